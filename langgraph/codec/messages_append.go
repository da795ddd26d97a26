package codec

import (
	"hash/maphash"

	"github.com/historyd/historyd/langgraph/codec/internal/mptoken"
	"github.com/historyd/historyd/langgraph/format"
)

// AppendReader reads successive versions of one messages channel, as
// ReadMessagesKnowing does, for less than a full read each: a messages
// list only grows between most versions (the reducer appends), and
// LangGraph's serializer writes an unchanged message as the same bytes, so
// a version whose stored messages begin with exactly the bytes of the
// previous version's is that list plus what follows, and only what follows
// is scanned, and handed over. The bytes are compared (by a keyed 64-bit
// hash of the previous version's, hash/maphash with a seed of this
// reader's own, so no stored content can be made to collide), not
// assumed: any other version (a
// message replaced or removed, a summary, another branch, a version read
// out of order) is read whole. Only msgpack lists are read this way.
//
// An AppendReader is not safe for concurrent use.
type AppendReader struct {
	// Mode and Known are ReadMessagesKnowing's.
	Mode  ReadMode
	Known func(id string) bool
	// Limits bounds each version read.
	Limits Limits

	// The previous msgpack version read: its list elements (the bytes
	// after the list header) as their length and hash (ok false when
	// there is none), and how many messages and human messages they are.
	ok                    bool
	prevLen               int
	prevSum               uint64
	prevCount, prevHumans int
	seed                  maphash.Seed
	seeded                bool
}

// Read reads one version; data is only used during the call. When the
// version is the previous one read plus what follows (extends), m.List
// holds only the messages that follow (those Mode keeps), Count and
// HumanCount are the whole list's, and Humans is nil; otherwise m is what
// ReadMessagesKnowing gives.
func (r *AppendReader) Read(blobType string, data []byte) (m Messages, extends bool, err error) {
	if blobType != format.TypeMsgpack {
		r.ok = false
		m, err := ReadMessagesKnowing(blobType, data, r.Limits, r.Mode, r.Known)
		return m, false, err
	}
	lim := r.Limits.withDefaults()
	if err := checkDecodable(blobType, data, lim); err != nil {
		r.ok = false
		return Messages{}, false, err
	}
	payload := snapshotPayload(data)
	d := newMsgpackDecoder(payload, lim)
	d.mode, d.known = r.Mode, r.Known
	if m, ok, err := r.extend(d); ok || err != nil {
		return m, ok, err
	}
	m, err = scanMsgpackMessages(data, lim, r.Mode, r.Known)
	if err != nil {
		r.ok = false
		return Messages{}, false, err
	}
	r.remember(payload, m)
	return m, false, nil
}

// extend reads the version d holds as the previous one plus its tail,
// when its elements begin with the previous version's bytes; ok is false
// when they do not (or it is no plain list), and the version is then read
// whole.
func (r *AppendReader) extend(d *mpDecoder) (Messages, bool, error) {
	if !r.ok || len(d.Buf) == 0 {
		return Messages{}, false, nil
	}
	if c := d.Buf[0]; !(c >= 0x90 && c <= 0x9f || c == 0xdc || c == 0xdd) {
		return Messages{}, false, nil // not a plain list header
	}
	d.Started()
	t, err := d.ReadToken()
	if err != nil || t.Kind != mptoken.Array {
		return Messages{}, false, nil
	}
	hdr, added := d.Pos, t.N-r.prevCount
	if added < 0 || len(d.Buf)-hdr < r.prevLen {
		return Messages{}, false, nil
	}
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.Write(d.Buf[hdr : hdr+r.prevLen])
	if h.Sum64() != r.prevSum {
		return Messages{}, false, nil
	}
	if 1 > d.maxDepth {
		return Messages{}, false, depthError(d.maxDepth, 1, t.Off)
	}
	// The previous version's elements are the same bytes, so the same
	// messages: start after them, with only the added ones to come.
	d.Pos, d.Pending = hdr+r.prevLen, added
	tail := Messages{Count: t.N, HumanCount: r.prevHumans}
	for range added {
		m, err := d.scanMessage(1)
		if err != nil {
			r.ok = false
			return Messages{}, false, err
		}
		tail.add(m, d.mode)
	}
	tail.Humans = nil
	if d.Pos != d.End {
		r.ok = false
		return Messages{}, false, d.Malformed(d.Pos, "%d trailing bytes after the value", d.End-d.Pos)
	}
	// The hash of the whole goes on from the prefix's.
	h.Write(d.Buf[hdr+r.prevLen:])
	r.prevLen, r.prevSum, r.prevCount, r.prevHumans = len(d.Buf)-hdr, h.Sum64(), tail.Count, tail.HumanCount
	return tail, true, nil
}

// remember keeps a version just read whole as the one the next is
// compared with.
func (r *AppendReader) remember(payload []byte, m Messages) {
	if !r.seeded {
		r.seed, r.seeded = maphash.MakeSeed(), true
	}
	d := newMsgpackDecoder(payload, r.Limits.withDefaults())
	d.Started()
	if t, err := d.ReadToken(); err != nil || t.Kind != mptoken.Array {
		r.ok = false
		return
	}
	r.ok, r.prevLen, r.prevSum = true, len(payload)-d.Pos, maphash.Bytes(r.seed, payload[d.Pos:])
	r.prevCount, r.prevHumans = m.Count, m.HumanCount
}

package lgcodec

import "bytes"

// AppendReader reads successive versions of one messages channel, as
// ReadMessagesKnowing does, for less than a full read each: a messages
// list only grows between most versions (the reducer appends), and
// LangGraph's serializer writes an unchanged message as the same bytes, so
// a version whose stored messages begin with exactly the bytes of the
// previous version's is that list plus what follows, and only what follows
// is scanned. The bytes are compared, not assumed: any other version (a
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

	// prev holds the previous msgpack version's list elements (the bytes
	// after the list header), copied; prevMsgs what was read of them.
	prev     []byte
	prevMsgs Messages
}

// Read reads one version. data is only used during the call.
func (r *AppendReader) Read(blobType string, data []byte) (Messages, error) {
	if blobType != TypeMsgpack {
		r.prev = nil
		return ReadMessagesKnowing(blobType, data, r.Limits, r.Mode, r.Known)
	}
	lim := r.Limits.withDefaults()
	if err := checkDecodable(blobType, data, lim); err != nil {
		r.prev = nil
		return Messages{}, err
	}
	payload := snapshotPayload(data)
	d := newMsgpackDecoder(payload, lim)
	d.mode, d.known = r.Mode, r.Known
	if m, ok, err := r.extend(d); ok || err != nil {
		return m, err
	}
	m, err := scanMsgpackMessages(data, lim, r.Mode, r.Known)
	if err != nil {
		r.prev = nil
		return Messages{}, err
	}
	r.remember(payload, m)
	return m, nil
}

// extend reads the version d holds as the previous one plus its tail,
// when its elements begin with the previous version's bytes; ok is false
// when they do not (or it is no plain list), and the version is then read
// whole.
func (r *AppendReader) extend(d *mpDecoder) (Messages, bool, error) {
	if r.prev == nil || len(d.buf) == 0 {
		return Messages{}, false, nil
	}
	if c := d.buf[0]; !(c >= 0x90 && c <= 0x9f || c == 0xdc || c == 0xdd) {
		return Messages{}, false, nil // not a plain list header
	}
	d.started()
	t, err := d.readToken()
	if err != nil || t.kind != mpArray {
		return Messages{}, false, nil
	}
	hdr, added := d.pos, t.n-r.prevMsgs.Count
	if added < 0 || len(d.buf)-hdr < len(r.prev) || !bytes.Equal(d.buf[hdr:hdr+len(r.prev)], r.prev) {
		return Messages{}, false, nil
	}
	if 1 > d.maxDepth {
		return Messages{}, false, depthError(d.maxDepth, 1, t.off)
	}
	// The previous version's elements are the same bytes, so the same
	// messages: start after them, with only the added ones to come.
	d.pos, d.pending = hdr+len(r.prev), added
	tail := Messages{Count: t.n, HumanCount: r.prevMsgs.HumanCount,
		Humans: clip(r.prevMsgs.Humans), List: clip(r.prevMsgs.List)}
	for range added {
		m, err := d.scanMessage(1)
		if err != nil {
			r.prev = nil
			return Messages{}, false, err
		}
		tail.add(m, d.mode)
	}
	if d.pos != d.end {
		r.prev = nil
		return Messages{}, false, d.malformed(d.pos, "%d trailing bytes after the value", d.end-d.pos)
	}
	r.remember(d.buf, tail)
	return tail, true, nil
}

// remember keeps a version just read as the one the next is compared with.
func (r *AppendReader) remember(payload []byte, m Messages) {
	d := newMsgpackDecoder(payload, r.Limits.withDefaults())
	d.started()
	if t, err := d.readToken(); err != nil || t.kind != mpArray {
		r.prev = nil
		return
	}
	r.prev = append(r.prev[:0], payload[d.pos:]...)
	r.prevMsgs = m
}

// clip returns s with no room to append into, so that a version extending
// another never writes into the slices the other one returned.
func clip[T any](s []T) []T { return s[:len(s):len(s)] }

package service

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// spliceCodec is the server's "proto" codec. Responses carrying state are
// sent as a list of buffers in which each state entry is the store's cached
// encoding itself, not a copy: a turn of megabytes then costs no memory
// beyond the cache while it is sent. Everything else, requests included,
// goes through gRPC's own codec. The bytes on the wire are a valid
// encoding of the same message.
type spliceCodec struct{ base encoding.CodecV2 }

func newSpliceCodec() spliceCodec { return spliceCodec{base: encoding.GetCodecV2(grpcproto.Name)} }

// Name is the content subtype this codec serves in place of gRPC's own.
func (c spliceCodec) Name() string { return grpcproto.Name }

// Unmarshal is gRPC's own.
func (c spliceCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

// Marshal splices the state responses and passes anything else on.
func (c spliceCodec) Marshal(v any) (mem.BufferSlice, error) {
	var w splicer
	switch m := v.(type) {
	case *historydv1.SnapshotResponse:
		st := m.GetState()
		if st == nil {
			break
		}
		w.reserve(m)
		rest := &historydv1.SnapshotResponse{Total: m.Total, RetainedTurns: m.RetainedTurns}
		if err := w.message(rest); err != nil {
			return nil, err
		}
		if err := w.turnState(1, st); err != nil {
			return nil, err
		}
		return w.done(), nil
	case *historydv1.StreamSnapshotsResponse:
		if m.Turn == nil {
			break
		}
		w.reserve(m)
		if err := w.message(&historydv1.StreamSnapshotsResponse{Total: m.Total}); err != nil {
			return nil, err
		}
		if err := w.turnState(1, m.Turn); err != nil {
			return nil, err
		}
		return w.done(), nil
	case *historydv1.SnapshotsResponse:
		w.reserve(m)
		if err := w.message(&historydv1.SnapshotsResponse{Total: m.Total}); err != nil {
			return nil, err
		}
		// Turn order, so that equal responses are equal bytes.
		for _, n := range slices.Sorted(maps.Keys(m.Turns)) {
			ts := m.Turns[n]
			if ts == nil {
				ts = &historydv1.TurnState{} // as proto.Marshal writes a nil map value
			}
			inner, err := turnStateHead(ts)
			if err != nil {
				return nil, err
			}
			tsSize := len(inner) + entriesSize(ts)
			key := tagSize + protowire.SizeVarint(uint64(int64(n)))
			// map<int32, TurnState> entry: key = 1, value = 2.
			w.header(1, key+sizeNested(tsSize))
			w.small(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(int64(n))))
			w.header(2, tsSize)
			w.small(inner)
			w.entries(ts)
		}
		return w.done(), nil
	}
	return c.base.Marshal(v)
}

// spliceMin is the size from which an entry's encoding is sent as its own
// buffer; smaller ones are copied, since a buffer per tiny entry costs more
// than the copy.
const spliceMin = 4 << 10

// splicer builds a message as a list of buffers: small parts are gathered
// in one buffer from gRPC's pool, returned to it once the message is sent;
// large entry encodings are listed as they are.
type splicer struct {
	// cur holds every small part, in order.
	cur []byte
	// pooled is the pool buffer cur started in; nil when cur was not
	// reserved.
	pooled *[]byte
	parts  []splicePart
}

// splicePart is a run of cur ending at end, or a large buffer.
type splicePart struct {
	end   int
	large []byte
}

// reserve sizes cur for m's small parts, so that it is allocated once:
// everything but the entries sent as their own buffers.
func (w *splicer) reserve(m proto.Message) {
	n := proto.Size(m)
	var turns []*historydv1.TurnState
	switch m := m.(type) {
	case *historydv1.SnapshotResponse:
		turns = append(turns, m.GetState())
	case *historydv1.StreamSnapshotsResponse:
		turns = append(turns, m.GetTurn())
	case *historydv1.SnapshotsResponse:
		turns = slices.Collect(maps.Values(m.Turns))
	}
	for _, ts := range turns {
		for _, e := range ts.GetEntries() {
			if raw := e.ProtoReflect().GetUnknown(); len(raw) >= spliceMin {
				n -= len(raw)
			}
		}
	}
	w.pooled = mem.DefaultBufferPool().Get(max(n, 0))
	w.cur = (*w.pooled)[:0]
}

func (w *splicer) small(b []byte) { w.cur = append(w.cur, b...) }

func (w *splicer) large(b []byte) {
	w.cut()
	// A SliceBuffer is never returned to a pool: the cache keeps its
	// bytes.
	w.parts = append(w.parts, splicePart{large: b})
}

// cut ends the current run of small parts.
func (w *splicer) cut() {
	last := 0
	for i := len(w.parts) - 1; i >= 0; i-- {
		if w.parts[i].large == nil {
			last = w.parts[i].end
			break
		}
	}
	if len(w.cur) > last {
		w.parts = append(w.parts, splicePart{end: len(w.cur)})
	}
}

func (w *splicer) done() mem.BufferSlice {
	w.cut()
	pool := mem.DefaultBufferPool()
	var root mem.Buffer = mem.SliceBuffer(w.cur)
	if w.pooled != nil {
		if len(w.cur) > 0 && cap(*w.pooled) > 0 && &w.cur[:1][0] == &(*w.pooled)[:1][0] {
			*w.pooled = w.cur
			root = mem.NewBuffer(w.pooled, pool)
		} else {
			// Outgrown (a size estimate was short) or unused.
			pool.Put(w.pooled)
		}
	}
	bufs := make(mem.BufferSlice, 0, len(w.parts))
	start := 0
	for _, p := range w.parts {
		if p.large != nil {
			bufs = append(bufs, mem.SliceBuffer(p.large))
			continue
		}
		bufs = append(bufs, root.Slice(start, p.end))
		start = p.end
	}
	root.Free()
	return bufs
}

// header appends the tag and length of field num holding n bytes.
func (w *splicer) header(num protowire.Number, n int) {
	w.cur = protowire.AppendVarint(protowire.AppendTag(w.cur, num, protowire.BytesType), uint64(n))
}

// message appends m's own encoding.
func (w *splicer) message(m proto.Message) error {
	b, err := proto.MarshalOptions{}.MarshalAppend(w.cur, m)
	if err != nil {
		return fmt.Errorf("marshal %T: %w", m, err)
	}
	w.cur = b
	return nil
}

// turnState appends field num holding ts.
func (w *splicer) turnState(num protowire.Number, ts *historydv1.TurnState) error {
	inner, err := turnStateHead(ts)
	if err != nil {
		return err
	}
	w.header(num, len(inner)+entriesSize(ts))
	w.small(inner)
	w.entries(ts)
	return nil
}

// turnStateHead encodes ts without its entries.
func turnStateHead(ts *historydv1.TurnState) ([]byte, error) {
	head := &historydv1.TurnState{Turn: ts.Turn, CheckpointId: ts.CheckpointId, Question: ts.Question, EndedAt: ts.EndedAt}
	b, err := proto.Marshal(head)
	if err != nil {
		return nil, fmt.Errorf("marshal turn state: %w", err)
	}
	return b, nil
}

// turnStateEntries is TurnState.entries' field number.
const turnStateEntries protowire.Number = 4

// entryBytes is the encoding of one StateEntry: the unknown fields the
// handlers set it from, or its marshaling when it was built otherwise.
func entryBytes(e *historydv1.StateEntry) []byte {
	if raw := e.ProtoReflect().GetUnknown(); len(raw) > 0 && proto.Size(e) == len(raw) {
		return raw
	}
	b, _ := proto.Marshal(e) // a StateEntry built in memory always marshals
	return b
}

func entriesSize(ts *historydv1.TurnState) int {
	n := 0
	for k, e := range ts.Entries {
		n += sizeNested(mapEntrySize(k, len(entryBytes(e))))
	}
	return n
}

// mapEntrySize is the size of a map<string, StateEntry> entry.
func mapEntrySize(k string, data int) int {
	return tagSize + protowire.SizeBytes(len(k)) + sizeNested(data)
}

// entries appends ts's entries in key order.
func (w *splicer) entries(ts *historydv1.TurnState) {
	for _, k := range slices.Sorted(maps.Keys(ts.Entries)) {
		data := entryBytes(ts.Entries[k])
		w.header(turnStateEntries, mapEntrySize(k, len(data)))
		w.cur = protowire.AppendString(protowire.AppendTag(w.cur, mapKey, protowire.BytesType), k)
		w.header(mapValue, len(data))
		if len(data) >= spliceMin {
			w.large(data)
		} else {
			w.small(data)
		}
	}
}

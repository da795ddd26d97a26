package wire

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// Codec is the server's "proto" codec. Responses carrying state are
// sent as a list of buffers in which each large state entry is the store's
// cached encoding itself, not a copy: a turn of megabytes then costs no
// memory beyond the cache while it is sent. Everything else, requests
// included, goes through gRPC's own codec. The bytes on the wire are a
// valid encoding of the same message.
type Codec struct{ base encoding.CodecV2 }

// NewCodec returns the codec, to install with grpc.ForceServerCodecV2.
func NewCodec() Codec { return Codec{base: encoding.GetCodecV2(grpcproto.Name)} }

// Name is the content subtype this codec serves in place of gRPC's own.
func (c Codec) Name() string { return grpcproto.Name }

// Unmarshal decodes a request with decodeRequest. Into a Request it
// never fails: what is wrong with the bytes is kept there, so that the
// call is refused as INVALID_ARGUMENT (see request.go) rather than failed
// by gRPC as INTERNAL, which it does with any error a codec returns.
func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*Request); ok {
		r.Bad = decodeRequest(data, r.Msg)
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	if bad := decodeRequest(data, m); bad != nil {
		return bad
	}
	return nil
}

// unmarshalRawStrings decodes b into m, setting m's top-level string
// fields (request messages have no others) without checking that they are
// UTF-8: every other field is decoded, and checked, as proto.Unmarshal
// decodes it. Repeated strings keep their order.
func unmarshalRawStrings(b []byte, m proto.Message) error {
	fields := m.ProtoReflect().Descriptor().Fields()
	type raw struct {
		fd protoreflect.FieldDescriptor
		v  []byte
	}
	var strs []raw
	var rest []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		size := protowire.ConsumeFieldValue(num, typ, b[n:])
		if size < 0 {
			return protowire.ParseError(size)
		}
		if fd := fields.ByNumber(num); fd != nil && fd.Kind() == protoreflect.StringKind && !fd.IsMap() && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			strs = append(strs, raw{fd, v})
		} else {
			rest = append(rest, b[:n+size]...)
		}
		b = b[n+size:]
	}
	if len(strs) == 0 {
		return errors.New("no string field to decode leniently")
	}
	if err := proto.Unmarshal(rest, m); err != nil {
		return err
	}
	r := m.ProtoReflect()
	for _, s := range strs {
		v := protoreflect.ValueOfString(string(s.v))
		if s.fd.IsList() {
			r.Mutable(s.fd).List().Append(v)
		} else {
			r.Set(s.fd, v)
		}
	}
	return nil
}

// Marshal splices the state responses and passes anything else on. Each
// response is planned first (its small parts encoded, its entries listed,
// every size known), then written into one pooled buffer of exactly the
// size of its small parts, with the large entries between.
func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	var (
		turns []plannedTurn
		keys  []int32 // SnapshotsResponse's map keys, one per turn
	)
	// The small parts are the response with its turns taken out, marshaled
	// as gRPC's codec would; the turns are put back right after, since the
	// handler's response may still be read (by an interceptor's log, say).
	// Taking them out rather than copying the rest keeps every field the
	// response gains marshaled without a change here.
	var head []byte
	var err error
	switch m := v.(type) {
	case *historydv1.SnapshotResponse:
		st := m.GetState()
		if st == nil {
			return c.base.Marshal(v)
		}
		result := m.Result
		m.Result = nil
		head, err = proto.Marshal(m)
		m.Result = result
		turns = []plannedTurn{planTurn(st)}
	case *historydv1.StreamSnapshotsResponse:
		if m.Turn == nil {
			return c.base.Marshal(v)
		}
		turn := m.Turn
		m.Turn = nil
		head, err = proto.Marshal(m)
		m.Turn = turn
		turns = []plannedTurn{planTurn(turn)}
	case *historydv1.SnapshotsResponse:
		all := m.Turns
		m.Turns = nil
		head, err = proto.Marshal(m)
		m.Turns = all
		// Turn order, so that equal responses are equal bytes.
		keys = slices.Sorted(maps.Keys(all))
		for _, n := range keys {
			turns = append(turns, planTurn(all[n]))
		}
	default:
		return c.base.Marshal(v)
	}
	if err != nil {
		return nil, fmt.Errorf("marshal %T: %w", v, err)
	}
	for _, t := range turns {
		if t.err != nil {
			return nil, t.err
		}
	}

	small := len(head)
	for i, t := range turns {
		if keys == nil {
			small += headerSize(t.size) + t.smallSize()
			continue
		}
		// map<int32, TurnState> entry: key = 1, value = 2.
		key := tagSize + protowire.SizeVarint(uint64(int64(keys[i])))
		small += headerSize(key+sizeNested(t.size)) + key + headerSize(t.size) + t.smallSize()
	}
	w := newSplicer(small)
	w.small(head)

	for i, t := range turns {
		if keys == nil {
			w.turn(1, t)
			continue
		}
		key := tagSize + protowire.SizeVarint(uint64(int64(keys[i])))
		w.header(1, key+sizeNested(t.size))
		w.cur = protowire.AppendVarint(protowire.AppendTag(w.cur, mapKey, protowire.VarintType), uint64(int64(keys[i])))
		w.turn(mapValue, t)
	}
	if len(w.cur) != small {
		// The sizes in the headers come from the same plan: a mismatch
		// would send a corrupt message.
		return nil, fmt.Errorf("spliced %d bytes of small parts, planned %d", len(w.cur), small)
	}
	return w.done(), nil
}

// spliceMin is the size from which an entry's encoding is sent as its own
// buffer; smaller ones are copied, since a buffer per tiny entry costs more
// than the copy.
const spliceMin = 4 << 10

// turnStateEntries is TurnState.entries' field number.
const turnStateEntries protowire.Number = 4

// plannedTurn is a TurnState ready to write: its fields but the entries
// encoded, its entries in key order, and its encoded size.
type plannedTurn struct {
	head    []byte
	entries []plannedEntry
	size    int
	err     error
}

type plannedEntry struct {
	key  string
	data []byte
}

func planTurn(ts *historydv1.TurnState) plannedTurn {
	if ts == nil {
		ts = &historydv1.TurnState{} // as proto.Marshal writes a nil map value
	}
	// Every field but the entries, marshaled with the entries taken out for
	// the moment (see Marshal).
	entries := ts.Entries
	ts.Entries = nil
	head, err := proto.Marshal(ts)
	ts.Entries = entries
	if err != nil {
		return plannedTurn{err: fmt.Errorf("marshal turn state: %w", err)}
	}
	p := plannedTurn{head: head, size: len(head)}
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		data := entryBytes(entries[k])
		p.entries = append(p.entries, plannedEntry{k, data})
		p.size += sizeNested(mapEntrySize(k, len(data)))
	}
	return p
}

// smallSize is how many of the turn's bytes are copied rather than sent
// as their own buffers.
func (p plannedTurn) smallSize() int {
	n := p.size
	for _, e := range p.entries {
		if len(e.data) >= spliceMin {
			n -= len(e.data)
		}
	}
	return n
}

// entryBytes is the encoding of one StateEntry: the unknown fields the
// handlers set it from, or its marshaling when it was built otherwise.
func entryBytes(e *historydv1.StateEntry) []byte {
	if raw := e.ProtoReflect().GetUnknown(); len(raw) > 0 && proto.Size(e) == len(raw) {
		return raw
	}
	b, _ := proto.Marshal(e) // a StateEntry built in memory always marshals
	return b
}

// mapEntrySize is the size of a map<string, StateEntry> entry.
func mapEntrySize(k string, data int) int {
	return tagSize + protowire.SizeBytes(len(k)) + sizeNested(data)
}

// headerSize is the size of the tag and length of a one-byte-tagged field
// holding n bytes.
func headerSize(n int) int { return sizeNested(n) - n }

// splicer writes a message as a list of buffers: small parts go into one
// buffer from gRPC's pool, returned to it once the message is sent; large
// entry encodings are listed as they are.
type splicer struct {
	// cur holds every small part, in order.
	cur    []byte
	pooled *[]byte
	parts  []splicePart
}

// splicePart is a run of cur ending at end, or a large buffer.
type splicePart struct {
	end   int
	large []byte
}

func newSplicer(small int) *splicer {
	w := &splicer{pooled: mem.DefaultBufferPool().Get(small)}
	w.cur = (*w.pooled)[:0]
	return w
}

func (w *splicer) small(b []byte) { w.cur = append(w.cur, b...) }

func (w *splicer) header(num protowire.Number, n int) { w.cur = appendHeader(w.cur, num, n) }

// turn writes field num holding the planned turn.
func (w *splicer) turn(num protowire.Number, t plannedTurn) {
	w.header(num, t.size)
	w.small(t.head)
	for _, e := range t.entries {
		w.header(turnStateEntries, mapEntrySize(e.key, len(e.data)))
		w.cur = protowire.AppendString(protowire.AppendTag(w.cur, mapKey, protowire.BytesType), e.key)
		w.header(mapValue, len(e.data))
		if len(e.data) < spliceMin {
			w.small(e.data)
			continue
		}
		w.cut()
		// A SliceBuffer is never returned to a pool: the cache keeps its
		// bytes.
		w.parts = append(w.parts, splicePart{large: e.data})
	}
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
	if len(w.cur) > 0 && cap(*w.pooled) > 0 && &w.cur[:1][0] == &(*w.pooled)[:1][0] {
		*w.pooled = w.cur
		root = mem.NewBuffer(w.pooled, pool)
	} else {
		pool.Put(w.pooled) // unused: no small parts
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

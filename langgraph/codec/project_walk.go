package codec

import (
	"slices"
	"unsafe"

	"github.com/historyd/historyd/langgraph/codec/internal/mptoken"
	"github.com/historyd/historyd/langgraph/format"
)

// A Visitor receives a value's parts in order, as Walk reads them: how the
// encoders of historyd's API formats read a stored value without building
// it. The bytes of String and Bytes are only valid during the call and
// must not be modified; a
// String may hold invalid UTF-8 (msgpack does not check), which the
// visitor must repair as its format requires. Lists and maps are
// announced with their lengths; a map's entries come as Key then the
// value. An error from a method ends the walk and is returned.
type Visitor interface {
	Null() error
	Bool(b bool) error
	Int(i int64) error
	// Uint is only called for integers above math.MaxInt64.
	Uint(u uint64) error
	Float(f float64) error
	String(s []byte) error
	Bytes(b []byte) error
	BeginList(n int) error
	EndList() error
	BeginMap(n int) error
	Key(k string) error
	EndMap() error
}

// Walk hands the parts of v to vis. v is a value as Decode returns it, or
// a Raw, which is read from its blob as Decode would decode it, without
// building it (extension values, which are small — dates, models — are
// decoded and walked as their data). A decoded map is walked in key order,
// so that equal values walk alike; a Raw map in stored order.
func Walk(v any, vis Visitor) error {
	switch x := v.(type) {
	case nil:
		return vis.Null()
	case bool:
		return vis.Bool(x)
	case string:
		// Handed over without a copy: visitors only read the bytes.
		return vis.String(unsafe.Slice(unsafe.StringData(x), len(x)))
	case int64:
		return vis.Int(x)
	case uint64:
		return vis.Uint(x)
	case float64:
		return vis.Float(x)
	case []byte:
		return vis.Bytes(x)
	case []any:
		if err := vis.BeginList(len(x)); err != nil {
			return err
		}
		for _, e := range x {
			if err := Walk(e, vis); err != nil {
				return err
			}
		}
		return vis.EndList()
	case map[string]any:
		if err := vis.BeginMap(len(x)); err != nil {
			return err
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if err := vis.Key(k); err != nil {
				return err
			}
			if err := Walk(x[k], vis); err != nil {
				return err
			}
		}
		return vis.EndMap()
	case Raw:
		return x.walk(vis)
	}
	// Decode yields only the types above; anything else is a bug, shown
	// rather than dropped.
	return vis.String([]byte(kindOf(v)))
}

// MsgpackRaw is a whole msgpack blob as a Raw, for walking a value stored
// on its own without decoding it.
func MsgpackRaw(data []byte, lim Limits) Raw {
	data = snapshotPayload(data)
	return Raw{data: data, start: 0, end: len(data), depth: 0, lim: lim.withDefaults()}
}

func (r Raw) walk(vis Visitor) error {
	d := newMsgpackDecoder(r.data, r.lim)
	d.Pos, d.End = r.start, r.end
	if err := d.walk(vis, r.depth); err != nil {
		return err
	}
	if d.Pos != d.End {
		return d.Malformed(d.Pos, "%d trailing bytes after the value", d.End-d.Pos)
	}
	return nil
}

// walk hands the value at pos to vis, as decodeValue would decode it and
// Walk would walk that. depth is the nesting level of the value's parent.
func (d *mpDecoder) walk(vis Visitor, depth int) error {
	d.Started()
	t, err := d.ReadToken()
	if err != nil {
		return err
	}
	switch t.Kind {
	case mptoken.Nil:
		return vis.Null()
	case mptoken.Bool:
		return vis.Bool(t.B)
	case mptoken.Int:
		return vis.Int(t.I)
	case mptoken.Uint:
		return vis.Uint(t.U)
	case mptoken.Float:
		return vis.Float(t.F)
	case mptoken.Str:
		return vis.String(d.Buf[t.Start : t.Start+t.N])
	case mptoken.Bin:
		return vis.Bytes(d.Buf[t.Start : t.Start+t.N])
	case mptoken.Array:
		if depth+1 > d.maxDepth {
			return depthError(d.maxDepth, depth+1, t.Off)
		}
		if err := vis.BeginList(t.N); err != nil {
			return err
		}
		for range t.N {
			if err := d.walk(vis, depth+1); err != nil {
				return err
			}
		}
		return vis.EndList()
	case mptoken.Map:
		if depth+1 > d.maxDepth {
			return depthError(d.maxDepth, depth+1, t.Off)
		}
		if err := vis.BeginMap(t.N); err != nil {
			return err
		}
		for range t.N {
			keyAt := d.Pos
			k, err := d.decodeValue(depth + 1)
			if err != nil {
				return err
			}
			key, err := d.keys.text(k, keyAt)
			if err != nil {
				return err
			}
			if err := vis.Key(key); err != nil {
				return err
			}
			if err := d.walk(vis, depth+1); err != nil {
				return err
			}
		}
		return vis.EndMap()
	}
	v, err := d.decodeExt(t, depth)
	if err != nil {
		return err
	}
	return Walk(v, vis)
}

// Raw is a value EachEntry left encoded: the layer above re-encodes it
// straight from the stored bytes (Walk), without building it. A Raw refers
// to the blob it was read from and is only valid while that blob is.
type Raw struct {
	data       []byte
	start, end int
	// depth is the nesting level of the value's parent, for MaxDepth.
	depth int
	lim   Limits
}

// Decode builds the value, as Decode would have.
func (r Raw) Decode() (any, error) {
	d := newMsgpackDecoder(r.data, r.lim)
	d.Pos, d.End = r.start, r.end
	v, err := d.decodeValue(r.depth)
	if err != nil {
		return nil, err
	}
	if d.Pos != d.End {
		return nil, d.Malformed(d.Pos, "%d trailing bytes after the value", d.End-d.Pos)
	}
	return v, nil
}

// EachEntry is EachKey for a map whose values are entries, decoded
// lazily: an entry that is a map is decoded except its lazy field, any
// other entry not at all, and what is not decoded is handed to fn as a
// Raw, for Walk to hand over straight from the blob. A state
// of megabytes of coordinates is then never built in memory. Each Raw is
// only valid until fn returns. A "json" value, which has no lengths to
// skip by, is decoded as EachKey decodes it.
func EachEntry(blobType string, data []byte, keep map[string]bool, lazy string, lim Limits, fn func(key string, v any) error) (whole any, ok bool, err error) {
	if blobType != format.TypeMsgpack {
		return EachKey(blobType, data, keep, lim, fn)
	}
	lim = lim.withDefaults()
	return eachMsgpackKey(data, keep, lim, func(d *mpDecoder) (any, error) { return d.lazyEntry(lazy, lim) }, fn)
}

// lazyEntry reads an entry at slot depth 1 as EachEntry describes.
func (d *mpDecoder) lazyEntry(lazy string, lim Limits) (any, error) {
	if d.Pos >= d.End {
		return nil, d.Malformed(d.Pos, "unexpected end of data: expected a value")
	}
	if c := d.Buf[d.Pos]; !(c >= 0x80 && c <= 0x8f) && c != 0xde && c != 0xdf {
		return d.raw(1, lim)
	}
	d.Started()
	t, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	if 2 > d.maxDepth {
		return nil, depthError(d.maxDepth, 2, t.Off)
	}
	out := make(map[string]any, min(t.N, 16))
	for range t.N {
		keyAt := d.Pos
		k, err := d.decodeValue(2)
		if err != nil {
			return nil, err
		}
		key, err := d.keys.text(k, keyAt)
		if err != nil {
			return nil, err
		}
		var v any
		if key == lazy {
			v, err = d.raw(2, lim)
		} else {
			v, err = d.decodeValue(2)
		}
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	return out, nil
}

// raw steps over the value at pos, checking its structure, and returns it
// as a Raw.
func (d *mpDecoder) raw(depth int, lim Limits) (Raw, error) {
	start := d.Pos
	if err := d.skipValues(1, depth); err != nil {
		return Raw{}, err
	}
	return Raw{data: d.Buf, start: start, end: d.Pos, depth: depth, lim: lim}, nil
}

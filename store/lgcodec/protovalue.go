package lgcodec

import (
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of google.protobuf.Value, Struct (and its map entries) and
// ListValue. All are below 16, so every tag is one byte.
const (
	pbNull   protowire.Number = 1
	pbNumber protowire.Number = 2
	pbString protowire.Number = 3
	pbBool   protowire.Number = 4
	pbStruct protowire.Number = 5
	pbList   protowire.Number = 6

	pbStructFields protowire.Number = 1
	pbEntryKey     protowire.Number = 1
	pbEntryValue   protowire.Number = 2
	pbListValues   protowire.Number = 1

	pbTagSize = 1
)

// maxExactInt is the largest integer a JSON number (an IEEE double) holds
// exactly; larger integers are sent as decimal strings.
const maxExactInt = 1 << 53

// Raw is a value EachEntry left encoded: it is re-encoded by
// AppendProtoValue straight from the stored bytes, without being built.
// A Raw refers to the blob it was read from and is only valid while that
// blob is.
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
	d.pos, d.end = r.start, r.end
	v, err := d.decodeValue(r.depth)
	if err != nil {
		return nil, err
	}
	if d.pos != d.end {
		return nil, d.malformed(d.pos, "%d trailing bytes after the value", d.end-d.pos)
	}
	return v, nil
}

// ProtoValueSize returns how many bytes AppendProtoValue appends for v.
func ProtoValueSize(v any) (int, error) {
	w := pbWriter{sizing: true}
	err := w.value(v)
	return w.n, err
}

// AppendProtoValue appends the fields of a google.protobuf.Value holding v,
// a value as Decode returns it or a Raw. This is where the mapping
// documented on historyd.v1.StateEntry is applied: numbers within ±2^53
// stay numbers, larger integers become decimal strings, NaN and ±Infinity
// strings, bytes base64, invalid UTF-8 is replaced, lists and maps nest.
// Map keys are sorted, so that equal values encode to equal bytes; a Raw
// map keeps its stored order. Appending into a buffer with room for
// ProtoValueSize(v) more bytes allocates nothing.
func AppendProtoValue(b []byte, v any) ([]byte, error) {
	w := pbWriter{b: b}
	err := w.value(v)
	return w.b, err
}

// ProtoStructSize returns how many bytes AppendProtoStruct appends for m.
func ProtoStructSize(m map[string]any) (int, error) {
	w := pbWriter{sizing: true}
	err := w.structFields(m)
	return w.n, err
}

// AppendProtoStruct appends the fields of a google.protobuf.Struct
// holding m, mapped as AppendProtoValue maps values.
func AppendProtoStruct(b []byte, m map[string]any) ([]byte, error) {
	w := pbWriter{b: b}
	err := w.structFields(m)
	return w.b, err
}

// pbWriter appends protobuf, or with sizing set only counts the bytes it
// would append. Sizing and writing run the same code, so the two cannot
// disagree.
type pbWriter struct {
	sizing bool
	b      []byte
	n      int
}

func (w *pbWriter) tag(num protowire.Number, typ protowire.Type) {
	if w.sizing {
		w.n += pbTagSize
		return
	}
	w.b = protowire.AppendTag(w.b, num, typ)
}

func (w *pbWriter) varint(num protowire.Number, v uint64) {
	w.tag(num, protowire.VarintType)
	if w.sizing {
		w.n += protowire.SizeVarint(v)
		return
	}
	w.b = protowire.AppendVarint(w.b, v)
}

// text writes a string field held as bytes (a msgpack str), repairing
// invalid UTF-8 as proto3 requires.
func (w *pbWriter) text(num protowire.Number, s []byte) {
	if !utf8.Valid(s) {
		w.textString(num, strings.ToValidUTF8(string(s), "\uFFFD"))
		return
	}
	w.tag(num, protowire.BytesType)
	if w.sizing {
		w.n += protowire.SizeBytes(len(s))
		return
	}
	w.b = protowire.AppendBytes(w.b, s)
}

// textString is text for a Go string, without converting it to bytes.
func (w *pbWriter) textString(num protowire.Number, s string) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	w.tag(num, protowire.BytesType)
	if w.sizing {
		w.n += protowire.SizeBytes(len(s))
		return
	}
	w.b = protowire.AppendString(w.b, s)
}

// nested writes field num holding the message fn writes. Writing, the
// length goes in front of the message: one byte is reserved for it (the
// common case) and the message is moved along when its length needs more,
// which stays within a buffer sized by a sizing pass.
func (w *pbWriter) nested(num protowire.Number, fn func() error) error {
	if w.sizing {
		before := w.n
		if err := fn(); err != nil {
			return err
		}
		w.n += pbTagSize + protowire.SizeVarint(uint64(w.n-before))
		return nil
	}
	w.b = protowire.AppendTag(w.b, num, protowire.BytesType)
	start := len(w.b)
	w.b = append(w.b, 0)
	if err := fn(); err != nil {
		return err
	}
	n := len(w.b) - start - 1
	if size := protowire.SizeVarint(uint64(n)); size > 1 {
		w.b = append(w.b, make([]byte, size-1)...)
		copy(w.b[start+size:], w.b[start+1:start+1+n])
	}
	protowire.AppendVarint(w.b[:start], uint64(n))
	return nil
}

func (w *pbWriter) null() { w.varint(pbNull, 0) }

func (w *pbWriter) bool(b bool) { w.varint(pbBool, protowire.EncodeBool(b)) }

func (w *pbWriter) str(s string) { w.textString(pbString, s) }

func (w *pbWriter) number(f float64) {
	switch {
	case math.IsNaN(f):
		w.str("NaN")
		return
	case math.IsInf(f, 1):
		w.str("Infinity")
		return
	case math.IsInf(f, -1):
		w.str("-Infinity")
		return
	}
	w.tag(pbNumber, protowire.Fixed64Type)
	if w.sizing {
		w.n += 8
		return
	}
	w.b = protowire.AppendFixed64(w.b, math.Float64bits(f))
}

func (w *pbWriter) int(i int64) {
	if i >= -maxExactInt && i <= maxExactInt {
		w.number(float64(i))
		return
	}
	w.str(strconv.FormatInt(i, 10))
}

func (w *pbWriter) uint(u uint64) {
	if u <= maxExactInt {
		w.number(float64(u))
		return
	}
	w.str(strconv.FormatUint(u, 10))
}

func (w *pbWriter) base64(p []byte) {
	w.tag(pbString, protowire.BytesType)
	n := base64.StdEncoding.EncodedLen(len(p))
	if w.sizing {
		w.n += protowire.SizeVarint(uint64(n)) + n
		return
	}
	w.b = protowire.AppendVarint(w.b, uint64(n))
	w.b = base64.StdEncoding.AppendEncode(w.b, p)
}

// value writes the fields of a google.protobuf.Value holding v.
func (w *pbWriter) value(v any) error {
	switch x := v.(type) {
	case nil:
		w.null()
	case bool:
		w.bool(x)
	case string:
		w.str(x)
	case int64:
		w.int(x)
	case uint64:
		w.uint(x)
	case float64:
		w.number(x)
	case []byte:
		w.base64(x)
	case []any:
		return w.nested(pbList, func() error {
			for _, e := range x {
				if err := w.nested(pbListValues, func() error { return w.value(e) }); err != nil {
					return err
				}
			}
			return nil
		})
	case map[string]any:
		return w.nested(pbStruct, func() error { return w.structFields(x) })
	case Raw:
		return x.transcode(w)
	default:
		// The decoder yields only the types above; anything else is a
		// bug, shown rather than dropped.
		w.str(fmt.Sprint(x))
	}
	return nil
}

// structFields writes the fields of a google.protobuf.Struct holding m, its
// keys sorted.
func (w *pbWriter) structFields(m map[string]any) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		err := w.nested(pbStructFields, func() error {
			w.textString(pbEntryKey, k)
			return w.nested(pbEntryValue, func() error { return w.value(m[k]) })
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// transcode writes the value the Raw holds, reading it from its blob.
func (r Raw) transcode(w *pbWriter) error {
	d := newMsgpackDecoder(r.data, r.lim)
	d.pos, d.end = r.start, r.end
	if err := d.transcode(w, r.depth); err != nil {
		return err
	}
	if d.pos != d.end {
		return d.malformed(d.pos, "%d trailing bytes after the value", d.end-d.pos)
	}
	return nil
}

// transcode writes the value at pos as a google.protobuf.Value, as
// decodeValue would decode it and value would write that, without building
// it. Extension values are decoded (they are small: dates, models) and
// written from their data. depth is the nesting level of the value's
// parent.
func (d *mpDecoder) transcode(w *pbWriter, depth int) error {
	d.started()
	t, err := d.readToken()
	if err != nil {
		return err
	}
	switch t.kind {
	case mpNil:
		w.null()
	case mpBool:
		w.bool(t.b)
	case mpInt:
		w.int(t.i)
	case mpUint:
		w.uint(t.u)
	case mpFloat:
		w.number(t.f)
	case mpStr:
		w.text(pbString, d.buf[t.start:t.start+t.n])
	case mpBin:
		w.base64(d.buf[t.start : t.start+t.n])
	case mpArray:
		if depth+1 > d.maxDepth {
			return depthError(d.maxDepth, depth+1, t.off)
		}
		return w.nested(pbList, func() error {
			for range t.n {
				if err := w.nested(pbListValues, func() error { return d.transcode(w, depth+1) }); err != nil {
					return err
				}
			}
			return nil
		})
	case mpMap:
		if depth+1 > d.maxDepth {
			return depthError(d.maxDepth, depth+1, t.off)
		}
		return w.nested(pbStruct, func() error {
			for range t.n {
				keyAt := d.pos
				k, err := d.decodeValue(depth + 1)
				if err != nil {
					return err
				}
				key, err := d.keys.text(k, keyAt)
				if err != nil {
					return err
				}
				err = w.nested(pbStructFields, func() error {
					w.textString(pbEntryKey, key)
					return w.nested(pbEntryValue, func() error { return d.transcode(w, depth+1) })
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	default:
		v, err := d.decodeExt(t, depth)
		if err != nil {
			return err
		}
		return w.value(v)
	}
	return nil
}

// EachEntry is EachKey for a map whose values are entries in the
// tool_state convention, decoded lazily: an entry that is a map is decoded
// except its "value" field, any other entry not at all, and what is not
// decoded is handed to fn as a Raw, for AppendProtoValue to re-encode
// straight from the blob. A state of megabytes of coordinates is then never
// built in memory. Each Raw is only valid until fn returns. A "json" value,
// which has no lengths to skip by, is decoded as EachKey decodes it.
func EachEntry(blobType string, data []byte, keep map[string]bool, lim Limits, fn func(key string, v any) error) (whole any, ok bool, err error) {
	if blobType != typeMsgpack {
		return EachKey(blobType, data, keep, lim, fn)
	}
	lim = lim.withDefaults()
	return eachMsgpackKey(data, keep, lim, func(d *mpDecoder) (any, error) { return d.lazyEntry(lim) }, fn)
}

// lazyEntry reads an entry at slot depth 1 as EachEntry describes.
func (d *mpDecoder) lazyEntry(lim Limits) (any, error) {
	if d.pos >= d.end {
		return nil, d.malformed(d.pos, "unexpected end of data: expected a value")
	}
	if c := d.buf[d.pos]; !(c >= 0x80 && c <= 0x8f) && c != 0xde && c != 0xdf {
		return d.raw(1, lim)
	}
	d.started()
	t, err := d.readToken()
	if err != nil {
		return nil, err
	}
	if 2 > d.maxDepth {
		return nil, depthError(d.maxDepth, 2, t.off)
	}
	out := make(map[string]any, min(t.n, 16))
	for range t.n {
		keyAt := d.pos
		k, err := d.decodeValue(2)
		if err != nil {
			return nil, err
		}
		key, err := d.keys.text(k, keyAt)
		if err != nil {
			return nil, err
		}
		var v any
		if key == "value" {
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
	start := d.pos
	if err := d.skipValues(1, depth); err != nil {
		return Raw{}, err
	}
	return Raw{data: d.buf, start: start, end: d.pos, depth: depth, lim: lim}, nil
}

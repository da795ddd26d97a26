package service

import (
	"encoding/base64"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/historyd/historyd/langgraph/codec"
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
)

// maxExactInt is the largest integer a JSON number (an IEEE double) holds
// exactly; larger integers are sent as decimal strings.
const maxExactInt = 1 << 53

// protoValueSize returns how many bytes appendProtoValue appends for v.
func protoValueSize(v any) (int, error) {
	w := pbWriter{sizing: true}
	err := w.value(v)
	return w.n, err
}

// appendProtoValue appends the fields of a google.protobuf.Value holding
// v, a value as lgcodec decodes it or an codec.Raw, read through
// codec.Walk. This is where the mapping documented on
// historyd.v1.StateEntry is applied: numbers within ±2^53 stay numbers,
// larger integers become decimal strings, NaN and ±Infinity strings, bytes
// base64, invalid UTF-8 is replaced, lists and maps nest. Decoded maps are
// written in key order, so that equal values encode to equal bytes; a Raw
// map keeps its stored order. Appending into a buffer with room for
// protoValueSize(v) more bytes allocates nothing.
func appendProtoValue(b []byte, v any) ([]byte, error) {
	w := pbWriter{b: b}
	err := w.value(v)
	return w.b, err
}

// protoStructSize returns how many bytes appendProtoStruct appends for m.
func protoStructSize(m map[string]any) (int, error) {
	w := pbWriter{sizing: true}
	err := w.structFields(m)
	return w.n, err
}

// appendProtoStruct appends the fields of a google.protobuf.Struct holding
// m, mapped as appendProtoValue maps values.
func appendProtoStruct(b []byte, m map[string]any) ([]byte, error) {
	w := pbWriter{b: b}
	err := w.structFields(m)
	return w.b, err
}

// pbWriter appends protobuf, or with sizing set only counts the bytes it
// would append. Sizing and writing run the same code, so the two cannot
// disagree. It is the codec.Visitor that writes a walked value as a
// google.protobuf.Value.
type pbWriter struct {
	sizing bool
	b      []byte
	n      int
	// open holds, per nested message being written, where its length
	// goes (writing) or the size before it (sizing).
	open []int
	// inMap says, per open list or map, whether it is a Struct: its values
	// are entries whose key came with Key.
	inMap []bool
	// bare says the outermost map is written as a Struct's fields alone,
	// without the Value and Struct around them.
	bare bool
}

var _ codec.Visitor = (*pbWriter)(nil)

// value writes the fields of a google.protobuf.Value holding v.
func (w *pbWriter) value(v any) error { return codec.Walk(v, w) }

// structFields writes the fields of a google.protobuf.Struct holding m, its
// keys sorted: m walked as a map whose own Struct wrapper is left out.
func (w *pbWriter) structFields(m map[string]any) error {
	w.bare = true
	return codec.Walk(m, w)
}

// element opens what a value needs around it inside the list or map it is
// in: a ListValue's values field, or a Struct entry's value field (the
// entry itself was opened by Key).
func (w *pbWriter) element() {
	if len(w.inMap) == 0 {
		return
	}
	if w.inMap[len(w.inMap)-1] {
		w.begin(pbEntryValue)
		return
	}
	w.begin(pbListValues)
}

// done closes what element opened; a map entry closes the entry too.
func (w *pbWriter) done() {
	if len(w.inMap) == 0 {
		return
	}
	w.end()
	if w.inMap[len(w.inMap)-1] {
		w.end() // the Struct entry
	}
}

func (w *pbWriter) tag(num protowire.Number, typ protowire.Type) {
	if w.sizing {
		w.n++
		return
	}
	w.b = protowire.AppendTag(w.b, num, typ)
}

// begin opens field num holding a nested message. Writing, one byte is
// reserved for its length (the common case) and the message is moved
// along when its length needs more, which stays within a buffer sized by
// a sizing pass.
func (w *pbWriter) begin(num protowire.Number) {
	if w.sizing {
		w.open = append(w.open, w.n)
		return
	}
	w.b = protowire.AppendTag(w.b, num, protowire.BytesType)
	w.open = append(w.open, len(w.b))
	w.b = append(w.b, 0)
}

// end closes the nested message begin opened last.
func (w *pbWriter) end() {
	start := w.open[len(w.open)-1]
	w.open = w.open[:len(w.open)-1]
	if w.sizing {
		w.n += 1 + protowire.SizeVarint(uint64(w.n-start))
		return
	}
	n := len(w.b) - start - 1
	if size := protowire.SizeVarint(uint64(n)); size > 1 {
		w.b = append(w.b, make([]byte, size-1)...)
		copy(w.b[start+size:], w.b[start+1:start+1+n])
	}
	protowire.AppendVarint(w.b[:start], uint64(n))
}

func (w *pbWriter) varint(num protowire.Number, v uint64) {
	w.tag(num, protowire.VarintType)
	if w.sizing {
		w.n += protowire.SizeVarint(v)
		return
	}
	w.b = protowire.AppendVarint(w.b, v)
}

// text writes a string field, repairing invalid UTF-8 as proto3 requires.
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

func (w *pbWriter) scalar(write func()) error {
	w.element()
	write()
	w.done()
	return nil
}

// Null implements codec.Visitor.
func (w *pbWriter) Null() error { return w.scalar(func() { w.varint(pbNull, 0) }) }

// Bool implements codec.Visitor.
func (w *pbWriter) Bool(b bool) error {
	return w.scalar(func() { w.varint(pbBool, protowire.EncodeBool(b)) })
}

// String implements codec.Visitor.
func (w *pbWriter) String(s []byte) error { return w.scalar(func() { w.text(pbString, s) }) }

func (w *pbWriter) number(f float64) {
	switch {
	case math.IsNaN(f):
		w.textString(pbString, "NaN")
		return
	case math.IsInf(f, 1):
		w.textString(pbString, "Infinity")
		return
	case math.IsInf(f, -1):
		w.textString(pbString, "-Infinity")
		return
	}
	w.tag(pbNumber, protowire.Fixed64Type)
	if w.sizing {
		w.n += 8
		return
	}
	w.b = protowire.AppendFixed64(w.b, math.Float64bits(f))
}

// Float implements codec.Visitor.
func (w *pbWriter) Float(f float64) error { return w.scalar(func() { w.number(f) }) }

// Int implements codec.Visitor.
func (w *pbWriter) Int(i int64) error {
	return w.scalar(func() {
		if i >= -maxExactInt && i <= maxExactInt {
			w.number(float64(i))
			return
		}
		w.textString(pbString, strconv.FormatInt(i, 10))
	})
}

// Uint implements codec.Visitor.
func (w *pbWriter) Uint(u uint64) error {
	return w.scalar(func() {
		if u <= maxExactInt {
			w.number(float64(u))
			return
		}
		w.textString(pbString, strconv.FormatUint(u, 10))
	})
}

// Bytes implements codec.Visitor: bytes are sent as standard base64.
func (w *pbWriter) Bytes(p []byte) error {
	return w.scalar(func() {
		w.tag(pbString, protowire.BytesType)
		n := base64.StdEncoding.EncodedLen(len(p))
		if w.sizing {
			w.n += protowire.SizeVarint(uint64(n)) + n
			return
		}
		w.b = protowire.AppendVarint(w.b, uint64(n))
		w.b = base64.StdEncoding.AppendEncode(w.b, p)
	})
}

// BeginList implements codec.Visitor.
func (w *pbWriter) BeginList(int) error {
	w.element()
	w.begin(pbList)
	w.inMap = append(w.inMap, false)
	return nil
}

// EndList implements codec.Visitor.
func (w *pbWriter) EndList() error {
	w.inMap = w.inMap[:len(w.inMap)-1]
	w.end()
	w.done()
	return nil
}

// BeginMap implements codec.Visitor.
func (w *pbWriter) BeginMap(int) error {
	if !(w.bare && len(w.inMap) == 0) {
		w.element()
		w.begin(pbStruct)
	}
	w.inMap = append(w.inMap, true)
	return nil
}

// Key implements codec.Visitor: it opens the Struct entry the next value
// completes.
func (w *pbWriter) Key(k string) error {
	w.begin(pbStructFields)
	w.textString(pbEntryKey, k)
	return nil
}

// EndMap implements codec.Visitor.
func (w *pbWriter) EndMap() error {
	w.inMap = w.inMap[:len(w.inMap)-1]
	if !(w.bare && len(w.inMap) == 0) {
		w.end()
		w.done()
	}
	return nil
}

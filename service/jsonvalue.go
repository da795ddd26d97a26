package service

import (
	"encoding/base64"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/historyd/historyd/langgraph/codec"
)

// appendJSONValue appends v, a value as lgcodec decodes it or an
// codec.Raw, as JSON text: the value_json form of StateEntry. It applies
// the same mapping as appendProtoValue, so that the text parsed equals the
// google.protobuf.Value parsed: numbers within ±2^53 stay numbers, larger
// integers become decimal strings, NaN and ±Infinity strings, bytes
// base64, invalid UTF-8 is replaced, lists and maps nest (a Raw map in its
// stored order, a decoded one in key order).
func appendJSONValue(b []byte, v any) ([]byte, error) {
	w := jsonWriter{b: b}
	err := codec.Walk(v, &w)
	return w.b, err
}

// jsonValueSize is the length of appendJSONValue's text for v, found by
// writing it a token at a time into a small scratch buffer: the entry is
// then written once into a buffer of exactly its size (see encodeEntry).
func jsonValueSize(v any) (int, error) {
	w := jsonWriter{sizing: true}
	err := codec.Walk(v, &w)
	return w.n, err
}

// jsonWriter is the codec.Visitor that writes a walked value as JSON.
type jsonWriter struct {
	b []byte
	// sizing says only to count: each method's text is added to n and
	// dropped from b.
	sizing bool
	n      int
	// first says, per open list or map, that no element was written yet.
	first []bool
	// keyed says the next value follows a key just written.
	keyed bool
}

var _ codec.Visitor = (*jsonWriter)(nil)

// done ends a Visitor method: when sizing, what it wrote is counted and
// dropped.
func (w *jsonWriter) done() error {
	if w.sizing {
		w.n += len(w.b)
		w.b = w.b[:0]
	}
	return nil
}

// element writes the separator before a value inside a list; a map's value
// follows its key, which wrote the separator.
func (w *jsonWriter) element() {
	if w.keyed {
		w.keyed = false
		return
	}
	if n := len(w.first); n > 0 {
		if !w.first[n-1] {
			w.b = append(w.b, ',')
		}
		w.first[n-1] = false
	}
}

// quote writes s as a JSON string, invalid UTF-8 repaired as value's
// strings are (each run of bad bytes one U+FFFD), so both formats agree.
func (w *jsonWriter) quote(s []byte) {
	if !utf8.Valid(s) {
		w.quoteString(string(s))
		return
	}
	w.b, _ = jsontext.AppendQuote(w.b, s)
}

func (w *jsonWriter) quoteString(s string) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	// Valid UTF-8 cannot fail.
	w.b, _ = jsontext.AppendQuote(w.b, s)
}

// Null implements codec.Visitor.
func (w *jsonWriter) Null() error {
	w.element()
	w.b = append(w.b, "null"...)
	return w.done()
}

// Bool implements codec.Visitor.
func (w *jsonWriter) Bool(v bool) error {
	w.element()
	w.b = strconv.AppendBool(w.b, v)
	return w.done()
}

// String implements codec.Visitor.
func (w *jsonWriter) String(s []byte) error {
	w.element()
	w.quote(s)
	return w.done()
}

// number writes f as the shortest text that parses back to it, in the
// notation JavaScript uses (exponents only below 1e-6 and from 1e21).
func (w *jsonWriter) number(f float64) {
	switch {
	case math.IsNaN(f):
		w.quoteString("NaN")
		return
	case math.IsInf(f, 1):
		w.quoteString("Infinity")
		return
	case math.IsInf(f, -1):
		w.quoteString("-Infinity")
		return
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	w.b = strconv.AppendFloat(w.b, f, format, -1, 64)
}

// Float implements codec.Visitor.
func (w *jsonWriter) Float(f float64) error {
	w.element()
	w.number(f)
	return w.done()
}

// Int implements codec.Visitor.
func (w *jsonWriter) Int(i int64) error {
	w.element()
	if i >= -maxExactInt && i <= maxExactInt {
		w.b = strconv.AppendInt(w.b, i, 10)
		return w.done()
	}
	w.b = append(w.b, '"')
	w.b = strconv.AppendInt(w.b, i, 10)
	w.b = append(w.b, '"')
	return w.done()
}

// Uint implements codec.Visitor.
func (w *jsonWriter) Uint(u uint64) error {
	w.element()
	if u <= maxExactInt {
		w.b = strconv.AppendUint(w.b, u, 10)
		return w.done()
	}
	w.b = append(w.b, '"')
	w.b = strconv.AppendUint(w.b, u, 10)
	w.b = append(w.b, '"')
	return w.done()
}

// Bytes implements codec.Visitor: bytes are sent as standard base64.
func (w *jsonWriter) Bytes(p []byte) error {
	w.element()
	w.b = append(w.b, '"')
	w.b = base64.StdEncoding.AppendEncode(w.b, p)
	w.b = append(w.b, '"')
	return w.done()
}

// BeginList implements codec.Visitor.
func (w *jsonWriter) BeginList(int) error {
	w.element()
	w.b = append(w.b, '[')
	w.first = append(w.first, true)
	return w.done()
}

// EndList implements codec.Visitor.
func (w *jsonWriter) EndList() error {
	w.first = w.first[:len(w.first)-1]
	w.b = append(w.b, ']')
	return w.done()
}

// BeginMap implements codec.Visitor.
func (w *jsonWriter) BeginMap(int) error {
	w.element()
	w.b = append(w.b, '{')
	w.first = append(w.first, true)
	return w.done()
}

// Key implements codec.Visitor.
func (w *jsonWriter) Key(k string) error {
	w.element()
	w.quoteString(k)
	w.b = append(w.b, ':')
	w.keyed = true
	return w.done()
}

// EndMap implements codec.Visitor.
func (w *jsonWriter) EndMap() error {
	w.first = w.first[:len(w.first)-1]
	w.b = append(w.b, '}')
	return w.done()
}

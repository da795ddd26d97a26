// Package pyjson writes values as Python's json.dumps prints them, the text
// Python's SqliteSaver stores checkpoint metadata in and that
// mcp-toolsets-runtime sizes tool_state entries by. The store measures
// entries with it and the saver writers write metadata with it, so it is its
// own package that neither direction of the format owns.
package pyjson

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/historyd/historyd/langgraph/format"
)

// Marshal is Python's json.dumps(v) with its defaults: ", " and ": "
// separators, non-ASCII escaped (ensure_ascii), floats as repr writes them,
// NaN and infinities as Python's literals. Python's SqliteSaver stores
// checkpoint metadata this way, and mcp-toolsets-runtime sizes tool_state
// entries by it. v may hold what langgraph/write's EncodeJSON takes but
// Message, DeltaSnapshot and Ext (format.Map for an ordered dict); []byte is written as str(bytes) would be (json.dumps
// with default=str), and int64 and uint64 as integers.
func Marshal(v any) ([]byte, error) {
	var b strings.Builder
	if err := writePythonJSON(&b, v); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func writePythonJSON(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(map[bool]string{true: "true", false: "false"}[x])
	case string:
		writePythonString(b, x)
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case uint64:
		b.WriteString(strconv.FormatUint(x, 10))
	case []byte:
		writePythonString(b, pythonBytesRepr(x))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pythonFloat(x))
		}
	case format.Map:
		b.WriteByte('{')
		for i, f := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writePythonString(b, f.Key)
			b.WriteString(": ")
			if err := writePythonJSON(b, f.Value); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case map[string]any:
		m := make(format.Map, 0, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			m = append(m, format.Field{Key: k, Value: x[k]})
		}
		return writePythonJSON(b, m)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writePythonJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		return fmt.Errorf("pyjson: %T has no JSON form", v)
	}
	return nil
}

// pythonFloat is Python's repr of a float: the shortest digits that round
// trip, in scientific notation when the exponent is below -4 or at least
// 16, and with ".0" when it would otherwise read as an integer.
func pythonFloat(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		mant, ex, _ := strings.Cut(e, "e")
		sign := ex[0]
		digits := strings.TrimLeft(ex[1:], "0")
		if len(digits) < 2 {
			digits = strings.Repeat("0", 2-len(digits)) + digits
		}
		return mant + "e" + string(sign) + digits
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// writePythonString writes s as json.dumps does with ensure_ascii: ASCII
// control and quote characters escaped, everything beyond ASCII as \uXXXX
// (UTF-16 surrogate pairs above the BMP).
func writePythonString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || r > 0x7e && r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		case r >= 0x10000:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(b, `\u%04x\u%04x`, hi, lo)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// pythonBytesRepr is str(b) for Python bytes: b'…' with printable ASCII as
// is, \\, \' and \t \n \r escaped, every other byte as \xNN. (Python
// quotes with " instead when the bytes hold a ' and no ".)
func pythonBytesRepr(p []byte) string {
	quote := byte('\'')
	if strings.IndexByte(string(p), '\'') >= 0 && strings.IndexByte(string(p), '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.WriteString("b")
	b.WriteByte(quote)
	for _, c := range p {
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c == quote:
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

package codec

import (
	"encoding/base64"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// keyText turns a decoded map key into the string key of a map[string]any.
// Strings stay as they are, since most keys already are strings and a
// string-valued extension (a UUID, a date) should read as its text; bytes
// have no JSON text, so they get base64; everything else gets its JSON text.
func keyText(k any) string {
	switch k := k.(type) {
	case string:
		return k
	case []byte:
		return base64.StdEncoding.EncodeToString(k)
	}
	return string(AppendJSON(nil, k))
}

// keyBudget bounds the text made from keys that are not strings. Each
// key's text is built from its already converted parts, so a map used as a
// key inside a map used as a key gets its quotes escaped once per level and
// doubles in size each time; real serializers never nest keys like that,
// but a crafted blob could, so the total text is capped relative to the
// blob's size.
type keyBudget struct {
	left   int
	format string
}

func newKeyBudget(format string, blobLen int) keyBudget {
	return keyBudget{left: 8*blobLen + 64<<10, format: format}
}

// text is keyText, charging non-string keys to the budget.
func (b *keyBudget) text(k any, off int) (string, error) {
	if s, ok := k.(string); ok {
		return s, nil
	}
	s := keyText(k)
	b.left -= len(s)
	if b.left < 0 {
		return "", &MalformedError{Format: b.format, Offset: off,
			Reason: "map keys that are not strings expand to too much text (maps nested as keys)"}
	}
	return s, nil
}

// AppendJSON appends the compact JSON text of a decoded value (as Decode
// yields it) to b. Map keys are sorted, so equal values have one text
// whatever the map's iteration order; strings escape only what JSON
// requires, numbers are written as JavaScript writes them (3.0 as 3), bytes
// as base64 and NaN and the infinities as Python's json module writes
// them. A value of any other type is written as null.
func AppendJSON(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case float64:
		return appendNumber(b, v)
	case string:
		return appendQuoted(b, v)
	case []byte:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v)
		return append(b, '"')
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSON(b, e)
		}
		return append(b, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendQuoted(b, k)
			b = append(b, ':')
			b = AppendJSON(b, v[k])
		}
		return append(b, '}')
	}
	return append(b, "null"...)
}

// appendNumber writes a float the way JavaScript's Number#toString does,
// which is also what JSON writers in Go and JavaScript produce: plain
// decimals between 1e-6 and 1e21, exponent form outside. NaN and the
// infinities are written as Python's json module writes them.
func appendNumber(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		start := len(b)
		b = strconv.AppendFloat(b, f, 'e', -1, 64)
		// JavaScript writes "1e-7", Go "1e-07".
		n := len(b)
		if n-start >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
		return b
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendQuoted writes a JSON string, escaping only what JSON requires so
// non-ASCII text stays readable in keys.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, "\ufffd"...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				b = append(b, c)
			}
		}
		i++
	}
	return append(b, '"')
}

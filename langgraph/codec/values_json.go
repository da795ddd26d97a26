package codec

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/historyd/historyd/langgraph/format"
)

// jsonParser is a JSON reader written for these blobs rather than
// encoding/json, because they need what that package does not give: Python's
// NaN and Infinity literals, exact 64-bit integers, byte offsets in errors,
// a configurable depth limit, and a look at every object as it closes to
// unwrap a DeltaChannel snapshot that is the whole value, and refuse one
// anywhere else.
type jsonParser struct {
	data     []byte
	pos      int
	maxDepth int
	// snapshot is set when the whole value is a DeltaChannel snapshot
	// record, whose value is the channel's value.
	snapshot bool
}

func decodeJSON(data []byte, lim Limits) (any, error) {
	p := &jsonParser{data: data, maxDepth: lim.MaxDepth}
	// TextDecoder drops a UTF-8 byte order mark before JSON.parse sees it.
	if len(data) >= 3 && data[0] == 0xef && data[1] == 0xbb && data[2] == 0xbf {
		p.pos = 3
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.malformed(p.pos, "unexpected %s after the value", p.describe())
	}
	if p.snapshot {
		// A DeltaChannel snapshot stores the channel's whole value.
		v = v.(map[string]any)["value"]
	}
	r := &reviver{keys: newKeyBudget(format.TypeJSON, len(data))}
	v = r.revive(v, false)
	if r.err != nil {
		return nil, r.err
	}
	return v, nil
}

func (p *jsonParser) malformed(off int, reason string, args ...any) error {
	return &MalformedError{Format: format.TypeJSON, Offset: off, Reason: fmt.Sprintf(reason, args...)}
}

func (p *jsonParser) describe() string {
	if p.pos >= len(p.data) {
		return "end of data"
	}
	return fmt.Sprintf("byte %q", p.data[p.pos])
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) literal(word string) bool {
	if len(p.data)-p.pos >= len(word) && string(p.data[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return true
	}
	return false
}

// value parses one value. depth is the nesting level of its parent; an
// object or array read here sits at depth+1.
func (p *jsonParser) value(depth int) (any, error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return nil, p.malformed(p.pos, "unexpected end of data: expected a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		if p.literal("-Infinity") {
			return math.Inf(-1), nil
		}
		return p.number()
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	case p.literal("null"):
		return nil, nil
	case p.literal("NaN"):
		return math.NaN(), nil
	case p.literal("Infinity"):
		return math.Inf(1), nil
	}
	return nil, p.malformed(p.pos, "unexpected %s: expected a value", p.describe())
}

func (p *jsonParser) array(depth int) (any, error) {
	start := p.pos
	if depth+1 > p.maxDepth {
		return nil, depthError(p.maxDepth, depth+1, start)
	}
	p.pos++
	out := []any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return out, nil
	}
	for {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.malformed(p.pos, "unexpected end of data in the array opened at offset %d", start)
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return out, nil
		default:
			return nil, p.malformed(p.pos, "unexpected %s in an array: expected ',' or ']'", p.describe())
		}
	}
}

func (p *jsonParser) object(depth int) (any, error) {
	start := p.pos
	if depth+1 > p.maxDepth {
		return nil, depthError(p.maxDepth, depth+1, start)
	}
	p.pos++
	out := map[string]any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return out, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.malformed(p.pos, "unexpected %s in an object: expected a string key", p.describe())
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.malformed(p.pos, "unexpected %s after an object key: expected ':'", p.describe())
		}
		p.pos++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out[k.(string)] = v
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.malformed(p.pos, "unexpected end of data in the object opened at offset %d", start)
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			if isLC(out, 2) && out["type"] == "delta_snapshot" {
				if _, ok := out["value"]; ok {
					if depth == 0 {
						p.snapshot = true
						return out, nil
					}
					return nil, &UnsupportedError{Format: format.TypeJSON, Feature: "delta_snapshot record", Offset: start,
						Reason: "a DeltaChannel snapshot inside a value; LangGraph.js only stores one as a channel's whole value"}
				}
			}
			return out, nil
		default:
			return nil, p.malformed(p.pos, "unexpected %s in an object: expected ',' or '}'", p.describe())
		}
	}
}

// str parses a string at pos. Invalid UTF-8 and lone surrogates become
// U+FFFD, as JavaScript's decoder would make them.
func (p *jsonParser) str() (any, error) {
	start := p.pos
	p.pos++
	// Fast path: no escapes, valid UTF-8.
	for i := p.pos; i < len(p.data); i++ {
		c := p.data[i]
		if c == '"' {
			s := p.data[p.pos:i]
			if utf8.Valid(s) {
				p.pos = i + 1
				return string(s), nil
			}
			break
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	var b []byte
	for {
		if p.pos >= len(p.data) {
			return nil, p.malformed(start, "unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(b), nil
		case c < 0x20:
			return nil, p.malformed(p.pos, "control character 0x%02x in a string", c)
		case c == '\\':
			if p.pos+1 >= len(p.data) {
				return nil, p.malformed(start, "unterminated string")
			}
			esc := p.data[p.pos+1]
			p.pos += 2
			switch esc {
			case '"', '\\', '/':
				b = append(b, esc)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, err := p.hex4(p.pos - 2)
				if err != nil {
					return nil, err
				}
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
						save := p.pos
						p.pos += 2
						if r2, err = p.hex4(save); err != nil {
							return nil, err
						}
						if utf16.DecodeRune(r, r2) == utf8.RuneError {
							// Not a pair: the second escape stands alone.
							p.pos = save
							r2 = -1
						}
					}
					if r2 < 0 {
						r = utf8.RuneError
					} else {
						r = utf16.DecodeRune(r, r2)
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return nil, p.malformed(p.pos-2, "invalid escape '\\%c' in a string", esc)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, "\uFFFD"...)
			} else {
				b = append(b, p.data[p.pos:p.pos+size]...)
			}
			p.pos += size
		}
	}
}

func (p *jsonParser) hex4(escOff int) (rune, error) {
	if len(p.data)-p.pos < 4 {
		return 0, p.malformed(escOff, "truncated \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.malformed(escOff, "invalid \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

// number parses a JSON number. Integer literals stay exact when they fit
// in 64 bits, since ids and counters written by JavaScript or Python are
// integers and must not be rounded.
func (p *jsonParser) number() (any, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.data[p.pos] == '-' {
		p.pos++
	}
	intStart := p.pos
	if digits() == 0 {
		return nil, p.malformed(start, "invalid number")
	}
	if p.data[intStart] == '0' && p.pos-intStart > 1 {
		return nil, p.malformed(start, "invalid number: leading zero")
	}
	integer := true
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		integer = false
		p.pos++
		if digits() == 0 {
			return nil, p.malformed(start, "invalid number: no digits after '.'")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		integer = false
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.malformed(start, "invalid number: no digits in the exponent")
		}
	}
	text := string(p.data[start:p.pos])
	if integer {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, nil
		}
		if text[0] != '-' {
			if u, err := strconv.ParseUint(text, 10, 64); err == nil {
				return u, nil
			}
		}
	}
	// ParseFloat only fails here on range, where it still returns ±Inf or 0
	// as Python's json module would.
	f, _ := strconv.ParseFloat(text, 64)
	return f, nil
}

package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what one structural summary shows, so the summary of a huge
// value stays small itself.
const (
	// shapeKeys is how many keys an object's one-line shape names.
	shapeKeys = 8
	// shapeStringChars is the longest string a shape prints whole; longer
	// ones are summarised by length.
	shapeStringChars = 40
	// outlineKeys is how many of an object's keys an outline describes.
	outlineKeys = 50
	// outlineFirstChars is the largest first array item an outline shows
	// whole; a larger one is shown by its shape.
	outlineFirstChars = 500
	// markerHeaderChars caps the media type shown in a data: URI marker.
	markerHeaderChars = 40
)

// dumps renders v as compact JSON. HTML escaping is off because the reader is
// a model, and "<data:...>" markers must reach it as written.
func dumps(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// prepare leaves only JSON-encodable data, so this is a value that
		// bypassed it; show it rather than fail the read.
		return strconv.Quote(fmt.Sprint(v))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// chars counts characters as a model-facing size: runes, not bytes, so a
// value in a non-Latin script is not outlined three times sooner.
func chars(s string) int { return utf8.RuneCountInString(s) }

// prepare copies v into plain JSON data (nil, bool, float64, json.Number,
// string, []any, map[string]any) and replaces every data: URI with a short
// marker. Every read goes through it first, so listing, search, drill-down
// and outline all see the marker and never the bytes: a model cannot use an
// embedded image's base64 and would only be tempted to echo it.
func prepare(v any) any {
	switch x := v.(type) {
	case nil, bool, json.Number:
		return x
	case string:
		if strings.HasPrefix(x, "data:") {
			return dataMarker(x)
		}
		return x
	case float64:
		return finite(x)
	case float32:
		return finite(float64(x))
	case int:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case int32:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case uint64:
		return json.Number(strconv.FormatUint(x, 10))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = prepare(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = prepare(e)
		}
		return out
	}
	// Some other Go value, from a host's own Present function: take it as
	// its JSON encoding would present it.
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var plain any
	if err := dec.Decode(&plain); err != nil {
		return fmt.Sprint(v)
	}
	return prepare(plain)
}

// finite spells non-finite floats as the service does, since JSON has no
// literal for them.
func finite(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

// dataMarker is the stand-in for a data: URI: its media type and payload
// size, enough for a model to know an image or file is there and how big.
// Only the "data:" prefix is recognised; guessing base64 by its look would
// also catch ids and hashes.
func dataMarker(uri string) string {
	header, payload, ok := strings.Cut(uri[len("data:"):], ",")
	if !ok {
		header, payload = "", uri[len("data:"):]
	}
	size := len(payload)
	if strings.HasSuffix(strings.ToLower(header), ";base64") {
		p := strings.TrimRight(payload, "=")
		size = len(p) * 3 / 4
	}
	if chars(header) > markerHeaderChars {
		header = string([]rune(header)[:markerHeaderChars]) + "…"
	}
	return fmt.Sprintf("<data:%s, %d bytes>", header, size)
}

// isMarker tells a data: marker apart from ordinary text, so shapes print
// it whole instead of as a string length.
func isMarker(s string) bool {
	return strings.HasPrefix(s, "<data:") && strings.HasSuffix(s, " bytes>") && chars(s) <= markerHeaderChars+40
}

// jsonType names v's JSON type, the vocabulary both JSON Schema and the
// model share.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return reflect.TypeOf(v).String()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// shape summarises v's structure in one line.
func shape(v any) string {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			return "object(empty)"
		}
		keys := sortedKeys(x)
		shown := strings.Join(keys[:min(len(keys), shapeKeys)], ", ")
		if len(keys) > shapeKeys {
			shown += ", …"
		}
		return fmt.Sprintf("object(%d keys: %s)", len(keys), shown)
	case []any:
		if len(x) == 0 {
			return "array[0]"
		}
		return fmt.Sprintf("array[%d] of %s", len(x), shape(x[0]))
	case string:
		if n := chars(x); n > shapeStringChars && !isMarker(x) {
			return fmt.Sprintf("string(%d chars)", n)
		}
	}
	return dumps(v)
}

// structure describes the top level of v, for a search that matched
// nothing: the model sees what is there to search for.
func structure(v any) string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return shape(v)
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+": "+shape(m[k]))
	}
	return strings.Join(parts, ", ")
}

// outline is what a value too large to return whole becomes.
type outline struct {
	Key       string `json:"key"`
	SizeChars int    `json:"size_chars"`
	Type      string `json:"type"`
	Outline   any    `json:"outline"`
	Hint      string `json:"hint"`
}

type arrayOutline struct {
	Length int    `json:"length"`
	Items  string `json:"items"`
	First  any    `json:"first,omitempty"`
}

func makeOutline(where string, v any, size int) outline {
	o := outline{
		Key:       where,
		SizeChars: size,
		Type:      jsonType(v),
		Hint:      "Too large to return whole. Pass pattern=<regex> to search it, or path=<path> (e.g. a.b[0].c) to read one part.",
	}
	switch x := v.(type) {
	case []any:
		a := arrayOutline{Length: len(x), Items: "empty"}
		if len(x) > 0 {
			a.Items = shape(x[0])
			a.First = x[0]
			if chars(dumps(x[0])) > outlineFirstChars {
				a.First = shape(x[0])
			}
		}
		o.Outline = a
	case map[string]any:
		keys := sortedKeys(x)
		fields := make(map[string]string, min(len(keys), outlineKeys)+1)
		for _, k := range keys[:min(len(keys), outlineKeys)] {
			fields[k] = shape(x[k])
		}
		if len(keys) > outlineKeys {
			fields["…"] = fmt.Sprintf("%d more keys not shown; pattern=<regex> finds them", len(keys)-outlineKeys)
		}
		o.Outline = fields
	default:
		o.Outline = shape(v)
	}
	return o
}

// pathKey renders one object key as a path segment: bare when it is a word,
// bracketed and quoted otherwise, so every printed path can be passed back
// as path= unchanged.
func pathKey(k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r))
	}) < 0 {
		return k
	}
	return "[" + dumps(k) + "]"
}

// join attaches a segment to a path: a dot before a bare segment, nothing
// before a bracketed one.
func join(prefix, segment string) string {
	switch {
	case prefix == "":
		return segment
	case strings.HasPrefix(segment, "["):
		return prefix + segment
	}
	return prefix + "." + segment
}

// pair is one leaf of a flattened value.
type pair struct {
	path  string
	value any
}

// leaves walks v depth first, objects in key order, yielding a path and a
// scalar for each leaf. Empty containers are leaves too, so they can still
// be found; a scalar at the root has the path ".".
func leaves(v any, prefix string) iter.Seq[pair] {
	return func(yield func(pair) bool) { walk(v, prefix, yield) }
}

func walk(v any, prefix string, yield func(pair) bool) bool {
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 {
			for _, k := range sortedKeys(x) {
				if !walk(x[k], join(prefix, pathKey(k)), yield) {
					return false
				}
			}
			return true
		}
	case []any:
		if len(x) > 0 {
			for i, e := range x {
				if !walk(e, fmt.Sprintf("%s[%d]", prefix, i), yield) {
					return false
				}
			}
			return true
		}
	}
	if prefix == "" {
		prefix = "."
	}
	return yield(pair{prefix, v})
}

// compile makes pattern a case-insensitive regular expression. A pattern
// that does not compile (RE2 has no lookaround or backreferences) is
// matched as literal text instead of failing, and the answer says so.
func compile(pattern string) (re *regexp.Regexp, literal bool) {
	if re, err := regexp.Compile("(?i)" + pattern); err == nil {
		return re, false
	}
	return regexp.MustCompile("(?i)" + regexp.QuoteMeta(pattern)), true
}

// excerpt caps a displayed value at limit characters. Given a match (byte
// offsets start and end into text; start -1 for none) the window is centred
// on it, so a hit deep in a long string is shown with its context.
func excerpt(text string, start, end, limit int) string {
	n := chars(text)
	if n <= limit {
		return text
	}
	r := []rune(text)
	if start < 0 {
		return string(r[:limit]) + fmt.Sprintf("…(+%d chars)", n-limit)
	}
	from := chars(text[:start]) - max(0, limit-chars(text[start:end]))/2
	from = max(0, min(from, n-limit))
	to := from + limit
	var b strings.Builder
	if from > 0 {
		b.WriteString("…")
	}
	b.WriteString(string(r[from:to]))
	if to < n {
		b.WriteString("…")
	}
	return b.String()
}

// grep searches flattened leaves for pattern and renders the answer: a
// header, then one "path = value" line per match, or when nothing matched,
// the searched value's top-level structure to aim the next try.
func (in *Inspector) grep(pattern, where string, v any, all iter.Seq[pair]) string {
	re, literal := compile(pattern)
	note := ""
	if literal {
		note = " (not a valid regular expression, so matched as plain text)"
	}
	var lines []string
	scanned, matches := 0, 0
	for p := range all {
		scanned++
		rendered := dumps(p.value)
		line := p.path + " = " + rendered
		loc := re.FindStringIndex(line)
		if loc == nil {
			continue
		}
		matches++
		if len(lines) >= in.maxMatches() {
			continue
		}
		off := len(p.path) + len(" = ")
		start := loc[0] - off
		if start < 0 {
			start = -1 // the match is in the path; show the value from its start
		}
		lines = append(lines, p.path+" = "+excerpt(rendered, start, loc[1]-off, in.maxLineChars()))
	}
	if matches == 0 {
		return fmt.Sprintf("No match for %q in %s (%d values searched)%s. Its structure: %s", pattern, where, scanned, note, structure(v))
	}
	noun := "matches"
	if matches == 1 {
		noun = "match"
	}
	header := fmt.Sprintf("%d %s for %q in %s", matches, noun, pattern, where)
	if matches > len(lines) {
		header += fmt.Sprintf(" (first %d shown)", len(lines))
	}
	return header + note + ":\n" + strings.Join(lines, "\n")
}

// segment is one step of a drill-down path.
type segment struct {
	text  string
	index bool // written as [n]
}

// parsePath splits a path such as `features[0].properties["a b"]` into
// segments. It returns the unparsable rest when the path is malformed.
func parsePath(path string) ([]segment, string) {
	var segs []segment
	i := 0
	for i < len(path) {
		switch c := path[i]; {
		case c == '.':
			i++
		case c == '[':
			rest := path[i+1:]
			if j := strings.IndexByte(rest, ']'); j > 0 && isDigits(rest[:j]) {
				segs = append(segs, segment{rest[:j], true})
				i += j + 2
				continue
			}
			if strings.HasPrefix(rest, `"`) {
				dec := json.NewDecoder(strings.NewReader(rest))
				var s string
				if err := dec.Decode(&s); err == nil {
					used := int(dec.InputOffset())
					if strings.HasPrefix(rest[used:], "]") {
						segs = append(segs, segment{s, false})
						i += 1 + used + 1
						continue
					}
				}
			}
			return segs, path[i:]
		case c == ']':
			return segs, path[i:]
		default:
			j := strings.IndexAny(path[i:], ".[]")
			if j < 0 {
				j = len(path) - i
			}
			segs = append(segs, segment{path[i : i+j], false})
			i += j
		}
	}
	return segs, ""
}

func isDigits(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// resolve walks segs into v. On failure it returns the value it got stuck
// at and the segment that did not fit.
func resolve(v any, segs []segment) (any, string, bool) {
	cur := v
	for _, s := range segs {
		switch x := cur.(type) {
		case []any:
			if isDigits(s.text) {
				if i, err := strconv.Atoi(s.text); err == nil && i < len(x) {
					cur = x[i]
					continue
				}
			}
		case map[string]any:
			if e, ok := x[s.text]; ok {
				cur = e
				continue
			}
		}
		return cur, s.text, false
	}
	return cur, "", true
}

// stripKey drops a leading dot, and the key itself when the model repeated
// it at the start of the path.
func stripKey(path, key string) string {
	path = strings.TrimLeft(path, ".")
	switch {
	case path == key:
		return ""
	case strings.HasPrefix(path, key+"."):
		return path[len(key)+1:]
	case strings.HasPrefix(path, key+"["):
		return path[len(key):]
	}
	return path
}

package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// goldenCase is one value written by a real LangGraph serializer, see
// testdata/gen_python.py and testdata/gen_js.mjs.
type goldenCase struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	DataB64  string `json:"data_b64"`
	Want     any    `json:"want"`
	Messages *struct {
		Count  int      `json:"count"`
		Humans []string `json:"humans"`
	} `json:"messages"`
	// Pydantic, when present, is what pydantic_core.to_jsonable_python
	// gives for the same Python value (see gen_python.py).
	Pydantic json.RawMessage `json:"pydantic"`
	// Host, when present, is what JSON.stringify gives for the same
	// JavaScript value (see gen_js.mjs).
	Host json.RawMessage `json:"host"`
}

type goldenFile struct {
	Versions map[string]string `json:"versions"`
	Cases    []goldenCase      `json:"cases"`
}

func loadGolden(t testing.TB, name string) goldenFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var g goldenFile
	if err := dec.Decode(&g); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(g.Cases) == 0 {
		t.Fatalf("%s has no cases", name)
	}
	return g
}

func (c goldenCase) data(t testing.TB) []byte {
	b, err := base64.StdEncoding.DecodeString(c.DataB64)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return b
}

// TestGoldenPython decodes the values written by the Python serializer.
func TestGoldenPython(t *testing.T) { runGolden(t, "python_golden.json") }

// TestGoldenJS decodes the values written by the LangChain.js serializer.
func TestGoldenJS(t *testing.T) { runGolden(t, "js_golden.json") }

func runGolden(t *testing.T, file string) {
	g := loadGolden(t, file)
	t.Logf("%s written by %v", file, g.Versions)
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			data := c.data(t)
			got, ok, err := Decode(c.Type, data, Limits{})
			if want, isErr := c.Want.(map[string]any); isErr && want["$error"] != nil {
				checkErrorKind(t, err, want["$error"].(string))
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !ok {
				t.Fatal("Decode: ok = false")
			}
			if diff := compareWant(got, c.Want, "$"); diff != "" {
				t.Errorf("Decode mismatch: %s\ngot: %s", diff, AppendJSON(nil, got))
			}
			if c.Messages != nil {
				m, err := ScanMessages(c.Type, data, Limits{})
				if err != nil {
					t.Fatalf("ScanMessages: %v", err)
				}
				if m.Count != c.Messages.Count || !reflect.DeepEqual(nonNil(m.Humans), nonNil(c.Messages.Humans)) {
					t.Errorf("ScanMessages = %d %q, want %d %q", m.Count, m.Humans, c.Messages.Count, c.Messages.Humans)
				}
			} else if _, isList := got.([]any); !isList {
				_, err := ScanMessages(c.Type, data, Limits{})
				var me *MalformedError
				if !errors.As(err, &me) {
					t.Errorf("ScanMessages on a non-list: err = %v, want *MalformedError", err)
				}
			}
		})
	}
}

// hostRenderings are the parts of Python values that historyd does not
// render as pydantic's to_jsonable_python does, and why: pydantic cannot
// render them at all, or the stored form cannot say what pydantic would
// need. Every other extension value must come out exactly as pydantic
// renders it.
var hostRenderings = map[string]string{
	"$unsupported timezone":   "pydantic cannot render a datetime.timezone; historyd gives the offset isoformat() appends for it",
	"$unsupported ZoneInfo":   "pydantic cannot render a ZoneInfo; historyd gives its key",
	"$unsupported Send":       "pydantic cannot render a Send; historyd gives [node, arg]",
	"$unsupported ndarray":    "pydantic cannot render a numpy array; historyd gives tolist()",
	"$unsupported ModelV1":    "pydantic 2 cannot render a pydantic.v1 model; historyd gives its dict()",
	"$unsupported ValueError": "exceptions are stored as their repr() text, which historyd gives",
	"$unsupported KeyError":   "exceptions are stored as their repr() text, which historyd gives",
	"$deviates namedtuple: stored as a dataclass is, so served as its field map": "the serializer stores a namedtuple as it stores a dataclass, so it cannot be told from one",
	"$deviates keys that are not strings: served as their JSON text":             "map keys are not extension values; historyd's key text is documented",
}

// TestGoldenPythonAsHostsRender holds every value the Python serializer
// wrote to what pydantic's to_jsonable_python, which Python hosts' JSON
// tools build on, gives for the same value, but for hostRenderings.
func TestGoldenPythonAsHostsRender(t *testing.T) {
	runHostGolden(t, "python_golden.json", func(c goldenCase) json.RawMessage { return c.Pydantic }, hostRenderings)
}

// jsHostRenderings are the parts of JavaScript values that historyd does
// not render as JSON.stringify does, and why: JSON.stringify loses them,
// and historyd renders them as it renders their Python counterparts.
var jsHostRenderings = map[string]string{
	"$deviates LangChain objects: JSON.stringify writes their serialized record, historyd their fields, as for Python": "a message reads the same whichever language wrote it",
	"$deviates undefined: JSON.stringify drops the field, historyd serves null":                                        "the stored record keeps the field",
	"$deviates NaN and infinities: JSON.stringify writes null, historyd the strings":                                   "null would lose the value",
	"$deviates Set: JSON.stringify writes {}, historyd lists the members":                                              "as for Python sets",
	"$deviates Map: JSON.stringify writes {}, historyd the entries":                                                    "as for Python dicts",
	"$deviates RegExp: JSON.stringify writes {}, historyd [source, flags]":                                             "{} would lose the value",
	"$deviates Error: JSON.stringify writes {}, historyd the message":                                                  "{} would lose the value",
	"$deviates Uint8Array: JSON.stringify writes an index map, historyd the bytes":                                     "bytes are served as base64, as for Python",
	"$deviates Send: historyd drops lg_name":                                                                           "Send reads {node, args}",
	"$deviates DeltaSnapshot: a channel's whole stored value, served as the value it holds":                            "the snapshot is how the channel is stored, not a value of its own",
}

// TestGoldenJSAsHostsRender holds every value the LangChain.js serializer
// wrote to what JSON.stringify gives for the same value, but for
// jsHostRenderings.
func TestGoldenJSAsHostsRender(t *testing.T) {
	runHostGolden(t, "js_golden.json", func(c goldenCase) json.RawMessage { return c.Host }, jsHostRenderings)
}

// runHostGolden compares each case's decoded value with the host
// rendering field gives, but for the parts renderings lists, each of which
// must occur.
func runHostGolden(t *testing.T, file string, field func(goldenCase) json.RawMessage, renderings map[string]string) {
	g := loadGolden(t, file)
	skipped := map[string]int{}
	compared := 0
	for _, c := range g.Cases {
		raw := field(c)
		if raw == nil {
			continue
		}
		compared++
		t.Run(c.Name, func(t *testing.T) {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var host any
			if err := dec.Decode(&host); err != nil {
				t.Fatal(err)
			}
			got, _, err := Decode(c.Type, c.data(t), Limits{})
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := compareWant(got, hostWant(host, got, skipped), "$"); diff != "" {
				t.Errorf("not as the host renders it: %s\ngot: %s", diff, AppendJSON(nil, got))
			}
		})
	}
	if compared < len(g.Cases)/2 {
		t.Fatalf("only %d of %d cases in %s carry the host's rendering; regenerate it (testdata/README.md)", compared, len(g.Cases), file)
	}
	for kind, n := range skipped {
		if renderings[kind] == "" {
			t.Errorf("%d values (%s) are not rendered as the host renders them, and no list says why", n, kind)
		}
	}
	for kind, why := range renderings {
		if skipped[kind] == 0 {
			t.Errorf("%q (%s) is listed, but no golden value has it: remove it or add a value", kind, why)
		}
	}
}

// hostWant turns pydantic's rendering into a want compareWant takes, and
// the parts listed in hostRenderings match anything, counted in skipped by
// kind. Bytes are no extension value, and historyd serves them as base64
// whatever pydantic's bytes mode (base64 here, UTF-8 text inside models
// that keep the default), so pydantic's text of the same bytes is
// {"$bytes"}; so is an integer too large for uint64, which historyd's JSON
// reading documents as a float.
func hostWant(host, got any, skipped map[string]int) any {
	switch h := host.(type) {
	case string:
		if b, ok := got.([]byte); ok {
			for _, enc := range []*base64.Encoding{base64.URLEncoding, base64.StdEncoding} {
				if raw, err := enc.DecodeString(h); err == nil && bytes.Equal(raw, b) {
					return map[string]any{"$bytes": base64.StdEncoding.EncodeToString(b)}
				}
			}
			if h == string(b) {
				return map[string]any{"$bytes": base64.StdEncoding.EncodeToString(b)}
			}
		}
	case json.Number:
		if f, ok := got.(float64); ok && !strings.ContainsAny(string(h), ".eE") {
			if hf, err := strconv.ParseFloat(string(h), 64); err == nil && hf == f && math.Abs(f) > math.MaxUint64 {
				return json.Number(strconv.FormatFloat(f, 'e', -1, 64))
			}
		}
	case []any:
		g, _ := got.([]any)
		out := make([]any, len(h))
		for i, e := range h {
			var ge any
			if i < len(g) {
				ge = g[i]
			}
			out[i] = hostWant(e, ge, skipped)
		}
		return out
	case map[string]any:
		if len(h) == 1 {
			for _, k := range []string{"$unsupported", "$deviates"} {
				if why, ok := h[k].(string); ok {
					skipped[k+" "+why]++
					return map[string]any{"$any": true}
				}
			}
		}
		g, _ := got.(map[string]any)
		out := make(map[string]any, len(h))
		for k, e := range h {
			out[k] = hostWant(e, g[k], skipped)
		}
		return out
	}
	return host
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func checkErrorKind(t *testing.T, err error, kind string) {
	t.Helper()
	var ue *UnsupportedError
	var me *MalformedError
	var le *LimitError
	switch {
	case kind == "unsupported" && errors.As(err, &ue):
	case kind == "malformed" && errors.As(err, &me):
	case kind == "limit" && errors.As(err, &le):
	default:
		t.Fatalf("err = %v (%T), want a %s error", err, err, kind)
	}
}

// compareWant compares a decoded value with a golden "want" parsed with
// json.Number, and returns the first difference. Integers must be int64 (or
// uint64 above MaxInt64) and match the literal exactly; floats must be
// float64; {"$bytes"} and {"$float"} stand for []byte and non-finite floats.
func compareWant(got, want any, path string) string {
	mismatch := func() string {
		return fmt.Sprintf("at %s: got %s (%T), want %v", path, AppendJSON(nil, got), got, want)
	}
	switch w := want.(type) {
	case nil:
		if got != nil {
			return mismatch()
		}
	case bool, string:
		if got != w {
			return mismatch()
		}
	case json.Number:
		s := string(w)
		if strings.ContainsAny(s, ".eE") {
			f, ok := got.(float64)
			wf, err := strconv.ParseFloat(s, 64)
			if !ok || err != nil || f != wf {
				return mismatch()
			}
			return ""
		}
		switch g := got.(type) {
		case int64:
			if strconv.FormatInt(g, 10) != s {
				return mismatch()
			}
		case uint64:
			if g <= math.MaxInt64 || strconv.FormatUint(g, 10) != s {
				return mismatch()
			}
		default:
			return mismatch()
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return mismatch()
		}
		for i := range w {
			if d := compareWant(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	case map[string]any:
		if _, ok := w["$any"]; ok && len(w) == 1 {
			return ""
		}
		if b64, ok := w["$bytes"].(string); ok && len(w) == 1 {
			g, ok := got.([]byte)
			wb, _ := base64.StdEncoding.DecodeString(b64)
			if !ok || !bytes.Equal(g, wb) {
				return mismatch()
			}
			return ""
		}
		if name, ok := w["$float"].(string); ok && len(w) == 1 {
			g, ok := got.(float64)
			good := ok && map[string]bool{
				"NaN":       math.IsNaN(g),
				"Infinity":  math.IsInf(g, 1),
				"-Infinity": math.IsInf(g, -1),
			}[name]
			if !good {
				return mismatch()
			}
			return ""
		}
		g, ok := got.(map[string]any)
		if !ok {
			return mismatch()
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, present := g[k]
			if !present {
				return fmt.Sprintf("at %s: missing key %q", path, k)
			}
			if d := compareWant(gv, w[k], path+"."+k); d != "" {
				return d
			}
		}
		for k := range g {
			if _, present := w[k]; !present {
				return fmt.Sprintf("at %s: unexpected key %q", path, k)
			}
		}
	default:
		return fmt.Sprintf("at %s: unknown want type %T", path, want)
	}
	return ""
}

package lgcodec

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
				t.Errorf("Decode mismatch: %s\ngot: %s", diff, appendJSON(nil, got))
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
		return fmt.Sprintf("at %s: got %s (%T), want %v", path, appendJSON(nil, got), got, want)
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

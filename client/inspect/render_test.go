package inspect

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestDataMarker(t *testing.T) {
	for uri, want := range map[string]string{
		"data:image/png;base64,iVBORw0KGgo=": "<data:image/png;base64, 8 bytes>",
		"data:text/plain,hello%20world":      "<data:text/plain, 13 bytes>",
		"data:,x":                            "<data:, 1 bytes>",
		"data:no-comma":                      "<data:, 8 bytes>",
		"data:" + strings.Repeat("x", 60) + ";base64,QUJD":      "<data:" + strings.Repeat("x", 40) + "…, 3 bytes>",
		"data:application/octet-stream;BASE64,AAAAAAAAAAAAAAAA": "<data:application/octet-stream;BASE64, 12 bytes>",
	} {
		if got := dataMarker(uri); got != want {
			t.Errorf("dataMarker(%.40q) = %q, want %q", uri, got, want)
		}
		if !isMarker(dataMarker(uri)) {
			t.Errorf("%q is not recognised as a marker", dataMarker(uri))
		}
	}
}

func TestPrepare(t *testing.T) {
	type point struct {
		X int    `json:"x"`
		L string `json:"label"`
	}
	got := prepare(map[string]any{
		"nan":   math.NaN(),
		"inf":   math.Inf(-1),
		"big":   int64(1) << 60,
		"small": 3,
		"strs":  []string{"a", "data:image/gif;base64,R0lG"},
		"pt":    point{X: 2, L: "data:,zz"},
	})
	want := map[string]any{
		"nan":   "NaN",
		"inf":   "-Infinity",
		"big":   jsonNumber("1152921504606846976"),
		"small": jsonNumber("3"),
		"strs":  []any{"a", "<data:image/gif;base64, 3 bytes>"},
		"pt":    map[string]any{"x": jsonNumber("2"), "label": "<data:, 2 bytes>"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("prepare = %#v\nwant %#v", got, want)
	}
}

func TestParsePath(t *testing.T) {
	tests := []struct {
		path string
		want []segment
		bad  string
	}{
		{"a.b[0].c", []segment{{"a", false}, {"b", false}, {"0", true}, {"c", false}}, ""},
		{`[0]["x.y"][2]`, []segment{{"0", true}, {"x.y", false}, {"2", true}}, ""},
		{`a["q\"uote"]`, []segment{{"a", false}, {`q"uote`, false}}, ""},
		{"a..b", []segment{{"a", false}, {"b", false}}, ""},
		{"a[b]", []segment{{"a", false}}, "[b]"},
		{"a]", []segment{{"a", false}}, "]"},
		{`a["open`, []segment{{"a", false}}, `["open`},
	}
	for _, tt := range tests {
		got, bad := parsePath(tt.path)
		if !reflect.DeepEqual(got, tt.want) || bad != tt.bad {
			t.Errorf("parsePath(%q) = %v, %q; want %v, %q", tt.path, got, bad, tt.want, tt.bad)
		}
	}
}

func TestPathsRoundTrip(t *testing.T) {
	// Every path a search prints must lead back to its value.
	v := prepare(map[string]any{
		"plain": []any{1, map[string]any{"with space": "a", "dotted.key": "b", "ünï": "c", "": "d"}},
		"empty": map[string]any{},
	})
	for p := range leaves(v, "") {
		segs, bad := parsePath(p.path)
		if bad != "" {
			t.Errorf("printed path %q does not parse at %q", p.path, bad)
			continue
		}
		got, failed, ok := resolve(v, segs)
		if !ok || !reflect.DeepEqual(got, p.value) {
			t.Errorf("path %q resolves to %v (failed at %q), want %v", p.path, got, failed, p.value)
		}
	}
}

func TestExcerpt(t *testing.T) {
	text := "αβγδεζηθικλμνξοπρστυφχψω" // 24 runes, 2 bytes each
	if got := excerpt(text, -1, -1, 30); got != text {
		t.Errorf("short text = %q", got)
	}
	if got := excerpt(text, -1, -1, 5); got != "αβγδε…(+19 chars)" {
		t.Errorf("head = %q", got)
	}
	start := strings.Index(text, "μ")
	if got := excerpt(text, start, start+len("μ"), 5); got != "…κλμνξ…" {
		t.Errorf("window = %q", got)
	}
	start = strings.Index(text, "ω")
	if got := excerpt(text, start, start+len("ω"), 5); got != "…υφχψω" {
		t.Errorf("window at the end = %q", got)
	}
}

func jsonNumber(s string) json.Number { return json.Number(s) }

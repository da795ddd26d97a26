package pyjson

import (
	"testing"

	"github.com/historyd/historyd/langgraph/format"
)

// TestMarshal holds Marshal to what Python's json.dumps printed for
// the same values (Python 3.11).
func TestMarshal(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{format.Map{{Key: "a", Value: "ü🌊\n\"x"}, {Key: "n", Value: 1.0}, {Key: "f", Value: 2.5e-7}, {Key: "big", Value: 1e22},
			{Key: "m", Value: []any{1, nil, true}}, {Key: "e", Value: format.Map{}}},
			`{"a": "\u00fc\ud83c\udf0a\n\"x", "n": 1.0, "f": 2.5e-07, "big": 1e+22, "m": [1, null, true], "e": {}}`},
		{[]any{1e15, 1e16, 0.0001, 0.00001, 123.456, -0.5}, `[1000000000000000.0, 1e+16, 0.0001, 1e-05, 123.456, -0.5]`},
		{map[string]any{"b": 1, "a": "\x01"}, `{"a": "\u0001", "b": 1}`},
		{[]any{[]byte("a'\x00\\"), []byte(`q"'`), int64(-3), uint64(1 << 63)}, `["b\"a'\\x00\\\\\"", "b'q\"\\''", -3, 9223372036854775808]`},
	} {
		got, err := Marshal(c.in)
		if err != nil || string(got) != c.want {
			t.Errorf("Marshal(%v) = %s, %v\nwant %s", c.in, got, err, c.want)
		}
	}
}

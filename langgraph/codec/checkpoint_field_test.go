package codec

import (
	"testing"

	"github.com/historyd/historyd/langgraph/format"
)

func TestField(t *testing.T) {
	saved := encodeMap(t,
		1, "an int key",
		"messages", "first",
		"tool_state", map[string]any{"k": int64(1)},
		"messages", []any{"second"},
	)
	tests := []struct {
		name, typ string
		data      []byte
		key       string
		ok        bool
		want      any
	}{
		{"msgpack: the last of repeated keys", format.TypeMsgpack, saved, "messages", true, []any{"second"}},
		{"msgpack: a map value", format.TypeMsgpack, saved, "tool_state", true, map[string]any{"k": int64(1)}},
		{"msgpack: no such key", format.TypeMsgpack, saved, "absent", false, nil},
		{"msgpack: not a map", format.TypeMsgpack, mustMsgpack(t, "alpha"), "messages", false, nil},
		{"json: a key", format.TypeJSON, []byte(` {"messages": [1, {"a": "b"}], "x": null}`), "messages", true, []any{1.0, map[string]any{"a": "b"}}},
		{"json: null value", format.TypeJSON, []byte(`{"x": null}`), "x", true, nil},
		{"json: not an object", format.TypeJSON, []byte(`"alpha"`), "messages", false, nil},
		{"empty", format.TypeEmpty, nil, "messages", false, nil},
		{"bytes", format.TypeBytes, []byte("raw"), "messages", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			val, ok, err := Field(tt.typ, tt.data, tt.key)
			if err != nil || ok != tt.ok {
				t.Fatalf("Field = ok %v, %v; want ok %v", ok, err, tt.ok)
			}
			if !ok {
				return
			}
			got, _, err := Decode(tt.typ, val, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if string(AppendJSON(nil, got)) != string(AppendJSON(nil, tt.want)) {
				t.Errorf("value = %s; want %s", AppendJSON(nil, got), AppendJSON(nil, tt.want))
			}
		})
	}
	if _, _, err := Field(format.TypePickle, []byte("x"), "messages"); err == nil {
		t.Error("a pickled value: no error")
	}
	if _, _, err := Field(format.TypeMsgpack, saved[:len(saved)-3], "messages"); err == nil {
		t.Error("a truncated map: no error")
	}
}

package codec

import (
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// decodeKeys collects what EachKey hands over into a map, or returns the
// value that is not a map.
func decodeKeys(typ string, data []byte, keep map[string]bool, lim Limits) (any, bool, error) {
	out := map[string]any{}
	whole, ok, err := EachKey(typ, data, keep, lim, func(k string, v any) error {
		out[k] = v
		return nil
	})
	if whole != nil {
		return whole, ok, err
	}
	return out, ok, err
}

func TestEachKey(t *testing.T) {
	state := map[string]any{
		"area": map[string]any{"value": 11420.0, "turn": int64(1)},
		"name": map[string]any{"value": "Severn"},
		"feature": map[string]any{"value": map[string]any{
			"type": "Polygon", "coordinates": []any{[]any{[]any{-3.1, 52.4}, []any{-2.9, 52.5}}},
		}},
	}
	data, err := msgpack.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []map[string]bool{
		nil, {}, {"area": true}, {"name": true, "feature": true, "absent": true},
	} {
		got, ok, err := decodeKeys("msgpack", data, keep, Limits{})
		if err != nil || !ok {
			t.Fatalf("EachKey(%v) = %v, %v", keep, ok, err)
		}
		want := map[string]any{}
		for k, v := range state {
			if keep == nil || keep[k] {
				want[k] = v
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("EachKey(%v) = %v\nwant %v", keep, got, want)
		}
		// JSON goes through Decode and is filtered after.
		js, ok, err := decodeKeys("json", []byte(`{"area": {"value": 1}, "name": {"value": "x"}}`), keep, Limits{})
		if err != nil || !ok {
			t.Fatalf("json EachKey = %v, %v", ok, err)
		}
		for k := range js.(map[string]any) {
			if keep != nil && !keep[k] {
				t.Errorf("json EachKey(%v) kept %q", keep, k)
			}
		}
	}
	// What Decode rejects, EachKey rejects, even in a skipped entry.
	bad := append([]byte{}, data[:len(data)-3]...)
	if _, _, err := decodeKeys("msgpack", bad, map[string]bool{"name": true}, Limits{}); err == nil {
		t.Error("truncated blob accepted")
	}
	deep, _ := msgpack.Marshal(map[string]any{"a": nest(10)})
	if _, _, err := decodeKeys("msgpack", deep, map[string]bool{"b": true}, Limits{MaxDepth: 5}); err == nil {
		t.Error("a skipped entry deeper than MaxDepth was accepted")
	}
	// A value that is not a map is decoded whole.
	list, _ := msgpack.Marshal([]any{"x"})
	if v, ok, err := decodeKeys("msgpack", list, map[string]bool{"x": true}, Limits{}); err != nil || !ok || !reflect.DeepEqual(v, []any{"x"}) {
		t.Errorf("EachKey of a list = %v, %v, %v", v, ok, err)
	}
}

func nest(n int) any {
	if n == 0 {
		return "leaf"
	}
	return []any{nest(n - 1)}
}

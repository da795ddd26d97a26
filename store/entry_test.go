package store

import (
	"reflect"
	"testing"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store/backend"
)

func ptr[T any](v T) *T { return &v }

func TestParseEntry(t *testing.T) {
	tests := []struct {
		name string
		raw  any
		want Entry
	}{
		{
			name: "full convention",
			raw: map[string]any{
				"value": 11420.0, "tool": "sketch_area", "seq": int64(3), "turn": int64(1),
				"turns_written": int64(1), "inputs": map[string]any{"name": "model"},
			},
			want: Entry{Value: 11420.0, Tool: ptr("sketch_area"), Seq: ptr(int64(3)), Turn: ptr(int64(1)),
				TurnsWritten: ptr(int64(1)), Inputs: map[string]string{"name": "model"}},
		},
		{
			name: "unknown fields are kept",
			raw:  map[string]any{"value": "x", "source": "cache", "ttl": int64(30)},
			want: Entry{Value: "x", Extra: map[string]any{"source": "cache", "ttl": int64(30)}},
		},
		{
			name: "mistyped convention fields are kept in extra",
			raw:  map[string]any{"value": nil, "seq": "7", "inputs": map[string]any{"a": int64(1)}, "tool": int64(5)},
			want: Entry{Value: nil, Extra: map[string]any{"seq": "7", "inputs": map[string]any{"a": int64(1)}, "tool": int64(5)}},
		},
		{
			name: "integral floats from JavaScript count as integers",
			raw:  map[string]any{"value": true, "turn": 2.0, "seq": 1.5},
			want: Entry{Value: true, Turn: ptr(int64(2)), Extra: map[string]any{"seq": 1.5}},
		},
		{
			name: "a bare value",
			raw:  []any{"a", "b"},
			want: Entry{Value: []any{"a", "b"}},
		},
		{
			name: "a map without value is a bare value",
			raw:  map[string]any{"area": 3.0},
			want: Entry{Value: map[string]any{"area": 3.0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseEntry(tt.raw); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseEntry = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestEachEntry(t *testing.T) {
	blob := func(v any) backend.Blob {
		data, err := write.EncodeMsgpack(v)
		if err != nil {
			t.Fatal(err)
		}
		return backend.Blob{Type: "msgpack", Data: data}
	}
	collect := func(b backend.Blob, keep map[string]bool) (map[string]Entry, error) {
		out := map[string]Entry{}
		err := eachEntry(b, "tool_state", keep, codec.Limits{}, func(k string, e Entry) error {
			out[k] = e
			return nil
		})
		return out, err
	}
	state := blob(map[string]any{"a": map[string]any{"value": 1.0}, "b": map[string]any{"value": 2.0, "turn": int64(3)}})
	got, err := collect(state, map[string]bool{"b": true, "missing": true})
	if err != nil || len(got) != 1 || *got["b"].Turn != 3 {
		t.Errorf("projection = %+v, %v; want only b", got, err)
	}
	if v, err := got["b"].Value.(codec.Raw).Decode(); err != nil || v != 2.0 {
		t.Errorf("b's value = %v, %v", v, err)
	}
	// The value stays encoded and the bookkeeping is read.
	got, err = collect(state, nil)
	if _, raw := got["b"].Value.(codec.Raw); err != nil || len(got) != 2 || !raw || *got["b"].Turn != 3 {
		t.Errorf("lazy = %+v, %v; want both keys, values left encoded", got, err)
	}
	for _, b := range []backend.Blob{{Type: "empty"}, {Type: "null"}} {
		if got, err := collect(b, nil); err != nil || len(got) != 0 {
			t.Errorf("%s state = %v, %v; want no entries", b.Type, got, err)
		}
	}
	// A value that is not a map is one entry named for the channel.
	if got, err := collect(blob([]any{"a todo"}), nil); err != nil || len(got) != 1 || got["tool_state"].Value == nil {
		t.Errorf("a list = %+v, %v; want one entry named tool_state", got, err)
	}
}

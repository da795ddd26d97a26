package codec

import (
	"encoding/json"
	"testing"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/vmihailenco/msgpack/v5"
)

// TestAtRest reads updated_channels from both serializers and tells a
// checkpoint that ends a run from one with a node still to run, as the
// checkpoints Python LangGraph 1.2 writes for a StateGraph show them.
func TestAtRest(t *testing.T) {
	for _, tt := range []struct {
		name        string
		updated     any // nil: absent
		rest, known bool
	}{
		{"input", []any{"__start__"}, false, true},
		{"agent to tools", []any{"branch:to:tools", "messages"}, false, true},
		{"a waiting edge", []any{"join:a+b:c"}, false, true},
		{"a Send", []any{"__pregel_tasks", "messages"}, false, true},
		{"the run's last step", []any{"messages"}, true, true},
		{"nothing updated", []any{}, true, true},
		{"not recorded", nil, false, false},
		{"not a list of strings", []any{1, "messages"}, false, false},
	} {
		doc := map[string]any{"v": 4, "ts": "2026-11-01T12:00:00+00:00", "channel_versions": map[string]any{"messages": "1"}}
		if tt.updated != nil {
			doc["updated_channels"] = tt.updated
		}
		js, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		mp, err := msgpack.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		for typ, data := range map[string][]byte{format.TypeJSON: js, format.TypeMsgpack: mp} {
			cp, err := ParseCheckpoint(typ, data, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", tt.name, typ, err)
			}
			rest, known := cp.AtRest()
			if rest != tt.rest || known != tt.known || cp.Versions["messages"] != "1" {
				t.Errorf("%s %s: at rest %v, known %v (updated %q); want %v, %v", tt.name, typ, rest, known, cp.Updated, tt.rest, tt.known)
			}
		}
	}
}

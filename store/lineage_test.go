package store_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// counterVersions names versions as LangGraph.js does: each channel counts
// 1, 2, 3, … per thread, a new number whenever its value changes, and a
// deleted thread's counters start over.
type counterVersions struct {
	n    map[string]int
	last map[string]string
}

func (c *counterVersions) version(ref backend.Ref, ch string, data []byte) string {
	k := ref.ThreadID + "\x00" + ch
	if c.last[k] != string(data) {
		c.n[k]++
		c.last[k] = string(data)
	}
	return strconv.Itoa(c.n[k])
}

type valueEncoder struct{}

func (valueEncoder) Encode(e store.Entry) ([]byte, error) {
	v := e.Value
	if raw, ok := v.(codec.Raw); ok {
		var err error
		if v, err = raw.Decode(); err != nil {
			return nil, err
		}
	}
	return json.Marshal(v)
}

// TestThreadWrittenAgain deletes a thread and writes another conversation
// under the same id, with versions that start over: nothing cached from the
// first conversation may answer for the second.
func TestThreadWrittenAgain(t *testing.T) {
	ctx := context.Background()
	versions := &counterVersions{n: map[string]int{}, last: map[string]string{}}
	mem := storetest.NewMemory()
	mem.Versions = versions.version
	ref := backend.Ref{ThreadID: "again"}
	first := storetest.Build(mem, ref, storetest.Demo[:2])
	st := store.New(store.Config{Backend: mem})
	all := func(h *store.History) []store.Turn { return h.Turns }
	h, _, states, err := st.ReadEncoded(ctx, ref, "", all, nil, valueEncoder{})
	if err != nil || h.Total != 2 || h.Turns[1].Question != storetest.Demo[1].Question {
		t.Fatalf("first conversation: %+v, %v", h, err)
	}
	if got := string(states[1].Entries[1].Data); got != `"Thames"` {
		t.Fatalf("first conversation, turn 2: %s", got)
	}

	var ids []string
	for _, w := range first {
		ids = append(ids, w.IDs...)
	}
	mem.Delete(ref, append(ids, "1f0c-000000"))
	versions.n, versions.last = map[string]int{}, map[string]string{}
	second := []storetest.Turn{
		{Question: "sketch the Trent", Writes: map[string]any{"sketch-ops/sketch_area/area_km2": 10452.0, "sketch-ops/sketch_area/name": "Trent"}},
		{Question: "and the Wye", Writes: map[string]any{"sketch-ops/sketch_area/area_km2": 4136.0, "sketch-ops/sketch_area/name": "Wye"}},
	}
	b := storetest.NewBuilderWithPrefix(mem, ref, "1f0d")
	for _, turn := range second {
		b.Turn(turn)
	}
	h, _, states, err = st.ReadEncoded(ctx, ref, "", all, nil, valueEncoder{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Total != 2 || h.Turns[0].Question != second[0].Question || h.Turns[1].Question != second[1].Question {
		t.Errorf("second conversation's turns = %+v", h.Turns)
	}
	if got := string(states[1].Entries[1].Data); got != `"Wye"` {
		t.Errorf("second conversation, turn 2, name = %s; want \"Wye\"", got)
	}
}

package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// memSink keeps what the generator writes.
type memSink struct {
	order  []string
	parent map[string]string
	cps    map[string]map[string]any
	meta   map[string]map[string]any
	blobs  map[[2]string][]byte // channel, version
}

// row keeps one row the generator's saver writes.
func (m *memSink) row(_ context.Context, r saver.Row) error {
	col := func(name string) any {
		i := slices.Index(r.Columns, name)
		if i < 0 {
			panic(fmt.Sprintf("no column %s in %s's row %v", name, r.Table, r.Columns))
		}
		return r.Values[i]
	}
	switch r.Table {
	case "checkpoints":
		var c, md map[string]any
		if err := json.Unmarshal([]byte(col("checkpoint").(string)), &c); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(col("metadata").(string)), &md); err != nil {
			return err
		}
		id := col("checkpoint_id").(string)
		parent, _ := col("parent_checkpoint_id").(string)
		m.order = append(m.order, id)
		m.cps[id], m.meta[id], m.parent[id] = c, md, parent
	case "checkpoint_blobs":
		key := [2]string{col("channel").(string), col("version").(string)}
		if _, dup := m.blobs[key]; dup {
			return fmt.Errorf("blob written twice: %s %s", key[0], key[1])
		}
		m.blobs[key] = col("blob").([]byte)
	}
	return nil
}

// TestThreadsDeriveAsHistorydDerives checks a generated thread against
// historyd's own decoder and turn rules, without a database: ids sort in
// writing order, every version names a blob, the turn ends the generator
// reports are the ones historyd derives, and tool_state decodes to what the
// generator says it wrote.
func TestThreadsDeriveAsHistorydDerives(t *testing.T) {
	for _, p := range []Params{
		{Turns: 4, CheckpointsPerTurn: 5, Keys: 3, StateBytes: 3000, Seed: 1},
		{Turns: 3, CheckpointsPerTurn: 9, Keys: 5, StateBytes: 20000, Seed: 2},
		{Turns: 12, CheckpointsPerTurn: 5, Keys: 3, StateBytes: 3000, Seed: 3, Forks: 3},
	} {
		t.Run(p.Name("plan"), func(t *testing.T) {
			m := &memSink{cps: map[string]map[string]any{}, meta: map[string]map[string]any{}, blobs: map[[2]string][]byte{}, parent: map[string]string{}}
			sum, err := build(context.Background(), "plan", p, Options{KeepDetail: true}, m.row)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(m.order), (p.Turns+p.Forks)*p.CheckpointsPerTurn; got != want {
				t.Fatalf("%d checkpoints, want %d", got, want)
			}
			var placed []store.Checkpoint
			var questions []store.Question
			byID := map[string]int32{}
			for i, id := range m.order {
				if i > 0 && id <= m.order[i-1] {
					t.Fatalf("checkpoint ids out of order: %s after %s", id, m.order[i-1])
				}
				parentStep := -2.0
				if p := m.parent[id]; p != "" {
					parentStep = m.meta[p]["step"].(float64)
				}
				if step := m.meta[id]["step"].(float64); step != parentStep+1 || (i == 0) != (m.parent[id] == "") {
					t.Errorf("checkpoint %d has step %v, its parent %q step %v", i, step, m.parent[id], parentStep)
				}
				versions := m.cps[id]["channel_versions"].(map[string]any)
				pl := store.Checkpoint{ID: id, Parent: m.parent[id]}
				if v, ok := versions["messages"].(string); ok {
					blob, ok := m.blobs[[2]string{"messages", v}]
					if !ok {
						t.Fatalf("checkpoint %s: no messages blob for version %s", id, v)
					}
					msgs, err := codec.ReadMessages("msgpack", blob, codec.Limits{}, codec.Humans)
					if err != nil {
						t.Fatal(err)
					}
					pl.Version, pl.Messages = v, msgs.Count
					for _, h := range msgs.List {
						q, ok := byID[h.ID]
						if !ok {
							q = int32(len(questions))
							byID[h.ID] = q
							questions = append(questions, store.Question{ID: h.ID, Text: h.Text})
						}
						pl.Asks = append(pl.Asks, q)
					}
				}
				placed = append(placed, pl)

				want := sum.Checkpoints[i]
				v, ok := versions["tool_state"].(string)
				if !ok {
					if want.State != nil {
						t.Errorf("checkpoint %s: no tool_state, generator says it has one", id)
					}
					continue
				}
				got, _, err := codec.Decode("msgpack", m.blobs[[2]string{"tool_state", v}], codec.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if !sameAsJSON(t, got, want.State) {
					t.Errorf("checkpoint %s (step %d): tool_state decodes differently from what the generator recorded", id, want.Step)
				}
			}
			h := store.Derive(backend.Ref{ThreadID: "plan"}, placed, questions)
			if h.Total != p.Turns || len(h.Forks) != p.Forks {
				t.Fatalf("historyd derives %d turns and %d forks, want %d and %d", h.Total, len(h.Forks), p.Turns, p.Forks)
			}
			for i, f := range h.Forks {
				// Turn n-1 ends at turn n's input checkpoint, which carries
				// on the state of the step the abandoned input left from too.
				n := p.ForkTurns()[i]
				from := m.parent[sum.TurnEnds[n-1]]
				if f.Turn != n-1 || f.Questions != n || f.From != from {
					t.Errorf("fork %d: %+v; want one from turn %d's last step (%s) holding %d questions", i, f, n-1, from, n)
				}
			}
			for _, turn := range h.Turns {
				if turn.End.ID != sum.TurnEnds[turn.N] {
					t.Errorf("turn %d: historyd ends it at %s, the generator at %s", turn.N, turn.End.ID, sum.TurnEnds[turn.N])
				}
			}
		})
	}
}

func sameAsJSON(t *testing.T, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func TestParamsValidate(t *testing.T) {
	for _, p := range []Params{
		{Turns: 0, CheckpointsPerTurn: 5, Keys: 1, StateBytes: 100},
		{Turns: 1, CheckpointsPerTurn: 4, Keys: 1, StateBytes: 100},
		{Turns: 1, CheckpointsPerTurn: 3, Keys: 1, StateBytes: 100},
		{Turns: 1, CheckpointsPerTurn: 5, Keys: 0, StateBytes: 100},
		{Turns: 1, CheckpointsPerTurn: 5, Keys: 4, StateBytes: 100},
	} {
		if p.Validate() == nil {
			t.Errorf("%+v: accepted", p)
		}
	}
}

package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// sharedBlobs stores values as PostgreSQL's checkpoint_blobs does, once per
// channel and version, the first value stored under a version kept: a
// checkpoint reads the value of the oldest checkpoint with its version.
type sharedBlobs struct {
	*storetest.Memory
	versions map[string]map[string]int // checkpoint → channel → version
}

func (b sharedBlobs) SharesBlobs() bool { return true }

func (b sharedBlobs) EachValue(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(int, backend.Blob) error) error {
	owners := make([]string, len(ids))
	for i, id := range ids {
		owners[i] = id
		for other, vs := range b.versions {
			if v, ok := vs[channel]; ok && v == b.versions[id][channel] && other < owners[i] {
				owners[i] = other
			}
		}
	}
	return b.Memory.EachValue(ctx, ref, channel, owners, fn)
}

// forkedJS writes a thread as LangGraph.js does, versions counted per
// lineage: turn 1 (c1), turn 2 (c2), then a fork from c1 whose first
// checkpoint (c3) produces versions 3 of messages and 2 of tool_state
// again, and c4 after it a new messages version.
func forkedJS(mem *storetest.Memory, ref backend.Ref) map[string]map[string]int {
	h1, h2, h3, a := write.Human("h1", "one"), write.Human("h2", "two"), write.Human("h3", "three"), write.AI("a", "answer")
	ts := func(v string) map[string]any {
		return map[string]any{"k": map[string]any{"value": v, "tool": "t", "seq": 1, "turn": 1, "turns_written": 1}}
	}
	type cp struct {
		id, parent string
		msgs       []any
		state      map[string]any
		vm, vs     int
	}
	versions := map[string]map[string]int{}
	for _, c := range []cp{
		{"c0", "", []any{}, nil, 1, 0},
		{"c1", "c0", []any{h1}, ts("one"), 2, 1},
		{"c2", "c1", []any{h1, h2}, ts("two"), 3, 2},
		{"c3", "c1", []any{h1, h3}, ts("three"), 3, 2},
		{"c4", "c3", []any{h1, h3, a}, ts("three"), 4, 2},
	} {
		values := write.Map{{Key: "messages", Value: c.msgs}}
		vers := write.Map{{Key: "messages", Value: c.vm}}
		versions[c.id] = map[string]int{"messages": c.vm}
		if c.state != nil {
			values = append(values, write.Field{Key: "tool_state", Value: c.state})
			vers = append(vers, write.Field{Key: "tool_state", Value: c.vs})
			versions[c.id]["tool_state"] = c.vs
		}
		mem.Put(ref, saver.Checkpoint{ID: c.id, Parent: c.parent, Values: values, Versions: vers,
			Metadata: write.Map{{Key: "source", Value: "loop"}}})
	}
	return versions
}

// A fork that produces again versions the branch it left produced: where
// values are inline, each branch reads its own; where they are shared by
// version, the fork's messages there are unread and its state is refused,
// never the other branch's served.
func TestForkReproducingVersions(t *testing.T) {
	ctx := context.Background()
	ref := backend.Ref{ThreadID: "js-fork"}
	for _, shared := range []bool{false, true} {
		mem := storetest.NewMemory()
		versions := forkedJS(mem, ref)
		var b backend.Backend = mem
		if shared {
			b = sharedBlobs{Memory: mem, versions: versions}
		}
		st := store.New(store.Config{Backend: b})
		h, err := st.History(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		var qs []string
		for _, turn := range h.Turns {
			qs = append(qs, turn.Question)
		}
		if !slices.Equal(qs, []string{"one", "three"}) || h.Turns[1].End.ID != "c4" {
			t.Errorf("shared %v: questions %q, turn 2 %+v", shared, qs, h.Turns[1])
		}
		// Inline, every list is read: complete. Shared, c3's is not, and
		// c4's holds every question: counted, not complete.
		if want := map[bool]store.Numbering{false: store.Complete, true: store.Counted}[shared]; h.Numbering != want {
			t.Errorf("shared %v: numbering %v, want %v", shared, h.Numbering, want)
		}
		_, _, states, err := st.ReadEncoded(ctx, ref, "", storetest.Only(2), nil, storetest.EntryEncoder{})
		if shared {
			var fe *store.ForeignValueError
			if !errors.As(err, &fe) || !errors.Is(err, store.ErrForeignValue) || fe.CheckpointID != "c4" || fe.Channel != "tool_state" {
				t.Errorf("shared values: turn 2 read %v, want ErrForeignValue at c4", err)
			}
		} else if err != nil || !strings.Contains(string(states[0].Entries[0].Data), `"three"`) {
			t.Errorf("inline values: turn 2 read %+v, %v", states, err)
		}
		// The abandoned branch stored its values first: its own either way.
		_, _, states, err = st.ReadEncoded(ctx, backend.Ref{ThreadID: ref.ThreadID, Head: "c2"}, "", storetest.Only(2), nil, storetest.EntryEncoder{})
		if err != nil || !strings.Contains(string(states[0].Entries[0].Data), `"two"`) {
			t.Errorf("shared %v: abandoned turn 2 read %+v, %v", shared, states, err)
		}
	}
}

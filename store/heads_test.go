package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// Reads of many heads share the thread's one index, each head's History
// derived once while it is kept, and the index charged for them.
func TestHeadsShareOneIndex(t *testing.T) {
	ctx := context.Background()
	mem := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "heads"}
	written := storetest.Build(mem, ref, storetest.Demo)
	st := store.New(store.Config{Backend: mem})
	if _, err := st.History(ctx, ref); err != nil {
		t.Fatal(err)
	}
	before := st.CacheStats().Index.Bytes
	var ids []string
	for _, w := range written {
		ids = append(ids, w.IDs...)
	}
	first := map[string]*store.History{}
	for _, id := range ids {
		h, err := st.History(ctx, backend.Ref{ThreadID: ref.ThreadID, Head: id})
		if err != nil {
			t.Fatal(err)
		}
		if h.Head != id || !h.Holds(id) {
			t.Fatalf("head %s: History of head %s", id, h.Head)
		}
		first[id] = h
	}
	if st.CacheStats().Index.Entries != 1 {
		t.Errorf("%d indexes for one thread", st.CacheStats().Index.Entries)
	}
	if after := st.CacheStats().Index.Bytes; after <= before {
		t.Errorf("the index is charged %d bytes with heads kept, %d without", after, before)
	}
	// The most recent heads are kept: read again, the same History.
	last := ids[len(ids)-2]
	if h, _ := st.History(ctx, backend.Ref{ThreadID: ref.ThreadID, Head: last}); h != first[last] {
		t.Errorf("head %s derived again", last)
	}
	// The oldest head read is no longer kept: derived again, equal.
	h, err := st.History(ctx, backend.Ref{ThreadID: ref.ThreadID, Head: ids[0]})
	if err != nil || h == first[ids[0]] || h.Total != first[ids[0]].Total {
		t.Errorf("head %s: %p %v, first %p", ids[0], h, err, first[ids[0]])
	}
}

// A checkpoint arriving whose parent the index does not hold (committed
// late with an older id, or its fork point deleted) is not placed on a
// guess: the thread is read afresh.
func TestRefreshReadsAfreshForAnUnknownParent(t *testing.T) {
	ctx := context.Background()
	mem := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "late"}
	written := storetest.Build(mem, ref, storetest.Demo[:2])
	// No count on the refresh: only the parent link shows what was missed.
	st := store.New(store.Config{Backend: mem, RecountEvery: time.Hour})
	if _, err := st.History(ctx, ref); err != nil {
		t.Fatal(err)
	}
	// Committed late: a checkpoint with an older id than the newest the
	// store listed (a new question from turn 1's end), then its child.
	late := written[0].End + "a"
	msgs := []any{write.Human("1f0c-msg-0", storetest.Demo[0].Question), write.Human("late", "a question from turn 1's end")}
	mem.Put(ref, saver.Checkpoint{ID: late, Parent: written[0].End, Values: write.Map{{Key: "messages", Value: msgs}}})
	mem.Put(ref, saver.Checkpoint{ID: "1f0c-zzzzzz", Parent: late, Values: write.Map{{Key: "messages", Value: msgs}}})
	h, err := st.History(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	// Read afresh, the lineage reaches the thread's first checkpoint
	// through the late one: complete, and the branch it left is a fork.
	if h.Head != "1f0c-zzzzzz" || h.Numbering != store.Complete || h.Total != 2 || h.Turns[1].Question != "a question from turn 1's end" {
		t.Errorf("head %s, numbering %v, turns %+v", h.Head, h.Numbering, h.Turns)
	}
	if len(h.Forks) != 1 || h.Forks[0].From != written[0].End || h.Forks[0].Newest != written[1].End {
		t.Errorf("forks %+v", h.Forks)
	}
}

// A namespace follows its own lineage: a subgraph run again (Studio's
// "re-run from here") is a new namespace, and each namespace's head is its
// own newest checkpoint; the root's lineage is the root's.
func TestNamespacesFollowTheirOwnLineage(t *testing.T) {
	ctx := context.Background()
	mem := storetest.NewMemory()
	root := backend.Ref{ThreadID: "sub"}
	rb := storetest.NewBuilder(mem, root)
	w1 := rb.Turn(storetest.Demo[0])
	rb.Turn(storetest.Demo[1])
	sub1 := backend.Ref{ThreadID: "sub", Namespace: "tools:1"}
	sb := storetest.NewBuilderWithPrefix(mem, sub1, "1f0d")
	s1 := sb.Turn(storetest.Demo[0])
	sb.Turn(storetest.Demo[1])
	// Re-run from turn 1's end: the root forks, and the subgraph runs in a
	// new namespace.
	rb.From(w1.End)
	rb.Turn(storetest.Demo[2])
	sub2 := backend.Ref{ThreadID: "sub", Namespace: "tools:2"}
	storetest.NewBuilderWithPrefix(mem, sub2, "1f0e").Turn(storetest.Demo[3])
	st := store.New(store.Config{Backend: mem})
	for _, c := range []struct {
		ref   backend.Ref
		total int
		forks int
	}{{root, 2, 1}, {sub1, 2, 0}, {sub2, 1, 0}} {
		h, err := st.History(ctx, c.ref)
		if err != nil || h.Total != c.total || len(h.Forks) != c.forks {
			t.Errorf("%+v: total %d, forks %+v, %v; want %d and %d forks", c.ref, h.Total, h.Forks, err, c.total, c.forks)
		}
	}
	// The first subgraph namespace's checkpoints are no head of the root.
	if _, err := st.History(ctx, backend.Ref{ThreadID: "sub", Head: s1.End}); !errors.Is(err, store.ErrUnknownHead) {
		t.Errorf("a subgraph checkpoint as the root's head: %v", err)
	}
}

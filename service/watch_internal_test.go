package service

import (
	"context"
	"testing"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// A poller compares histories by what they say: one derived again from the
// same checkpoints, as a thread too large to cache is on every read, is
// no change; a new checkpoint or a deleted one is.
func TestSameHistory(t *testing.T) {
	mem := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "t"}
	b := storetest.NewBuilder(mem, ref)
	w := b.Turn(storetest.Demo[0])
	uncached := store.New(store.Config{Backend: mem, CacheBytes: -1})
	read := func() *store.History {
		t.Helper()
		h, err := uncached.History(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	first, again := read(), read()
	if first == again || !sameHistory(first, again) {
		t.Errorf("two reads of an unchanged thread, uncached: shared %v, same %v; want different Histories saying the same", first == again, sameHistory(first, again))
	}
	b.Turn(storetest.Demo[1])
	grown := read()
	if sameHistory(first, grown) || sameHistory(grown, nil) || !sameHistory(nil, nil) {
		t.Error("a turn added: the histories read the same")
	}
	mem.Delete(ref, w.IDs[1:2])
	if sameHistory(grown, read()) {
		t.Error("a checkpoint deleted: the histories read the same")
	}
}

// A turn whose only checkpoint left is the between-runs one that asked its
// question (the builder's input already holds it, as an update_state
// adding a question does) has not ended: its run is still to come. Once a
// later question is asked, it has.
func TestNotEndedAtItsOwnQuestion(t *testing.T) {
	ended := func(mem *storetest.Memory, ref backend.Ref, n int) bool {
		t.Helper()
		h, err := store.New(store.Config{Backend: mem, CacheBytes: -1}).History(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		turnOf := map[string]int{}
		for _, st := range h.Steps {
			turnOf[st.Checkpoint.ID] = st.Turn
		}
		if h.Total < n || !h.Turns[n-1].Retained {
			t.Fatalf("turn %d not retained: %+v", n, h.Turns)
		}
		return h.Ended(h.Turns[n-1], turnOf)
	}
	mem := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "asked"}
	b := storetest.NewBuilder(mem, ref)
	w := b.Turn(storetest.Demo[0])
	mem.Delete(ref, w.IDs[1:]) // what a poll between the turn's first two writes sees
	if ended(mem, ref, 1) {
		t.Error("turn 1, only its question asked, has ended")
	}

	mem = storetest.NewMemory()
	b = storetest.NewBuilder(mem, ref)
	b.Turn(storetest.Demo[0])
	b.Turn(storetest.Demo[1])
	if !ended(mem, ref, 1) {
		t.Error("turn 1, with turn 2 asked after it, has not ended")
	}
}

// lineage is a hand-built History of checkpoints ids, one turn each.
func lineage(head string, forks []store.Fork, ids ...string) *store.History {
	h := &store.History{Head: head, Forks: forks}
	for i, id := range ids {
		h.Steps = append(h.Steps, store.Step{Checkpoint: &store.Checkpoint{ID: id}, Turn: i + 1})
	}
	return h
}

// A watcher that sent turns up to d, on a b c d, is rewound when the thread
// forks at b (its head now f on a b e f): to turn 2, whose end b the new
// lineage shares, on the branch it had followed; not when retention
// pruned the ends it sent while the head it read is still there.
func TestRewound(t *testing.T) {
	old := lineage("d", nil, "a", "b", "c", "d")
	w := &watcher{last: old, sent: map[int]sentTurn{1: {end: "a"}, 2: {end: "b"}, 4: {end: "d"}}}
	other := store.Fork{From: "a", Turn: 1, Questions: 1, Newest: "x"}
	branch := store.Fork{From: "b", Turn: 2, Questions: 4, Newest: "d"}

	forked := lineage("f", []store.Fork{other, branch}, "a", "b", "e", "f")
	rw := w.rewound(forked)
	if rw == nil || rw.turn != 2 || rw.fork == nil || *rw.fork != branch {
		t.Errorf("forked at b: %+v, want turn 2 on %+v", rw, branch)
	}

	// The abandoned branch went on after the watcher read it: it is still
	// the one leaving from b.
	wentOn := branch
	wentOn.Newest = "g"
	rw = w.rewound(lineage("f", []store.Fork{other, {From: "b", Newest: "c"}, wentOn}, "a", "b", "e", "f"))
	if rw == nil || rw.fork == nil || *rw.fork != wentOn {
		t.Errorf("branch went on: %+v, want %+v", rw, wentOn)
	}

	// The branch deleted: rewound, no fork to name.
	if rw = w.rewound(lineage("f", nil, "a", "b", "e", "f")); rw == nil || rw.turn != 2 || rw.fork != nil {
		t.Errorf("branch deleted: %+v, want turn 2 and no fork", rw)
	}
	// Forked before anything sent: turn 0.
	if rw = w.rewound(lineage("z", nil, "z")); rw == nil || rw.turn != 0 {
		t.Errorf("forked before the first turn: %+v, want turn 0", rw)
	}

	for name, h := range map[string]*store.History{
		"grown":  lineage("e", nil, "a", "b", "c", "d", "e"),
		"pruned": lineage("e", nil, "d", "e"),
	} {
		if rw := w.rewound(h); rw != nil {
			t.Errorf("%s: rewound %+v, want nil", name, rw)
		}
	}
	// Retention took the newest end sent: the head read is still there.
	w2 := &watcher{last: old, sent: map[int]sentTurn{2: {end: "b"}}}
	if rw := w2.rewound(lineage("e", nil, "c", "d", "e")); rw != nil {
		t.Errorf("end pruned: rewound %+v, want nil", rw)
	}
	// Nothing sent yet: nothing to rewind.
	if rw := (&watcher{last: old, sent: map[int]sentTurn{}}).rewound(forked); rw != nil {
		t.Errorf("nothing sent: rewound %+v", rw)
	}
}

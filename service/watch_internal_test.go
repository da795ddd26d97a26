package service

import (
	"context"
	"testing"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/storetest"
)

// A poller compares histories by what they say: one derived again from the
// same checkpoints, as a thread too large to cache is on every read, is
// no change; a new checkpoint or a deleted one is.
func TestSameHistory(t *testing.T) {
	mem := storetest.NewMemory()
	ref := store.Ref{ThreadID: "t"}
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
	ended := func(mem *storetest.Memory, ref store.Ref, n int) bool {
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
		return ended(h, h.Turns[n-1], turnOf)
	}
	mem := storetest.NewMemory()
	ref := store.Ref{ThreadID: "asked"}
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

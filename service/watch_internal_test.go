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

package store_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// longThread writes a thread of n checkpoints into mem, each the child of
// the one before, whose messages change every per checkpoints (a question,
// then an answer, in turn) and whose tool_state changes every statePer, as
// LangGraph's super-steps that write other channels leave them. Only the
// first checkpoint of a version stores its value, which is the one the
// store reads.
func longThread(mem *storetest.Memory, ref backend.Ref, n, per, statePer int) {
	var msgs []any
	for i := range n {
		cp := saver.Checkpoint{ID: fmt.Sprintf("1f0c-%07d", i), TS: storetest.Base.Add(time.Duration(i) * time.Second),
			Metadata: write.Map{{Key: "source", Value: "loop"}}}
		if i > 0 {
			cp.Parent = fmt.Sprintf("1f0c-%07d", i-1)
		}
		v, sv := i/per, i/statePer
		if i%per == 0 {
			if v%2 == 0 {
				msgs = append(msgs, write.Human(fmt.Sprintf("h%d", v), fmt.Sprintf("question %d", v/2+1)))
			} else {
				msgs = append(msgs, write.AI(fmt.Sprintf("a%d", v), "answer"))
			}
			cp.Values = append(cp.Values, write.Field{Key: "messages", Value: append([]any(nil), msgs...)})
		}
		if i%statePer == 0 {
			cp.Values = append(cp.Values, write.Field{Key: "tool_state", Value: map[string]any{"counter": map[string]any{"value": sv}}})
		}
		cp.Versions = write.Map{{Key: "messages", Value: fmt.Sprintf("%032d", v)}, {Key: "tool_state", Value: fmt.Sprintf("%032d", sv)}}
		mem.Put(ref, cp)
	}
}

// heapInUse returns the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestIndexSizeIsTheHeap holds what the index cache charges a thread to
// what caching it adds to the live heap: the charge is what the byte
// budget is for.
func TestIndexSizeIsTheHeap(t *testing.T) {
	for _, c := range []struct{ n, per, statePer int }{{10000, 50, 50}, {10000, 50, 1}, {1000, 4, 4}} {
		t.Run(fmt.Sprintf("%d checkpoints, messages every %d, state every %d", c.n, c.per, c.statePer), func(t *testing.T) {
			mem := storetest.NewMemory()
			ref := backend.Ref{ThreadID: "long"}
			longThread(mem, ref, c.n, c.per, c.statePer)
			st := store.New(store.Config{Backend: mem, CacheBytes: 1 << 30, CacheStateBytes: -1})
			before := heapInUse()
			h, err := st.History(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			grew := heapInUse() - before
			charged := st.CacheStats().Index.Bytes
			t.Logf("%d turns; the heap grew %d bytes (%d a checkpoint), the cache charged %d (%d a checkpoint)",
				h.Total, grew, grew/int64(c.n), charged, charged/int64(c.n))
			if st.CacheStats().Index.Entries != 1 {
				t.Fatalf("cache stats %+v: want the index cached", st.CacheStats())
			}
			if charged < grew*3/4 || charged > grew*5/4 {
				t.Errorf("the index cache charged %d bytes for an index that takes %d: want within a quarter of it", charged, grew)
			}
			runtime.KeepAlive(h)
		})
	}
}

// TestCacheBoundedInBytes reads more long threads than the cache holds:
// what it holds stays within its budget, the least recently read go
// first, and a thread too large for a quarter of it is served, not kept.
func TestCacheBoundedInBytes(t *testing.T) {
	mem := storetest.NewMemory()
	refs := make([]backend.Ref, 6)
	for i := range refs {
		refs[i] = backend.Ref{ThreadID: fmt.Sprintf("t%d", i)}
		longThread(mem, refs[i], 2000, 10, 10)
	}
	huge := backend.Ref{ThreadID: "huge"}
	longThread(mem, huge, 20000, 100, 100)
	one := func() int64 {
		st := store.New(store.Config{Backend: mem, CacheStateBytes: -1})
		if _, err := st.History(context.Background(), refs[0]); err != nil {
			t.Fatal(err)
		}
		return st.CacheStats().Index.Bytes
	}()
	// Room for four of the small threads, not five, each under a quarter
	// of it; the huge one is ten times as large.
	budget := one*9/2 + 1
	st := store.New(store.Config{Backend: mem, CacheBytes: budget, CacheStateBytes: -1})
	ctx := context.Background()
	for _, ref := range refs {
		if _, err := st.History(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if s := st.CacheStats(); s.Bytes > budget {
			t.Fatalf("the caches hold %d bytes, over their %d", s.Bytes, budget)
		}
	}
	s := st.CacheStats()
	if s.Index.Entries != 4 || s.Index.Evictions != 2 || s.Index.Misses != 6 || s.Capacity != budget {
		t.Errorf("after 6 threads of %d bytes each into %d: %+v; want 4 kept, 2 evicted, 6 misses", one, budget, s)
	}
	// The last four are kept: reading them again hits, the first misses.
	for _, ref := range refs[2:] {
		if _, err := st.History(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if s := st.CacheStats(); s.Index.Hits != 4 {
		t.Errorf("after reading the four kept again: %+v; want 4 hits", s.Index)
	}
	for range 2 {
		h, err := st.History(ctx, huge)
		if err != nil {
			t.Fatal(err)
		}
		if h.Total != 20000/100/2 {
			t.Fatalf("huge thread: %d turns, want %d", h.Total, 20000/100/2)
		}
	}
	if s := st.CacheStats(); s.Index.Uncached != 2 || s.Index.Entries != 4 || s.Bytes > budget {
		t.Errorf("after reading a thread too large to cache twice: %+v; want it served uncached twice, the four others kept", s)
	}
}

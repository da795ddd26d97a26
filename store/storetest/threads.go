package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// PutThread writes a thread of n checkpoints (n >= 1) one question long,
// the first written at at and each later one a second after the one
// before, with ids 1f0d-000000, 1f0d-000001, …. It returns the
// checkpoint ids.
func PutThread(w Writer, ref backend.Ref, at time.Time, n int) []string {
	var ids []string
	parent := ""
	for i := range n {
		id := fmt.Sprintf("1f0d-%06d", i)
		msgs := []any{write.Human(ref.ThreadID+"-q1", "the question")}
		if i > 0 {
			msgs = append(msgs, write.AI(fmt.Sprintf("%s-a%d", ref.ThreadID, i), "an answer"))
		}
		w.Put(ref, saver.Checkpoint{ID: id, Parent: parent, TS: at.Add(time.Duration(i) * time.Second),
			Values:   write.Map{{Key: "messages", Value: msgs}},
			Metadata: write.Map{{Key: "source", Value: "loop"}, {Key: "step", Value: i}}})
		ids = append(ids, id)
		parent = id
	}
	return ids
}

// AllThreads pages through a listing with pages of size, and returns the
// thread ids in the order listed.
func AllThreads(t testing.TB, st *store.Store, q store.ThreadsQuery, size int) []string {
	t.Helper()
	q.Limit = size
	var out []string
	for range 10_000 {
		page, err := st.Threads(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Threads) > size {
			t.Fatalf("page of %d threads, asked for %d", len(page.Threads), size)
		}
		for _, s := range page.Threads {
			out = append(out, s.ThreadID)
		}
		if page.Next == nil {
			return out
		}
		q.After = page.Next
	}
	t.Fatal("listing did not end after 10,000 pages")
	return nil
}

// ThreadsCases are the suite's cases of Backend.Threads, through
// Store.Threads and directly.
var ThreadsCases = []Case{
	{"Threads: every thread once while a writer adds threads", threadsWhileWriting},
	{"Threads: prefix filter", threadsPrefixes},
	{"Threads: a walk under prefixes visits no thread outside them", threadsConfined},
	{"Threads: time filters and last-activity order", threadsTimes},
	{"Threads: namespaces, counts and times", threadsNamespaces},
	{"Steps list checkpoints in order and say where runs ended", stepsAndRest},
}

func threadsWhileWriting(t *testing.T, open Open) {
	b, w := open(t)
	st := store.New(store.Config{Backend: b})
	var before []string
	for i := range 40 {
		id := fmt.Sprintf("t%03d", i*2)
		before = append(before, id)
		PutThread(w, backend.Ref{ThreadID: id}, Base.Add(time.Duration(i)*time.Minute), 1+i%3)
	}
	for _, order := range []store.ThreadOrder{store.ByThreadID, store.ByLastActivity} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			// The writer adds threads between and after the existing ids,
			// newer than all of them, while the listing pages (at most 40,
			// so that a listing by last activity, which visits every
			// thread on each page, keeps up).
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			var added []string
			go func() {
				defer wg.Done()
				for i := range 40 {
					select {
					case <-stop:
						return
					default:
					}
					id := fmt.Sprintf("t%03d-%d-%d", i%90, order, i)
					PutThread(w, backend.Ref{ThreadID: id}, Base.Add(time.Hour+time.Duration(i)*time.Second), 1)
					added = append(added, id)
					time.Sleep(2 * time.Millisecond)
				}
			}()
			got := AllThreads(t, st, store.ThreadsQuery{Order: order}, 3)
			close(stop)
			wg.Wait()
			seen := map[string]int{}
			for _, id := range got {
				seen[id]++
			}
			for id, n := range seen {
				if n > 1 {
					t.Errorf("%s listed %d times", id, n)
				}
			}
			for _, id := range before {
				if seen[id] != 1 {
					t.Errorf("%s, there from start to end, listed %d times", id, seen[id])
				}
			}
			if order == store.ByThreadID && !slices.IsSorted(got) {
				t.Errorf("not in thread-id order: %v", got)
			}
			before = append(before, added...)
		})
	}
}

func threadsPrefixes(t *testing.T, open Open) {
	b, w := open(t)
	st := store.New(store.Config{Backend: b})
	// In byte order: "z" sorts before "ü".
	ids := []string{"a", "a/1", "a/2", "a/20", "ab/1", "b/1", "b/2", "t%_/1", "tx_/1", "z", "ü/1", "üb/1"}
	for i, id := range ids {
		PutThread(w, backend.Ref{ThreadID: id}, Base.Add(time.Duration(i)*time.Minute), 1)
	}
	for _, tt := range []struct {
		prefixes []string
		want     []string
	}{
		{nil, ids},
		{[]string{"a/"}, []string{"a/1", "a/2", "a/20"}},
		{[]string{"a/2"}, []string{"a/2", "a/20"}},
		{[]string{"a"}, []string{"a", "a/1", "a/2", "a/20", "ab/1"}},
		{[]string{"b/", "a/"}, []string{"a/1", "a/2", "a/20", "b/1", "b/2"}},
		{[]string{"a/", "a/1", "a"}, []string{"a", "a/1", "a/2", "a/20", "ab/1"}},
		{[]string{"t%_/"}, []string{"t%_/1"}},
		{[]string{"ü/"}, []string{"ü/1"}},
		{[]string{"c/", "y"}, nil},
		{[]string{"z", ""}, ids},
	} {
		for _, size := range []int{1, 2, 100} {
			got := AllThreads(t, st, store.ThreadsQuery{Prefixes: tt.prefixes}, size)
			if !slices.Equal(got, tt.want) {
				t.Errorf("prefixes %q, pages of %d: %q, want %q", tt.prefixes, size, got, tt.want)
			}
		}
		// A cursor inside, before and after the ranges.
		if len(tt.want) > 1 {
			got := AllThreads(t, st, store.ThreadsQuery{Prefixes: tt.prefixes, After: &store.ThreadCursor{ThreadID: tt.want[0]}}, 2)
			if !slices.Equal(got, tt.want[1:]) {
				t.Errorf("prefixes %q after %q: %q, want %q", tt.prefixes, tt.want[0], got, tt.want[1:])
			}
		}
	}
	if got := AllThreads(t, st, store.ThreadsQuery{After: &store.ThreadCursor{ThreadID: "\U0010FFFF"}}, 5); len(got) != 0 {
		t.Errorf("after the last id: %q", got)
	}
}

// threadsConfined holds what tenant isolation rests on: a walk under
// prefixes (a tenant's) visits only ids under them, whatever sorts among
// them in the storage's own order, so that no cursor, count, refusal or
// cost of a listing depends on anyone else's threads.
func threadsConfined(t *testing.T, open Open) {
	b, w := open(t)
	own := []string{"acme/1", "acme/2", "acme/z"}
	// Ids some collation sorts among acme/'s: other cases and accents
	// (ICU compares the letters first), other punctuation (glibc ignores
	// it: "acmecorp/1" sorts between "acme/2" and "acme/z"), and ids
	// around the prefix in byte order.
	foreign := []string{"ACME/1", "Acme/15", "acme-m", "acme-/3", "acmecorp/1", "acmé/1", "acme", "ac/me/1", "acme0", "acme./1", "acme.", "b"}
	for i, id := range slices.Concat(own, foreign) {
		PutThread(w, backend.Ref{ThreadID: id}, Base.Add(time.Duration(i)*time.Minute), 1)
	}
	ctx := context.Background()
	for i, after := range []string{"", own[0], own[1], own[2]} {
		want := own[i:]
		// One more than the threads left: a walk that visited any other id
		// would stop at the limit, or hand it over.
		var got []string
		walk, err := b.Threads(ctx, backend.ThreadQuery{Prefixes: []string{"acme/"}, After: after, Limit: len(want) + 1}, func(r backend.ThreadRow) error {
			got = append(got, r.ThreadID)
			return nil
		})
		last := ""
		if len(want) > 0 {
			last = want[len(want)-1]
		}
		if err != nil || !slices.Equal(got, want) || walk.More || walk.Last != last {
			t.Errorf("walk under acme/ after %q: %q, last %q, more %v, %v; want %q, last %q, no more", after, got, walk.Last, walk.More, err, want, last)
		}
	}
	st := store.New(store.Config{Backend: b})
	for _, order := range []store.ThreadOrder{store.ByThreadID, store.ByLastActivity} {
		got := AllThreads(t, st, store.ThreadsQuery{Prefixes: []string{"acme/"}, Order: order}, 1)
		slices.Sort(got)
		if !slices.Equal(got, own) {
			t.Errorf("%v under acme/: %q, want %q", order, got, own)
		}
	}
}

func threadsTimes(t *testing.T, open Open) {
	b, w := open(t)
	st := store.New(store.Config{Backend: b})
	// Last activity: t-0 at Base+2s (3 checkpoints from Base), t-1 at
	// +1h, t-2 at +30m, t-3 at +1h (a tie with t-1), t-4 at +10m.
	starts := []time.Duration{0, time.Hour, 30 * time.Minute, time.Hour - time.Second, 10 * time.Minute}
	lengths := []int{3, 1, 1, 2, 1}
	for i := range starts {
		PutThread(w, backend.Ref{ThreadID: fmt.Sprintf("t-%d", i)}, Base.Add(starts[i]), lengths[i])
	}
	newest := []string{"t-1", "t-3", "t-2", "t-4", "t-0"}
	for _, size := range []int{1, 2, 10} {
		if got := AllThreads(t, st, store.ThreadsQuery{Order: store.ByLastActivity}, size); !slices.Equal(got, newest) {
			t.Errorf("newest first, pages of %d: %q, want %q", size, got, newest)
		}
	}
	for _, tt := range []struct {
		after, before time.Duration // from Base; 0 is unset
		want          []string
	}{
		{after: 20 * time.Minute, want: []string{"t-1", "t-2", "t-3"}},
		{before: 20 * time.Minute, want: []string{"t-0", "t-4"}},
		{after: 5 * time.Minute, before: 50 * time.Minute, want: []string{"t-2", "t-4"}},
		// Strictly after and before: t-2's last checkpoint is at +30m.
		{after: 30 * time.Minute, before: time.Hour, want: nil},
		{before: 30*time.Minute + time.Nanosecond, after: 30*time.Minute - time.Nanosecond, want: []string{"t-2"}},
	} {
		q := store.ThreadsQuery{}
		if tt.after != 0 {
			q.ActiveAfter = Base.Add(tt.after)
		}
		if tt.before != 0 {
			q.ActiveBefore = Base.Add(tt.before)
		}
		for _, size := range []int{1, 3} {
			if got := AllThreads(t, st, q, size); !slices.Equal(got, tt.want) {
				t.Errorf("after %v before %v, pages of %d: %q, want %q", tt.after, tt.before, size, got, tt.want)
			}
			q.Order = store.ByLastActivity
			want := slices.DeleteFunc(slices.Clone(newest), func(id string) bool { return !slices.Contains(tt.want, id) })
			if got := AllThreads(t, st, q, size); !slices.Equal(got, want) {
				t.Errorf("newest first, after %v before %v, pages of %d: %q, want %q", tt.after, tt.before, size, got, want)
			}
			q.Order = 0
		}
	}
}

func threadsNamespaces(t *testing.T, open Open) {
	b, w := open(t)
	st := store.New(store.Config{Backend: b})
	root := PutThread(w, backend.Ref{ThreadID: "both"}, Base, 4)
	PutThread(w, backend.Ref{ThreadID: "both", Namespace: "sub:1"}, Base.Add(time.Hour), 2)
	PutThread(w, backend.Ref{ThreadID: "only-sub", Namespace: "sub:1"}, Base.Add(2*time.Hour), 3)
	PutThread(w, backend.Ref{ThreadID: "only-root"}, Base.Add(3*time.Hour), 1)
	written := Build(w, backend.Ref{ThreadID: "turns"}, Demo)

	ctx := context.Background()
	page, err := st.Threads(ctx, store.ThreadsQuery{Limit: 10, Turns: true})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		id          string
		n           int64
		first, last time.Time
		lastID      string
		turns       int
	}
	var all []got
	for _, s := range page.Threads {
		g := got{s.ThreadID, s.Checkpoints, s.FirstAt.UTC(), s.LastAt.UTC(), s.LastID, -1}
		if s.History != nil {
			g.turns = s.History.Total
		}
		all = append(all, g)
	}
	n := 1 // Build's first, empty checkpoint
	for _, wr := range written {
		n += len(wr.IDs)
	}
	want := []got{
		{"both", 4, Base, Base.Add(3 * time.Second), root[3], 1},
		{"only-root", 1, Base.Add(3 * time.Hour), Base.Add(3 * time.Hour), "1f0d-000000", 1},
		{"turns", int64(n), Base, Base.Add(time.Duration(n-1) * time.Second), written[len(written)-1].End, len(Demo)},
	}
	if !slices.Equal(all, want) || page.Next != nil {
		t.Errorf("root namespace: %+v (next %v)\nwant %+v", all, page.Next, want)
	}

	page, err = st.Threads(ctx, store.ThreadsQuery{Namespace: "sub:1", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var sub []got
	for _, s := range page.Threads {
		sub = append(sub, got{s.ThreadID, s.Checkpoints, s.FirstAt.UTC(), s.LastAt.UTC(), s.LastID, -1})
	}
	wantSub := []got{
		{"both", 2, Base.Add(time.Hour), Base.Add(time.Hour + time.Second), "1f0d-000001", -1},
		{"only-sub", 3, Base.Add(2 * time.Hour), Base.Add(2*time.Hour + 2*time.Second), "1f0d-000002", -1},
	}
	if !slices.Equal(sub, wantSub) {
		t.Errorf("namespace sub:1: %+v\nwant %+v", sub, wantSub)
	}

	// A thread whose checkpoints are all deleted is gone.
	w.Delete(backend.Ref{ThreadID: "only-root"}, []string{"1f0d-000000"})
	if got := AllThreads(t, st, store.ThreadsQuery{}, 2); !slices.Equal(got, []string{"both", "turns"}) {
		t.Errorf("after deleting only-root: %q", got)
	}
}

// stepsAndRest checks what WatchTurns reads of a thread on every backend:
// its checkpoints in order with their turns, and which checkpoints ended a
// run (updated_channels triggering no node, as Python LangGraph records
// them; LangChain.js's savers record none, which reads as unknown).
func stepsAndRest(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-steps"}
	recorded := true
	if sw, ok := w.(interface{ Saver() saver.Saver }); ok {
		recorded = sw.Saver().Python()
	}
	type step struct {
		source  string
		updated []string
		human   bool // the checkpoint adds a question
	}
	steps := []step{
		{"input", []string{"__start__"}, false},
		{"loop", []string{"branch:to:agent", "messages"}, true},
		{"loop", []string{"branch:to:tools", "messages"}, false},
		{"loop", []string{"messages", "tool_state"}, false},
		{"input", []string{"__start__"}, false},
		{"loop", []string{"branch:to:agent", "messages"}, true},
	}
	var msgs []any
	parent := ""
	for i, s := range steps {
		if s.human {
			msgs = append(msgs, write.Human(fmt.Sprintf("q%d", i), fmt.Sprintf("question %d", i)))
		} else if i > 0 {
			msgs = append(msgs, write.AI(fmt.Sprintf("a%d", i), "answer"))
		}
		id := fmt.Sprintf("1f0f-%06d", i)
		w.Put(ref, saver.Checkpoint{ID: id, Parent: parent, TS: Base.Add(time.Duration(i) * time.Second),
			Values:          write.Map{{Key: "messages", Value: slices.Clone(msgs)}},
			UpdatedChannels: s.updated,
			Metadata:        write.Map{{Key: "source", Value: s.source}, {Key: "step", Value: i - 1}}})
		parent = id
	}
	st := store.New(store.Config{Backend: b})
	h, err := st.History(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	wantTurns := []int{0, 1, 1, 1, 1, 2}
	wantRest := []store.Rest{store.Running, store.Running, store.Running, store.AtRest, store.Running, store.Running}
	if len(h.Steps) != len(steps) {
		t.Fatalf("%d steps, want %d", len(h.Steps), len(steps))
	}
	for i, s := range h.Steps {
		want := wantRest[i]
		if !recorded {
			want = store.RestUnknown
		}
		if s.Checkpoint.ID != fmt.Sprintf("1f0f-%06d", i) || s.Turn != wantTurns[i] || s.Checkpoint.Rest != want {
			t.Errorf("step %d: %s, turn %d, rest %v; want 1f0f-%06d, turn %d, rest %v", i, s.Checkpoint.ID, s.Turn, s.Checkpoint.Rest, i, wantTurns[i], want)
		}
	}
	if h.Total != 2 || h.Turns[0].End.ID != "1f0f-000004" || recorded && h.Turns[0].End.Rest != store.Running {
		t.Errorf("turns %+v; want turn 1 carried on to the next input checkpoint", h.Turns)
	}
}

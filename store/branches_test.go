package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/historyd/historyd/store/backend"
)

// forkedThread is four turns (q1..q4), then a question sent from turn 2's
// end (q5), then one more (q6): the host's thread is q1 q2 q5 q6, and the
// branch of q3 and q4 is abandoned.
func forkedThread(tb *table) (cps []Checkpoint, turn2End string) {
	main := tb.thread() // 1ef-00 .. 1ef-12, turn 2 ends at 1ef-06
	branch := tb.chain("1eg", []step{
		{msgs: 7, humans: []string{"q1", "q2", "q5"}}, {msgs: 8, humans: []string{"q1", "q2", "q5"}},
		{msgs: 9, humans: []string{"q1", "q2", "q5", "q6"}}, {msgs: 10, humans: []string{"q1", "q2", "q5", "q6"}},
	})
	branch[0].Parent = "1ef-06"
	return append(main, branch...), "1ef-06"
}

func TestLineageForks(t *testing.T) {
	tb := newTable()
	cps, from := forkedThread(tb)
	h := Derive(backend.Ref{ThreadID: "t"}, cps, tb.qs)
	want := []turnWant{{1, true, "1ef-03", "q1", nil}, {2, true, "1ef-06", "q2", nil}, {3, true, "1eg-01", "q5", nil}, {4, true, "1eg-03", "q6", nil}}
	if got := summarize(h); !reflect.DeepEqual(got, want) || h.Numbering != Complete || h.Head != "1eg-03" {
		t.Fatalf("head read: %+v %v head %s\nwant %+v", got, h.Numbering, h.Head, want)
	}
	for _, s := range h.Steps {
		if s.Checkpoint.ID > "1ef-06" && s.Checkpoint.ID < "1eg" {
			t.Errorf("abandoned checkpoint %s is a step", s.Checkpoint.ID)
		}
	}
	if want := []Fork{{From: from, Turn: 2, Questions: 4, Newest: "1ef-12"}}; !reflect.DeepEqual(h.Forks, want) {
		t.Errorf("forks = %+v, want %+v", h.Forks, want)
	}
	// The abandoned branch, read with its newest checkpoint as head.
	ab := Derive(backend.Ref{ThreadID: "t", Head: "1ef-12"}, cps, tb.qs)
	want = []turnWant{{1, true, "1ef-03", "q1", nil}, {2, true, "1ef-06", "q2", nil}, {3, true, "1ef-09", "q3", nil}, {4, true, "1ef-12", "q4", nil}}
	if got := summarize(ab); !reflect.DeepEqual(got, want) || ab.Head != "1ef-12" {
		t.Errorf("abandoned branch: %+v, want %+v", got, want)
	}
	if want := []Fork{{From: from, Turn: 2, Questions: 4, Newest: "1eg-03"}}; !reflect.DeepEqual(ab.Forks, want) {
		t.Errorf("abandoned branch's forks = %+v, want %+v", ab.Forks, want)
	}
	if un := Derive(backend.Ref{ThreadID: "t", Head: "nope"}, cps, tb.qs); un.Total != 0 || un.Head != "" {
		t.Errorf("unknown head: %+v", un)
	}
}

// A fork of a fork is the nested branch of the branch it leaves: the
// thread's head read lists the first branch only, whose newest checkpoint
// (and count) is its own chain's.
func TestLineageForkOfAFork(t *testing.T) {
	tb := newTable()
	cps, _ := forkedThread(tb)
	// From the abandoned branch's turn 3 end (1ef-09), another question.
	nested := tb.chain("1eh", []step{{msgs: 10, humans: []string{"q1", "q2", "q3", "q7"}}, {msgs: 11, humans: []string{"q1", "q2", "q3", "q7"}}})
	nested[0].Parent = "1ef-09"
	// The thread's newest stays 1eg-03? No: 1eh sorts after 1eg; move the
	// head on so that the main lineage is still the newest.
	tail := tb.chain("1ei", []step{{msgs: 11, humans: []string{"q1", "q2", "q5", "q6"}}})
	tail[0].Parent = "1eg-03"
	cps = slices.Concat(cps, nested, tail)
	h := Derive(backend.Ref{ThreadID: "t"}, cps, tb.qs)
	if h.Head != "1ei-00" || h.Total != 4 {
		t.Fatalf("head %s total %d", h.Head, h.Total)
	}
	// The branch from 1ef-06 holds two chains; its newest is 1eh-01, the
	// nested fork's, whose lineage holds q1 q2 q3 q7.
	if want := []Fork{{From: "1ef-06", Turn: 2, Questions: 4, Newest: "1eh-01"}}; !reflect.DeepEqual(h.Forks, want) {
		t.Errorf("forks = %+v, want %+v", h.Forks, want)
	}
	br := Derive(backend.Ref{ThreadID: "t", Head: "1eh-01"}, cps, tb.qs)
	want := []Fork{{From: "1ef-06", Turn: 2, Questions: 4, Newest: "1ei-00"}, {From: "1ef-09", Turn: 3, Questions: 4, Newest: "1ef-12"}}
	if !reflect.DeepEqual(br.Forks, want) {
		t.Errorf("nested branch's forks = %+v, want %+v", br.Forks, want)
	}
}

// Retention deleting the fork point cuts the lineage; below the cut, what
// agrees with it (the turns before the fork) is on it, the abandoned
// branch is not.
func TestLineageRetentionCutsTheForkPoint(t *testing.T) {
	tb := newTable()
	cps, from := forkedThread(tb)
	cps = without(cps, from)
	h := Derive(backend.Ref{ThreadID: "t"}, cps, tb.qs)
	want := []turnWant{{1, true, "1ef-03", "q1", nil}, {2, true, "1ef-05", "q2", nil}, {3, true, "1eg-01", "q5", nil}, {4, true, "1eg-03", "q6", nil}}
	if got := summarize(h); !reflect.DeepEqual(got, want) || h.Numbering != Complete {
		t.Errorf("turns %+v %v\nwant %+v", got, h.Numbering, want)
	}
	if len(h.Forks) != 0 {
		t.Errorf("forks below the cut: %+v", h.Forks)
	}
	// With the oldest turns gone too, the numbering is counted.
	h = Derive(backend.Ref{ThreadID: "t"}, without(cps, "1ef-00", "1ef-01"), tb.qs)
	if h.Numbering != Counted || h.Total != 4 || h.Turns[2].End.ID != "1eg-01" {
		t.Errorf("pruned: total %d %v %+v", h.Total, h.Numbering, summarize(h))
	}
}

// Every fork's Questions is what a read with its Newest as head totals, on
// random trees.
func TestForkQuestionsAreTheHeadReadsTotals(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 3))
		tb := newTable()
		var cps []Checkpoint
		asked := 0
		for i := range 40 + r.IntN(40) {
			c := Checkpoint{ID: fmt.Sprintf("c%03d", i)}
			var humans []string
			if i > 0 {
				p := cps[len(cps)-1]
				if r.IntN(6) == 0 {
					p = cps[r.IntN(len(cps))]
				}
				c.Parent = p.ID
				for _, q := range p.Asks {
					humans = append(humans, tb.qs[q].ID)
				}
				c.Messages = p.Messages + 1
			}
			if r.IntN(3) == 0 {
				asked++
				humans = append(humans, fmt.Sprintf("q%d", asked))
			}
			c.Asks = tb.asks(humans...)
			c.Version = c.ID
			cps = append(cps, c)
		}
		if r.IntN(2) == 0 {
			cps = slices.Delete(cps, 0, r.IntN(10))
		}
		h := Derive(backend.Ref{ThreadID: "t"}, cps, tb.qs)
		for _, f := range h.Forks {
			b := Derive(backend.Ref{ThreadID: "t", Head: f.Newest}, cps, tb.qs)
			if b.Total != f.Questions {
				t.Fatalf("seed %d: fork %+v; a read of its head totals %d", seed, f, b.Total)
			}
			if !h.Holds(f.From) || h.Holds(f.Newest) || !b.Holds(f.From) {
				t.Fatalf("seed %d: fork %+v is not where the lineages part", seed, f)
			}
		}
	}
}

// Rows are input: parentless rows, long chains and many forks cost one
// pass, not one per row.
func TestLineageAdversarialRows(t *testing.T) {
	if testing.Short() {
		t.Skip("large inputs")
	}
	tb := newTable()
	q := tb.asks("q1")
	check := func(name string, cps []Checkpoint, want func(*History) bool) {
		t.Helper()
		start := time.Now()
		h := Derive(backend.Ref{ThreadID: "t"}, cps, tb.qs)
		took := time.Since(start)
		if !want(h) {
			t.Errorf("%s: total %d, %d steps, %d forks, head %s", name, h.Total, len(h.Steps), len(h.Forks), h.Head)
		}
		// Linear work on 100k rows is well under a second even with -race;
		// quadratic work would be hours.
		if took > 10*time.Second {
			t.Errorf("%s took %v", name, took)
		}
	}
	const n = 100_000
	parentless := make([]Checkpoint, n)
	for i := range parentless {
		parentless[i] = Checkpoint{ID: fmt.Sprintf("p%06d", i), Parent: fmt.Sprintf("gone%06d", i), Asks: q, Version: "v"}
	}
	check("100k parentless rows", parentless, func(h *History) bool {
		// Each agrees with the head (the same questions): below the cut.
		return h.Head == "p099999" && h.Total == 1 && len(h.Steps) == n && h.Numbering == Counted
	})
	chain := make([]Checkpoint, n)
	for i := range chain {
		chain[i] = Checkpoint{ID: fmt.Sprintf("c%06d", i), Asks: q, Version: "v"}
		if i > 0 {
			chain[i].Parent = chain[i-1].ID
		}
	}
	check("100k chain", chain, func(h *History) bool { return h.Total == 1 && len(h.Steps) == n && len(h.Forks) == 0 })
	// A spine of 10k checkpoints, each but the last with a branch of 9
	// (100k rows), ids time-ordered as savers write them.
	var forks []Checkpoint
	for i := range 10_000 {
		spine := Checkpoint{ID: fmt.Sprintf("s%05d-0", i), Asks: q, Version: "v"}
		if i > 0 {
			spine.Parent = fmt.Sprintf("s%05d-0", i-1)
		}
		forks = append(forks, spine)
		for k := 1; k <= 9 && i < 9_999; k++ {
			b := Checkpoint{ID: fmt.Sprintf("s%05d-%d", i, k), Asks: q, Version: "v", Parent: fmt.Sprintf("s%05d-%d", i, k-1)}
			forks = append(forks, b)
		}
	}
	check("10k forks", forks, func(h *History) bool {
		return h.Head == "s09999-0" && len(h.Forks) == 9_999 && len(h.Steps) == 10_000 && h.Forks[0].Newest == "s00000-9"
	})
}

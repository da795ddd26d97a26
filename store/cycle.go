package store

import (
	"context"
	"slices"

	"github.com/historyd/historyd/store/backend"
)

// Stored rows are input like any request: parent links that loop, which no
// saver writes but anyone who can write a thread's rows can, must neither
// pin a CPU nor go unnoticed. Every walk over parent links stops where it
// meets its own trail, and the store refuses a thread whose links loop with
// a CycleError before any walk begins; every loop over stored data looks at
// its context (steps), so a read whose caller has gone stops.

// parentCycle returns the checkpoints of a loop of parent links among the
// n checkpoints link names (each its id and its parent's, a later repeat of
// an id standing for it, as in every walk), from the smallest id on, each
// followed by its parent; nil when the links do not loop. Of several loops
// it returns the one holding the smallest id, whatever the order of the
// checkpoints.
//
// Ids are time-ordered and a parent is older than its child, so links that
// loop hold at least one link to a parent whose id is not smaller: a thread
// without one, the common case, costs one pass and no allocation.
func parentCycle(n int, link func(i int) (id, parent string)) []string {
	suspect := false
	for i := range n {
		id, p := link(i)
		if p != "" && p >= id {
			suspect = true
			break
		}
	}
	if !suspect {
		return nil
	}
	parent := make(map[string]string, n)
	order := make([]string, 0, n)
	for i := range n {
		id, p := link(i)
		if _, seen := parent[id]; !seen {
			order = append(order, id)
		}
		parent[id] = p
	}
	// Walk up from each checkpoint not walked yet, marking the trail with
	// the walk's number: meeting this walk's mark is a loop, meeting an
	// earlier walk's, or a checkpoint not listed, is not.
	walk := make(map[string]int, n)
	var best []string
	for k, start := range order {
		mark := k + 1
		for id := start; ; {
			if w, ok := walk[id]; ok {
				if w == mark {
					best = smallerLoop(best, loopFrom(id, parent))
				}
				break
			}
			walk[id] = mark
			p := parent[id]
			if _, listed := parent[p]; p == "" || !listed {
				break
			}
			id = p
		}
	}
	return best
}

// loopFrom returns the loop of parent links through id, from its smallest
// id on.
func loopFrom(id string, parent map[string]string) []string {
	loop := []string{id}
	for p := parent[id]; p != id; p = parent[p] {
		loop = append(loop, p)
	}
	return smallestFirst(loop)
}

// smallestFirst returns a loop of checkpoints, each followed by its parent,
// from its smallest id on, so that one loop is named one way however it
// was met.
func smallestFirst(loop []string) []string {
	first := slices.Index(loop, slices.Min(loop))
	return slices.Concat(loop[first:], loop[:first])
}

// smallerLoop returns whichever loop holds the smaller id; a nil one holds
// none.
func smallerLoop(a, b []string) []string {
	if a == nil || b[0] < a[0] {
		return b
	}
	return a
}

// checkLinks returns a CycleError when the parent links of ref's
// checkpoints, those of an index (known) and those listed since (cps),
// loop.
func checkLinks(ref backend.Ref, known []Checkpoint, cps []listed) error {
	loop := parentCycle(len(known)+len(cps), func(i int) (string, string) {
		if i < len(known) {
			return known[i].ID, known[i].Parent
		}
		c := cps[i-len(known)]
		return c.id, c.parent
	})
	if loop != nil {
		return &CycleError{Ref: ref, Checkpoints: loop}
	}
	return nil
}

// ctxEvery is how many steps a loop over stored data takes between looks at
// its context: often enough that a read whose caller has gone stops within
// moments, however much it was reading, and rarely enough to cost nothing.
const ctxEvery = 1024

// steps counts the steps of one loop over stored data.
type steps struct {
	ctx context.Context
	n   int
}

// next counts a step and, every ctxEvery steps, returns the context's
// error.
func (s *steps) next() error {
	if s.n++; s.n%ctxEvery == 0 {
		return s.ctx.Err()
	}
	return nil
}

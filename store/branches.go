package store

import (
	"cmp"
	"slices"
)

// forks returns the branches that leave lineage l, oldest fork point
// first: each child of a chain checkpoint that is not on the chain starts
// one. A branch's own forks (a fork of a fork) are not listed: they leave
// that branch, and a read with its newest checkpoint as head lists them.
//
// Each branch's question count is what a History with that head would
// total, without deriving it: the questions of the lineage up to the fork
// point (counted once, as the lineage is walked) and those the branch's
// own chain adds. steps are the lineage's, giving each fork point's turn.
func (t *tree) forks(l line, steps []Step) []Fork {
	n := len(l.chain)
	hasFork := false
	for _, i := range l.chain {
		for k := t.firstKid[i]; k >= 0; k = t.nextKid[k] {
			if !l.on[k] {
				hasFork = true
			}
		}
	}
	if !hasFork {
		return nil
	}
	// first maps each question to the place on the chain (from its oldest,
	// 0) where the lineage first holds it; -1 below a cut. upTo[r] counts
	// the questions first held at or before place r.
	first := map[int32]int{}
	for _, i := range l.below {
		if c := t.cps[i]; !c.Unplaced {
			for _, q := range c.Asks {
				first[q] = -1
			}
		}
	}
	base := len(first)
	upTo := make([]int, n)
	turnAt := make([]int, n)
	stepTurn := make(map[string]int, len(steps))
	for _, s := range steps {
		stepTurn[s.Checkpoint.ID] = s.Turn
	}
	seenVersion := map[string]bool{}
	turn := 0
	for r := range n {
		c := t.cps[l.chain[n-1-r]]
		if !c.Unplaced && (c.Version == "" || !seenVersion[c.Version]) {
			seenVersion[c.Version] = true
			for _, q := range c.Asks {
				if _, ok := first[q]; !ok {
					first[q] = r
					base++
				}
			}
		}
		if tn, ok := stepTurn[c.ID]; ok {
			turn = tn
		}
		upTo[r], turnAt[r] = base, turn
	}
	var out []Fork
	for r := range n {
		from := l.chain[n-1-r]
		for k := t.firstKid[from]; k >= 0; k = t.nextKid[k] {
			if l.on[k] {
				continue
			}
			newest := t.newest[k]
			out = append(out, Fork{From: t.cps[from].ID, Turn: turnAt[r], Newest: t.cps[newest].ID,
				Questions: upTo[r] + t.branchAdds(newest, from, r, first)})
		}
	}
	slices.SortFunc(out, func(a, b Fork) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.Newest, b.Newest))
	})
	return out
}

// branchAdds counts the questions the chain from newest up to (not
// including) from holds that the lineage does not hold at or before place
// r of its chain (first, as forks builds it).
func (t *tree) branchAdds(newest, from, r int, first map[int32]int) int {
	added := map[int32]bool{}
	seenVersion := map[string]bool{}
	// The walk stops at from, which is newest's ancestor; the step bound
	// holds if links loop.
	for i, steps := newest, 0; i >= 0 && i != from && steps < len(t.cps); i, steps = t.parent[i], steps+1 {
		c := t.cps[i]
		if c.Unplaced || c.Version != "" && seenVersion[c.Version] {
			continue
		}
		seenVersion[c.Version] = true
		for _, q := range c.Asks {
			if at, ok := first[q]; !ok || at > r {
				added[q] = true
			}
		}
	}
	return len(added)
}

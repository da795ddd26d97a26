package store

import "slices"

// Time travel (a run started from an older checkpoint, update_state on
// one) leaves a thread's checkpoints a tree: every checkpoint written after
// the fork descends from the checkpoint it started from, not from the
// newest one before it. The conversation a host is on is one path of that
// tree, the lineage: the head and its ancestors by parent link. Turns are
// numbered on it alone; the other branches are reported as forks
// (branches.go).
//
// Stored rows are input: a thread of parentless rows, or of rows whose
// links loop, must cost no more than one pass over them. Every walk below
// marks what it visited and stops where it meets its trail.

// tree is a thread's checkpoints with their parent links resolved, built
// once per index and shared by the lineages of every head read from it.
type tree struct {
	cps []Checkpoint
	// at maps a checkpoint id to its index in cps.
	at map[string]int
	// parent is the index of each checkpoint's parent in cps, -1 when it
	// has none or its parent is not stored.
	parent []int
	// firstKid and nextKid list each checkpoint's children (indexes into
	// cps, -1 ending a list).
	firstKid, nextKid []int
	// newest is the index of the newest checkpoint (greatest id) of each
	// checkpoint's subtree, itself included.
	newest []int
	// head is the index of the thread's newest checkpoint; -1 for none.
	head int
}

// newTree resolves the parent links of cps.
func newTree(cps []Checkpoint) *tree {
	n := len(cps)
	t := &tree{cps: cps, at: make(map[string]int, n), parent: make([]int, n), firstKid: make([]int, n), nextKid: make([]int, n),
		newest: make([]int, n), head: -1}
	for i, c := range cps {
		t.at[c.ID] = i
		t.firstKid[i], t.newest[i] = -1, i
	}
	for i, c := range cps {
		t.parent[i] = -1
		if p, ok := t.at[c.Parent]; ok && c.Parent != "" && p != i {
			t.parent[i] = p
			t.nextKid[i], t.firstKid[p] = t.firstKid[p], i
		}
	}
	// The head is the newest checkpoint, as LangGraph's get_state reads
	// it; of those with no child, so that a child written with an older id
	// than its parent (clocks disagreeing) is not cut off its lineage.
	for i, c := range cps {
		if t.firstKid[i] < 0 && (t.head < 0 || c.ID > cps[t.head].ID) {
			t.head = i
		}
	}
	if t.head < 0 && n > 0 {
		// Every checkpoint has a child: links that loop.
		t.head = 0
		for i, c := range cps {
			if c.ID > cps[t.head].ID {
				t.head = i
			}
		}
	}
	// Children come after their parents in checkpoint order: walked
	// backwards, each subtree's newest is known before its parent's.
	order := checkpointOrder(cps)
	for k := len(order) - 1; k >= 0; k-- {
		i := order[k]
		if p := t.parent[i]; p >= 0 && cps[t.newest[i]].ID > cps[t.newest[p]].ID {
			t.newest[p] = t.newest[i]
		}
	}
	return t
}

// line is one lineage of a tree.
type line struct {
	// head is the index of the lineage's head in the tree's cps.
	head int
	// chain holds the head and its ancestors by parent link, head first.
	chain []int
	// on marks the checkpoints of chain.
	on []bool
	// below holds the checkpoints left below a cut in the chain (a parent
	// no longer stored) that agree with the lineage (see lineage).
	below []int
}

// lineage returns the lineage ending at the checkpoint with id head, or at
// the thread's newest checkpoint when head is empty; false when the tree
// holds no such checkpoint (or no checkpoint at all).
//
// Where retention cut the chain, what is left below the cut is on the
// lineage only if it agrees with it: a checkpoint older than the chain's
// oldest whose questions are a prefix of those the chain's oldest readable
// checkpoint holds. Another branch's checkpoints below the cut hold a
// question the lineage never asked, and are left out.
func (t *tree) lineage(head string) (line, bool) {
	h := t.head
	if head != "" {
		i, ok := t.at[head]
		if !ok {
			return line{}, false
		}
		h = i
	}
	if h < 0 {
		return line{}, false
	}
	l := line{head: h, on: make([]bool, len(t.cps))}
	for i := h; i >= 0 && !l.on[i]; i = t.parent[i] {
		l.on[i] = true
		l.chain = append(l.chain, i)
	}
	bottom := t.cps[l.chain[len(l.chain)-1]]
	if bottom.Parent == "" || t.parent[l.chain[len(l.chain)-1]] >= 0 {
		// The chain reaches the thread's first checkpoint (or, with links
		// that loop, which Store refuses before deriving, meets itself).
		return l, true
	}
	// The oldest checkpoint of the chain whose messages were read holds
	// the questions asked before the cut.
	var ref []int32
	known := false
	for k := len(l.chain) - 1; k >= 0 && !known; k-- {
		if c := t.cps[l.chain[k]]; !c.Unplaced {
			ref, known = c.Asks, true
		}
	}
	if !known {
		return l, true
	}
	// Checkpoints holding one messages version hold the same questions:
	// each version is compared once, so the cost is what was read.
	agrees := map[string]bool{}
	for i, c := range t.cps {
		if l.on[i] || c.Unplaced || c.ID >= bottom.ID {
			continue
		}
		ok, seen := agrees[c.Version]
		if !seen || c.Version == "" {
			ok = isPrefix(c.Asks, ref)
			agrees[c.Version] = ok
		}
		if ok {
			l.below = append(l.below, i)
		}
	}
	return l, true
}

// isPrefix reports whether a is a prefix of b.
func isPrefix(a, b []int32) bool {
	if len(a) > len(b) {
		return false
	}
	if len(a) > 0 && &a[0] == &b[0] {
		// Versions of one thread share one array of question numbers,
		// each a longer prefix of it (threadData.extend).
		return true
	}
	for k, q := range a {
		if b[k] != q {
			return false
		}
	}
	return true
}

// members returns the indexes of the lineage's checkpoints, what its turns
// are numbered on: the chain, and what agrees with it below a cut.
func (l line) members() []int {
	return append(slices.Clip(l.chain), l.below...)
}

package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/store/backend"
)

// A DeltaChannel (LangGraph's langgraph.channels.delta, LangGraph.js's
// DeltaValue; deepagents declares messages and files this way) does not
// store its value at every checkpoint: only a snapshot every so often. The
// value at a checkpoint C is rebuilt as LangGraph's own loader rebuilds it:
// follow parent links (not id order: forks) from C's parent back to the
// nearest checkpoint holding a stored value (a snapshot, or a plain value
// from before the channel became a DeltaChannel), then apply that channel's
// writes from there through C's parent, oldest checkpoint first and, within
// a checkpoint, in (task_path, task_id, idx) order, through the channel's
// reducer. A chain that reaches a checkpoint without the channel starts
// from the empty value; one that reaches the thread's first checkpoint
// without a stored value does too. One that reaches a deleted checkpoint
// cannot be rebuilt: the value is lost, and never guessed. (The messages
// channel is read in part past such a break, as what was written since,
// and marked so: see Store.rebuildMessages.)
//
// The same rule holds for every reducer channel, so it is applied wherever
// a checkpoint has a version of a channel but no stored value.

// folder says how one channel's values are rebuilt: what a stored value
// reads as, what a checkpoint's writes do to a value, and what is done with
// each rebuilt value.
type folder[V any] struct {
	// seed reads a stored value.
	seed func(id string, b backend.Blob) (V, error)
	// empty is the channel's value where it has none.
	empty func() V
	// apply returns base with one checkpoint's writes applied, in order.
	// It must not modify base.
	apply func(id string, base V, writes []backend.Write) (V, error)
	// done receives the value at each target. V is not kept after it
	// returns, unless done keeps it.
	done func(id string, v V) error
	// orphan, when set, is the value of a checkpoint whose parent was
	// deleted, for a channel whose values can still be read in part
	// without it (a messages list: what was written since). Unset, such a
	// value is lost.
	orphan func() V
}

// probeBatch is how many checkpoints one read asks for stored values while
// walking chains back to one.
const probeBatch = 32

// rebuild rebuilds channel's value at each of targets, checkpoints of the
// thread as listed in nodes (by id), and hands each to f.done. It returns
// the targets whose value cannot be rebuilt. Values already known — a
// target whose own stored value was read — need not be passed: every
// target is taken to have a version of the channel and no stored value of
// its own, or one rebuild finds.
//
// It is one function because its loop carries one walk's state (the
// frontier along parent links, the writes read, the values folded) from
// batch to batch; split, that state would be passed around whole.
func rebuild[V any](ctx context.Context, s *Store, ref backend.Ref, channel string, nodes map[string]listed, targets []string, f folder[V]) (broken []string, err error) {
	// base: the value a chain starts from, at the checkpoint holding it.
	type chainState int
	const (
		unknown  chainState = iota
		stored              // holds a stored value: base
		empty               // has no version of the channel: base (empty)
		unstored            // has a version and no stored value: rebuilt from its parent
		lost                // cannot be rebuilt
	)
	state := map[string]chainState{}
	base := map[string]V{}
	// Walk every target's chain up, a batch of probes at a time, until each
	// meets a base or a deleted checkpoint, or a checkpoint whose parent a
	// chain took up already: chains join, and links that loop (no saver
	// writes them, but stored rows are input) meet their own trail.
	taken := map[string]bool{}
	heads := slices.Clone(targets)
	for len(heads) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var probe []string
		var next []string
		for _, h := range heads {
			switch state[h] {
			case stored, empty, lost:
				continue
			case unstored:
				if taken[h] {
					continue
				}
				taken[h] = true
				p := nodes[h].parent
				switch _, ok := nodes[p]; {
				case p == "":
					// The thread's first checkpoint, and nothing stored:
					// LangGraph starts from the empty value.
					state[h], base[h] = stored, f.empty()
				case !ok && f.orphan != nil:
					state[h], base[h] = stored, f.orphan()
				case !ok:
					state[h] = lost
				default:
					next = append(next, p)
				}
				continue
			}
			if _, has := nodes[h].versions[channel]; !has {
				state[h], base[h] = empty, f.empty()
				continue
			}
			probe = append(probe, h)
			next = append(next, h)
		}
		for start := 0; start < len(probe); start += probeBatch {
			batch := probe[start:min(start+probeBatch, len(probe))]
			err := s.eachValue(ctx, ref, channel, batch, func(i int, b backend.Blob) error {
				id := batch[i]
				switch {
				case b.Missing:
					state[id] = lost
				case b.Type == format.TypeEmpty:
					state[id] = unstored
				default:
					v, err := f.seed(id, b)
					if err != nil {
						return err
					}
					state[id], base[id] = stored, v
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		heads = slices.Compact(sortedUnique(next))
	}
	// The checkpoints each target's value is folded through, parent first,
	// and who needs each one's value.
	children := map[string]int{}
	var fold []string // unstored checkpoints whose value is rebuilt
	memo := map[string]bool{}
	walked := steps{ctx: ctx}
	// isLost follows id's chain to its base, or to a checkpoint whose value
	// is lost; a chain meeting its own trail loops.
	isLost := func(id string) (bool, error) {
		var chain []string
		on := map[string]bool{}
		for {
			if v, ok := memo[id]; ok || state[id] != unstored {
				l := ok && v || state[id] == lost
				for _, c := range chain {
					memo[c] = l
				}
				return l, nil
			}
			if on[id] {
				return false, &CycleError{Ref: ref, Checkpoints: smallestFirst(chain[slices.Index(chain, id):])}
			}
			if err := walked.next(); err != nil {
				return false, err
			}
			on[id] = true
			chain = append(chain, id)
			id = nodes[id].parent
		}
	}
	inFold := map[string]bool{}
	for _, t := range targets {
		l, err := isLost(t)
		if err != nil {
			return nil, err
		}
		if l {
			broken = append(broken, t)
			continue
		}
		for id := t; state[id] == unstored && !inFold[id]; id = nodes[id].parent {
			inFold[id] = true
			fold = append(fold, id)
			children[nodes[id].parent]++
		}
	}
	isTarget := make(map[string]bool, len(targets))
	for _, t := range targets {
		isTarget[t] = true
		if st := state[t]; st == stored || st == empty {
			if err := f.done(t, base[t]); err != nil {
				return nil, err
			}
		}
	}
	if len(fold) == 0 {
		return broken, nil
	}
	// Each folded checkpoint's value is its parent's with the parent's
	// writes applied, so the parents' writes are read.
	var parents []string
	for p := range children {
		parents = append(parents, p)
	}
	slices.Sort(parents)
	writes := map[string][]backend.Write{}
	err = s.b.EachWrite(ctx, ref, channel, parents, func(w backend.Write) error {
		w.Value.Data = append([]byte(nil), w.Value.Data...)
		writes[w.CheckpointID] = append(writes[w.CheckpointID], w)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s writes of thread %q: %w", channel, ref.ThreadID, err)
	}
	for _, ws := range writes {
		slices.SortFunc(ws, func(a, b backend.Write) int {
			return cmp.Or(strings.Compare(a.TaskPath, b.TaskPath), strings.Compare(a.TaskID, b.TaskID), cmp.Compare(a.Idx, b.Idx))
		})
	}
	// Fold parents first, each value handed on as soon as it is known and
	// kept only while a child still needs it: a long thread's lists are
	// never all in memory at once.
	values := base
	for _, id := range foldOrder(fold, nodes) {
		// Each step applies writes to what may be a long list: the
		// context is looked at every time.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := nodes[id].parent
		v, err := f.apply(p, values[p], writes[p])
		if err != nil {
			return nil, err
		}
		if children[p]--; children[p] <= 0 {
			delete(values, p)
		}
		if isTarget[id] {
			if err := f.done(id, v); err != nil {
				return nil, err
			}
		}
		if children[id] > 0 {
			values[id] = v
		}
	}
	return broken, nil
}

// foldOrder sorts checkpoints so that each comes after its parent when
// both are in ids.
func foldOrder(ids []string, nodes map[string]listed) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	in := make(map[string]bool, len(out))
	for _, id := range out {
		in[id] = true
	}
	done := make(map[string]bool, len(out))
	ordered := make([]string, 0, len(out))
	for _, id := range out {
		var chain []string
		for c := id; in[c] && !done[c]; c = nodes[c].parent {
			chain = append(chain, c)
			done[c] = true
		}
		for k := len(chain) - 1; k >= 0; k-- {
			ordered = append(ordered, chain[k])
		}
	}
	return ordered
}

func sortedUnique(ids []string) []string {
	slices.Sort(ids)
	return slices.Compact(ids)
}

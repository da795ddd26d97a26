package store

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/historyd/historyd/store/backend"
)

// A thread is cached once, whatever head it is read at: the index holds
// every checkpoint of the thread (of every branch), its History is the
// thread head's, and the Histories of other heads (backend.Ref.Head) are derived
// from the same checkpoints when first asked and kept beside it, a few of
// them (headsKept), so that an operator reading an abandoned branch turn
// by turn derives it once.

// headsKept is how many Histories of heads other than the thread's an
// index keeps.
const headsKept = 8

// threadKey returns ref without its head: the key of the thread's index.
func threadKey(ref backend.Ref) backend.Ref {
	ref.Head = ""
	return ref
}

// heads is an index's Histories of other heads, the most recently used
// first.
type heads struct {
	mu   sync.Mutex
	kept []*History
}

// get returns the History kept for head and marks it used.
func (hs *heads) get(head string) (*History, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for i, h := range hs.kept {
		if h.Head == head {
			copy(hs.kept[1:i+1], hs.kept[:i])
			hs.kept[0] = h
			return h, true
		}
	}
	return nil, false
}

// put keeps h, dropping the least recently used beyond headsKept, and
// returns what the kept Histories hold in memory, about.
func (hs *heads) put(h *History) int64 {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, k := range hs.kept {
		if k.Head == h.Head {
			return hs.bytesLocked()
		}
	}
	hs.kept = append([]*History{h}, hs.kept[:min(len(hs.kept), headsKept-1)]...)
	return hs.bytesLocked()
}

func (hs *heads) bytesLocked() int64 {
	var n int64
	for _, h := range hs.kept {
		n += historySize(h)
	}
	return n
}

// historySize is what a History derived from an index holds beyond the
// index's checkpoints, about.
func historySize(h *History) int64 {
	n := int64(unsafe.Sizeof(History{})) + int64(cap(h.Steps))*int64(unsafe.Sizeof(Step{})) +
		int64(cap(h.Turns))*int64(unsafe.Sizeof(Turn{})) + int64(cap(h.Forks))*int64(unsafe.Sizeof(Fork{}))
	for _, t := range h.Turns {
		n += int64(len(t.Question)) + int64(cap(t.AnsweredWith))*8
	}
	return n
}

// historyAt returns the History of ref's head from the thread's index ix:
// the thread's own when ref.Head is empty or the thread's head, else the
// lineage ending at ref.Head, derived once and kept with the index.
func (s *Store) historyAt(ix *index, ref backend.Ref) (*History, error) {
	if ref.Head == "" || ref.Head == ix.hist.Head {
		return ix.hist, nil
	}
	if h, ok := ix.heads.get(ref.Head); ok {
		return h, nil
	}
	t := newTree(ix.checkpoints)
	if _, ok := t.at[ref.Head]; !ok {
		return nil, fmt.Errorf("thread %q: head %s: %w", ref.ThreadID, ref.Head, ErrUnknownHead)
	}
	h := deriveOn(ref, t, ix.thread.table())
	kept := ix.heads.put(h)
	// The index is charged for what it keeps, if it is still the one
	// cached.
	s.indexes.recharge(threadKey(ref), func(cur *index) bool { return cur == ix }, ix.size+kept)
	return h, nil
}

// parentsKnown reports whether every checkpoint of newer has its parent
// in known or newer, or none.
func parentsKnown(known []Checkpoint, newer []listed) bool {
	ids := make(map[string]bool, len(newer))
	for _, c := range newer {
		ids[c.id] = true
	}
	var old map[string]bool
	for _, c := range newer {
		if c.parent == "" || ids[c.parent] {
			continue
		}
		if old == nil {
			old = make(map[string]bool, len(known))
			for _, k := range known {
				old[k.ID] = true
			}
		}
		if !old[c.parent] {
			return false
		}
	}
	return true
}

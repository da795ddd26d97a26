package store

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/historyd/historyd/store/backend"
)

// What the caches charge for an item is what it holds in memory, about:
// its structs as the compiler lays them out, its strings and slices as the
// allocator rounds them, and a map's entries with the share of the map's
// groups and control bytes each takes. Memory an item shares with another
// (a thread's versions, its question table) is charged once, to whichever
// holds it (the thread data); memory it shares with nothing cached (the
// driver's buffers) is not charged. The figures are held to the heap the
// runtime reports in TestIndexSizeIsTheHeap.

const (
	// mapEntry is a map entry's share of a large map beyond its key and
	// value: control bytes, groups not full, the table.
	mapEntry = 24
	// mapHeader is an empty map's own memory.
	mapHeader = 48
	// threadDataSize is an empty threadData, its maps included.
	threadDataSize = int64(unsafe.Sizeof(threadData{})) + 3*mapHeader
)

// mapSize is what a map of n entries of slot bytes each (key and value)
// holds: a map of up to 8 entries is one group of 8 slots and their
// control bytes, a larger one about a slot and a control byte per entry
// with an eighth of the slots free.
func mapSize(n int, slot int64) int64 {
	if n <= 8 {
		return mapHeader + allocated(int(8+8*slot))
	}
	return mapHeader + int64(n)*(slot+1)*8/7 + 64
}

// allocated is the memory an allocation of n bytes takes: allocations are
// rounded up to the allocator's size classes, at least 8 bytes apart.
func allocated(n int) int64 {
	if n == 0 {
		return 0
	}
	return int64((n + 7) &^ 7)
}

// versionsKey names a set of channel versions: equal sets, equal keys.
func versionsKey(versions map[string]string) string {
	var b strings.Builder
	for _, ch := range slices.Sorted(maps.Keys(versions)) {
		b.WriteString(ch)
		b.WriteByte(0)
		b.WriteString(versions[ch])
		b.WriteByte(0)
	}
	return b.String()
}

// versionsSize is what a shared versions map and its key in
// threadData.shared hold.
func versionsSize(key string, versions map[string]string) int64 {
	str := int64(unsafe.Sizeof(""))
	n := mapSize(len(versions), 2*str) + allocated(len(key)) + str + 8 + mapEntry
	for ch, v := range versions {
		n += allocated(len(ch)) + allocated(len(v))
	}
	return n
}

// questionSize is what one question of the table holds: the Question, its
// id and text, and its entry in byID.
func questionSize(id, text string) int64 {
	return int64(unsafe.Sizeof(Question{})) + allocated(len(id)) + allocated(len(text)) +
		int64(unsafe.Sizeof("")) + 4 + mapEntry
}

// heldSize is what one messages version's entry in threadData.versions
// holds, beyond its asks.
func heldSize(version string) int64 {
	return int64(unsafe.Sizeof("")+unsafe.Sizeof(held{})) + mapEntry + allocated(len(version))
}

// asksSize is what a version's question numbers, after extending before,
// add: nothing when they grew in place, the whole array when appending
// moved them (the old array stays, held by the versions it was read for).
func asksSize(before, after []int32) int64 {
	if cap(after) == 0 || unsafe.SliceData(after) == unsafe.SliceData(before) {
		return 0
	}
	return allocated(4 * cap(after))
}

// indexSize is what an index holds in memory, about: its checkpoints (their
// ids and parents; their versions and questions are the thread data's), its
// history and its thread data.
func indexSize(ix *index) int64 {
	n := int64(unsafe.Sizeof(index{})) + int64(unsafe.Sizeof(History{})) +
		int64(cap(ix.checkpoints))*int64(unsafe.Sizeof(Checkpoint{}))
	for _, c := range ix.checkpoints {
		n += allocated(len(c.ID)) + allocated(len(c.Parent))
	}
	n += int64(cap(ix.hist.Steps))*int64(unsafe.Sizeof(Step{})) + int64(cap(ix.hist.Turns))*int64(unsafe.Sizeof(Turn{}))
	for _, t := range ix.hist.Turns {
		n += allocated(8 * cap(t.AnsweredWith))
	}
	return n + ix.thread.bytes()
}

// noticesKept bounds how many threads notices remembers having logged,
// so that remembering costs little however many there are; past it, it
// starts over, and a thread may be logged again.
const noticesKept = 4096

// notices logs, once per thread, that a thread was too large to cache.
type notices struct {
	log   *slog.Logger
	label func(string) string
	mu    sync.Mutex
	seen  map[backend.Ref]bool
}

// note logs that ref's index, of n checkpoints, takes size bytes, more
// than budget, unless it was logged already.
func (ns *notices) note(ctx context.Context, ref backend.Ref, n int, size, budget int64) {
	if ns.log == nil {
		return
	}
	ns.mu.Lock()
	logged := ns.seen[ref]
	if !logged {
		if ns.seen == nil || len(ns.seen) >= noticesKept {
			ns.seen = map[backend.Ref]bool{}
		}
		ns.seen[ref] = true
	}
	ns.mu.Unlock()
	if logged {
		return
	}
	args := []any{"checkpoints", n, "index_bytes", size, "budget_bytes", budget}
	if ns.label != nil {
		args = append(args, "thread", ns.label(ref.ThreadID))
	}
	ns.log.WarnContext(ctx, "a thread's turn index is larger than a quarter of the cache (--cache-bytes): served without caching it, each read lists the whole thread", args...)
}

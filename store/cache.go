package store

import (
	"container/list"
	"math"
	"runtime/debug"
	"sync"
	"time"
)

// The store's caches (the turn indexes, the encoded states) share one
// budget of bytes: each item is charged what it holds in memory, about, and
// the least recently used items, of whichever cache, are dropped until the
// charges fit. A budget in threads would let a few long threads take the
// process down; one in bytes holds whatever the threads are like.

// DefaultCacheBytes is the budget of a Store whose Config.CacheBytes is 0:
// a quarter of the Go runtime's soft memory limit (GOMEMLIMIT) when one is
// set, leaving the rest for the reads in flight; DefaultCacheBytesNoLimit
// otherwise.
func DefaultCacheBytes() int64 {
	if limit := debug.SetMemoryLimit(-1); limit > 0 && limit < math.MaxInt64 {
		return limit / 4
	}
	return DefaultCacheBytesNoLimit
}

// DefaultCacheBytesNoLimit is DefaultCacheBytes without GOMEMLIMIT.
const DefaultCacheBytesNoLimit = 256 << 20

// cache is the budget the store's shelves (one per kind of item) share,
// and the order of use across them.
type cache struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	// tick orders uses across shelves: each item keeps the tick of its
	// last use.
	tick    uint64
	shelves []evictor
}

// evictor is a shelf as the cache evicts from it, with cache.mu held.
type evictor interface {
	// oldest returns the last-use tick of the shelf's least recently used
	// item; false when the shelf is empty.
	oldest() (uint64, bool)
	evictOldest()
}

func newCache(capacity int64) *cache { return &cache{capacity: max(capacity, 0)} }

// fit evicts the least recently used items, of whichever shelf, until the
// items fit the budget. It is called with c.mu held.
func (c *cache) fit() {
	for c.used > c.capacity {
		var from evictor
		var at uint64
		for _, s := range c.shelves {
			if t, ok := s.oldest(); ok && (from == nil || t < at) {
				from, at = s, t
			}
		}
		if from == nil {
			return
		}
		from.evictOldest()
	}
}

// shelf is one kind of item of a cache, kept in its budget, with bounds of
// its own: the largest item it takes (admit), and optionally how many items
// (maxItems) and how many bytes (maxBytes) it holds. A shelf that is off
// keeps nothing.
type shelf[K comparable, V any] struct {
	c        *cache
	off      bool
	admit    int64
	maxItems int
	maxBytes int64
	items    map[K]*list.Element
	order    list.List // *shelfItem[K, V], the most recently used first
	used     int64
	// What the shelf did, since it was made.
	hits, misses, evictions, uncached int64
}

type shelfItem[K comparable, V any] struct {
	key  K
	val  V
	cost int64
	tick uint64
}

// newShelf adds a shelf to c. Items larger than admit are not kept; with
// maxItems or maxBytes above 0 the shelf holds at most that many items, or
// bytes, of the cache's.
func newShelf[K comparable, V any](c *cache, off bool, admit int64, maxItems int, maxBytes int64) *shelf[K, V] {
	if maxBytes > 0 {
		admit = min(admit, maxBytes)
	}
	s := &shelf[K, V]{c: c, off: off || c.capacity == 0, admit: admit, maxItems: maxItems, maxBytes: maxBytes, items: map[K]*list.Element{}}
	c.mu.Lock()
	c.shelves = append(c.shelves, s)
	c.mu.Unlock()
	return s
}

// get returns the item kept for k, if any, and marks it used.
func (s *shelf[K, V]) get(k K) (V, bool) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if e, ok := s.items[k]; ok {
		s.c.tick++
		it := e.Value.(*shelfItem[K, V])
		it.tick = s.c.tick
		s.order.MoveToFront(e)
		return it.val, true
	}
	var zero V
	return zero, false
}

// count records lookups that found (hits) and did not find (misses) what
// they looked for; what a lookup is depends on the shelf.
func (s *shelf[K, V]) count(hits, misses int) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.hits += int64(hits)
	s.misses += int64(misses)
}

// put keeps v for k, charged cost bytes, replacing what k had, and evicts
// what no longer fits. It reports whether v is kept: an item costing more
// than the shelf admits is not, and k then has nothing kept.
func (s *shelf[K, V]) put(k K, v V, cost int64) bool {
	if s.off {
		return false
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if cost > s.admit || cost > s.c.capacity {
		if e, ok := s.items[k]; ok {
			s.drop(e)
		}
		s.uncached++
		return false
	}
	s.c.tick++
	if e, ok := s.items[k]; ok {
		it := e.Value.(*shelfItem[K, V])
		s.used += cost - it.cost
		s.c.used += cost - it.cost
		it.val, it.cost, it.tick = v, cost, s.c.tick
		s.order.MoveToFront(e)
	} else {
		s.items[k] = s.order.PushFront(&shelfItem[K, V]{key: k, val: v, cost: cost, tick: s.c.tick})
		s.used += cost
		s.c.used += cost
	}
	for s.order.Len() > 0 && (s.maxItems > 0 && s.order.Len() > s.maxItems || s.maxBytes > 0 && s.used > s.maxBytes) {
		s.evictOldest()
	}
	s.c.fit()
	return true
}

// recharge charges the item kept for k cost bytes instead, if is says it
// is still the one meant, and evicts what no longer fits.
func (s *shelf[K, V]) recharge(k K, is func(V) bool, cost int64) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	e, ok := s.items[k]
	if !ok {
		return
	}
	it := e.Value.(*shelfItem[K, V])
	if !is(it.val) {
		return
	}
	if cost > s.admit {
		s.drop(e)
		return
	}
	s.used += cost - it.cost
	s.c.used += cost - it.cost
	it.cost = cost
	for s.order.Len() > 0 && s.maxBytes > 0 && s.used > s.maxBytes {
		s.evictOldest()
	}
	s.c.fit()
}

// remove drops what is kept for k.
func (s *shelf[K, V]) remove(k K) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if e, ok := s.items[k]; ok {
		s.drop(e)
	}
}

func (s *shelf[K, V]) drop(e *list.Element) {
	it := e.Value.(*shelfItem[K, V])
	s.order.Remove(e)
	delete(s.items, it.key)
	s.used -= it.cost
	s.c.used -= it.cost
}

func (s *shelf[K, V]) oldest() (uint64, bool) {
	if e := s.order.Back(); e != nil {
		return e.Value.(*shelfItem[K, V]).tick, true
	}
	return 0, false
}

func (s *shelf[K, V]) evictOldest() {
	s.drop(s.order.Back())
	s.evictions++
}

// CacheUse is what one of the store's caches holds and has done.
type CacheUse struct {
	// Entries is how many items it holds, Bytes what they are charged.
	Entries int
	Bytes   int64
	// Hits and Misses count the lookups that found what they looked for
	// and those that did not; Evictions the items dropped to make room;
	// Uncached the items too large to keep, served without being kept.
	Hits, Misses, Evictions, Uncached int64
}

func (s *shelf[K, V]) use() CacheUse {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return CacheUse{Entries: s.order.Len(), Bytes: s.used, Hits: s.hits, Misses: s.misses, Evictions: s.evictions, Uncached: s.uncached}
}

// index is a thread's checkpoints as last read, placed for derivation.
// It is immutable once cached; a refresh builds a new one.
type index struct {
	checkpoints []Checkpoint
	minID       string
	maxID       string
	hist        *History
	// thread is what the thread's messages versions hold, shared with the
	// thread's next index.
	thread *threadData
	// counted is when the checkpoints were last counted, which is what
	// notices a deletion that spared the oldest checkpoint.
	counted time.Time
	// size is what the index holds in memory, about, its thread data
	// included (see indexSize).
	size int64
	// heads keeps the Histories of other heads read from the index;
	// shared by the copies of an index whose checkpoints are the same.
	heads *heads
}

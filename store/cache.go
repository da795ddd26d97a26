package store

import (
	"container/list"
	"sync"
	"time"
)

// lru is a small least-recently-used map, safe for concurrent use. Zero
// capacity disables it.
type lru[K comparable, V any] struct {
	mu    sync.Mutex
	cap   int
	order *list.List
	items map[K]*list.Element
}

type lruItem[K comparable, V any] struct {
	key K
	val V
}

func newLRU[K comparable, V any](capacity int) *lru[K, V] {
	return &lru[K, V]{cap: capacity, order: list.New(), items: map[K]*list.Element{}}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruItem[K, V]).val, true
	}
	var zero V
	return zero, false
}

func (c *lru[K, V]) put(k K, v V) {
	if c.cap <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		e.Value.(*lruItem[K, V]).val = v
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&lruItem[K, V]{k, v})
	for c.order.Len() > c.cap {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruItem[K, V]).key)
	}
}

func (c *lru[K, V]) remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.Remove(e)
		delete(c.items, k)
	}
}

// scanKey names one messages value: versions are immutable per thread,
// namespace and channel, so a scan never goes stale.
type scanKey struct {
	ref     Ref
	version string
}

// index is a thread's checkpoints as last read, placed for derivation.
// It is immutable once cached; a refresh builds a new one.
type index struct {
	placed    []Placed
	minID     string
	maxID     string
	hist      *History
	questions []string
	// counted is when the checkpoints were last counted, which is what
	// notices a deletion that spared the oldest checkpoint.
	counted time.Time
}

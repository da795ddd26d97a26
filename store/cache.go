package store

import (
	"container/list"
	"sync"
	"time"
)

// lru is a small least-recently-used map, safe for concurrent use. Each
// item has a cost, 1 unless put with putCost, and the items' costs never
// add up to more than the capacity. Zero capacity disables it.
type lru[K comparable, V any] struct {
	mu    sync.Mutex
	cap   int
	used  int
	order *list.List
	items map[K]*list.Element
}

type lruItem[K comparable, V any] struct {
	key  K
	val  V
	cost int
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

func (c *lru[K, V]) put(k K, v V) { c.putCost(k, v, 1) }

// putCost adds or replaces an item of the given cost, evicting the least
// recently used items until the costs fit. An item costing more than the
// whole capacity is not kept.
func (c *lru[K, V]) putCost(k K, v V, cost int) {
	if c.cap <= 0 || cost > c.cap {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		it := e.Value.(*lruItem[K, V])
		c.used += cost - it.cost
		it.val, it.cost = v, cost
		c.order.MoveToFront(e)
	} else {
		c.items[k] = c.order.PushFront(&lruItem[K, V]{k, v, cost})
		c.used += cost
	}
	for c.used > c.cap {
		c.drop(c.order.Back())
	}
}

func (c *lru[K, V]) drop(e *list.Element) {
	it := e.Value.(*lruItem[K, V])
	c.order.Remove(e)
	delete(c.items, it.key)
	c.used -= it.cost
}

func (c *lru[K, V]) remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.drop(e)
	}
}

// len returns how many items are kept.
func (c *lru[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// cost returns the sum of the items' costs.
func (c *lru[K, V]) cost() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
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
}

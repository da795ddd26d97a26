package store

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/historyd/historyd/store/backend"
)

// refreshes shares index refreshes of one thread between concurrent
// reads, without ever answering a read from a refresh that began before
// it arrived (which could miss a checkpoint written just before the read):
// a read arriving while a refresh of its thread runs waits for the next
// one, which starts as soon as the running one ends and serves every read
// that arrived meanwhile. Under load a thread is then refreshed at most
// twice at once, whatever the number of readers.
type refreshes struct {
	mu    sync.Mutex
	slots map[backend.Ref]*refreshSlot
}

type refreshSlot struct {
	running, queued *refreshCall
}

// refreshTimeout bounds a shared refresh, as probeTimeout does a probe: a
// first read of a thread of a hundred thousand checkpoints takes seconds,
// so the bound is generous; each read stops waiting at its own deadline.
const refreshTimeout = 10 * time.Minute

// refreshCall is one refresh and the reads waiting for it.
type refreshCall struct {
	done chan struct{}
	ix   *index
	sn   seen
	err  error
	// ctx is the first waiting read's context without its deadline (for
	// the values, such as the trace, it carries), cancelled by cancel once
	// every read waiting for the refresh has stopped waiting.
	ctx     context.Context
	cancel  context.CancelFunc
	waiters int // guarded by refreshes.mu
	// panicked holds what fn panicked with, to panic with again in every
	// waiting read's goroutine, where the server recovers it as it would a
	// panic of the read's own.
	panicked any
}

func newRefreshCall(ctx context.Context) *refreshCall {
	c := &refreshCall{done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return c
}

// do runs fn for ref, or waits for a run of it that starts after this
// call began, and returns that run's result. A read whose own context ends
// stops waiting; the shared run goes on for the others, and is cancelled
// when no read waits for it any more.
func (r *refreshes) do(ctx context.Context, ref backend.Ref, fn func(context.Context) (*index, seen, error)) (*index, seen, error) {
	r.mu.Lock()
	if r.slots == nil {
		r.slots = map[backend.Ref]*refreshSlot{}
	}
	sl := r.slots[ref]
	if sl == nil {
		sl = &refreshSlot{}
		r.slots[ref] = sl
	}
	var c *refreshCall
	if sl.running == nil {
		c = newRefreshCall(ctx)
		sl.running = c
		go r.run(ref, sl, c, fn)
	} else {
		note(ctx, AttrIndexShared.Bool(true))
		if sl.queued == nil {
			sl.queued = newRefreshCall(ctx)
		}
		c = sl.queued
	}
	c.waiters++
	r.mu.Unlock()
	select {
	case <-c.done:
		if c.panicked != nil {
			panic(c.panicked)
		}
		return c.ix, c.sn, c.err
	case <-ctx.Done():
		r.mu.Lock()
		if c.waiters--; c.waiters == 0 {
			c.cancel()
			// A queued refresh nobody waits for any more is dropped, not
			// run cancelled: a read arriving next would otherwise join it
			// and fail with this read's cancellation.
			if sl.queued == c {
				sl.queued = nil
			}
		}
		r.mu.Unlock()
		return nil, seen{}, ctx.Err()
	}
}

// runRecovering runs fn and returns what it panicked with, if it did,
// with the stack where it did: shared work runs on a goroutine of its own,
// and a panic there would end the process.
func runRecovering(fn func()) (panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = fmt.Sprintf("%v\n\npanicked in shared store work:\n%s", p, debug.Stack())
		}
	}()
	fn()
	return nil
}

// run runs c, then the refresh queued behind it, if any.
func (r *refreshes) run(ref backend.Ref, sl *refreshSlot, c *refreshCall, fn func(context.Context) (*index, seen, error)) {
	for c != nil {
		c.panicked = runRecovering(func() {
			ctx, cancel := context.WithTimeout(c.ctx, refreshTimeout)
			defer cancel()
			c.ix, c.sn, c.err = fn(ctx)
		})
		c.cancel()
		close(c.done)
		r.mu.Lock()
		next := sl.queued
		sl.running, sl.queued = next, nil
		if next == nil {
			delete(r.slots, ref)
		}
		r.mu.Unlock()
		c = next
	}
}

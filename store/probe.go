package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/historyd/historyd/store/backend"
)

// probeTimeout bounds a shared probe: it serves several callers, so no one
// caller's deadline (or cancellation) may cut it short for the others;
// each caller stops waiting at its own, and the probe is cancelled once
// none waits.
const probeTimeout = 30 * time.Second

// prober shares freshness probes between concurrent reads. A read's probe
// joins the batch being gathered; a batch is sent as one backend.Backend.Probe
// call as soon as none is in flight, so under load each statement answers
// every read that arrived while the previous one ran, and reads of the
// same thread in one batch share one probe. A batch only ever holds
// probes that arrived before it was sent, so its answer is at least as
// fresh as each of them asked: no read is answered from a probe that
// started before it arrived.
type prober struct {
	b backend.Backend

	mu      sync.Mutex
	pending []*probeCall
	running bool
}

// probeCall is one read waiting for its probe.
type probeCall struct {
	p    backend.Probe
	done chan struct{}
	res  backend.ProbeResult
	err  error
	// batch is the batch that was sent with the probe; nil while pending.
	batch *probeSend
	// panicked is what the probe panicked with (see refreshCall).
	panicked any
}

// probeSend is one backend.Backend.Probe call and how many reads still wait for
// it: when none does, it is cancelled.
type probeSend struct {
	cancel  context.CancelFunc
	waiting int
}

// probe answers p, sharing the statement with the reads arriving meanwhile.
func (pr *prober) probe(ctx context.Context, p backend.Probe) (backend.ProbeResult, error) {
	c := &probeCall{p: p, done: make(chan struct{})}
	pr.mu.Lock()
	pr.pending = append(pr.pending, c)
	start := !pr.running
	pr.running = true
	pr.mu.Unlock()
	if start {
		go pr.run(context.WithoutCancel(ctx))
	}
	select {
	case <-c.done:
		if c.panicked != nil {
			panic(c.panicked)
		}
		return c.res, c.err
	case <-ctx.Done():
		pr.mu.Lock()
		if b := c.batch; b != nil {
			if b.waiting--; b.waiting == 0 {
				b.cancel()
			}
		} else {
			// Still waiting to be sent: leave the queue.
			pr.pending = slices.DeleteFunc(pr.pending, func(p *probeCall) bool { return p == c })
		}
		pr.mu.Unlock()
		return backend.ProbeResult{}, fmt.Errorf("%w: %w", backend.ErrNoAnswer, ctx.Err())
	}
}

// run sends batches until none is waiting. ctx carries the values (not the
// deadline) of the read that started it, for tracing.
func (pr *prober) run(ctx context.Context) {
	for {
		pr.mu.Lock()
		batch := pr.pending
		pr.pending = nil
		if len(batch) == 0 {
			pr.running = false
			pr.mu.Unlock()
			return
		}
		bctx, cancel := context.WithTimeout(ctx, probeTimeout)
		b := &probeSend{cancel: cancel, waiting: len(batch)}
		for _, c := range batch {
			c.batch = b
		}
		pr.mu.Unlock()
		pr.send(bctx, batch)
		cancel()
	}
}

// send answers one batch with one backend.Backend.Probe call, one probe per
// thread: the smallest After and every Verify id of the calls for it.
func (pr *prober) send(ctx context.Context, batch []*probeCall) {
	var ps []backend.Probe
	at := make(map[backend.Ref]int, len(batch))
	for _, c := range batch {
		i, ok := at[c.p.Ref]
		if !ok {
			at[c.p.Ref] = len(ps)
			ps = append(ps, backend.Probe{Ref: c.p.Ref, After: c.p.After, Verify: slices.Clone(c.p.Verify)})
			continue
		}
		p := &ps[i]
		p.After = min(p.After, c.p.After)
		for _, id := range c.p.Verify {
			if !slices.Contains(p.Verify, id) {
				p.Verify = append(p.Verify, id)
			}
		}
	}
	var res []backend.ProbeResult
	var err error
	if p := runRecovering(func() { res, err = pr.b.Probe(ctx, ps) }); p != nil {
		for _, c := range batch {
			c.panicked = p
			close(c.done)
		}
		return
	}
	if err == nil && len(res) != len(ps) {
		err = fmt.Errorf("probe of %d threads answered %d", len(ps), len(res))
	}
	for _, c := range batch {
		if err != nil {
			c.err = err
		} else {
			r := res[at[c.p.Ref]]
			// Each read learns of its own checkpoints only: a read's
			// census is held against what it asked.
			c.res = backend.ProbeResult{MinID: r.MinID, Newer: r.Newer}
			for _, id := range r.Present {
				if slices.Contains(c.p.Verify, id) {
					c.res.Present = append(c.res.Present, id)
				}
			}
		}
		close(c.done)
	}
}

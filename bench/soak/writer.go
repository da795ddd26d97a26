package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// tenant is one of the soak's callers: a bearer token mapped, by the token
// file historyd serves with, to one thread-id prefix.
type tenant struct {
	name, prefix, token string
}

var tenants = []tenant{
	{"acme", "acme/", "soak-token-acme-8f2c61"},
	{"globex", "globex/", "soak-token-globex-03ad9e"},
	{"initech", "initech/", "soak-token-initech-b71e44"},
}

// thread is one conversation the writer appends to.
type thread struct {
	id     string
	tenant int
	b      *storetest.Builder

	// begun counts the turns whose first checkpoint the writer has
	// started to write; done the turns written whole. A reader that saw
	// done = d before its call and begun = b after it was answered about
	// a thread with between d and b questions.
	begun, done atomic.Int32

	mu     sync.Mutex
	ids    [][]string // ids[n]: turn n's checkpoint ids (ids[0]: the first, empty checkpoint)
	pruned int        // turns 0..pruned deleted by retention (-1: none)
}

// registry holds every thread written; live are the threads each tenant's
// callers read, the newest few, which the writer appends to.
type registry struct {
	mu   sync.RWMutex
	all  []*thread
	live [][]*thread
}

// pick returns one of the tenant's live threads with at least two turns
// written, or nil when it has none yet.
func (r *registry) pick(t int, rng *rand.Rand) *thread {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var ok []*thread
	for _, th := range r.live[t] {
		if th.done.Load() >= 2 {
			ok = append(ok, th)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	return ok[rng.IntN(len(ok))]
}

// tenantThreads lists the ids of every thread of tenant t written so far.
func (r *registry) tenantThreads(t int) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for _, th := range r.all {
		if th.tenant == t {
			out = append(out, th.id)
		}
	}
	return out
}

func (r *registry) threads() []*thread {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*thread(nil), r.all...)
}

// writer appends turns to the live threads, directly to PostgreSQL in
// LangGraph.js's PostgresSaver layout, retrying each statement while the
// database restarts (every statement lgsaver writes is idempotent).
type writer struct {
	db      *pgxpool.Pool
	lg      *saver.Writer
	reg     *registry
	cfg     config
	gen     int
	retries atomic.Int64
	failed  atomic.Pointer[error]
}

func newWriter(db *pgxpool.Pool, reg *registry, cfg config) *writer {
	w := &writer{db: db, reg: reg, cfg: cfg}
	w.lg = saver.NewWriter(saver.PostgresJS, w.exec, "")
	return w
}

// exec runs one statement, again and again while it fails (PostgreSQL
// restarting), for up to two minutes.
func (w *writer) exec(ctx context.Context, q string, args ...any) error {
	deadline := time.Now().Add(2 * time.Minute)
	pause := 50 * time.Millisecond
	for {
		_, err := w.db.Exec(ctx, q, args...)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		w.retries.Add(1)
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}

func (w *writer) fail(err error) {
	if err != nil {
		w.failed.CompareAndSwap(nil, &err)
	}
}

// err is the first write that failed for good, if any.
func (w *writer) err() error {
	if p := w.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Put and Delete make the writer a storetest.Writer, so that storetest's
// Builder writes the conversations.
func (w *writer) Put(ref backend.Ref, cp saver.Checkpoint) {
	w.fail(w.lg.Put(context.Background(), ref.ThreadID, ref.Namespace, cp))
}

func (w *writer) Delete(ref backend.Ref, ids []string) {
	w.fail(w.lg.Delete(context.Background(), ref.ThreadID, ref.Namespace, ids...))
}

// newThread starts a thread for tenant t (its first, empty checkpoint).
func (w *writer) newThread(t, slot int) *thread {
	w.gen++
	th := &thread{id: fmt.Sprintf("%schat-%04d-%d", tenants[t].prefix, w.gen, slot), tenant: t, pruned: -1}
	th.b = storetest.NewBuilder(w, backend.Ref{ThreadID: th.id})
	th.ids = [][]string{{"1f0c-000000"}}
	w.reg.mu.Lock()
	w.reg.all = append(w.reg.all, th)
	w.reg.mu.Unlock()
	return th
}

// turnOf scripts turn n of th: every turn writes counter; some write a
// list or a note too, so that diffs have keys added, changed and left
// alone. The question names the thread, so that an answer about another
// thread cannot pass for this one.
func turnOf(th *thread, n int) storetest.Turn {
	writes := map[string]any{"counter": map[string]any{"n": n, "thread": th.id}}
	if n%3 == 1 {
		places := make([]any, 0, n%7+1)
		for i := range n%7 + 1 {
			places = append(places, fmt.Sprintf("place %d of turn %d", i, n))
		}
		writes["places"] = places
	}
	if n%4 == 0 {
		writes["note"] = fmt.Sprintf("turn %d of %s: ünïcode ✓", n, th.id)
	}
	return storetest.Turn{Question: fmt.Sprintf("question %d of %s", n, th.id), Writes: writes}
}

// turn writes the next turn of th.
func (w *writer) turn(th *thread) {
	n := int(th.begun.Add(1))
	wr := th.b.Turn(turnOf(th, n))
	th.mu.Lock()
	th.ids = append(th.ids, wr.IDs)
	th.mu.Unlock()
	th.done.Add(1)
}

// seed writes the live threads of every tenant, cfg.seedTurns turns each.
func (w *writer) seed() error {
	w.reg.live = make([][]*thread, len(tenants))
	for t := range tenants {
		for slot := range w.cfg.liveThreads {
			th := w.newThread(t, slot)
			for range w.cfg.seedTurns {
				w.turn(th)
			}
			w.reg.live[t] = append(w.reg.live[t], th)
		}
	}
	return w.err()
}

// run appends a turn to the next live thread every cfg.writeEvery until
// ctx ends; a thread that reaches cfg.maxTurns is retired (no longer read
// by callers, still listed and pruned) and replaced by a new one.
func (w *writer) run(ctx context.Context) error {
	tick := time.NewTicker(w.cfg.writeEvery)
	defer tick.Stop()
	next := 0
	for {
		select {
		case <-ctx.Done():
			return w.err()
		case <-tick.C:
		}
		t, slot := next%len(tenants), (next/len(tenants))%w.cfg.liveThreads
		next++
		w.reg.mu.RLock()
		th := w.reg.live[t][slot]
		w.reg.mu.RUnlock()
		if int(th.done.Load()) >= w.cfg.maxTurns {
			fresh := w.newThread(t, slot)
			w.reg.mu.Lock()
			w.reg.live[t][slot] = fresh
			w.reg.mu.Unlock()
			th = fresh
		}
		w.turn(th)
		if err := w.err(); err != nil {
			return err
		}
	}
}

// retention deletes, thread by thread, the checkpoints of every turn but
// the newest cfg.keepTurns, as a retention job would (lgsaver's Delete:
// checkpoint rows go, blobs stay). Before deleting, it reads the facts of
// the checkpoints it is about to delete directly, into archive, so that
// answers served from them can still be checked after the run.
type retention struct {
	w       *writer
	archive map[string]map[string]facts // thread → checkpoint → facts
	mu      sync.Mutex
	deleted atomic.Int64
}

func (r *retention) run(ctx context.Context) error {
	tick := time.NewTicker(r.w.cfg.pruneEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// Every thread with turns past the ones kept, so that retention
		// keeps up however many threads there are.
		for _, th := range r.w.reg.threads() {
			if err := r.prune(ctx, th); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}

func (r *retention) prune(ctx context.Context, th *thread) error {
	cut := int(th.done.Load()) - r.w.cfg.keepTurns
	th.mu.Lock()
	from := th.pruned + 1
	var ids []string
	for n := from; n <= cut && n < len(th.ids); n++ {
		ids = append(ids, th.ids[n]...)
	}
	th.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	var got map[string]facts
	err := retry(ctx, func() (err error) {
		got, err = readFacts(ctx, r.w.db, th.id, ids)
		return err
	})
	if err != nil {
		return fmt.Errorf("retention: read %s before deleting: %w", th.id, err)
	}
	if len(got) != len(ids) {
		return fmt.Errorf("retention: %s: %d of the %d checkpoints to delete found", th.id, len(got), len(ids))
	}
	r.mu.Lock()
	if r.archive[th.id] == nil {
		r.archive[th.id] = map[string]facts{}
	}
	for id, f := range got {
		r.archive[th.id][id] = f
	}
	r.mu.Unlock()
	r.w.Delete(backend.Ref{ThreadID: th.id}, ids)
	if err := r.w.err(); err != nil {
		return err
	}
	r.deleted.Add(int64(len(ids)))
	th.mu.Lock()
	th.pruned = cut
	th.mu.Unlock()
	return nil
}

// retry calls fn until it succeeds, for up to two minutes.
func retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(2 * time.Minute)
	pause := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}

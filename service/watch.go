package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/auth"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// Defaults of WatchConfig.
const (
	// DefaultWatchPollInterval is how often a watched thread is read.
	DefaultWatchPollInterval = 250 * time.Millisecond
	// DefaultMaxWatchesPerTenant is how many WatchTurns streams one tenant
	// may hold open at once (every caller is one tenant without
	// authentication).
	DefaultMaxWatchesPerTenant = 100
	// DefaultMaxWatches is how many WatchTurns streams one server holds
	// open at once.
	DefaultMaxWatches = 1000
	// maxWatchErrorBackoff caps the wait between reads of a watched thread
	// while the store cannot be reached.
	maxWatchErrorBackoff = 10 * time.Second
)

// WatchConfig configures WatchTurns. A zero field is its default; a
// negative limit is no limit.
type WatchConfig struct {
	// PollInterval is how often a watched thread is read while it
	// changes; while it does not, the wait grows to twice this. Default
	// DefaultWatchPollInterval.
	PollInterval time.Duration
	// MaxPerTenant bounds the open watches of one tenant. Default
	// DefaultMaxWatchesPerTenant.
	MaxPerTenant int
	// MaxTotal bounds the open watches of the server. Default
	// DefaultMaxWatches.
	MaxTotal int
}

// Watches is what the Servers of one process share about WatchTurns: the
// limits on open watches, which count the calls tenant isolation answers
// over an empty store too, and the shutdown that ends them all. It is safe
// for concurrent use.
type Watches struct {
	interval         time.Duration
	perTenant, total int
	mu               sync.Mutex
	open             int
	byTenant         map[string]int
	ctx              context.Context
	close            context.CancelFunc
}

// NewWatches returns the shared state of watches configured by cfg.
func NewWatches(cfg WatchConfig) *Watches {
	w := &Watches{interval: cfg.PollInterval, perTenant: cfg.MaxPerTenant, total: cfg.MaxTotal, byTenant: map[string]int{}}
	if w.interval <= 0 {
		w.interval = DefaultWatchPollInterval
	}
	if w.perTenant == 0 {
		w.perTenant = DefaultMaxWatchesPerTenant
	}
	if w.total == 0 {
		w.total = DefaultMaxWatches
	}
	w.ctx, w.close = context.WithCancel(context.Background())
	return w
}

// Close ends every watch: each WatchTurns stream returns, with OK, and no
// new one starts. It is what a server's shutdown does first, so that
// graceful stopping does not wait for streams that never end.
func (w *Watches) Close() { w.close() }

// Open reports how many watches are open.
func (w *Watches) Open() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.open
}

// acquire counts one more watch for tenant, or says which limit it is
// past.
func (w *Watches) acquire(tenant string) (func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.ctx.Err() != nil:
		return nil, status.Error(codes.Unavailable, "the server is shutting down; watch again elsewhere from the last turn received")
	case w.total > 0 && w.open >= w.total:
		return nil, status.Errorf(codes.ResourceExhausted, "this server holds %d watches open, the most it allows (--watch-max); try again later", w.open)
	case w.perTenant > 0 && w.byTenant[tenant] >= w.perTenant:
		who := "all callers together (no authentication)"
		if tenant != "" {
			who = fmt.Sprintf("tenant %q", tenant)
		}
		return nil, status.Errorf(codes.ResourceExhausted, "%s hold %d watches open, the most this server allows per tenant (--watch-max-per-tenant); close one first", who, w.byTenant[tenant])
	}
	w.open++
	w.byTenant[tenant]++
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.open--
			if w.byTenant[tenant]--; w.byTenant[tenant] == 0 {
				delete(w.byTenant, tenant)
			}
		})
	}, nil
}

// pollers runs one poller per watched thread of a Server's store, shared
// by all its watchers.
type pollers struct {
	st *store.Store
	w  *Watches
	mu sync.Mutex
	by map[backend.Ref]*poller
}

// poller reads one thread's history every interval (longer while nothing
// changes, and while the store fails) and tells its watchers when it
// changed. Watchers read what changed themselves: the poller only signals.
type poller struct {
	ps     *pollers
	ref    backend.Ref
	cancel context.CancelFunc
	// Guarded by ps.mu.
	subs map[chan struct{}]bool
	// retry holds the watchers whose own read failed for a while (the
	// store unavailable): they are signalled after the next successful
	// read even if the thread did not change, since they have not sent
	// what it holds.
	retry map[chan struct{}]bool
	// err is the error that ended the poller, when one did.
	err error
}

// subscribe registers a watcher of ref: ch receives a signal (coalesced:
// a watcher behind by several changes gets one) whenever the thread
// changed, and once at the start; after retry, also after the poller's
// next successful read. unsubscribe stops the poller with its last
// watcher.
func (ps *pollers) subscribe(ref backend.Ref) (ch chan struct{}, failed func() error, retry func(), unsubscribe func()) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.by[ref]
	if !ok {
		ctx, cancel := context.WithCancel(ps.w.ctx)
		p = &poller{ps: ps, ref: ref, cancel: cancel, subs: map[chan struct{}]bool{}, retry: map[chan struct{}]bool{}}
		ps.by[ref] = p
		go p.run(ctx)
	}
	ch = make(chan struct{}, 1)
	ch <- struct{}{}
	p.subs[ch] = true
	failed = func() error {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		return p.err
	}
	retry = func() {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		p.retry[ch] = true
	}
	return ch, failed, retry, func() {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		delete(p.subs, ch)
		delete(p.retry, ch)
		if len(p.subs) == 0 && ps.by[ref] == p {
			delete(ps.by, ref)
			p.cancel()
		}
	}
}

// notify signals every watcher (only those waiting to retry, with
// retriesOnly).
func (p *poller) notify(retriesOnly bool) {
	p.ps.mu.Lock()
	defer p.ps.mu.Unlock()
	set := p.subs
	if retriesOnly {
		set = p.retry
	}
	for ch := range set {
		select {
		case ch <- struct{}{}:
		default: // a signal is pending already
		}
	}
	clear(p.retry)
}

// transient reports whether an error of a store read may clear by itself.
func transient(err error) bool {
	return errors.Is(err, backend.ErrUnavailable) || errors.Is(err, store.ErrStale) || errors.Is(err, context.DeadlineExceeded)
}

func (p *poller) run(ctx context.Context) {
	interval := p.ps.w.interval
	wait := interval
	var last *store.History
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		rctx, cancel := context.WithTimeout(ctx, max(10*interval, 5*time.Second))
		h, err := p.ps.st.History(rctx, p.ref)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && transient(err):
			wait = min(max(wait*2, interval), maxWatchErrorBackoff)
		case err != nil:
			// The thread holds what historyd cannot read: every watcher
			// ends with it.
			p.ps.mu.Lock()
			p.err = err
			if p.ps.by[p.ref] == p {
				delete(p.ps.by, p.ref)
			}
			p.ps.mu.Unlock()
			p.notify(false)
			return
		case !sameHistory(h, last):
			// A History is shared until the thread changes; one derived
			// again (an index evicted, or a thread too large to cache,
			// derived on every read) is compared by what it holds.
			last = h
			wait = interval
			p.notify(false)
		default:
			wait = min(wait*2, 2*interval)
			p.notify(true)
		}
		timer.Reset(wait)
	}
}

// sameHistory reports whether two histories of a thread say the same:
// the same turns, ending where they did, derived from the same
// checkpoints.
func sameHistory(a, b *store.History) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.Total != b.Total || a.Numbering != b.Numbering || a.Head != b.Head || len(a.Steps) != len(b.Steps) {
		return false
	}
	for i, st := range a.Steps {
		if u := b.Steps[i]; st.Turn != u.Turn || st.Checkpoint.ID != u.Checkpoint.ID {
			return false
		}
	}
	for i, t := range a.Turns {
		if u := b.Turns[i]; t.Retained != u.Retained || t.End.ID != u.End.ID || !slices.Equal(t.AnsweredWith, u.AnsweredWith) {
			return false
		}
	}
	return true
}

// WatchTurns implements historyd.v1.ThreadHistory.WatchTurns. Calls
// denied by tenant isolation reach it too, over an empty store (see
// handlers.go): they watch a thread that never has a turn, counted
// against the same limits.
func (s *Server) WatchTurns(req *historydv1.WatchTurnsRequest, stream historydv1.ThreadHistory_WatchTurnsServer) error {
	ctx := stream.Context()
	if err := firstError(checkThread(req.GetThreadId(), req.GetCheckpointNs()), checkTurnField("after_turn", req.GetAfterTurn()),
		checkKeys(req.GetKeys()), s.checkChannel(req.GetChannel()), checkValueFormat(req.GetValueFormat()),
		checkHead(req.GetHeadCheckpointId())); err != nil {
		return s.fail(ctx, "WatchTurns", err)
	}
	tenant := ""
	if t, ok := auth.TenantFromContext(ctx); ok {
		tenant = t.Name
	}
	release, err := s.watches.acquire(tenant)
	if err != nil {
		return err
	}
	defer release()
	ref := refOf(req.GetThreadId(), req.GetCheckpointNs(), req.GetHeadCheckpointId())
	changed, failed, retry, unsubscribe := s.pollers.subscribe(ref)
	defer unsubscribe()
	// The headers say the watch is in place before any turn is sent.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	w := watcher{s: s, req: req, ref: ref, sent: map[int]sentTurn{}, after: int(req.GetAfterTurn()), stream: stream, channel: req.GetChannel()}
	if w.channel == "" {
		w.channel = s.store.StateChannels()[0]
	}
	for {
		select {
		case <-ctx.Done():
			return s.fail(ctx, "WatchTurns", ctx.Err())
		case <-s.watches.ctx.Done():
			return nil
		case <-changed:
		}
		if err := failed(); err != nil {
			return s.fail(ctx, "WatchTurns", err)
		}
		err := w.send(ctx)
		switch {
		case err == nil:
		case transient(err):
			// The poller backs off; its next successful read tries again,
			// whether or not the thread changed meanwhile.
			retry()
		default:
			return s.fail(ctx, "WatchTurns", err)
		}
	}
}

// watcher is one WatchTurns stream's progress: which turns it sent, at
// which end, on which lineage, and the newest checkpoint it has accounted
// for.
type watcher struct {
	s      *Server
	req    *historydv1.WatchTurnsRequest
	ref    backend.Ref
	stream historydv1.ThreadHistory_WatchTurnsServer
	// sent maps each turn sent to the end it was sent with: an end that
	// moves to a checkpoint with the same state (the next run's input
	// checkpoint carries the turn's end on) is not sent again.
	sent map[int]sentTurn
	// after is the newest turn not to send: the request's after_turn,
	// lowered to the turn the thread was rewound to when it is.
	after   int
	channel string
	// started says newest holds the newest checkpoint of the thread when
	// the watch began: checkpoints are sent from then on.
	started bool
	newest  string
	// last is the History the last send read: the lineage the turns sent
	// belong to.
	last *store.History
}

// sentTurn is the end a turn was sent with.
type sentTurn struct {
	// state is the version of the state it was sent with.
	state string
	// end is its last checkpoint.
	end string
}

// send reads and sends what is new: history_rewound if the thread's
// lineage changed under the watcher, then each checkpoint written since
// the last send (with checkpoints set), then each turn that has ended
// since, or whose end moved.
func (w *watcher) send(ctx context.Context) error {
	// pick runs on the freshly derived history; the turns it returns are
	// the ones ReadEncoded returns, and isCheckpoint says which of them
	// stand for a new checkpoint rather than a turn's end. Its last run is
	// on the history ReadEncoded returns, so what it leaves in rw, after
	// and sent is what that history says.
	var (
		isCheckpoint []bool
		newest       string
		rw           *rewind
		after        int
		sent         map[int]sentTurn
	)
	pick := func(h *store.History) []store.Turn {
		isCheckpoint = isCheckpoint[:0]
		newest = w.newest
		after, sent = w.after, w.sent
		if rw = w.rewound(h); rw != nil {
			// The turns sent after the shared one belong to the abandoned
			// branch: the new branch's turns of those numbers are new.
			after, sent = min(after, rw.turn), map[int]sentTurn{}
			for n, st := range w.sent {
				if n <= rw.turn {
					sent[n] = st
				}
			}
		}
		var out []store.Turn
		turnOf := make(map[string]int, len(h.Steps))
		for _, st := range h.Steps {
			id := st.Checkpoint.ID
			turnOf[id] = st.Turn
			if w.started && w.req.GetCheckpoints() && id > w.newest && st.Turn >= 1 {
				t := h.Turns[st.Turn-1]
				t.Retained, t.End = true, *st.Checkpoint
				out = append(out, t)
				isCheckpoint = append(isCheckpoint, true)
			}
			newest = max(newest, id)
		}
		for _, t := range h.Turns {
			st, done := sent[t.N]
			if t.N > after && t.Retained && h.Ended(t, turnOf) && (!done || st.state != t.End.State(w.channel)) {
				out = append(out, t)
				isCheckpoint = append(isCheckpoint, false)
			}
		}
		return out
	}
	h, turns, states, err := w.s.store.ReadEncoded(ctx, w.ref, w.req.GetChannel(), pick, w.req.GetKeys(), encoderFor(w.req.GetValueFormat()))
	if err != nil {
		return err
	}
	total, num := clampInt32(h.Total), numbering(h.Numbering)
	if rw != nil {
		ev := &historydv1.HistoryRewound{Turn: clampInt32(rw.turn)}
		if rw.fork != nil {
			ev.Fork = toFork(*rw.fork)
		}
		msg := &historydv1.WatchTurnsResponse{Event: &historydv1.WatchTurnsResponse_HistoryRewound{HistoryRewound: ev},
			Total: total, Numbering: num, HeadCheckpointId: h.Head}
		if err := w.stream.Send(msg); err != nil {
			return err
		}
		w.after, w.sent = after, sent
	}
	for i, t := range turns {
		if states[i].Lost {
			continue // its state cannot be rebuilt: not retained
		}
		msg := &historydv1.WatchTurnsResponse{Total: total, Numbering: num, HeadCheckpointId: h.Head}
		if isCheckpoint[i] {
			msg.Event = &historydv1.WatchTurnsResponse_Checkpoint{Checkpoint: toTurnState(t, states[i])}
		} else {
			msg.Event = &historydv1.WatchTurnsResponse_TurnEnded{TurnEnded: toTurnState(t, states[i])}
		}
		if err := w.stream.Send(msg); err != nil {
			return err
		}
		if !isCheckpoint[i] {
			w.sent[t.N] = sentTurn{state: t.End.State(w.channel), end: t.End.ID}
		}
	}
	w.started, w.newest, w.last = true, newest, h
	return nil
}

// rewind is how a watched thread's lineage changed: the last turn the new
// lineage shares with the turns sent, and the branch the watcher had been
// following, when the thread still holds it.
type rewind struct {
	turn int
	fork *store.Fork
}

// rewound says how h, the thread's history now, no longer descends from
// the turns the watcher sent, or nil when it does. It does when it holds
// the newest turn's end sent, and also when it holds the head the turns
// were sent from: the ends it lacks then were pruned (retention deletes
// the oldest checkpoints), not left on another branch.
func (w *watcher) rewound(h *store.History) *rewind {
	if w.last == nil || len(w.sent) == 0 {
		return nil
	}
	newest := 0
	for n := range w.sent {
		newest = max(newest, n)
	}
	if h.Holds(w.sent[newest].end) || h.Holds(w.last.Head) {
		return nil
	}
	held := make(map[string]bool, len(h.Steps))
	for _, st := range h.Steps {
		held[st.Checkpoint.ID] = true
	}
	rw := &rewind{}
	for n, st := range w.sent {
		if held[st.end] {
			rw.turn = max(rw.turn, n)
		}
	}
	rw.fork = followed(w.last, h, held)
	return rw
}

// followed finds, among h's forks, the branch old (the lineage a watcher
// followed) went on: the one whose newest checkpoint is old's head, or
// else the newest of those leaving from the last checkpoint the two
// lineages share (the branch went on after old was read). nil when h
// lists none (the branch was deleted).
func followed(old, h *store.History, held map[string]bool) *store.Fork {
	from := ""
	for i := len(old.Steps) - 1; i >= 0; i-- {
		if id := old.Steps[i].Checkpoint.ID; held[id] {
			from = id
			break
		}
	}
	var best *store.Fork
	for i := range h.Forks {
		f := &h.Forks[i]
		if f.Newest == old.Head {
			return f
		}
		if f.From == from && (best == nil || f.Newest > best.Newest) {
			best = f
		}
	}
	return best
}

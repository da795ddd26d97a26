package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// How the backend connects again once a connection attempt has failed:
// the first retry after ReconnectInitial, each later one after twice the
// wait before it, at most ReconnectMax, each wait spread by
// ReconnectJitter either way so that replicas that lost the database
// together do not come back together. Meanwhile no other connection is
// attempted: a call that needs one fails at once.
const (
	// ReconnectInitial is the wait before the first new attempt.
	ReconnectInitial = 100 * time.Millisecond
	// ReconnectMax caps the wait between attempts, before jitter: a
	// database that comes back is found within about this long, and one
	// that stays down sees about two attempts a second from each replica.
	ReconnectMax = 500 * time.Millisecond
	// ReconnectJitter is the fraction by which each wait is spread.
	ReconnectJitter = 0.2
	// reconnectTimeout bounds one attempt: connecting and one round trip.
	reconnectTimeout = 5 * time.Second
)

// gate keeps the pool from dialling a database known to be unreachable.
// While it is open, the pool connects as it needs to. A connection attempt
// that fails (refused, timed out, the server starting up or out of
// connections, a login refused) closes it: from then on the pool's
// attempts fail at once, without dialling, and one goroutine tries to
// connect, alone, backing off between attempts, until one succeeds and
// opens the gate again. So a stopped database sees one connection attempt
// at a time from each replica however many calls arrive, and calls learn
// at once that it is down.
type gate struct {
	// cfg is what an attempt connects with: the pool's connection
	// settings, untraced, since attempts run outside any call.
	cfg *pgx.ConnConfig
	// classify sorts an attempt's error as the backend's queries' errors
	// are sorted.
	classify func(error) error

	mu sync.Mutex
	// closedBy is the classified error of the attempt that closed the
	// gate, or of the latest attempt since; nil while the gate is open.
	closedBy error
	since    time.Time // when the gate closed
	attempts int       // attempts that failed since it closed
	next     time.Time // when the next attempt starts
	stop     context.CancelFunc
	stopped  bool
	done     chan struct{} // closed when the retrying goroutine returns
}

func newGate(cfg *pgx.ConnConfig, classify func(error) error) *gate {
	cfg = cfg.Copy()
	cfg.Tracer = nil
	return &gate{cfg: cfg, classify: classify}
}

// NotConnectedError is what the backend's queries fail with while its
// last connection attempt failed: no connection is attempted for them.
// It wraps the error of that attempt, so errors.Is tells
// backend.ErrUnavailable (a database down, or out of connections) from
// backend.ErrNotCheckpointStore (a login refused).
type NotConnectedError struct {
	// Since is when the first attempt of the outage failed.
	Since time.Time
	// Attempts counts the attempts that failed since.
	Attempts int
	// Next is when the next attempt is due.
	Next time.Time
	// Err is the latest attempt's error.
	Err error
}

// Error says for how long the database has been unreachable, and why.
func (e *NotConnectedError) Error() string {
	next := time.Until(e.Next).Round(time.Millisecond)
	return fmt.Sprintf("not connecting: %d connection attempts failed in %s, the next in %s: %v",
		e.Attempts, time.Since(e.Since).Round(time.Millisecond), max(next, 0), e.Err)
}

// Unwrap returns the latest attempt's error.
func (e *NotConnectedError) Unwrap() error { return e.Err }

// beforeConnect is the pool's BeforeConnect: it lets the pool connect only
// while the gate is open.
func (g *gate) beforeConnect(context.Context, *pgx.ConnConfig) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closedBy == nil {
		return nil
	}
	return &NotConnectedError{Since: g.since, Attempts: g.attempts, Next: g.next, Err: g.closedBy}
}

// dialer wraps the pool's dial: a connection to the database that cannot
// be made closes the gate before the pool hears of it, so that no call
// waiting for a connection starts another attempt in the moment between
// (closing it only once the failed query is classified leaves that
// moment open, and a waiting call dials into it).
func (g *gate) dialer(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil && ctx.Err() == nil {
			g.failed(g.classify(err))
		}
		return conn, err
	}
}

// failed closes the gate after a connection attempt of the pool failed
// with err, classified, and starts retrying. Calls that fail on
// connections already open do not close it: the pool replaces those, and
// it is the replacement's attempt that tells.
func (g *gate) failed(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closedBy != nil || g.stopped {
		return
	}
	g.closedBy, g.since, g.attempts = err, time.Now(), 1
	ctx, cancel := context.WithCancel(context.Background())
	g.stop, g.done = cancel, make(chan struct{})
	go g.retry(ctx, g.done)
}

// retry attempts a connection, one at a time, backing off, until one
// succeeds or the backend closes.
func (g *gate) retry(ctx context.Context, done chan struct{}) {
	defer close(done)
	b := &backoff.ExponentialBackOff{
		InitialInterval:     ReconnectInitial,
		RandomizationFactor: ReconnectJitter,
		Multiplier:          2,
		MaxInterval:         ReconnectMax,
	}
	b.Reset()
	for {
		wait := b.NextBackOff()
		g.mu.Lock()
		g.next = time.Now().Add(wait)
		g.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := g.attempt(ctx)
		g.mu.Lock()
		if ctx.Err() != nil {
			g.mu.Unlock()
			return
		}
		if err == nil {
			g.closedBy = nil
			g.mu.Unlock()
			return
		}
		g.closedBy = err
		g.attempts++
		g.mu.Unlock()
	}
}

// attempt connects once and makes one round trip, which a pooler that
// accepts logins with its server down cannot answer.
func (g *gate) attempt(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, reconnectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, g.cfg)
	if err != nil {
		return g.classify(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.Ping(ctx); err != nil {
		return g.classify(err)
	}
	return nil
}

// close stops retrying; the gate is not used again.
func (g *gate) close() {
	g.mu.Lock()
	g.stopped = true
	stop, done := g.stop, g.done
	g.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// isNotConnected reports whether err is the gate's refusal.
func isNotConnected(err error) bool {
	var nc *NotConnectedError
	return errors.As(err, &nc)
}

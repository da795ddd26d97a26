package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/historyd/historyd/store/backend"
)

// A transaction pooler (PgBouncer's pool_mode = transaction or statement)
// that historyd was not told of (Config.Pooler) would break it two ways:
// the settings a session of historyd's own gets (read-only, generic plans)
// would be made on server connections the pooler shares with other
// clients, the checkpointer among them, and named prepared statements
// would be prepared on one server connection and run on another
// ("prepared statement ... already exists", "... does not exist"). So
// historyd looks for one:
//
//   - before its first connection, with two of its own: one runs
//     pg_backend_pid() in two transactions while the other holds a
//     transaction open in between. Connected to PostgreSQL itself or
//     through a session pooler, a connection keeps its server process, and
//     the two answers are the same; through a transaction pooler the
//     first connection's server was handed to the second's open
//     transaction, and the answers differ (or the second transaction
//     waits for a server that is not free, or a statement pooler refuses
//     the transaction block). Nothing is set on either connection.
//   - on every read: SQLSTATE 42P05 (duplicate prepared statement) or 26000
//     (no such prepared statement) is what a transaction pooler does to
//     named prepared statements, and a read that fails so is made again,
//     once, in the pooler-safe mode.
//
// Either way historyd logs a warning and from then on runs as with
// PoolerTransaction: its connections are replaced by ones that set
// nothing and prepare no named statement.

// detectTimeout bounds each step of looking for a pooler.
const detectTimeout = 2 * time.Second

// pooling is what the backend knows of a pooler in front of PostgreSQL.
type pooling struct {
	configured Pooler
	// ownMode says the DSN chose its query exec mode, which historyd then
	// leaves alone.
	ownMode bool
	log     *slog.Logger
	// skipDetect turns looking at the first connection off, so that tests
	// can reach the fallback on reads.
	skipDetect bool

	// safe says a transaction pooler is in front, configured or found.
	safe atomic.Bool

	mu      sync.Mutex // serialises looking
	checked bool       // looked, or no need to
}

func newPooling(cfg Config, p Pooler, ownMode bool) *pooling {
	pl := &pooling{configured: p, ownMode: ownMode, log: cfg.Logger, skipDetect: cfg.skipPoolerDetect}
	if pl.log == nil {
		pl.log = slog.Default()
	}
	pl.safe.Store(p == PoolerTransaction)
	pl.checked = p == PoolerTransaction || cfg.skipPoolerDetect
	return pl
}

// beforeConnect is the pool's BeforeConnect: the gate first, then, before
// the first connection, a look for a pooler; a connection made once one is
// known is made pooler-safe.
func (b *Backend) beforeConnect(ctx context.Context, cc *pgx.ConnConfig) error {
	if err := b.gate.beforeConnect(ctx, cc); err != nil {
		return err
	}
	if err := b.pooling.detect(ctx, cc); err != nil {
		return err
	}
	if b.pooling.safe.Load() && !b.pooling.ownMode {
		cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	return nil
}

// afterConnect is the pool's AfterConnect without a configured
// transaction pooler: a session of historyd's own is set up as such,
// unless a transaction pooler was found.
func (b *Backend) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	if b.pooling.safe.Load() {
		return nil
	}
	return ownSession(ctx, conn)
}

// detect looks for a transaction pooler once, before the first
// connection. An error connecting fails the connection it was for; one
// later (a statement refused) only leaves the question to the fallback.
func (p *pooling) detect(ctx context.Context, cc *pgx.ConnConfig) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.checked {
		return nil
	}
	why, err := findTransactionPooler(ctx, cc)
	if err != nil {
		return err
	}
	p.checked = true
	if why != "" {
		p.switchToSafe(why)
	}
	return nil
}

// findTransactionPooler says why the connections cc makes go through a
// transaction pooler, or "" when they do not seem to. Its error is a
// failure to connect.
func findTransactionPooler(ctx context.Context, cc *pgx.ConnConfig) (string, error) {
	cfg := cc.Copy()
	cfg.Tracer = nil
	connect := func() (*pgx.Conn, error) {
		cctx, cancel := context.WithTimeout(ctx, reconnectTimeout)
		defer cancel()
		return pgx.ConnectConfig(cctx, cfg)
	}
	pid := func(c *pgx.Conn) (int32, error) {
		pctx, cancel := context.WithTimeout(ctx, detectTimeout)
		defer cancel()
		var n int32
		err := c.QueryRow(pctx, "SELECT pg_backend_pid()", pgx.QueryExecModeSimpleProtocol).Scan(&n)
		return n, err
	}
	a, err := connect()
	if err != nil {
		return "", err
	}
	defer a.Close(context.WithoutCancel(ctx))
	first, err := pid(a)
	if err != nil {
		return "", nil
	}
	holder, err := connect()
	if err != nil {
		return "", err
	}
	defer holder.Close(context.WithoutCancel(ctx))
	bctx, cancel := context.WithTimeout(ctx, detectTimeout)
	_, err = holder.Exec(bctx, "BEGIN", pgx.QueryExecModeSimpleProtocol)
	cancel()
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && strings.Contains(pgErr.Message, "pooling mode"):
		// PgBouncer in statement mode: "transaction blocks not allowed".
		return fmt.Sprintf("the server refused a transaction block: %s", pgErr.Message), nil
	case err != nil:
		return "", nil
	}
	if _, err := pid(holder); err != nil {
		return "", nil // no server for the second connection: not telling
	}
	second, err := pid(a)
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		return "a connection's second transaction waited for a server connection while its first one's was held by another transaction", nil
	case err != nil:
		return "", nil
	case second != first:
		return fmt.Sprintf("one connection's transactions ran in server processes %d and %d", first, second), nil
	}
	return "", nil
}

// switchToSafe makes the backend pooler-safe, once, saying why; the
// caller replaces the pool's connections.
func (p *pooling) switchToSafe(why string) bool {
	if !p.safe.CompareAndSwap(false, true) {
		return false
	}
	p.log.Warn("PostgreSQL is reached through a transaction pooler that --pooler does not name; running as with --pooler transaction (no session settings, no named prepared statements): set --pooler transaction to say so",
		"pooler", string(p.configured), "why", why)
	return true
}

// poolerMoved is a read's error when a transaction pooler ran one of its
// statements on a server connection that did not have it: the backend has
// turned pooler-safe, and the read may be made again.
type poolerMoved struct{ err error }

func (e *poolerMoved) Error() string { return e.err.Error() }
func (e *poolerMoved) Unwrap() error { return e.err }

// poolerSign reports whether pgErr is what a transaction pooler does to
// named prepared statements.
func poolerSign(pgErr *pgconn.PgError) bool {
	return pgErr.Code == "42P05" || pgErr.Code == "26000" // duplicate_prepared_statement, invalid_sql_statement_name
}

// movedByPooler turns the backend pooler-safe after pgErr, a sign of a
// transaction pooler, and returns the read's error: UNAVAILABLE for the
// caller, should the read not be made again.
func (b *Backend) movedByPooler(pgErr *pgconn.PgError) error {
	if b.pooling.switchToSafe(fmt.Sprintf("a read failed with SQLSTATE %s: %s", pgErr.Code, oneLine(pgErr.Message))) {
		b.pool.Reset()
	}
	return &poolerMoved{fmt.Errorf("%w: a transaction pooler moved a statement to another server connection (%s, SQLSTATE %s); reading pooler-safe from now on",
		backend.ErrUnavailable, oneLine(pgErr.Message), pgErr.Code)}
}

// retried runs read and, should it fail with a transaction pooler's sign
// (see movedByPooler) before handing anything on, runs it once more: the
// sign is met when a statement starts, before any row, and the backend
// is pooler-safe by then. handed, when not nil, is what read sets once it
// hands its caller anything; a read that has cannot be made again without
// handing it twice. Every read of the backend goes through here.
func retried(handed *bool, read func() error) error {
	err := read()
	var m *poolerMoved
	if errors.As(err, &m) && (handed == nil || !*handed) {
		err = read()
	}
	return err
}

// List implements backend.Backend: list, through retried.
func (b *Backend) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (c backend.Census, err error) {
	var handed bool
	err = retried(&handed, func() (err error) {
		c, err = b.list(ctx, ref, q, func(r backend.Row) error { handed = true; return fn(r) })
		return err
	})
	return c, err
}

// Probe implements backend.Backend: probe, through retried.
func (b *Backend) Probe(ctx context.Context, ps []backend.Probe) (res []backend.ProbeResult, err error) {
	err = retried(nil, func() (err error) {
		res, err = b.probe(ctx, ps)
		return err
	})
	return res, err
}

// EachValue implements backend.Backend: eachValue, through retried.
func (b *Backend) EachValue(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(int, backend.Blob) error) error {
	var handed bool
	return retried(&handed, func() error {
		return b.eachValue(ctx, ref, channel, ids, func(i int, v backend.Blob) error { handed = true; return fn(i, v) })
	})
}

// EachWrite implements backend.Backend: eachWrite, through retried.
func (b *Backend) EachWrite(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(backend.Write) error) error {
	var handed bool
	return retried(&handed, func() error {
		return b.eachWrite(ctx, ref, channel, ids, func(w backend.Write) error { handed = true; return fn(w) })
	})
}

// Newest implements backend.Backend: newest, through retried.
func (b *Backend) Newest(ctx context.Context, ref *backend.Ref, limit int, fn func(backend.Row) error) error {
	var handed bool
	return retried(&handed, func() error {
		return b.newest(ctx, ref, limit, func(r backend.Row) error { handed = true; return fn(r) })
	})
}

// Threads implements backend.Backend: threads, through retried.
func (b *Backend) Threads(ctx context.Context, q backend.ThreadQuery, fn func(backend.ThreadRow) error) (w backend.ThreadWalk, err error) {
	var handed bool
	err = retried(&handed, func() (err error) {
		w, err = b.threads(ctx, q, func(r backend.ThreadRow) error { handed = true; return fn(r) })
		return err
	})
	return w, err
}

// ExplainThreads returns PostgreSQL's EXPLAIN (ANALYZE, BUFFERS) of the
// first statement a listing q runs (see explainThreads), through retried.
func (b *Backend) ExplainThreads(ctx context.Context, q backend.ThreadQuery) (plan string, err error) {
	err = retried(nil, func() (err error) {
		plan, err = b.explainThreads(ctx, q)
		return err
	})
	return plan, err
}

// Ping implements backend.Backend: ping, through retried.
func (b *Backend) Ping(ctx context.Context) error {
	return retried(nil, func() error { return b.ping(ctx) })
}

// PoolerSafe reports whether the backend runs pooler-safe: configured
// with PoolerTransaction, or having found a transaction pooler.
func (b *Backend) PoolerSafe() bool { return b.pooling.safe.Load() }

// Package postgres reads LangGraph checkpoints from the tables the Python
// and JavaScript PostgresSaver write (checkpoints, checkpoint_blobs). It only
// reads: a role granted SELECT on those tables is enough, and it never
// creates or alters anything.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/store/backend"
)

// Config configures a Backend.
type Config struct {
	// DSN is a PostgreSQL connection string (URL or key=value form).
	// Required.
	DSN string
	// Schema is the schema holding the checkpoint tables. Empty means the
	// connection's search_path (normally "public").
	Schema string
	// MaxConns caps the pool's connections. Zero means pgxpool's default
	// (the larger of 4 and the number of CPUs).
	MaxConns int32
	// Channels, when set, are the only channels whose versions Checkpoints
	// and CheckpointsSince report; the others are left in the database
	// rather than sent and parsed for every checkpoint. Empty reports all.
	Channels []string
	// TracerProvider, when set, traces every statement, connection and
	// pool wait of a traced call (otelpgx), as a child of the call's span.
	// Nil: the pool has no tracer at all.
	TracerProvider trace.TracerProvider
	// Pooler says what connection pooler, if any, stands between historyd
	// and PostgreSQL. The zero value is PoolerNone. With PoolerNone or
	// PoolerSession, a transaction pooler is looked for before the first
	// connection and recognised by its errors on reads; once found, the
	// backend runs as with PoolerTransaction (see pooling).
	Pooler Pooler
	// Logger receives the warning that a transaction pooler was found.
	// Default slog.Default().
	Logger *slog.Logger

	// skipPoolerDetect leaves the look before the first connection out,
	// for the tests of what reads recognise.
	skipPoolerDetect bool
}

// Pooler is the kind of connection pooler in front of PostgreSQL, as far
// as historyd must know of it: whether a connection keeps its server
// session from one transaction to the next.
type Pooler string

const (
	// PoolerNone connects to PostgreSQL itself. Each connection's session
	// is made read-only and plans prepared statements generically, and the
	// warm path's statements are prepared once per connection.
	PoolerNone Pooler = "none"
	// PoolerSession is a pooler in session mode (PgBouncer's pool_mode =
	// session): a client keeps one server connection for as long as it is
	// connected, so historyd behaves as with PoolerNone.
	PoolerSession Pooler = "session"
	// PoolerTransaction is a pooler in transaction mode (PgBouncer's
	// pool_mode = transaction, or statement): each transaction may run on
	// another server connection, shared with other clients. historyd then
	// sets nothing on the session, which would leak to those clients, and
	// uses no named prepared statement, which the next server connection
	// would not have: each statement is parsed with the unnamed statement
	// in the same round trip that runs it (pgx's cache_describe mode), and
	// planned for its arguments. Nothing then makes the session read-only
	// but the role: give historyd one granted SELECT only.
	PoolerTransaction Pooler = "transaction"
)

// ParsePooler parses "none", "session" or "transaction"; "" is none.
func ParsePooler(s string) (Pooler, error) {
	switch p := Pooler(s); p {
	case "":
		return PoolerNone, nil
	case PoolerNone, PoolerSession, PoolerTransaction:
		return p, nil
	}
	return "", fmt.Errorf("%q: want none, session or transaction", s)
}

// Backend is a backend.Backend over a pgx connection pool.
type Backend struct {
	pool *pgxpool.Pool
	// gate stops the pool dialling while the database is unreachable.
	gate *gate
	// pooling says whether a transaction pooler is in front, configured
	// or found (see pooling).
	pooling *pooling
	// Queries are built once with the schema-qualified table names.
	listSQL   string
	probeSQL  string
	sinceSQL  string
	countSQL  string
	valuesSQL string
	writesSQL [2]string // without and with task_path
	// readableSQL reads the checkpoints table as every read does, for Ping.
	readableSQL string
	// newestSQL and newestAllSQL sample one thread's newest checkpoints,
	// and any thread's.
	newestSQL, newestAllSQL string
	schema                  string
	// taskPath says whether checkpoint_writes has Python's task_path
	// column (LangGraph.js's table has none): 0 unknown, 1 no, 2 yes.
	taskPath atomic.Int32
}

var _ backend.Backend = (*Backend)(nil)

// Open parses cfg and creates the pool. It does not wait for the database:
// connections are made on first use, so a database that is down at start is
// reported by Ping and by each query as backend.ErrUnavailable, and one that
// refuses historyd for good (no such database, a login refused, a missing
// grant) as backend.ErrNotCheckpointStore.
//
// It is one function because it is the pool's configuration, field by
// field, each with the reason for its value beside it.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if cfg.DSN == "" {
		return nil, errors.New("postgres: empty DSN")
	}
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// pgx's message can echo the password; keep only what it says is wrong.
		return nil, fmt.Errorf("postgres: parse DSN: %w", redact(err))
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	pooler := cfg.Pooler
	if pooler == "" {
		pooler = PoolerNone
	}
	if _, err := ParsePooler(string(pooler)); err != nil {
		return nil, fmt.Errorf("postgres: pooler %w", err)
	}
	// application_name is the one startup parameter besides user and
	// database historyd sends: poolers refuse the others they do not know
	// (PgBouncer: "unsupported startup parameter"), so session settings are
	// made after connecting, and only where the session is historyd's own.
	if pc.ConnConfig.RuntimeParams["application_name"] == "" {
		pc.ConnConfig.RuntimeParams["application_name"] = "historyd"
	}
	// Server sessions are shared and change between transactions: no
	// named prepared statements, unless the DSN asks for a mode itself
	// (default_query_exec_mode, say cache_statement for a PgBouncer with
	// max_prepared_statements).
	ownMode := setsParam(cfg.DSN, "default_query_exec_mode")
	if pooler == PoolerTransaction && !ownMode {
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	if cfg.TracerProvider != nil {
		// Spans carry the statement text, never its arguments (otelpgx
		// records them only when asked to): historyd binds every value,
		// thread ids included. Metrics are Prometheus's (package metrics).
		pc.ConnConfig.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(cfg.TracerProvider),
			otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()))
	}
	checkpoints := table(cfg.Schema, "checkpoints")
	blobs := table(cfg.Schema, "checkpoint_blobs")
	writes := table(cfg.Schema, "checkpoint_writes")
	versions, err := versionsSQL(cfg.Channels)
	if err != nil {
		return nil, err
	}
	// present lists which of the checkpoints in $4 exist. Each is looked
	// up by its key: with "checkpoint_id = ANY($4)" a generic plan may
	// filter the thread's whole index range instead, a cost that grows
	// with the thread.
	present := `(SELECT array_agg(want.id) FROM unnest($4::text[]) AS want(id) WHERE (SELECT true FROM ` + checkpoints + ` p
 WHERE p.thread_id = $1 AND p.checkpoint_ns = $2 AND p.checkpoint_id = want.id))`
	// Each row: the id, the parent, the checkpoint projected to what
	// historyd reads of it (its time, versions, and the channels its step
	// updated, which say whether the run went on), and the same of its
	// metadata, both JSON text.
	row := `c.checkpoint_id, c.parent_checkpoint_id, jsonb_build_object('ts', c.checkpoint->'ts', 'channel_versions', ` + versions + `,
 'updated_channels', c.checkpoint->'updated_channels')::text, ` + metadataSQL
	// The same with every channel's version, for sampling which channels
	// there are.
	allRow := `c.checkpoint_id, c.parent_checkpoint_id, jsonb_build_object('ts', c.checkpoint->'ts', 'channel_versions', c.checkpoint->'channel_versions')::text, ` + metadataSQL
	b := &Backend{
		schema:      cfg.Schema,
		listSQL:     `SELECT ` + row + ` FROM ` + checkpoints + ` c WHERE c.thread_id = $1 AND c.checkpoint_ns = $2`,
		readableSQL: `SELECT 1 FROM ` + checkpoints + ` WHERE thread_id = '' AND checkpoint_ns = '' AND checkpoint_id = '' LIMIT 1`,
		// The census and the newer rows come from one statement, hence one
		// snapshot. The smallest id is an index probe; the count reads the
		// thread's index entries, so it is asked for only now and then.
		// The warm path's common case, nothing new: two index probes and
		// the checked ids, a plan that suits every thread, so it is
		// prepared once per connection.
		probeSQL: `SELECT min(checkpoint_id), max(checkpoint_id), ` + strings.Replace(present, "$4", "$3", 1) + `
FROM ` + checkpoints + ` WHERE thread_id = $1 AND checkpoint_ns = $2`,
		sinceSQL: `WITH n AS (SELECT min(checkpoint_id) AS lo, ` + present + ` AS present FROM ` + checkpoints + ` WHERE thread_id = $1 AND checkpoint_ns = $2)
SELECT -1, n.lo, n.present, ` + row + `
FROM n LEFT JOIN ` + checkpoints + ` c ON c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id > $3`,
		countSQL: `WITH n AS (SELECT count(*) AS n, min(checkpoint_id) AS lo, ` + present + ` AS present FROM ` + checkpoints + ` WHERE thread_id = $1 AND checkpoint_ns = $2)
SELECT n.n, n.lo, n.present, ` + row + `
FROM n LEFT JOIN ` + checkpoints + ` c ON c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id > $3`,
		// A channel's value is its blob at the checkpoint's version of the
		// channel; primitives Python keeps inline in channel_values have no
		// blob. A non-empty blob wins over the inline reading, as in
		// LangGraph's own loader (a delta snapshot leaves a marker inline).
		// Driven by the ids, each checkpoint found by its key (LIMIT 1
		// keeps the planner from turning the lookups into a scan of the
		// thread, as a generic plan otherwise may).
		valuesSQL: `SELECT c.checkpoint_id, b.type, b.blob, c.inline
FROM unnest($4::text[]) AS want(id)
CROSS JOIN LATERAL (SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id,
    c.checkpoint->'channel_versions'->>$3 AS version, c.checkpoint->'channel_values'->$3 AS inline
  FROM ` + checkpoints + ` c WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = want.id LIMIT 1) c
LEFT JOIN ` + blobs + ` b
  ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = $3 AND b.version = c.version`,
		// A thread's newest: its index, backwards.
		newestSQL: `SELECT ` + allRow + ` FROM ` + checkpoints + ` c WHERE c.thread_id = $1 AND c.checkpoint_ns = $2
ORDER BY c.checkpoint_id DESC LIMIT $3`,
		// Any thread's: the rows in the table's last pages, which is where
		// new rows go while no vacuum has freed space before them. Sorting
		// the whole table by id instead would read every checkpoint; this
		// reads $1 pages (a TID range scan from PostgreSQL 14 on).
		newestAllSQL: `SELECT ` + allRow + ` FROM ` + checkpoints + ` c
WHERE c.ctid >= (SELECT format('(%s,0)', greatest(pg_relation_size(to_regclass($3)) / current_setting('block_size')::bigint - $1, 0))::tid)
ORDER BY c.checkpoint_id DESC LIMIT $2`,
		writesSQL: [2]string{
			`SELECT checkpoint_id, task_id, '', idx, type, blob FROM ` + writes + `
WHERE thread_id = $1 AND checkpoint_ns = $2 AND channel = $3 AND checkpoint_id = ANY($4)`,
			`SELECT checkpoint_id, task_id, task_path, idx, type, blob FROM ` + writes + `
WHERE thread_id = $1 AND checkpoint_ns = $2 AND channel = $3 AND checkpoint_id = ANY($4)`,
		},
	}
	b.gate = newGate(pc.ConnConfig, sortError)
	pc.ConnConfig.DialFunc = b.gate.dialer(pc.ConnConfig.DialFunc)
	b.pooling = newPooling(cfg, pooler, ownMode)
	pc.BeforeConnect = b.beforeConnect
	if pooler != PoolerTransaction {
		pc.AfterConnect = b.afterConnect
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: create pool: %w", redact(err))
	}
	b.pool = pool
	return b, nil
}

// ownSession sets up a connection whose server session is historyd's
// alone, in one round trip: read-only, since historyd only reads (a
// replica or a SELECT-only role is enough), and prepared statements run
// with their generic plan, planned once per connection: the warm path's
// statements (the probe, the value lookup) are index lookups whatever the
// thread, and planning them anew on every call cost PostgreSQL several
// times their execution. The statements whose best plan depends on their
// arguments are sent with the simple protocol, which plans each call with
// its values. Servers before PostgreSQL 12 lack plan_cache_mode and plan
// as they would.
func ownSession(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, "SET default_transaction_read_only = on; SET plan_cache_mode = force_generic_plan")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42704" { // undefined_object: no such setting
		// The failed statement took the first one back with it.
		_, err = conn.Exec(ctx, "SET default_transaction_read_only = on")
	}
	return err
}

// setsParam reports whether the DSN, a URL or key=value pairs, sets the
// parameter key itself.
func setsParam(dsn, key string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		return err == nil && u.Query().Has(key)
	}
	return regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(key) + `\s*=`).MatchString(dsn)
}

// metadataSQL projects checkpoint c's metadata to what historyd reads of
// it, as JSON text: the step, the source, and whether it marks a graph
// with DeltaChannel channels (the markers' contents are not needed).
const metadataSQL = `jsonb_strip_nulls(jsonb_build_object('step', c.metadata->'step', 'source', c.metadata->'source',
 'counters_since_delta_snapshot', CASE WHEN c.metadata ? 'counters_since_delta_snapshot' THEN true END,
 'delta_writes_versioned', CASE WHEN c.metadata ? 'delta_writes_versioned' THEN true END))::text`

// versionsSQL selects checkpoint c's channel_versions, or only those of
// channels when there are any. Channel names are written into the
// statement as literals: they come from the configuration, and one holding
// a backslash or NUL is refused rather than escaped.
func versionsSQL(channels []string) (string, error) {
	if len(channels) == 0 {
		return `c.checkpoint->'channel_versions'`, nil
	}
	var pairs []string
	for _, ch := range channels {
		if ch == "" || strings.ContainsAny(ch, "\\\x00") {
			return "", fmt.Errorf("postgres: channel name %q: empty, or holds a backslash or NUL", ch)
		}
		lit := "'" + strings.ReplaceAll(ch, "'", "''") + "'"
		pairs = append(pairs, lit+`, c.checkpoint->'channel_versions'->`+lit)
	}
	// A version is never JSON null, so stripping nulls only drops the
	// channels a checkpoint has no version of.
	return `jsonb_strip_nulls(jsonb_build_object(` + strings.Join(pairs, ", ") + `))`, nil
}

func table(schema, name string) string {
	if schema == "" {
		return pgx.Identifier{name}.Sanitize()
	}
	return pgx.Identifier{schema, name}.Sanitize()
}

// list hands fn the thread's checkpoints, all of them or those newer than
// q.After, with the census q asks for, from one statement.
//
// It is one function because it builds one statement and reads its rows in
// one pass; the statement's parts and the columns read must agree.
func (b *Backend) list(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	if q.After == "" {
		// Planned with the thread's own statistics (the simple protocol),
		// like the incremental listing.
		rows, err := b.pool.Query(ctx, b.listSQL, pgx.QueryExecModeSimpleProtocol, ref.ThreadID, ref.Namespace)
		if err != nil {
			return backend.Census{}, b.classify(ctx, err)
		}
		defer rows.Close()
		census := backend.Census{Count: 0}
		want := make(map[string]bool, len(q.Verify))
		for _, id := range q.Verify {
			want[id] = true
		}
		for rows.Next() {
			var r rowCols
			if err := rows.Scan(&r.id, &r.parent, nil, nil); err != nil {
				return backend.Census{}, b.classify(ctx, err)
			}
			r.rawJSON(rows, 2)
			census.Count++
			if census.MinID == "" || r.id < census.MinID {
				census.MinID = r.id
			}
			if want[r.id] {
				census.Present = append(census.Present, r.id)
			}
			if err := fn(r.row()); err != nil {
				return backend.Census{}, err
			}
		}
		if err := rows.Err(); err != nil {
			return backend.Census{}, b.classify(ctx, err)
		}
		return census, nil
	}
	verify := q.Verify
	if verify == nil {
		verify = []string{}
	}
	if !q.Count {
		var lo, hi *string
		var found []string
		err := b.pool.QueryRow(ctx, b.probeSQL, ref.ThreadID, ref.Namespace, verify).Scan(&lo, &hi, &found)
		if err != nil {
			return backend.Census{}, b.classify(ctx, err)
		}
		if hi == nil || *hi <= q.After {
			census := backend.Census{Count: -1, Present: found}
			if lo != nil {
				census.MinID = *lo
			}
			return census, nil
		}
	}
	sql := b.sinceSQL
	if q.Count {
		sql = b.countSQL
	}
	// Planned with the actual arguments every time (the simple protocol): a
	// generic plan cannot tell that "newer than the newest seen" is a
	// handful of rows, and on a table holding few threads it scans the
	// whole table instead of the index, which makes a read cost the
	// thread's length.
	rows, err := b.pool.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol, ref.ThreadID, ref.Namespace, q.After, verify)
	if err != nil {
		return backend.Census{}, b.classify(ctx, err)
	}
	defer rows.Close()
	var census backend.Census
	for rows.Next() {
		var (
			n     int
			lo    *string
			found []string
			r     rowCols
			id    *string
		)
		if err := rows.Scan(&n, &lo, &found, &id, &r.parent, nil, nil); err != nil {
			return backend.Census{}, b.classify(ctx, err)
		}
		r.rawJSON(rows, 5)
		census.Count = n
		if census.Present == nil {
			census.Present = found
		}
		if lo != nil {
			census.MinID = *lo
		}
		if id == nil {
			continue // the census alone: nothing newer
		}
		r.id = *id
		if err := fn(r.row()); err != nil {
			return backend.Census{}, err
		}
	}
	if err := rows.Err(); err != nil {
		return backend.Census{}, b.classify(ctx, err)
	}
	return census, nil
}

// rowCols are the columns of one listed checkpoint.
type rowCols struct {
	id                   string
	parent               *string
	checkpoint, metadata []byte
}

// rawJSON points r's checkpoint and metadata at the columns from i on as
// the row buffer holds them, without a copy: both are text (JSON), whose
// text and binary formats are the same bytes, and a row is only valid
// while List's callback runs.
func (r *rowCols) rawJSON(rows pgx.Rows, i int) {
	raw := rows.RawValues()
	r.checkpoint, r.metadata = raw[i], raw[i+1]
}

func (r rowCols) row() backend.Row {
	out := backend.Row{
		ID:         r.id,
		Checkpoint: backend.Blob{Type: format.TypeJSON, Data: r.checkpoint},
		Metadata:   backend.Blob{Type: format.TypeJSON, Data: r.metadata},
	}
	if r.parent != nil {
		out.Parent = *r.parent
	}
	return out
}

// eachValue reads channel's value at each checkpoint in ids, handing each
// blob over straight from the row buffer.
func (b *Backend) eachValue(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(int, backend.Blob) error) error {
	at := make(map[string][]int, len(ids))
	for i, id := range ids {
		at[id] = append(at[id], i)
	}
	rows, err := b.pool.Query(ctx, b.valuesSQL, ref.ThreadID, ref.Namespace, channel, ids)
	if err != nil {
		return b.classify(ctx, err)
	}
	defer rows.Close()
	seen := make(map[string]bool, len(ids))
	for rows.Next() {
		var (
			id     string
			typ    *string
			inline []byte
		)
		// The blob column is skipped here and read raw below: bytea's
		// binary format is the bytes themselves.
		if err := rows.Scan(&id, &typ, nil, &inline); err != nil {
			return b.classify(ctx, err)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		var blob backend.Blob
		switch {
		case typ != nil && *typ != format.TypeEmpty:
			data, err := bytea(rows, 2)
			if err != nil {
				return b.classify(ctx, err)
			}
			blob = backend.Blob{Type: *typ, Data: data}
		case inline != nil:
			blob = backend.Blob{Type: format.TypeJSON, Data: inline}
		default:
			blob = backend.Blob{Type: format.TypeEmpty}
		}
		for _, i := range at[id] {
			if err := fn(i, blob); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return b.classify(ctx, err)
	}
	for i, id := range ids {
		if !seen[id] {
			if err := fn(i, backend.Blob{Missing: true}); err != nil {
				return err
			}
		}
	}
	return nil
}

// eachWrite hands fn channel's writes attached to the checkpoints of ids,
// each value straight from the row buffer.
func (b *Backend) eachWrite(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(backend.Write) error) error {
	withPath, err := b.hasTaskPath(ctx)
	if err != nil {
		return err
	}
	sql := b.writesSQL[0]
	if withPath {
		sql = b.writesSQL[1]
	}
	rows, err := b.pool.Query(ctx, sql, ref.ThreadID, ref.Namespace, channel, ids)
	if err != nil {
		return b.classify(ctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			w   backend.Write
			typ string
		)
		// The blob column is read raw below: bytea's binary format is the
		// bytes themselves.
		if err := rows.Scan(&w.CheckpointID, &w.TaskID, &w.TaskPath, &w.Idx, &typ, nil); err != nil {
			return b.classify(ctx, err)
		}
		data, err := bytea(rows, 5)
		if err != nil {
			return b.classify(ctx, err)
		}
		w.Value = backend.Blob{Type: typ, Data: data}
		if err := fn(w); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return b.classify(ctx, err)
	}
	return nil
}

// newest hands fn up to limit of the newest checkpoints, of the thread or
// of any thread, with every channel's version.
func (b *Backend) newest(ctx context.Context, ref *backend.Ref, limit int, fn func(backend.Row) error) error {
	if limit <= 0 {
		return nil
	}
	var rows pgx.Rows
	var err error
	if ref != nil {
		rows, err = b.pool.Query(ctx, b.newestSQL, ref.ThreadID, ref.Namespace, limit)
	} else {
		// A page holds several checkpoints: a quarter as many pages as
		// rows wanted is enough unless the rows are large.
		rows, err = b.pool.Query(ctx, b.newestAllSQL, limit/4+1, limit, b.name("checkpoints"))
	}
	if err != nil {
		return b.classify(ctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r rowCols
		if err := rows.Scan(&r.id, &r.parent, &r.checkpoint, &r.metadata); err != nil {
			return b.classify(ctx, err)
		}
		if err := fn(r.row()); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return b.classify(ctx, err)
	}
	return nil
}

// bytea returns the bytea column i of the current row. In the binary
// format, which every query mode but exec and simple_protocol uses, the
// value is the bytes themselves and is handed over in place; in the text
// format (a DSN choosing one of those two modes) it is decoded.
func bytea(rows pgx.Rows, i int) ([]byte, error) {
	raw := rows.RawValues()[i]
	if raw == nil || rows.FieldDescriptions()[i].Format == pgx.BinaryFormatCode {
		return raw, nil
	}
	var out []byte
	if err := rows.Conn().TypeMap().Scan(pgtype.ByteaOID, pgx.TextFormatCode, raw, &out); err != nil {
		return nil, fmt.Errorf("postgres: read bytea column: %w", err)
	}
	return out, nil
}

// hasTaskPath reports whether checkpoint_writes has Python's task_path
// column, asking the database once.
func (b *Backend) hasTaskPath(ctx context.Context) (bool, error) {
	switch b.taskPath.Load() {
	case 1:
		return false, nil
	case 2:
		return true, nil
	}
	var exists *bool
	err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'task_path' AND NOT attisdropped)
 WHERE to_regclass($1) IS NOT NULL`, b.name("checkpoint_writes")).Scan(&exists)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("%w: no checkpoint_writes table in %s; LangGraph's savers create it with the others", backend.ErrNotCheckpointStore, b.where())
	}
	if err != nil {
		return false, b.classify(ctx, err)
	}
	if *exists {
		b.taskPath.Store(2)
	} else {
		b.taskPath.Store(1)
	}
	return *exists, nil
}

// ping checks that the database answers, that the checkpoint tables are
// where the configuration says, and that they can be read now: a lock
// that blocks every read (an ALTER TABLE, a LOCK TABLE, a VACUUM FULL of a
// migration) blocks the probe too, which then fails at ctx's deadline, so
// that readiness and health say what callers meet.
func (b *Backend) ping(ctx context.Context) error {
	var ok, canRead bool
	var role string
	name, blobs := b.name("checkpoints"), b.name("checkpoint_blobs")
	err := b.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL,
  coalesce(has_table_privilege(to_regclass($1), 'SELECT') AND has_table_privilege(to_regclass($2), 'SELECT'), false),
  current_user`,
		name, blobs).Scan(&ok, &canRead, &role)
	if err != nil {
		return b.classify(ctx, err)
	}
	if !ok {
		return fmt.Errorf("%w: no checkpoints and checkpoint_blobs tables in %s; point --dsn/--schema at the database and schema LangGraph's checkpointer writes", backend.ErrNotCheckpointStore, b.where())
	}
	if !canRead {
		return fmt.Errorf("%w: role %q may not SELECT from %s and %s; GRANT SELECT ON %[3]s, %[4]s TO %s", backend.ErrNotCheckpointStore,
			role, name, blobs, pgx.Identifier{role}.Sanitize())
	}
	// An index probe for a thread that cannot exist: it costs nothing
	// whatever the table holds, and takes the lock every read takes.
	if err := b.pool.QueryRow(ctx, b.readableSQL).Scan(new(int)); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return b.classify(ctx, err)
	}
	return nil
}

// name is a checkpoint table's name as to_regclass takes it.
func (b *Backend) name(table string) string {
	if b.schema == "" {
		return table
	}
	return pgx.Identifier{b.schema, table}.Sanitize()
}

// where says where the backend looks for the tables.
func (b *Backend) where() string {
	if b.schema == "" {
		return "the search_path"
	}
	return fmt.Sprintf("schema %q", b.schema)
}

// Close stops connecting and closes the pool.
func (b *Backend) Close() {
	b.gate.close()
	b.pool.Close()
}

// classify sorts a query error into what the layers above act on: the
// caller's own deadline or cancellation; the database being unreachable,
// which may heal (backend.ErrUnavailable); or a configuration that never
// will (backend.ErrNotCheckpointStore): no such database, a login the
// server refuses, a missing grant, no checkpoint tables. Each message is
// one line and says what to fix.
//
// A connection attempt that failed closes the backend's gate (see gate):
// until an attempt succeeds again, queries fail at once with a
// NotConnectedError wrapping the attempt's error, classified.
func (b *Backend) classify(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("postgres: %w: %w", backend.ErrNoAnswer, ctxErr)
	}
	if isNotConnected(err) {
		return fmt.Errorf("postgres: %w", err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && poolerSign(pgErr) {
		return b.movedByPooler(pgErr)
	}
	out := sortError(err)
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		b.gate.failed(out)
	}
	return out
}

// dataRole and indexRole are what a damaged part of PostgreSQL is to
// historyd (backend.CorruptError.Role), as a caller may read it: they name
// no host, database, schema or role.
const (
	dataRole  = "the PostgreSQL checkpoint database"
	indexRole = "an index of the PostgreSQL checkpoint tables"
)

// sortError is classify's sorting of an error that is not the caller's
// deadline or cancellation.
func sortError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg := oneLine(pgErr.Message)
		switch {
		case pgErr.Code == "42P01" || pgErr.Code == "3F000": // undefined_table, invalid_schema_name
			return fmt.Errorf("%w: %s; point --dsn/--schema at the database and schema LangGraph's checkpointer writes", backend.ErrNotCheckpointStore, msg)
		case pgErr.Code == "42501": // insufficient_privilege: the role lacks a grant
			return fmt.Errorf("%w: %s; grant historyd's role CONNECT on the database, USAGE on the schema and SELECT on the checkpoint tables", backend.ErrNotCheckpointStore, msg)
		case pgErr.Code == "3D000", // invalid_catalog_name
			pgErr.Code == "08P01" && strings.HasPrefix(pgErr.Message, "no such database"): // PgBouncer's
			return fmt.Errorf("%w: %s; point --dsn at the database LangGraph's checkpointer writes", backend.ErrNotCheckpointStore, msg)
		case pgErr.Code == "28P01": // invalid_password
			return fmt.Errorf("%w: %s; check the password in --dsn (or PGPASSWORD, ~/.pgpass)", backend.ErrNotCheckpointStore, msg)
		case pgErr.Code == "28000", // invalid_authorization_specification
			pgErr.Code == "08P01" && (strings.Contains(pgErr.Message, "authentication failed") || strings.HasPrefix(pgErr.Message, "no such user")): // PgBouncer's
			return fmt.Errorf("%w: the server refused the login: %s; check the user in --dsn, that the role exists and may log in, and the server's pg_hba.conf", backend.ErrNotCheckpointStore, msg)
		case pgErr.Code == "08P01" && strings.HasPrefix(pgErr.Message, "unsupported startup parameter"):
			// A pooler refusing a parameter the DSN sets: it will refuse it
			// every time.
			return fmt.Errorf("%w: the pooler refused the connection: %s; remove that parameter from --dsn, or list it in the pooler's ignore_startup_parameters", backend.ErrNotCheckpointStore, msg)
		case pgErr.Code == "XX001": // data_corrupted: a page of a table fails its checks
			// Damage, not a bug nor an outage: the log gets PostgreSQL's
			// words, which name the relation's file; a caller only what
			// the damaged part is to historyd.
			return &backend.CorruptError{Role: dataRole, Err: fmt.Errorf("postgres: %s (SQLSTATE %s)", msg, pgErr.Code)}
		case pgErr.Code == "XX002": // index_corrupted
			return &backend.CorruptError{Role: indexRole, Err: fmt.Errorf("postgres: %s (SQLSTATE %s)", msg, pgErr.Code)}
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"), // insufficient resources
			strings.HasPrefix(pgErr.Code, "57"), // operator intervention (shutdown, cancel, starting up)
			pgErr.Code == "40001", pgErr.Code == "40P01":
			return fmt.Errorf("%w: %s (SQLSTATE %s)", backend.ErrUnavailable, msg, pgErr.Code)
		}
		return fmt.Errorf("postgres: %s (SQLSTATE %s)", msg, pgErr.Code)
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	// A connection the server or pooler closed under a query ends it with
	// an unexpected EOF: the database went away (a restart, PgBouncer
	// stopping) and may come back.
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s", backend.ErrUnavailable, oneLine(redact(err).Error()))
	}
	if msg := err.Error(); oneLine(msg) != msg {
		return fmt.Errorf("postgres: %s", oneLine(msg))
	}
	return fmt.Errorf("postgres: %w", err)
}

// oneLine folds a message that spans lines (pgx lists each address it
// tried on a line of its own) into one, so that a log record stays on one
// line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// redact drops anything after "password=" from an error text; pgx includes
// parts of the connection string in some messages.
func redact(err error) error {
	msg := err.Error()
	if i := strings.Index(msg, "password="); i >= 0 {
		return errors.New(msg[:i] + "password=<redacted>")
	}
	return err
}

// SharesBlobs implements backend.BlobSharer: checkpoint_blobs keeps one value
// per (thread, namespace, channel, version).
func (b *Backend) SharesBlobs() bool { return true }

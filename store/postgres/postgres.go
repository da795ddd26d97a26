// Package postgres reads LangGraph checkpoints from the tables the Python
// and JavaScript PostgresSaver write (checkpoints, checkpoint_blobs). It only
// reads: a role granted SELECT on those tables is enough, and it never
// creates or alters anything.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/lgcodec"
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
}

// Backend is a store.Backend over a pgx connection pool.
type Backend struct {
	pool *pgxpool.Pool
	// Queries are built once with the schema-qualified table names.
	listSQL   string
	probeSQL  string
	sinceSQL  string
	countSQL  string
	valuesSQL string
	writesSQL [2]string // without and with task_path
	schema    string
	// taskPath says whether checkpoint_writes has Python's task_path
	// column (LangGraph.js's table has none): 0 unknown, 1 no, 2 yes.
	taskPath atomic.Int32
}

var _ store.Backend = (*Backend)(nil)

// Open parses cfg and creates the pool. It does not wait for the database:
// connections are made on first use, so a database that is down at start is
// reported by Ping and by each query as store.ErrUnavailable.
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
	// Reads only; a replica or a SELECT-only role is enough.
	pc.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	if pc.ConnConfig.RuntimeParams["application_name"] == "" {
		pc.ConnConfig.RuntimeParams["application_name"] = "historyd"
	}
	// Prepared statements run with their generic plan, planned once per
	// connection: the warm path's statements (the probe, the value lookup)
	// are index lookups whatever the thread, and planning them anew on
	// every call cost PostgreSQL several times their execution. The
	// statements whose best plan depends on their arguments are sent with
	// the simple protocol, which plans each call with its values. Servers
	// before PostgreSQL 12 lack the setting and plan as they would.
	pc.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42704" { // undefined_object: no such setting
			return nil
		}
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: create pool: %w", redact(err))
	}
	checkpoints := table(cfg.Schema, "checkpoints")
	blobs := table(cfg.Schema, "checkpoint_blobs")
	writes := table(cfg.Schema, "checkpoint_writes")
	versions, err := versionsSQL(cfg.Channels)
	if err != nil {
		pool.Close()
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
	return &Backend{
		pool:    pool,
		schema:  cfg.Schema,
		listSQL: `SELECT ` + row + ` FROM ` + checkpoints + ` c WHERE c.thread_id = $1 AND c.checkpoint_ns = $2`,
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
		writesSQL: [2]string{
			`SELECT checkpoint_id, task_id, '', idx, type, blob FROM ` + writes + `
WHERE thread_id = $1 AND checkpoint_ns = $2 AND channel = $3 AND checkpoint_id = ANY($4)`,
			`SELECT checkpoint_id, task_id, task_path, idx, type, blob FROM ` + writes + `
WHERE thread_id = $1 AND checkpoint_ns = $2 AND channel = $3 AND checkpoint_id = ANY($4)`,
		},
	}, nil
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

// List hands fn the thread's checkpoints, all of them or those newer than
// q.After, with the census q asks for, from one statement.
func (b *Backend) List(ctx context.Context, ref store.Ref, q store.Query, fn func(store.Row) error) (store.Census, error) {
	if q.After == "" {
		// Planned with the thread's own statistics (the simple protocol),
		// like the incremental listing.
		rows, err := b.pool.Query(ctx, b.listSQL, pgx.QueryExecModeSimpleProtocol, ref.ThreadID, ref.Namespace)
		if err != nil {
			return store.Census{}, b.classify(ctx, err)
		}
		defer rows.Close()
		census := store.Census{Count: 0}
		want := make(map[string]bool, len(q.Verify))
		for _, id := range q.Verify {
			want[id] = true
		}
		for rows.Next() {
			var r rowCols
			if err := rows.Scan(&r.id, &r.parent, &r.checkpoint, &r.metadata); err != nil {
				return store.Census{}, b.classify(ctx, err)
			}
			census.Count++
			if census.MinID == "" || r.id < census.MinID {
				census.MinID = r.id
			}
			if want[r.id] {
				census.Present = append(census.Present, r.id)
			}
			if err := fn(r.row()); err != nil {
				return store.Census{}, err
			}
		}
		if err := rows.Err(); err != nil {
			return store.Census{}, b.classify(ctx, err)
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
			return store.Census{}, b.classify(ctx, err)
		}
		if hi == nil || *hi <= q.After {
			census := store.Census{Count: -1, Present: found}
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
		return store.Census{}, b.classify(ctx, err)
	}
	defer rows.Close()
	var census store.Census
	for rows.Next() {
		var (
			n     int
			lo    *string
			found []string
			r     rowCols
			id    *string
		)
		if err := rows.Scan(&n, &lo, &found, &id, &r.parent, &r.checkpoint, &r.metadata); err != nil {
			return store.Census{}, b.classify(ctx, err)
		}
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
			return store.Census{}, err
		}
	}
	if err := rows.Err(); err != nil {
		return store.Census{}, b.classify(ctx, err)
	}
	return census, nil
}

// rowCols are the columns of one listed checkpoint.
type rowCols struct {
	id                   string
	parent               *string
	checkpoint, metadata []byte
}

func (r rowCols) row() store.Row {
	out := store.Row{
		ID:         r.id,
		Checkpoint: store.Blob{Type: lgcodec.TypeJSON, Data: r.checkpoint},
		Metadata:   store.Blob{Type: lgcodec.TypeJSON, Data: r.metadata},
	}
	if r.parent != nil {
		out.Parent = *r.parent
	}
	return out
}

// EachValue reads channel's value at each checkpoint in ids, handing each
// blob over straight from the row buffer.
func (b *Backend) EachValue(ctx context.Context, ref store.Ref, channel string, ids []string, fn func(int, store.Blob) error) error {
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
		var blob store.Blob
		switch {
		case typ != nil && *typ != lgcodec.TypeEmpty:
			blob = store.Blob{Type: *typ, Data: rows.RawValues()[2]}
		case inline != nil:
			blob = store.Blob{Type: lgcodec.TypeJSON, Data: inline}
		default:
			blob = store.Blob{Type: lgcodec.TypeEmpty}
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
			if err := fn(i, store.Blob{Missing: true}); err != nil {
				return err
			}
		}
	}
	return nil
}

// EachWrite hands fn channel's writes attached to the checkpoints of ids,
// each value straight from the row buffer.
func (b *Backend) EachWrite(ctx context.Context, ref store.Ref, channel string, ids []string, fn func(store.Write) error) error {
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
			w   store.Write
			typ string
		)
		// The blob column is read raw below: bytea's binary format is the
		// bytes themselves.
		if err := rows.Scan(&w.CheckpointID, &w.TaskID, &w.TaskPath, &w.Idx, &typ, nil); err != nil {
			return b.classify(ctx, err)
		}
		w.Value = store.Blob{Type: typ, Data: rows.RawValues()[5]}
		if err := fn(w); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return b.classify(ctx, err)
	}
	return nil
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
		return false, fmt.Errorf("%w: no checkpoint_writes table in %s; LangGraph's savers create it with the others", store.ErrNotCheckpointStore, b.where())
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

// Ping checks that the database answers and that the checkpoint tables are
// where the configuration says.
func (b *Backend) Ping(ctx context.Context) error {
	var ok bool
	name, blobs := b.name("checkpoints"), b.name("checkpoint_blobs")
	var canRead bool
	err := b.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL,
  coalesce(has_table_privilege(to_regclass($1), 'SELECT') AND has_table_privilege(to_regclass($2), 'SELECT'), false)`,
		name, blobs).Scan(&ok, &canRead)
	if err != nil {
		return b.classify(ctx, err)
	}
	if !ok {
		return fmt.Errorf("%w: no checkpoints and checkpoint_blobs tables in %s", store.ErrNotCheckpointStore, b.where())
	}
	if !canRead {
		return fmt.Errorf("%w: the role may not SELECT from %s and %s; grant it SELECT on both", store.ErrNotCheckpointStore, name, blobs)
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

// Close closes the pool.
func (b *Backend) Close() { b.pool.Close() }

// classify sorts a query error into what the layers above act on: the
// caller's own deadline or cancellation, the database being unreachable, or
// the tables not being there.
func (b *Backend) classify(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("postgres: %w", ctxErr)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "42P01" || pgErr.Code == "3F000": // undefined_table, invalid_schema_name
			return fmt.Errorf("%w: %s", store.ErrNotCheckpointStore, pgErr.Message)
		case pgErr.Code == "42501": // insufficient_privilege: the role lacks a grant
			return fmt.Errorf("%w: %s; grant historyd's role SELECT on the checkpoint tables", store.ErrNotCheckpointStore, pgErr.Message)
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"), // insufficient resources
			strings.HasPrefix(pgErr.Code, "57"), // operator intervention (shutdown, cancel)
			pgErr.Code == "40001", pgErr.Code == "40P01":
			return fmt.Errorf("%w: %s (SQLSTATE %s)", store.ErrUnavailable, pgErr.Message, pgErr.Code)
		}
		return fmt.Errorf("postgres: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, redact(err))
	}
	return fmt.Errorf("postgres: %w", err)
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

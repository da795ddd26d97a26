// Package postgres reads LangGraph checkpoints from the tables the Python
// and JavaScript PostgresSaver write (checkpoints, checkpoint_blobs). It only
// reads: a role granted SELECT on those tables is enough, and it never
// creates or alters anything.
package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/historyd/historyd/store"
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
	schema    string
}

var (
	_ store.Backend       = (*Backend)(nil)
	_ store.Incremental   = (*Backend)(nil)
	_ store.ValueStreamer = (*Backend)(nil)
)

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
	return &Backend{
		pool:   pool,
		schema: cfg.Schema,
		// LangGraph marks graphs with DeltaChannel channels in checkpoint
		// metadata; such threads are refused rather than misread.
		listSQL: `SELECT c.checkpoint_id, c.checkpoint->>'ts', ` + versions + `, ` + deltaSQL + `
FROM ` + checkpoints + ` c WHERE c.thread_id = $1 AND c.checkpoint_ns = $2`,
		// The census and the newer rows come from one statement, hence one
		// snapshot. The smallest id is an index probe; the count reads the
		// thread's index entries, so it is asked for only now and then.
		// The warm path's common case, nothing new: two index probes and
		// the checked ids, a plan that suits every thread, so it is
		// prepared once per connection.
		probeSQL: `SELECT min(checkpoint_id), max(checkpoint_id), ` + strings.Replace(present, "$4", "$3", 1) + `
FROM ` + checkpoints + ` WHERE thread_id = $1 AND checkpoint_ns = $2`,
		sinceSQL: `WITH n AS (SELECT min(checkpoint_id) AS lo, ` + present + ` AS present FROM ` + checkpoints + ` WHERE thread_id = $1 AND checkpoint_ns = $2)
SELECT -1, n.lo, n.present, c.checkpoint_id, c.checkpoint->>'ts', ` + versions + `, coalesce(` + deltaSQL + `, false)
FROM n LEFT JOIN ` + checkpoints + ` c ON c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id > $3`,
		countSQL: `WITH n AS (SELECT count(*) AS n, min(checkpoint_id) AS lo, ` + present + ` AS present FROM ` + checkpoints + ` WHERE thread_id = $1 AND checkpoint_ns = $2)
SELECT n.n, n.lo, n.present, c.checkpoint_id, c.checkpoint->>'ts', ` + versions + `, coalesce(` + deltaSQL + `, false)
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
	}, nil
}

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

// deltaSQL says whether checkpoint c's metadata marks a graph with
// DeltaChannel channels, as LangGraph's savers write it.
const deltaSQL = `(c.metadata ? 'counters_since_delta_snapshot' OR c.metadata ? 'delta_writes_versioned')`

func table(schema, name string) string {
	if schema == "" {
		return pgx.Identifier{name}.Sanitize()
	}
	return pgx.Identifier{schema, name}.Sanitize()
}

// Checkpoints lists the thread's checkpoints with their channel versions.
func (b *Backend) Checkpoints(ctx context.Context, ref store.Ref) ([]store.Checkpoint, error) {
	// Planned with the thread's own statistics, like CheckpointsSince.
	rows, err := b.pool.Query(ctx, b.listSQL, pgx.QueryExecModeSimpleProtocol, ref.ThreadID, ref.Namespace)
	if err != nil {
		return nil, b.classify(ctx, err)
	}
	defer rows.Close()
	var out []store.Checkpoint
	for rows.Next() {
		var (
			id       string
			ts       *string
			versions []byte
			delta    bool
		)
		if err := rows.Scan(&id, &ts, &versions, &delta); err != nil {
			return nil, b.classify(ctx, err)
		}
		c, err := checkpoint(ref, id, ts, versions, delta)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, b.classify(ctx, err)
	}
	return out, nil
}

// CheckpointsSince takes the thread's census and lists the checkpoints
// newer than after, in one statement. Without a count, a probe comes
// first, and when it finds nothing newer it is the whole answer.
func (b *Backend) CheckpointsSince(ctx context.Context, ref store.Ref, since store.Since) (store.Census, []store.Checkpoint, error) {
	q := b.sinceSQL
	if since.Count {
		q = b.countSQL
	}
	verify := since.Verify
	if verify == nil {
		verify = []string{}
	}
	if !since.Count {
		var lo, hi *string
		var present []string
		err := b.pool.QueryRow(ctx, b.probeSQL, ref.ThreadID, ref.Namespace, verify).Scan(&lo, &hi, &present)
		if err != nil {
			return store.Census{}, nil, b.classify(ctx, err)
		}
		if hi == nil || *hi <= since.After {
			census := store.Census{Count: -1, Present: present}
			if lo != nil {
				census.MinID = *lo
			}
			return census, nil, nil
		}
	}
	// Planned with the actual arguments every time (the simple protocol): a
	// generic plan cannot tell that "newer than the newest seen" is a
	// handful of rows, and on a table holding few threads it scans the
	// whole table instead of the index, which makes a read cost the
	// thread's length.
	rows, err := b.pool.Query(ctx, q, pgx.QueryExecModeSimpleProtocol, ref.ThreadID, ref.Namespace, since.After, verify)
	if err != nil {
		return store.Census{}, nil, b.classify(ctx, err)
	}
	defer rows.Close()
	var (
		census store.Census
		out    []store.Checkpoint
	)
	for rows.Next() {
		var (
			n        int
			lo       *string
			present  []string
			id       *string
			ts       *string
			versions []byte
			delta    bool
		)
		if err := rows.Scan(&n, &lo, &present, &id, &ts, &versions, &delta); err != nil {
			return store.Census{}, nil, b.classify(ctx, err)
		}
		census.Count = n
		if census.Present == nil {
			census.Present = present
		}
		if lo != nil {
			census.MinID = *lo
		}
		if id == nil {
			continue
		}
		c, err := checkpoint(ref, *id, ts, versions, delta)
		if err != nil {
			return store.Census{}, nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return store.Census{}, nil, b.classify(ctx, err)
	}
	return census, out, nil
}

func checkpoint(ref store.Ref, id string, ts *string, versions []byte, delta bool) (store.Checkpoint, error) {
	c := store.Checkpoint{ID: id, Delta: delta}
	if ts != nil {
		if t, err := time.Parse(time.RFC3339Nano, *ts); err == nil {
			c.TS = t
		}
	}
	var err error
	if c.Versions, err = parseVersions(versions); err != nil {
		return c, &store.DecodeError{Ref: ref, CheckpointID: id, Channel: "channel_versions", Err: err}
	}
	return c, nil
}

// parseVersions reads channel_versions, whose values are strings in Python
// and numbers or strings in JavaScript. A number is kept as its JSON text,
// which is what the blob table's version column holds.
func parseVersions(raw []byte) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]string{}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("channel_versions is not an object: %w", err)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			out[k] = s
			continue
		}
		out[k] = string(v)
	}
	return out, nil
}

// Values reads channel's value at each checkpoint in ids.
func (b *Backend) Values(ctx context.Context, ref store.Ref, channel string, ids []string) ([]store.Blob, error) {
	out := make([]store.Blob, len(ids))
	err := b.EachValue(ctx, ref, channel, ids, func(i int, blob store.Blob) error {
		blob.Data = bytes.Clone(blob.Data)
		out[i] = blob
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
		case typ != nil && *typ != "empty":
			blob = store.Blob{Type: *typ, Data: rows.RawValues()[2]}
		case inline != nil:
			blob = store.Blob{Type: "json", Data: inline}
		default:
			blob = store.Blob{Type: "empty"}
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
			if err := fn(i, store.Blob{Type: store.BlobMissing}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Ping checks that the database answers and that the checkpoint tables are
// where the configuration says.
func (b *Backend) Ping(ctx context.Context) error {
	var ok bool
	name, blobs := "checkpoints", "checkpoint_blobs"
	if b.schema != "" {
		name = pgx.Identifier{b.schema, "checkpoints"}.Sanitize()
		blobs = pgx.Identifier{b.schema, "checkpoint_blobs"}.Sanitize()
	}
	var canRead bool
	err := b.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL,
  coalesce(has_table_privilege(to_regclass($1), 'SELECT') AND has_table_privilege(to_regclass($2), 'SELECT'), false)`,
		name, blobs).Scan(&ok, &canRead)
	if err != nil {
		return b.classify(ctx, err)
	}
	if !ok {
		where := "the search_path"
		if b.schema != "" {
			where = fmt.Sprintf("schema %q", b.schema)
		}
		return fmt.Errorf("%w: no checkpoints and checkpoint_blobs tables in %s", store.ErrNotCheckpointStore, where)
	}
	if !canRead {
		return fmt.Errorf("%w: the role may not SELECT from %s and %s; grant it SELECT on both", store.ErrNotCheckpointStore, name, blobs)
	}
	return nil
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

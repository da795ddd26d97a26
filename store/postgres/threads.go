package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/store/backend"
)

// Listing threads. LangGraph's checkpoints table has the primary key
// (thread_id, checkpoint_ns, checkpoint_id), and historyd cannot add
// indexes, so the distinct thread ids are found by a loose index scan:
// a recursive query whose every step is one index probe for the next
// thread id after the last one ("the smallest thread_id > $prev"),
// which PostgreSQL 15, lacking skip scans, would otherwise get by reading
// every checkpoint's index entry. Each thread visited then costs one probe
// for its count, oldest and newest ids in the namespace (its own index
// entries) and two row fetches for their timestamps. The walk is lazy:
// it stops after the rows asked for, so a page costs its threads.
//
// A prefix is a range of an index only where the index sorts thread ids
// bytewise: the primary key does where thread_id's collation is bytewise
// (see walkOrder). Under any other collation (ICU's, or the C library's
// en_US.UTF-8, a common default) the ids under a prefix are scattered
// among others ("ACME/1" and "acmecorp/1" among "acme/…"), and a walk
// that visited them would let a tenant's listing depend on other tenants'
// threads: its cursors would name them, its refusals count them, its cost
// grow with them. There the walk ranges over an index an operator created
// on thread_id COLLATE "C" (docs/deploy.md, "Listing threads"), in byte
// order; without one, a listing under prefixes is refused
// (backend.ErrUnorderedPrefixes), and only a listing of every thread, which
// has no one else's to visit, walks the primary key in its own order.

// bytewiseNames are the collations that sort text by its bytes in UTF-8:
// C and POSIX by definition, ucs_basic by code point (UTF-8 preserves code
// point order), and glibc's C.UTF-8, which sorts by code point too.
var bytewiseNames = []string{"C", "POSIX", "ucs_basic", "C.UTF-8", "C.utf8"}

// collation is a row of pg_collation, as the catalog query reads it.
type collation struct {
	Schema   string `json:"schema"`
	Name     string `json:"name"`
	Provider string `json:"provider"` // empty before PostgreSQL 15: libc
	Collate  string `json:"collate"`
}

// bytewise reports whether the collation sorts bytewise in a database
// whose default collation is db.
func (c collation) bytewise(db collation) bool {
	switch {
	case slices.Contains(bytewiseNames[:3], c.Name):
		return true
	case c.Name == "default":
		return (db.Provider == "" || db.Provider == "c") && slices.Contains(bytewiseNames, db.Collate)
	case c.Provider == "c":
		return slices.Contains(bytewiseNames, c.Collate)
	}
	return false
}

// walkOrder is the order a listing walks thread ids in.
type walkOrder struct {
	// collate is the COLLATE clause every comparison and ORDER BY of the
	// walk carries: empty to walk the primary key in thread_id's own
	// collation, else that of an index sorting thread_id bytewise.
	collate string
	// bytewise says the walk is in byte order, so that a prefix is a
	// range of it.
	bytewise bool
	// column names thread_id's collation, for the operator's log.
	column string
}

// walkOrderSQL reads thread_id's collation, the database's default, and
// the collations of the valid, unconditional btree indexes leading with
// thread_id (default operator class, so that ORDER BY can use them).
// to_jsonb reads the provider columns where the server has them (15 and
// later) and nothing where it does not (libc then).
const walkOrderSQL = `SELECT
  jsonb_build_object('schema', cn.nspname, 'name', co.collname, 'provider', to_jsonb(co)->>'collprovider', 'collate', to_jsonb(co)->>'collcollate')::text,
  (SELECT jsonb_build_object('provider', to_jsonb(d)->>'datlocprovider', 'collate', d.datcollate)::text
   FROM pg_database d WHERE d.datname = current_database()),
  (SELECT coalesce(jsonb_agg(jsonb_build_object('schema', n.nspname, 'name', ic.collname,
     'provider', to_jsonb(ic)->>'collprovider', 'collate', to_jsonb(ic)->>'collcollate')), '[]')::text
   FROM pg_index i
   JOIN pg_collation ic ON ic.oid = i.indcollation[0]
   JOIN pg_namespace n ON n.oid = ic.collnamespace
   JOIN pg_opclass oc ON oc.oid = i.indclass[0]
   JOIN pg_class x ON x.oid = i.indexrelid
   JOIN pg_am am ON am.oid = x.relam
   WHERE i.indrelid = a.attrelid AND i.indkey[0] = a.attnum AND i.indisvalid AND i.indisready
     AND i.indpred IS NULL AND am.amname = 'btree' AND oc.opcdefault)
FROM pg_attribute a
LEFT JOIN pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
WHERE a.attrelid = to_regclass($1) AND a.attname = 'thread_id' AND NOT a.attisdropped`

// walkOrder reads how a listing can walk the checkpoints table's thread
// ids. It asks on every listing: one catalog lookup, next to a walk of
// the index, and never stale, so that an index created while historyd
// runs is used from the next listing on.
func (b *Backend) walkOrder(ctx context.Context) (walkOrder, error) {
	var column, db, indexes string
	err := b.pool.QueryRow(ctx, walkOrderSQL, b.name("checkpoints")).Scan(&column, &db, &indexes)
	if errors.Is(err, pgx.ErrNoRows) {
		return walkOrder{}, fmt.Errorf("%w: no checkpoints table with a thread_id column in %s", backend.ErrNotCheckpointStore, b.where())
	}
	if err != nil {
		return walkOrder{}, b.classify(ctx, err)
	}
	var col, dbc collation
	var idx []collation
	for _, j := range []struct {
		text string
		into any
	}{{column, &col}, {db, &dbc}, {indexes, &idx}} {
		if err := json.Unmarshal([]byte(j.text), j.into); err != nil {
			return walkOrder{}, fmt.Errorf("read thread_id's collation: %w", err)
		}
	}
	o := walkOrder{column: col.Name, bytewise: col.bytewise(dbc)}
	if col.Name == "default" {
		o.column = "the database's default, " + dbc.Collate
		if dbc.Provider == "i" {
			o.column = "the database's default, ICU"
		}
	}
	if o.bytewise {
		return o, nil
	}
	for _, c := range idx {
		if c.bytewise(dbc) {
			o.collate = " COLLATE " + pgx.Identifier{c.Schema, c.Name}.Sanitize()
			o.bytewise = true
			break
		}
	}
	return o, nil
}

// threadsSQL walks thread ids from a start (%[2]s: how thread_id compares
// with $1) while they start with the prefix $2, at most $3 of them, in the
// order of thread_id%[3]s (a COLLATE clause, or none), then counts and
// reads the oldest and newest checkpoint in the namespace $4 of each
// visited id; %[1]s is the table.
const threadsSQL = `WITH RECURSIVE walk(tid, k) AS (
  (SELECT thread_id, 1 FROM %[1]s WHERE thread_id%[3]s %[2]s $1 ORDER BY thread_id%[3]s LIMIT 1)
  UNION ALL
  SELECT (SELECT c.thread_id FROM %[1]s c WHERE c.thread_id%[3]s > w.tid ORDER BY c.thread_id%[3]s LIMIT 1), w.k + 1
  FROM walk w WHERE w.tid IS NOT NULL AND w.tid ^@ $2 AND w.k < $3
), visited AS (
  SELECT w.tid, w.k FROM walk w WHERE w.tid IS NOT NULL AND w.tid ^@ $2
)
SELECT v.tid, s.n, f.checkpoint_id, f.head, l.checkpoint_id, l.head
FROM visited v
CROSS JOIN LATERAL (SELECT count(*) AS n, min(c.checkpoint_id) AS lo, max(c.checkpoint_id) AS hi
  FROM %[1]s c WHERE c.thread_id = v.tid AND c.checkpoint_ns = $4) s
LEFT JOIN LATERAL (SELECT c.checkpoint_id, jsonb_build_object('ts', c.checkpoint->'ts')::text AS head
  FROM %[1]s c WHERE c.thread_id = v.tid AND c.checkpoint_ns = $4 AND c.checkpoint_id = s.lo) f ON true
LEFT JOIN LATERAL (SELECT c.checkpoint_id, jsonb_build_object('ts', c.checkpoint->'ts')::text AS head
  FROM %[1]s c WHERE c.thread_id = v.tid AND c.checkpoint_ns = $4 AND c.checkpoint_id = s.hi) l ON true
ORDER BY v.k`

// walk is one statement of a listing: a walk over one range of thread
// ids, with its arguments but the most ids it visits.
type walk struct {
	stmt string
	args []any // $1, $2 and $4
}

// with returns the walk's arguments, limit being $3.
func (w walk) with(limit int) []any { return []any{w.args[0], w.args[1], limit, w.args[2]} }

// walks returns the statements a listing runs, in order: one per range of
// thread ids the listing covers (backend.PrefixRanges), each confined to its
// prefix. Without an order in which a prefix is a range, only a listing of
// every thread can be walked.
func (b *Backend) walks(q backend.ThreadQuery, o walkOrder) ([]walk, error) {
	if !o.bytewise && len(q.Prefixes) > 0 {
		return nil, b.unordered(o)
	}
	cp := table(b.schema, "checkpoints")
	var out []walk
	for _, r := range backend.PrefixRanges(q.Prefixes, q.After) {
		op := ">"
		if r.Inclusive {
			op = ">="
		}
		out = append(out, walk{fmt.Sprintf(threadsSQL, cp, op, o.collate), []any{r.From, r.Prefix, q.Namespace}})
	}
	return out, nil
}

// unordered is the error a listing under prefixes is refused with when
// o is no byte order: it names the index that would make it one.
func (b *Backend) unordered(o walkOrder) error {
	return fmt.Errorf("%w: the collation of thread_id in %s (%s) does not sort bytewise, and no index sorts it so; create one, e.g. CREATE INDEX CONCURRENTLY ON %s (thread_id COLLATE \"C\"), as docs/deploy.md (\"Listing threads\") describes",
		backend.ErrUnorderedPrefixes, b.name("checkpoints"), o.column, b.name("checkpoints"))
}

// PrefixListing reports whether a listing under thread-id prefixes can be
// walked now: nil when thread_id sorts bytewise or an index sorts it so,
// else the error such a listing is refused with (wrapping
// backend.ErrUnorderedPrefixes), which names the index to create. historyd
// serve asks at start, so that an operator whose tenants are confined to
// prefixes learns of the missing index before a caller does.
func (b *Backend) PrefixListing(ctx context.Context) error {
	return retried(nil, func() error {
		o, err := b.walkOrder(ctx)
		if err == nil && !o.bytewise {
			err = b.unordered(o)
		}
		return err
	})
}

// threads lists threads with a loose index scan; see above.
func (b *Backend) threads(ctx context.Context, q backend.ThreadQuery, fn func(backend.ThreadRow) error) (backend.ThreadWalk, error) {
	o, err := b.walkOrder(ctx)
	if err != nil {
		return backend.ThreadWalk{}, err
	}
	ws, err := b.walks(q, o)
	if err != nil {
		return backend.ThreadWalk{}, err
	}
	var tw backend.ThreadWalk
	left := q.Limit
	for _, w := range ws {
		if left == 0 {
			break
		}
		if err := b.walkThreads(ctx, w.stmt, w.with(left), &tw, &left, fn); err != nil {
			return tw, err
		}
	}
	tw.More = left == 0
	return tw, nil
}

// explainThreads returns PostgreSQL's EXPLAIN (ANALYZE, BUFFERS) of the
// first statement a listing q runs: what the benchmark records, and what
// an operator can ask for on their own database. EXPLAIN ANALYZE runs the
// statement, which only reads.
func (b *Backend) explainThreads(ctx context.Context, q backend.ThreadQuery) (string, error) {
	o, err := b.walkOrder(ctx)
	if err != nil {
		return "", err
	}
	ws, err := b.walks(q, o)
	if err != nil {
		return "", err
	}
	if len(ws) == 0 {
		return "", errors.New("postgres: the listing runs no statement (its cursor is past its prefixes)")
	}
	rows, err := b.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+ws[0].stmt, append([]any{pgx.QueryExecModeSimpleProtocol}, ws[0].with(q.Limit)...)...)
	if err != nil {
		return "", b.classify(ctx, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", b.classify(ctx, err)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		return "", b.classify(ctx, err)
	}
	return strings.Join(lines, "\n"), nil
}

// walkThreads runs one walk, handing fn the threads with checkpoints in
// the namespace and counting the visited ones off left.
func (b *Backend) walkThreads(ctx context.Context, stmt string, args []any, w *backend.ThreadWalk, left *int, fn func(backend.ThreadRow) error) error {
	// Planned with its values (the simple protocol): the start and the
	// prefix decide which index range the first step reads.
	rows, err := b.pool.Query(ctx, stmt, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		return b.classify(ctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			tid             string
			n               int64
			firstID, lastID *string
			first, last     []byte
		)
		if err := rows.Scan(&tid, &n, &firstID, &first, &lastID, &last); err != nil {
			return b.classify(ctx, err)
		}
		w.Last = tid
		*left--
		if n == 0 || firstID == nil || lastID == nil {
			continue
		}
		err := fn(backend.ThreadRow{ThreadID: tid, Count: n,
			First: backend.Row{ID: *firstID, Checkpoint: backend.Blob{Type: format.TypeJSON, Data: first}},
			Last:  backend.Row{ID: *lastID, Checkpoint: backend.Blob{Type: format.TypeJSON, Data: last}},
		})
		if err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return b.classify(ctx, err)
	}
	return nil
}

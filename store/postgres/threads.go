package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/lgcodec"
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
// A prefix is a range of the index only where thread_id sorts bytewise
// (see threadOrder); elsewhere the walk visits every thread from the
// cursor on and keeps those under the prefixes.

// bytewiseNames are the collations that sort text by its bytes in UTF-8:
// C and POSIX by definition, ucs_basic by code point (UTF-8 preserves code
// point order), and glibc's C.UTF-8, which sorts by code point too.
var bytewiseNames = []string{"C", "POSIX", "ucs_basic", "C.UTF-8", "C.utf8"}

// threadOrder reports whether the checkpoints table's thread_id column
// sorts bytewise. Under any other collation a prefix is not a contiguous
// range of the index. It asks on every listing: one catalog lookup, next
// to a walk of the index, and never stale.
func (b *Backend) threadOrder(ctx context.Context) (bool, error) {
	// to_jsonb reads the provider columns where the server has them (15
	// and later) and null where it does not (libc then).
	var (
		name, provider, collate *string
		dbProvider, dbCollate   *string
	)
	err := b.pool.QueryRow(ctx, `SELECT co.collname, to_jsonb(co)->>'collprovider', to_jsonb(co)->>'collcollate',
  (SELECT to_jsonb(d)->>'datlocprovider' FROM pg_database d WHERE d.datname = current_database()),
  (SELECT d.datcollate FROM pg_database d WHERE d.datname = current_database())
FROM pg_attribute a LEFT JOIN pg_collation co ON co.oid = a.attcollation
WHERE a.attrelid = to_regclass($1) AND a.attname = 'thread_id' AND NOT a.attisdropped`, b.name("checkpoints")).
		Scan(&name, &provider, &collate, &dbProvider, &dbCollate)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("%w: no checkpoints table with a thread_id column in %s", store.ErrNotCheckpointStore, b.where())
	}
	if err != nil {
		return false, b.classify(ctx, err)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	bytewise := false
	switch {
	case slices.Contains(bytewiseNames[:3], str(name)):
		bytewise = true
	case str(name) == "default":
		bytewise = (dbProvider == nil || str(dbProvider) == "c") && slices.Contains(bytewiseNames, str(dbCollate))
	case str(provider) == "c":
		bytewise = slices.Contains(bytewiseNames, str(collate))
	}
	return bytewise, nil
}

// threadsSQL walks thread ids from a start (%[2]s: how thread_id compares
// with $1) while they pass %[3]s (the prefix $2), at most $3 of them, then
// counts and reads the oldest and newest checkpoint in the namespace $4 of
// each visited id that %[4]s keeps (a prefix filter, where the walk could
// not range over it); %[1]s is the table.
const threadsSQL = `WITH RECURSIVE walk(tid, k) AS (
  (SELECT thread_id, 1 FROM %[1]s WHERE %[2]s ORDER BY thread_id LIMIT 1)
  UNION ALL
  SELECT (SELECT c.thread_id FROM %[1]s c WHERE c.thread_id > w.tid ORDER BY c.thread_id LIMIT 1), w.k + 1
  FROM walk w WHERE w.tid IS NOT NULL AND %[3]s AND w.k < $3
), visited AS (
  SELECT w.tid, w.k, %[4]s AS kept FROM walk w WHERE w.tid IS NOT NULL AND %[3]s
)
SELECT v.tid, v.kept, s.n, f.checkpoint_id, f.head, l.checkpoint_id, l.head
FROM visited v
CROSS JOIN LATERAL (SELECT count(*) AS n, min(c.checkpoint_id) AS lo, max(c.checkpoint_id) AS hi
  FROM %[1]s c WHERE c.thread_id = v.tid AND c.checkpoint_ns = $4 AND v.kept) s
LEFT JOIN LATERAL (SELECT c.checkpoint_id, jsonb_build_object('ts', c.checkpoint->'ts')::text AS head
  FROM %[1]s c WHERE c.thread_id = v.tid AND c.checkpoint_ns = $4 AND c.checkpoint_id = s.lo) f ON true
LEFT JOIN LATERAL (SELECT c.checkpoint_id, jsonb_build_object('ts', c.checkpoint->'ts')::text AS head
  FROM %[1]s c WHERE c.thread_id = v.tid AND c.checkpoint_ns = $4 AND c.checkpoint_id = s.hi) l ON true
ORDER BY v.k`

// walk is one statement of a listing: a walk over one range of thread ids
// (or, where thread_id does not sort bytewise, over all of them from the
// cursor on), with its arguments but the most ids it visits.
type walk struct {
	stmt string
	args []any // $1, $2 and $4
}

// with returns the walk's arguments, limit being $3.
func (w walk) with(limit int) []any { return []any{w.args[0], w.args[1], limit, w.args[2]} }

// walks returns the statements a listing runs, in order.
func (b *Backend) walks(q store.ThreadQuery, bytewise bool) []walk {
	cp := table(b.schema, "checkpoints")
	if !bytewise {
		// One walk over every thread from the cursor on, in the index's
		// order, keeping those under the prefixes.
		var after, prefixes any
		if q.After != "" {
			after = q.After
		}
		if len(q.Prefixes) > 0 {
			prefixes = q.Prefixes
		}
		return []walk{{fmt.Sprintf(threadsSQL, cp, "($1::text IS NULL OR thread_id > $1)", "true", "($2::text[] IS NULL OR w.tid ^@ ANY($2::text[]))"),
			[]any{after, prefixes, q.Namespace}}}
	}
	var out []walk
	for _, r := range store.PrefixRanges(q.Prefixes, q.After) {
		op := ">"
		if r.Inclusive {
			op = ">="
		}
		out = append(out, walk{fmt.Sprintf(threadsSQL, cp, "thread_id "+op+" $1", "w.tid ^@ $2", "true"), []any{r.From, r.Prefix, q.Namespace}})
	}
	return out
}

// Threads implements store.Backend with a loose index scan; see above.
func (b *Backend) Threads(ctx context.Context, q store.ThreadQuery, fn func(store.ThreadRow) error) (store.ThreadWalk, error) {
	bytewise, err := b.threadOrder(ctx)
	if err != nil {
		return store.ThreadWalk{}, err
	}
	var tw store.ThreadWalk
	left := q.Limit
	for _, w := range b.walks(q, bytewise) {
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

// ExplainThreads returns PostgreSQL's EXPLAIN (ANALYZE, BUFFERS) of the
// first statement a listing q runs: what the benchmark records, and what
// an operator can ask for on their own database. EXPLAIN ANALYZE runs the
// statement, which only reads.
func (b *Backend) ExplainThreads(ctx context.Context, q store.ThreadQuery) (string, error) {
	bytewise, err := b.threadOrder(ctx)
	if err != nil {
		return "", err
	}
	ws := b.walks(q, bytewise)
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

// walkThreads runs one walk, handing fn the kept threads with
// checkpoints in the namespace and counting the visited ones off left.
func (b *Backend) walkThreads(ctx context.Context, stmt string, args []any, w *store.ThreadWalk, left *int, fn func(store.ThreadRow) error) error {
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
			kept            bool
			n               int64
			firstID, lastID *string
			first, last     []byte
		)
		if err := rows.Scan(&tid, &kept, &n, &firstID, &first, &lastID, &last); err != nil {
			return b.classify(ctx, err)
		}
		w.Last = tid
		*left--
		if !kept || n == 0 || firstID == nil || lastID == nil {
			continue
		}
		err := fn(store.ThreadRow{ThreadID: tid, Count: n,
			First: store.Row{ID: *firstID, Checkpoint: store.Blob{Type: lgcodec.TypeJSON, Data: first}},
			Last:  store.Row{ID: *lastID, Checkpoint: store.Blob{Type: lgcodec.TypeJSON, Data: last}},
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

package gen

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/langgraph/saver"
)

// ManyThreads is the store the Threads measurement lists: N threads in a
// schema of their own, in Python PostgresSaver's layout (its tables, by
// lgsaver's DDL, and its checkpoint rows), written by PostgreSQL itself
// from generate_series, since a million threads written row by row from Go
// would take most of the benchmark. Only the checkpoints table is filled:
// listing threads reads nothing else.
//
// Thread i is "tenant-<i mod 50>/<md5 of i>", so each of 50 tenants has
// N/50 threads and ids sort in no relation to time; it has 1 + i mod 5
// checkpoints (3 on average), 7 s apart, the last of them at a time spread
// over 60 days from 2026-10-01, each with UUIDv6-shaped, time-ordered ids,
// "ts", "channel_versions", "versions_seen" and "updated_channels" as
// format 4 writes them, and metadata with source and step.
type ManyThreads struct {
	// Schema holds the tables.
	Schema string
	// N is the number of threads.
	N int
}

// Tenants is how many tenant prefixes ManyThreads spreads threads over.
const Tenants = 50

// ActivityUntil is when the last checkpoints of ManyThreads end: their
// times are spread over the 60 days before it.
var ActivityUntil = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// Prefix returns tenant t's thread-id prefix.
func (m ManyThreads) Prefix(t int) string { return fmt.Sprintf("tenant-%02d/", t%Tenants) }

// Checkpoints is how many checkpoints the threads hold in all.
func (m ManyThreads) Checkpoints() int {
	n := 0
	for i := 1; i <= m.N; i++ {
		n += 1 + i%5
	}
	return n
}

// Exists reports whether the schema holds exactly these threads.
func (m ManyThreads) Exists(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{m.Schema, "checkpoints"}.Sanitize()).Scan(&ok)
	if err != nil || !ok {
		return false, err
	}
	var rows int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{m.Schema, "checkpoints"}.Sanitize()).Scan(&rows); err != nil {
		return false, err
	}
	return rows == m.Checkpoints(), nil
}

// Write drops the schema, creates it with the saver's tables and fills
// them, then runs VACUUM ANALYZE as autovacuum would have on a store that
// has been running.
func (m ManyThreads) Write(ctx context.Context, conn *pgx.Conn) error {
	q := pgx.Identifier{m.Schema}.Sanitize()
	stmts := []string{`DROP SCHEMA IF EXISTS ` + q + ` CASCADE`, `CREATE SCHEMA ` + q}
	stmts = append(stmts, saver.PostgresPython.DDL(q)...)
	stmts = append(stmts, fmt.Sprintf(`INSERT INTO %[1]s.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata)
SELECT tid, '', cid, lag(cid) OVER (PARTITION BY tid ORDER BY k), NULL,
  jsonb_build_object('v', 4, 'id', cid, 'ts', to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
    'channel_versions', jsonb_build_object('messages', lpad(k::text, 32, '0') || '.0.5', '__start__', lpad(k::text, 32, '0') || '.0.5'),
    'versions_seen', '{}'::jsonb, 'updated_channels', CASE WHEN k = n THEN '["messages"]' ELSE '["branch:to:agent","messages"]' END::jsonb,
    'channel_values', '{}'::jsonb),
  jsonb_build_object('source', CASE WHEN k = 1 THEN 'input' ELSE 'loop' END, 'step', k - 2)
FROM (
  SELECT format('tenant-%%s/%%s', lpad((i %% %[3]d)::text, 2, '0'), md5(i::text)) AS tid, k, n,
    last - (n - k) * interval '7 seconds' AS ts
  FROM (SELECT i, 1 + i %% 5 AS n,
      timestamptz '2026-10-01 00:00:00+00' + ((hashtext(i::text)::bigint & 2147483647) %% (60 * 86400)) * interval '1 second' AS last
    FROM generate_series(1, %[2]d) AS i) th,
  generate_series(1, n) AS k
) s,
LATERAL (SELECT lpad(to_hex((extract(epoch FROM ts) * 1000000)::bigint), 15, '0') AS hx) h,
LATERAL (SELECT substr(hx, 1, 8) || '-' || substr(hx, 9, 4) || '-6' || substr(hx, 13, 3) || '-8' || lpad(to_hex(k), 3, '0') || '-' || substr(md5(tid), 1, 12) AS cid) c`,
		q, m.N, Tenants))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%.80s…: %w", s, err)
		}
	}
	for _, t := range []string{"checkpoints", "checkpoint_blobs", "checkpoint_writes"} {
		if _, err := conn.Exec(ctx, `VACUUM ANALYZE `+pgx.Identifier{m.Schema, t}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

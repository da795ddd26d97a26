package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/historyd/historyd/bench/gen"
	"github.com/historyd/historyd/bench/load"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/postgres"
)

// threadsSchema holds the million threads the Threads rows list, apart
// from the other threads.
const threadsSchema = "bench_threads"

// threadsRequests is how many requests each Threads row times, one at a
// time.
const threadsRequests = 30

// threadsList measures Threads on a store of a million threads (rows T1–
// T6): pages by thread id from the start and from a token, under a tenant
// prefix, with a selective time filter, newest first under a prefix small
// enough to sort, and newest first over the whole store (refused). It
// records the plan of a page's statement, EXPLAIN (ANALYZE, BUFFERS), in
// threads-explain.txt and results.json.
//
// It is one function because its six rows share one store, one client and
// one tenant setup, and read as one table.
func (r *runner) threadsList(ctx context.Context) error {
	m := gen.ManyThreads{Schema: threadsSchema, N: r.plan.manyThreads}
	conn, err := pgx.Connect(ctx, r.cfg.DSN)
	if err != nil {
		return err
	}
	ok, err := m.Exists(ctx, conn)
	if err == nil && (!ok || r.cfg.Regenerate) {
		t0 := time.Now()
		r.logf("generating %d threads (%d checkpoints) in schema %s", m.N, m.Checkpoints(), m.Schema)
		err = m.Write(ctx, conn)
		r.detail("threads_generated_seconds", time.Since(t0).Seconds())
	}
	var size string
	if err == nil {
		err = conn.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size($1))`, pgx.Identifier{m.Schema, "checkpoints"}.Sanitize()).Scan(&size)
	}
	conn.Close(context.Background())
	if err != nil {
		return err
	}
	desc := fmt.Sprintf("%d threads, %d checkpoints (%s with indexes)", m.N, m.Checkpoints(), size)

	b, err := postgres.Open(ctx, postgres.Config{DSN: r.cfg.DSN, Schema: m.Schema})
	if err != nil {
		return err
	}
	plans := map[string]string{}
	for name, q := range map[string]backend.ThreadQuery{
		"page of 100, by thread id":  {Limit: 100},
		"page of 100 under a prefix": {Prefixes: []string{m.Prefix(7)}, Limit: 100},
	} {
		if plans[name], err = b.ExplainThreads(ctx, q); err != nil {
			b.Close()
			return err
		}
	}
	b.Close()
	r.detail("threads_explain", plans)
	var text string
	for _, name := range []string{"page of 100, by thread id", "page of 100 under a prefix"} {
		text += fmt.Sprintf("-- %s\n%s\n\n", name, plans[name])
	}
	if err := os.WriteFile(filepath.Join(r.cfg.Work, "threads-explain.txt"), []byte(text), 0o644); err != nil {
		return err
	}

	s, _, err := r.start(ctx, "threads", false, "HISTORYD_SCHEMA="+m.Schema)
	if err != nil {
		return err
	}
	defer s.Stop()
	c := historydv1.NewThreadHistoryClient(s.Conn)
	first, err := c.Threads(ctx, &historydv1.ThreadsRequest{PageSize: 100})
	if err != nil {
		return err
	}
	if len(first.Threads) != 100 || first.NextPageToken == "" {
		return fmt.Errorf("first page: %d threads, token %q", len(first.Threads), first.NextPageToken)
	}
	// The store's last hour of activity, a filter few threads pass.
	recent := timestamppb.New(gen.ActivityUntil.Add(-time.Hour))
	small := m.Prefix(7) + "0" // about N/800 threads: within the sort's bound
	results := map[string]any{}
	for _, row := range []struct {
		id, what string
		req      *historydv1.ThreadsRequest
		want     codes.Code
	}{
		{"T1", "the first page of 100, by thread id", &historydv1.ThreadsRequest{PageSize: 100}, codes.OK},
		{"T2", "the next page of 100, from the first page's token", &historydv1.ThreadsRequest{PageSize: 100, PageToken: first.NextPageToken}, codes.OK},
		{"T3", fmt.Sprintf("a page of 100 under one tenant's prefix (%s, %d threads)", m.Prefix(7), m.N/gen.Tenants),
			&historydv1.ThreadsRequest{PageSize: 100, ThreadIdPrefix: m.Prefix(7)}, codes.OK},
		{"T4", "a call with a time filter few threads pass (last activity in the store's last hour): 10,000 threads visited, a short page and a token",
			&historydv1.ThreadsRequest{PageSize: 100, LastActivityAfter: recent}, codes.OK},
		{"T5", fmt.Sprintf("newest first under %s (%d threads sorted)", small, m.N/gen.Tenants/16),
			&historydv1.ThreadsRequest{PageSize: 100, ThreadIdPrefix: small, Order: historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY}, codes.OK},
		{"T6", "newest first over the whole store: refused (FAILED_PRECONDITION) after visiting 10,001 threads",
			&historydv1.ThreadsRequest{PageSize: 100, Order: historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY}, codes.FailedPrecondition},
	} {
		var listed int
		var last error
		res := load.Drive(ctx, 1, threadsRequests, 0, func(ctx context.Context, _, _ int) error {
			resp, err := c.Threads(ctx, row.req)
			if status.Code(err) != row.want {
				last = fmt.Errorf("%s: %v, want %v", row.id, err, row.want)
				return last
			}
			listed = len(resp.GetThreads())
			return nil
		})
		if res.Errors > 0 {
			return errors.Join(last, fmt.Errorf("%d of %d requests failed", res.Errors, res.Requests))
		}
		results[row.id] = res
		what := fmt.Sprintf("%s; %d listed", msText(res.P50), listed)
		if row.want != codes.OK {
			what = msText(res.P50) + " to the refusal"
		}
		r.add(Row{ID: row.id, What: fmt.Sprintf("Threads on %s: %s", desc, row.what),
			Historyd: fmt.Sprintf("p50 %s (p99 %s, %d requests at c=1)", what, msText(res.P99), res.Requests), Load1: res.Load1})
	}
	r.detail("threads", results)
	return nil
}

package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
)

// TestThroughPgBouncer serves a thread through Debian's PgBouncer with its
// stock settings, in transaction mode (historyd serve --pooler transaction,
// and --pooler none, which historyd finds out and warns of) and in session
// mode (--pooler session), as a role granted SELECT only,
// to 8 concurrent clients making every kind of call. Every call must
// succeed with exactly the answer a historyd connected to PostgreSQL
// directly gives.
func TestThroughPgBouncer(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	dsn := sharedDSN(t)
	pool := connect(t, dsn)
	schema := newSchema(t, pool, "pooler")
	th := writeThread(t, pool, pgx.Identifier{schema}.Sanitize(), "pooled-rivers", rivers)

	direct := testbin.Start(t, bin, "--dsn", dsn, "--schema", schema)
	want := answers(t, historydv1.NewThreadHistoryClient(dial(t, direct.Addr)), th.id, len(th.turns))
	if err := th.checkSnapshots(want.all); err != nil {
		t.Fatalf("the direct historyd's answer is wrong: %v", err)
	}

	for _, mode := range []struct{ name, pooler, env string }{
		{"transaction", "transaction", "HISTORYD_TEST_POOLER_TX_DSN"},
		{"session", "session", "HISTORYD_TEST_POOLER_SESSION_DSN"},
		// Not told of the transaction pooler, historyd finds it.
		{"transaction, --pooler none", "none", "HISTORYD_TEST_POOLER_TX_DSN"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			h := testbin.Start(t, bin, "--dsn", poolerDSN(t, pool, schema, mode.env), "--schema", schema, "--pooler", mode.pooler)
			conn := dial(t, h.Addr)
			waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
			c := historydv1.NewThreadHistoryClient(conn)
			const clients, rounds = 8, 25
			var (
				mu     sync.Mutex
				calls  int
				failed []error
				wg     sync.WaitGroup
			)
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						got, n, err := answersErr(c, th.id, len(th.turns))
						if err == nil {
							err = want.diff(got)
						}
						mu.Lock()
						calls += n
						if err != nil {
							failed = append(failed, err)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			t.Logf("through PgBouncer in %s mode: %d calls from %d clients, %d rounds failed", mode.name, calls, clients, len(failed))
			if len(failed) > 0 {
				t.Fatalf("%d of %d rounds failed; first: %v", len(failed), clients*rounds, failed[0])
			}
			warned := strings.Count(h.Logs.String(), "transaction pooler that --pooler does not name")
			if want := map[bool]int{true: 1, false: 0}[mode.pooler == "none"]; warned != want {
				t.Errorf("%d warnings of an unnamed transaction pooler, want %d", warned, want)
			}
			h.RequireRunning(t)
		})
	}
}

// poolerDSN is the shared test database through the PgBouncer the variable
// env names (scripts/test.sh starts it), as the role PgBouncer lets in,
// granted SELECT on schema's checkpoint tables only.
func poolerDSN(t *testing.T, pool *pgxpool.Pool, schema, env string) string {
	t.Helper()
	dsn, role := os.Getenv(env), os.Getenv("HISTORYD_TEST_POOLER_ROLE")
	if dsn == "" || role == "" {
		t.Fatalf("%s and HISTORYD_TEST_POOLER_ROLE are not set: run `make test` (scripts/test.sh starts PgBouncer with scripts/pg-test.sh pooler start)", env)
	}
	grantSelect(t, pool, schema, role)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s must be a URL: %v", env, err)
	}
	u.User = url.User(role)
	return u.String()
}

// grantSelect grants role USAGE on schema and SELECT on its tables.
func grantSelect(t *testing.T, pool *pgxpool.Pool, schema, role string) {
	t.Helper()
	q, r := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{role}.Sanitize()
	for _, stmt := range []string{"GRANT USAGE ON SCHEMA " + q + " TO " + r, "GRANT SELECT ON ALL TABLES IN SCHEMA " + q + " TO " + r} {
		if _, err := pool.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// answerSet is every answer historyd gives about one thread.
type answerSet struct {
	all    *historydv1.SnapshotsResponse
	one    []*historydv1.SnapshotResponse // turn 1..n, and turn n+1 (no such turn)
	turns  *historydv1.TurnsResponse
	stream []*historydv1.StreamSnapshotsResponse
}

// answers asks for every answer, failing t on an error.
func answers(t *testing.T, c historydv1.ThreadHistoryClient, thread string, turns int) answerSet {
	t.Helper()
	a, _, err := answersErr(c, thread, turns)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// answersErr asks for every answer about thread, and returns them with the
// number of calls made.
func answersErr(c historydv1.ThreadHistoryClient, thread string, turns int) (answerSet, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var a answerSet
	var err error
	calls := 1
	if a.all, err = c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread}); err != nil {
		return a, calls, fmt.Errorf("Snapshots: %w", err)
	}
	for n := int32(1); n <= int32(turns)+1; n++ {
		calls++
		one, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: n, Keys: []string{"area_km2", "name", "summary"}})
		if err != nil {
			return a, calls, fmt.Errorf("Snapshot turn %d: %w", n, err)
		}
		a.one = append(a.one, one)
	}
	calls++
	if a.turns, err = c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread, IncludeKeysWritten: true}); err != nil {
		return a, calls, fmt.Errorf("Turns: %w", err)
	}
	calls++
	s, err := c.StreamSnapshots(ctx, &historydv1.StreamSnapshotsRequest{ThreadId: thread, FromTurn: 2})
	if err != nil {
		return a, calls, fmt.Errorf("StreamSnapshots: %w", err)
	}
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return a, calls, fmt.Errorf("StreamSnapshots: %w", err)
		}
		a.stream = append(a.stream, m)
	}
	return a, calls, nil
}

// diff says how got differs from a, or returns nil.
func (a answerSet) diff(got answerSet) error {
	if !proto.Equal(a.all, got.all) {
		return fmt.Errorf("Snapshots differs: %v, want %v", got.all, a.all)
	}
	if len(got.one) != len(a.one) {
		return fmt.Errorf("%d Snapshot answers, want %d", len(got.one), len(a.one))
	}
	for i := range a.one {
		if !proto.Equal(a.one[i], got.one[i]) {
			return fmt.Errorf("Snapshot turn %d differs: %v, want %v", i+1, got.one[i], a.one[i])
		}
	}
	if !proto.Equal(a.turns, got.turns) {
		return fmt.Errorf("Turns differs: %v, want %v", got.turns, a.turns)
	}
	if len(got.stream) != len(a.stream) {
		return fmt.Errorf("StreamSnapshots sent %d messages, want %d", len(got.stream), len(a.stream))
	}
	for i := range a.stream {
		if !proto.Equal(a.stream[i], got.stream[i]) {
			return fmt.Errorf("StreamSnapshots message %d differs: %v, want %v", i, got.stream[i], a.stream[i])
		}
	}
	return nil
}

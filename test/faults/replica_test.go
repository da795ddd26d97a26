package faults

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// TestHotStandby serves from a real hot standby (pg_basebackup -R of a
// cluster of the test's own, started read-only and streaming from it), as
// a role granted SELECT only, and shows what the README says of replicas:
// a turn written on the primary is served once the standby has replayed
// it, and not before; a turn pruned on the primary is still served until
// the standby replays the deletion. Replay is paused with
// pg_wal_replay_pause() after the standby has received the WAL, so that
// what historyd answers in between is the standby's lag and nothing else.
func TestHotStandby(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	c := startCluster(t, 0)
	primary := connect(t, c.DSN)
	public := pgx.Identifier{"public"}.Sanitize()
	checkpointTables(t, primary, public)
	// Roles and grants replicate like everything else.
	for _, stmt := range []string{"CREATE ROLE historyd_standby LOGIN", "GRANT SELECT ON ALL TABLES IN SCHEMA public TO historyd_standby"} {
		if _, err := primary.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	ref := backend.Ref{ThreadID: "replicated"}
	w := newWriter(t, primary, public)
	b := storetest.NewBuilder(w, ref)
	var written []storetest.Written
	for _, turn := range rivers[:3] {
		written = append(written, b.Turn(turn))
	}

	c.run("standby", "start")
	standbyDSN := c.env("HISTORYD_TEST_STANDBY_DSN")
	standby := connect(t, standbyDSN)
	var inRecovery bool
	if err := standby.QueryRow(context.Background(), "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("the standby is not in recovery: %v, %v", inRecovery, err)
	}
	u, err := url.Parse(standbyDSN)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User("historyd_standby")
	h := testbin.Start(t, bin, "--dsn", u.String())
	conn := dial(t, h.Addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	client := historydv1.NewThreadHistoryClient(conn)

	turns := func() *historydv1.TurnsResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := client.Turns(ctx, &historydv1.TurnsRequest{ThreadId: ref.ThreadID})
		if err != nil {
			t.Fatalf("Turns from the standby: %v", err)
		}
		return r
	}
	// waitFor polls Turns until ok holds, and says how long that took.
	waitFor := func(what string, ok func(*historydv1.TurnsResponse) bool) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			r := turns()
			if ok(r) {
				return time.Since(start)
			}
			if time.Since(start) > 15*time.Second {
				t.Fatalf("%s: not seen within 15s; last answer %v", what, r)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	retained := func(r *historydv1.TurnsResponse, n int) bool {
		return int(r.GetTotal()) >= n && r.GetTurns()[n-1].GetRetained()
	}

	// Replicated: the three turns written before the standby was made,
	// and a fourth written while it streams.
	if r := turns(); r.GetTotal() != 3 {
		t.Fatalf("standby serves %d turns, want the 3 written: %v", r.GetTotal(), r)
	}
	written = append(written, b.Turn(rivers[3]))
	took := waitFor("turn 4, written on the primary", func(r *historydv1.TurnsResponse) bool { return r.GetTotal() == 4 })
	t.Logf("turn 4 served from the standby %v after it was written on the primary", took.Round(time.Millisecond))

	// Replay paused: a new turn and the pruning of turn 1 reach the
	// standby's WAL but not its data.
	execSQL(t, standby, "SELECT pg_wal_replay_pause()")
	waitQuery(t, standby, "SELECT pg_get_wal_replay_pause_state() = 'paused'")
	written = append(written, b.Turn(rivers[4]))
	w.Delete(ref, written[0].IDs)
	var lsn string
	if err := primary.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, standby, fmt.Sprintf("SELECT pg_last_wal_receive_lsn() >= '%s'::pg_lsn", lsn))
	for range 3 { // across the cache's refreshes and recounts (every second)
		r := turns()
		if r.GetTotal() != 4 || !retained(r, 1) {
			t.Fatalf("with replay paused after the primary wrote turn 5 and pruned turn 1, the standby answers %v; want 4 turns, turn 1 retained", r)
		}
		time.Sleep(600 * time.Millisecond)
	}
	var primaryTotal int
	if err := primary.QueryRow(context.Background(), "SELECT count(*) FROM checkpoints WHERE thread_id = $1 AND checkpoint_id = ANY($2)", ref.ThreadID, written[0].IDs).Scan(&primaryTotal); err != nil || primaryTotal != 0 {
		t.Fatalf("turn 1's checkpoints on the primary: %d, %v; want none left", primaryTotal, err)
	}

	// Replay resumed: both show.
	execSQL(t, standby, "SELECT pg_wal_replay_resume()")
	took = waitFor("turn 5 and the pruning of turn 1, once replay resumed", func(r *historydv1.TurnsResponse) bool {
		return r.GetTotal() == 5 && !retained(r, 1) && retained(r, 2) && retained(r, 5)
	})
	t.Logf("turn 5 and turn 1's pruning served %v after replay resumed", took.Round(time.Millisecond))
	h.RequireRunning(t)
}

func execSQL(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// waitQuery polls a query returning one boolean until it is true.
func waitQuery(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var ok bool
		if err := pool.QueryRow(context.Background(), sql).Scan(&ok); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still false after 15s", sql)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package faults

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// readyz returns /readyz's status code, or 0 when it does not answer.
func readyz(addr string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestLockedTableNotReady holds LOCK TABLE checkpoints (ACCESS EXCLUSIVE,
// as a migration's ALTER TABLE takes) for longer than a call may wait:
// every read blocks on it, and so does the health probe, which has a
// deadline, so health turns NOT_SERVING and /readyz 503 while the lock is
// held, and both come back once it is released.
func TestLockedTableNotReady(t *testing.T) {
	skipIfShort(t)
	bin := buildHistoryd(t)
	shared := sharedDSN(t)
	pool := connect(t, shared)
	schema := newSchema(t, pool, "lock")
	q := pgx.Identifier{schema}.Sanitize()
	th := writeThread(t, pool, q, "locked", rivers)
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	h := startHistoryd(t, bin, "--dsn", shared, "--schema", schema, "--metrics-listen", metrics)
	conn := dial(t, h.addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	if code := readyz(metrics); code != http.StatusOK {
		t.Fatalf("/readyz before the lock: %d", code)
	}

	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE "+q+".checkpoints"); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	// A call meets the lock and times out.
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = historydv1.NewThreadHistoryClient(conn).Snapshot(cctx, &historydv1.SnapshotRequest{ThreadId: th.id + "-new", Turn: 1})
	cancel()
	if err == nil {
		t.Fatal("a call answered while the checkpoints table was locked")
	}
	notServing := waitHealth(t, conn, healthpb.HealthCheckResponse_NOT_SERVING, 8*time.Second)
	t.Logf("health NOT_SERVING %v after the lock was taken", notServing.Sub(locked).Round(time.Millisecond))
	if code := readyz(metrics); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while the table is locked: %d, want 503", code)
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 8*time.Second)
	if code := readyz(metrics); code != http.StatusOK {
		t.Errorf("/readyz after the lock was released: %d, want 200", code)
	}
	resp, err := historydv1.NewThreadHistoryClient(conn).Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: 2})
	if err != nil {
		t.Fatalf("after the lock: %v", err)
	}
	if err := th.checkSnapshot(2, resp); err != nil {
		t.Error(err)
	}
	h.requireRunning(t)
}

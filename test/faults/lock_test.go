package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
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
// held, and both come back once it is released. The call that timed out
// says the store had not answered, which is what happened.
func TestLockedTableNotReady(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	shared := sharedDSN(t)
	pool := connect(t, shared)
	schema := newSchema(t, pool, "lock")
	q := pgx.Identifier{schema}.Sanitize()
	th := writeThread(t, pool, q, "locked", rivers)
	metrics := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	h := testbin.Start(t, bin, "--dsn", shared, "--schema", schema, "--metrics-listen", metrics, "--max-call-duration", "1s")
	conn := dial(t, h.Addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	client := historydv1.NewThreadHistoryClient(conn)
	if _, err := client.Snapshot(context.Background(), &historydv1.SnapshotRequest{ThreadId: th.id, Turn: 1}); err != nil {
		t.Fatal(err) // the thread's index is cached: its next read is a probe statement
	}
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
	// A call meets the lock and runs into the server's deadline cap, with
	// its statement unanswered, and says so.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = client.Snapshot(cctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: 1})
	cancel()
	if st := status.Convert(err); st.Code() != codes.DeadlineExceeded || !strings.HasSuffix(st.Message(), "deadline exceeded before the checkpoint store answered") {
		t.Errorf("a call while the checkpoints table was locked: %v, want DEADLINE_EXCEEDED saying the store had not answered", err)
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
	resp, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: 2})
	if err != nil {
		t.Fatalf("after the lock: %v", err)
	}
	if err := th.checkSnapshot(2, resp); err != nil {
		t.Error(err)
	}
	h.RequireRunning(t)
}

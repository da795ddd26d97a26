package faults

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
)

// hugeThread has 100,000 checkpoints: 500 turns of 200 super-steps each.
// Its messages change twice a turn (the question, the answer), so it holds
// 1,000 messages versions, the longest 1,000 messages; the AI answers carry
// 200 bytes of text each, for about 113 MiB of messages blobs in all, every
// one of which historyd must count the human messages of once. Each turn's
// state holds 1,000 integers.
var hugeThread = generated{ID: "huge", Turns: 500, PerTurn: 200, BigItems: 1000, Filler: 200}

// maxPeakRSS bounds historyd's peak resident memory while it serves
// hugeThread. What it must hold at once is the listing of 100,000
// checkpoints (an id, a timestamp and two channel versions each, some
// tens of MB as Go values) and the messages blobs it counts; a server
// whose memory grew with the thread's whole size rather than with what one
// step holds would pass 512 MiB here, and would be killed in a typical
// container long before a real thread's history grew this large.
const maxPeakRSS = 512 << 20

// TestHundredThousandCheckpoints serves Snapshot and Turns from a thread of
// 100,000 checkpoints and checks that the answers are right, the process
// stays up, and its peak resident memory (VmHWM) stays under maxPeakRSS; a
// call may instead be refused with ResourceExhausted, but never crash the
// server.
func TestHundredThousandCheckpoints(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	pool := connect(t, sharedDSN(t))
	schema := newSchema(t, pool, "huge")
	fillThread(t, pool, pgx.Identifier{schema}.Sanitize(), hugeThread)
	var blobBytes int64
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(sum(octet_length(blob)), 0) FROM `+pgx.Identifier{schema}.Sanitize()+`.checkpoint_blobs WHERE channel = 'messages'`).Scan(&blobBytes); err != nil {
		t.Fatal(err)
	}
	t.Logf("messages blobs: %d MiB", blobBytes>>20)

	h := testbin.Start(t, bin, "--dsn", sharedDSN(t), "--schema", schema)
	conn := dial(t, h.Addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	client := historydv1.NewThreadHistoryClient(conn)
	idle := h.PeakRSS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	exhausted := func(what string, err error) bool {
		t.Helper()
		if status.Code(err) == codes.ResourceExhausted {
			t.Logf("%s: refused: %v", what, err)
			h.RequireRunning(t)
			return true
		}
		return false
	}

	// The first call reads and counts the whole thread.
	start := time.Now()
	last := int32(hugeThread.Turns)
	resp, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: hugeThread.ID, Turn: last})
	first := time.Since(start)
	switch {
	case exhausted("first Snapshot", err):
	case err != nil:
		h.RequireRunning(t)
		t.Fatalf("Snapshot of turn %d: %v", last, err)
	default:
		if resp.GetTotal() != last || len(resp.GetRetainedTurns()) != hugeThread.Turns {
			t.Errorf("Snapshot: total %d, %d retained turns; want %d, %d", resp.GetTotal(), len(resp.GetRetainedTurns()), last, hugeThread.Turns)
		}
		if err := hugeThread.checkTurn(last, resp.GetState()); err != nil {
			t.Error(err)
		}
	}
	afterFirst := h.PeakRSS(t)

	start = time.Now()
	for _, n := range []int32{1, 2, 250, 499} {
		resp, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: hugeThread.ID, Turn: n})
		if exhausted("Snapshot", err) {
			continue
		}
		if err != nil {
			h.RequireRunning(t)
			t.Fatalf("Snapshot of turn %d: %v", n, err)
		}
		if err := hugeThread.checkTurn(n, resp.GetState()); err != nil {
			t.Error(err)
		}
	}
	more := time.Since(start) / 4

	start = time.Now()
	turns, err := client.Turns(ctx, &historydv1.TurnsRequest{ThreadId: hugeThread.ID})
	turnsTook := time.Since(start)
	if !exhausted("Turns", err) {
		if err != nil {
			h.RequireRunning(t)
			t.Fatalf("Turns: %v", err)
		}
		if int(turns.GetTotal()) != hugeThread.Turns || len(turns.GetTurns()) != hugeThread.Turns {
			t.Fatalf("Turns: total %d with %d turns, want %d", turns.GetTotal(), len(turns.GetTurns()), hugeThread.Turns)
		}
		for i, ti := range turns.GetTurns() {
			n := i + 1
			if int(ti.GetNumber()) != n || !ti.GetRetained() || ti.GetCheckpointId() != hugeThread.endID(n) || ti.GetQuestion() != hugeThread.question(n) {
				t.Fatalf("Turns: turn %d = %v; want retained, checkpoint %s, question %q", n, ti, hugeThread.endID(n), hugeThread.question(n))
			}
		}
	}
	h.RequireRunning(t)
	peak := h.PeakRSS(t)
	t.Logf("first Snapshot %v, later Snapshots %v each, Turns %v", first.Round(time.Millisecond), more.Round(time.Millisecond), turnsTook.Round(time.Millisecond))
	t.Logf("historyd peak RSS (VmHWM): %d MiB idle, %d MiB after the first call, %d MiB in all (bound %d MiB)", idle>>20, afterFirst>>20, peak>>20, maxPeakRSS>>20)
	if peak > maxPeakRSS {
		t.Errorf("historyd's peak RSS reached %d MiB serving a thread of 100,000 checkpoints, over the %d MiB bound", peak>>20, maxPeakRSS>>20)
	}
}

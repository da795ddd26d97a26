package faults

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// idleCPU bounds the CPU time historyd may spend in a few seconds without
// calls: the health probe's, and nothing that kept running after a call.
const idleCPU = 500 * time.Millisecond

// TestParentCycle writes, into a thread historyd has already cached, three
// checkpoints whose parent links loop and whose messages (a DeltaChannel's)
// are rebuilt from writes, as anyone who can write a thread's rows can.
// Every read of the thread, and its watch, must end with DATA_LOSS naming
// the loop well within its deadline; other threads are served as before;
// once the calls are done historyd must sit idle, not spin; and SIGTERM
// must end it within its grace period.
func TestParentCycle(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	pool := connect(t, sharedDSN(t))
	schema := newSchema(t, pool, "cycle")
	plain := writeThread(t, pool, schema, "plain", rivers)
	looped := writeThread(t, pool, schema, "looped", rivers[:2])
	const grace = 2 * time.Second
	h := testbin.Start(t, bin, "--dsn", sharedDSN(t), "--schema", schema, "--shutdown-grace", grace.String(), "--watch-poll-interval", "100ms")
	conn := dial(t, h.Addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	client := historydv1.NewThreadHistoryClient(conn)
	ctx := context.Background()
	if resp, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: looped.id, Turn: 1}); err != nil {
		t.Fatal(err)
	} else if err := looped.checkSnapshot(1, resp); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch, err := client.WatchTurns(wctx, &historydv1.WatchTurnsRequest{ThreadId: looped.id})
	if err != nil {
		t.Fatal(err)
	}
	// Turn 1 has ended (the second run began); turn 2, LangGraph.js's
	// last, ends when the next run begins.
	if _, err := watch.Recv(); err != nil {
		t.Fatalf("watch before the loop was written: %v", err)
	}

	// 1f0d-1's parent is 1f0d-3, which descends from it.
	w := newWriter(t, pool, schema)
	for i, parent := range []string{"1f0d-3", "1f0d-1", "1f0d-2"} {
		w.Put(backend.Ref{ThreadID: looped.id}, saver.Checkpoint{ID: fmt.Sprintf("1f0d-%d", i+1), Parent: parent,
			TS: storetest.Base.Add(time.Hour), Versions: write.Map{{Key: "messages", Value: 100 + i}},
			Metadata: write.Map{{Key: "source", Value: "loop"}}})
	}
	const loop = "1f0d-1 → 1f0d-3 → 1f0d-2 → 1f0d-1"
	dataLoss := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.DataLoss || !strings.Contains(status.Convert(err).Message(), loop) {
			t.Errorf("%s = %v, want DataLoss naming the loop %s", what, err, loop)
		}
	}
	for _, n := range []int32{1, 2} {
		err := storetest.ReturnsWithin(t, 10*time.Second, func() error {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			_, err := client.Snapshot(cctx, &historydv1.SnapshotRequest{ThreadId: looped.id, Turn: n})
			return err
		})
		dataLoss(fmt.Sprintf("Snapshot of turn %d", n), err)
	}
	dataLoss("Turns", storetest.ReturnsWithin(t, 10*time.Second, func() error {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := client.Turns(cctx, &historydv1.TurnsRequest{ThreadId: looped.id})
		return err
	}))
	dataLoss("the watch", storetest.ReturnsWithin(t, 10*time.Second, func() error {
		for {
			if _, err := watch.Recv(); err != nil {
				return err
			}
		}
	}))
	if resp, err := client.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: plain.id}); err != nil {
		t.Errorf("another thread: %v", err)
	} else if err := plain.checkSnapshots(resp); err != nil {
		t.Errorf("another thread: %v", err)
	}

	before := cpuTime(t, h)
	time.Sleep(3 * time.Second)
	idle := cpuTime(t, h) - before
	t.Logf("CPU time in 3s without calls, after the reads of the looped thread: %v (bound %v)", idle, idleCPU)
	if idle > idleCPU {
		t.Errorf("historyd used %v of CPU in 3s without calls: something it started is still running", idle)
	}

	signalled := h.Signal(t, syscall.SIGTERM)
	code := h.WaitExit(t, grace+10*time.Second)
	exited := h.ExitAt().Sub(signalled)
	t.Logf("SIGTERM: exited %v after the signal, code %d", exited.Round(time.Millisecond), code)
	if code != 0 || exited > grace+2*time.Second {
		t.Errorf("SIGTERM: exit code %d after %v, want 0 within the %v grace period", code, exited, grace)
	}
}

// cpuTime reads the CPU time the process has used, user and system.
func cpuTime(t *testing.T, h *testbin.Process) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", h.Cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read historyd's CPU time: %v", err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 12th and 13th of them.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 13 {
		t.Fatalf("/proc/%d/stat: %q", h.Cmd.Process.Pid, b)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %q", h.Cmd.Process.Pid, b)
		}
		ticks += n
	}
	// USER_HZ is 100 on every Linux this runs on.
	return time.Duration(ticks) * 10 * time.Millisecond
}

package faults

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
)

// slowThread is a thread whose Snapshots call takes a while: 24 turns, each
// ending on a state with a list of 150,000 integers (about 1.3 MB of JSON)
// that historyd reads and steps over even when the call asks only for the
// small "counter" key.
var slowThread = generated{ID: "slow", Turns: 24, PerTurn: 4, BigItems: 150000}

// stop kills the process and waits for it.
func stop(t *testing.T, h *testbin.Process) {
	t.Helper()
	if !h.HasExited() {
		_ = h.Cmd.Process.Kill()
	}
	<-h.Exited()
}

// slowCall is one Snapshots call of slowThread made before the signal.
type slowCall struct {
	start, end time.Time
	err        error
	resp       *historydv1.SnapshotsResponse
}

// TestSIGTERMUnderLoad sends SIGTERM while slow calls are in flight. With
// time enough (--shutdown-grace), every call in flight must finish with the
// right answer, calls made after the signal must be refused with
// Unavailable, and the process must exit 0 once the last call is done.
// When the grace period runs out first, the process must exit 0 at its end,
// and the calls still running must fail with Unavailable rather than hang
// or answer wrongly.
func TestSIGTERMUnderLoad(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	pool := connect(t, sharedDSN(t))
	schema := newSchema(t, pool, "sigterm")
	fillThread(t, pool, pgx.Identifier{schema}.Sanitize(), slowThread)

	t.Run("grace enough", func(t *testing.T) {
		const grace = 30 * time.Second
		h, client, took := startSlow(t, bin, schema, grace)
		calls, signalled := signalUnderLoad(t, h, client, took)

		// After the signal: new calls, on the connection in use and on a
		// new one, are refused.
		time.Sleep(200 * time.Millisecond)
		refused := func(what string, c historydv1.ThreadHistoryClient) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: slowThread.ID, Turn: 1, Keys: []string{"counter"}})
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s after SIGTERM = %v, want Unavailable", what, err)
			}
		}
		refused("a call on the open connection", client)
		refused("a call on a new connection", historydv1.NewThreadHistoryClient(dial(t, h.Addr)))

		code := h.WaitExit(t, grace+10*time.Second)
		exited := h.ExitAt().Sub(signalled)
		var last time.Time
		for i, c := range calls {
			if c.err != nil {
				t.Errorf("call %d in flight at SIGTERM failed: %v", i, c.err)
				continue
			}
			if !c.end.After(signalled) {
				t.Errorf("call %d ended %v before SIGTERM: it was not in flight", i, signalled.Sub(c.end))
			}
			if err := checkSlow(c.resp); err != nil {
				t.Errorf("call %d in flight at SIGTERM: %v", i, err)
			}
			if c.end.After(last) {
				last = c.end
			}
		}
		t.Logf("SIGTERM with %d calls in flight (one call alone takes %v): the last call finished %v after the signal, the process exited %v after it, code %d",
			len(calls), took.Round(time.Millisecond), last.Sub(signalled).Round(time.Millisecond), exited.Round(time.Millisecond), code)
		if code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0", code)
		}
		if exited > grace {
			t.Errorf("exited %v after SIGTERM, beyond the %v grace period", exited, grace)
		}
		if h.ExitAt().Before(last) {
			t.Errorf("exited before the last in-flight call finished")
		}
	})

	t.Run("grace runs out", func(t *testing.T) {
		// A grace period a quarter of one call: the calls, started a third
		// of a call before the signal, cannot all finish within it.
		probe, _, one := startSlow(t, bin, schema, time.Minute)
		stop(t, probe)
		grace := max(one/4, 50*time.Millisecond).Round(time.Millisecond)
		h, client, took := startSlow(t, bin, schema, grace)
		calls, signalled := signalUnderLoad(t, h, client, took)
		code := h.WaitExit(t, 10*time.Second)
		exited := h.ExitAt().Sub(signalled)
		cut := 0
		for i, c := range calls {
			switch {
			case c.err == nil:
				if err := checkSlow(c.resp); err != nil {
					t.Errorf("call %d: %v", i, err)
				}
			case status.Code(c.err) == codes.Unavailable:
				cut++
			default:
				t.Errorf("call %d cut off by the end of the grace period = %v, want Unavailable", i, c.err)
			}
		}
		t.Logf("SIGTERM with %d calls in flight and a %v grace period: exited %v after the signal, code %d; %d calls cut off",
			len(calls), grace, exited.Round(time.Millisecond), code, cut)
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		// The grace period, plus what stopping takes; not less, with calls
		// still running.
		if exited < grace {
			t.Errorf("exited %v after SIGTERM, before the %v grace period was over", exited, grace)
		}
		if exited > grace+2*time.Second {
			t.Errorf("exited %v after SIGTERM with a %v grace period", exited, grace)
		}
		if cut == 0 {
			t.Errorf("no call was cut off, although each takes %v and the grace period is %v", took, grace)
		}
	})
}

// startSlow starts historyd over slowThread and returns a client and how
// long one Snapshots call takes on its own.
func startSlow(t *testing.T, bin, schema string, grace time.Duration) (*testbin.Process, historydv1.ThreadHistoryClient, time.Duration) {
	t.Helper()
	// The state cache off: every call decodes its states, so that calls
	// take long enough to be in flight at the signal.
	h := testbin.Start(t, bin, "--dsn", sharedDSN(t), "--schema", schema, "--shutdown-grace", grace.String(), "--cache-state-bytes", "0")
	conn := dial(t, h.Addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	client := historydv1.NewThreadHistoryClient(conn)
	var took time.Duration
	for range 2 { // the first call also builds the turn index
		start := time.Now()
		resp, err := client.Snapshots(context.Background(), &historydv1.SnapshotsRequest{ThreadId: slowThread.ID, Keys: []string{"counter"}})
		if err != nil {
			t.Fatalf("Snapshots of the slow thread: %v", err)
		}
		if err := checkSlow(resp); err != nil {
			t.Fatal(err)
		}
		took = time.Since(start)
	}
	if took < 100*time.Millisecond {
		t.Fatalf("one Snapshots call takes %v: too fast to have calls in flight at the signal; make slowThread larger", took)
	}
	return h, client, took
}

// signalUnderLoad starts as many Snapshots calls as there are turns, sends
// SIGTERM once they are surely in flight, and returns them once all ended.
func signalUnderLoad(t *testing.T, h *testbin.Process, client historydv1.ThreadHistoryClient, took time.Duration) ([]slowCall, time.Time) {
	t.Helper()
	const inFlight = 6
	calls := make([]slowCall, inFlight)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c := &calls[i]
			c.start = time.Now()
			c.resp, c.err = client.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: slowThread.ID, Keys: []string{"counter"}})
			c.end = time.Now()
		}()
	}
	// The calls share the CPUs, so together they take about inFlight times
	// as long as one; a third of one call in, all are running.
	time.Sleep(took / 3)
	signalled := h.Signal(t, syscall.SIGTERM)
	wg.Wait()
	for i, c := range calls {
		if !c.start.Before(signalled) {
			t.Fatalf("call %d started after the signal", i)
		}
	}
	return calls, signalled
}

// checkSlow checks a Snapshots answer of slowThread projected on "counter".
func checkSlow(resp *historydv1.SnapshotsResponse) error {
	if int(resp.GetTotal()) != slowThread.Turns || len(resp.GetTurns()) != slowThread.Turns {
		return fmt.Errorf("total %d with %d turns, want %d", resp.GetTotal(), len(resp.GetTurns()), slowThread.Turns)
	}
	for n, ts := range resp.GetTurns() {
		if err := slowThread.checkTurn(n, ts, "counter"); err != nil {
			return err
		}
	}
	return nil
}

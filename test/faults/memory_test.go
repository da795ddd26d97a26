package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
)

// longThreads are five threads of 200,000 checkpoints each: 500 turns of
// 400 super-steps, 1,000 messages versions, the longest 1,000 messages
// (about 55 MiB of messages blobs a thread). One thread's turn index takes
// about 31 MiB, more than a quarter of the cache under the manifest's
// GOMEMLIMIT: each is served without being cached.
var longThreads = func() []generated {
	out := make([]generated, 5)
	for i := range out {
		out[i] = generated{ID: fmt.Sprintf("long-thread-%d", i), Turns: 500, PerTurn: 400, BigItems: 100}
	}
	return out
}()

// manifestMemory reads the container's memory limit and GOMEMLIMIT from
// the deployment manifest, deploy/base/deployment.yaml.
func manifestMemory(t *testing.T) (limit int64, goLimit string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbin.RepoRoot(t), "deploy", "base", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gm := regexp.MustCompile(`- name: GOMEMLIMIT\s+value: (\d+MiB)`).FindSubmatch(b)
	lm := regexp.MustCompile(`limits:\s+cpu: \S+\s+memory: (\d+)Mi`).FindSubmatch(b)
	if gm == nil || lm == nil {
		t.Fatalf("deploy/base/deployment.yaml: no GOMEMLIMIT in MiB, or no limits.memory in Mi, where this test reads them")
	}
	mi, _ := strconv.ParseInt(string(lm[1]), 10, 64)
	return mi << 20, string(gm[1])
}

// TestLongThreadsInBoundedMemory runs historyd as the manifest does
// (GOMEMLIMIT, the default cache budget it derives) and reads five threads
// of 200,000 checkpoints in turn, each three times: every answer is right,
// the peak resident memory stays under the manifest's limit, and each
// thread, too large to cache, is logged so once, by its hash.
func TestLongThreadsInBoundedMemory(t *testing.T) {
	skipIfShort(t)
	limit, goLimit := manifestMemory(t)
	bin := testbin.Build(t)
	pool := connect(t, sharedDSN(t))
	schema := newSchema(t, pool, "long")
	for _, g := range longThreads {
		fillThread(t, pool, pgx.Identifier{schema}.Sanitize(), g)
	}
	h := testbin.StartWith(t, testbin.Config{Env: []string{"GOMEMLIMIT=" + goLimit}}, bin,
		"--dsn", sharedDSN(t), "--schema", schema, "--max-call-duration", "5m")
	conn := dial(t, h.Addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	client := historydv1.NewThreadHistoryClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	idle := h.PeakRSS(t)

	for round, read := range []func(g generated) error{
		func(g generated) error {
			resp, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: g.ID, Turn: int32(g.Turns)})
			if err != nil {
				return err
			}
			return g.checkTurn(int32(g.Turns), resp.GetState())
		},
		func(g generated) error {
			resp, err := client.Turns(ctx, &historydv1.TurnsRequest{ThreadId: g.ID})
			if err != nil {
				return err
			}
			if int(resp.GetTotal()) != g.Turns || len(resp.GetTurns()) != g.Turns {
				return fmt.Errorf("Turns: total %d with %d turns, want %d", resp.GetTotal(), len(resp.GetTurns()), g.Turns)
			}
			for i, ti := range resp.GetTurns() {
				if n := i + 1; !ti.GetRetained() || ti.GetCheckpointId() != g.endID(n) || ti.GetQuestion() != g.question(n) {
					return fmt.Errorf("Turns: turn %d = %v", n, ti)
				}
			}
			return nil
		},
		func(g generated) error {
			resp, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: g.ID, Turn: 1})
			if err != nil {
				return err
			}
			return g.checkTurn(1, resp.GetState())
		},
	} {
		for _, g := range longThreads {
			start := time.Now()
			if err := read(g); err != nil {
				h.RequireRunning(t)
				t.Fatalf("round %d, thread %s: %v", round+1, g.ID, err)
			}
			t.Logf("round %d, thread %s: %v, peak RSS so far %d MiB", round+1, g.ID, time.Since(start).Round(time.Millisecond), h.PeakRSS(t)>>20)
		}
	}
	h.RequireRunning(t)
	peak := h.PeakRSS(t)
	t.Logf("GOMEMLIMIT=%s, limits.memory %d MiB: peak RSS (VmHWM) %d MiB idle, %d MiB after reading 5 threads of 200,000 checkpoints 3 times each",
		goLimit, limit>>20, idle>>20, peak>>20)
	if peak >= limit {
		t.Errorf("historyd's peak RSS reached %d MiB, at or over the manifest's %d MiB limit", peak>>20, limit>>20)
	}
	logs := h.Logs.String()
	notices := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "served without caching it") {
			notices++
		}
		for _, g := range longThreads {
			if strings.Contains(line, g.ID) {
				t.Errorf("a log line names thread %s as it is: %s", g.ID, line)
			}
		}
	}
	if notices != len(longThreads) {
		t.Errorf("%d log lines say a thread was served without caching it, want one per thread (%d)\n%s", notices, len(longThreads), logs)
	}
}

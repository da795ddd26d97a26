package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
	"github.com/historyd/historyd/store/storetest"
)

// retryingRoundRobin spreads calls over every address and retries
// UNAVAILABLE on another one: what a host in front of several replicas
// configures.
const retryingRoundRobin = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "historyd.v1.ThreadHistory"}],
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.05s",
      "maxBackoff": "0.5s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}`

// TestReplicaKilledUnderLoad runs three replicas against one database behind
// a client-side round-robin balancer with retries, kills one mid-run, and
// requires every call to succeed with the right answer: historyd keeps no
// state that replicas must share.
func TestReplicaKilledUnderLoad(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	dsn := sharedDSN(t)
	pool := connect(t, dsn)
	schema := newSchema(t, pool, "scaleout")
	th := writeThread(t, pool, pgx.Identifier{schema}.Sanitize(), "scale-out", storetest.Demo)

	var replicas []*testbin.Process
	var addrs []resolver.Address
	for range 3 {
		h := testbin.Start(t, bin, "--dsn", dsn, "--schema", schema, "--shutdown-grace", "5s")
		replicas = append(replicas, h)
		addrs = append(addrs, resolver.Address{Addr: h.Addr})
	}
	r := manual.NewBuilderWithScheme("replicas")
	r.InitialState(resolver.State{Addresses: addrs})
	conn, err := grpc.NewClient(r.Scheme()+":///historyd",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(retryingRoundRobin))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := historydv1.NewThreadHistoryClient(conn)

	// Every replica must answer before the load starts, so the kill hits a
	// replica that was taking its share.
	for _, h := range replicas {
		waitHealth(t, dial(t, h.Addr), healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	}

	const workers, perWorker = 6, 400
	var (
		ok, failed atomic.Int64
		firstErr   atomic.Value
		wg         sync.WaitGroup
		killAt     = make(chan struct{})
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if w == 0 && i == perWorker/3 {
					close(killAt)
				}
				n := int32(1 + (w+i)%len(storetest.Demo))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: n})
				cancel()
				if err == nil {
					err = th.checkSnapshot(n, resp)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("turn %d: %v (%v)", n, err, status.Code(err)))
					continue
				}
				ok.Add(1)
			}
		}()
	}
	<-killAt
	killed := time.Now()
	if err := replicas[1].Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("%d calls over 3 replicas, replica %s killed after %d: %d ok, %d failed, %s after the kill",
		workers*perWorker, replicas[1].Addr, perWorker/3, ok.Load(), failed.Load(), time.Since(killed).Round(time.Millisecond))
	if failed.Load() != 0 {
		t.Fatalf("%d calls failed; first: %v", failed.Load(), firstErr.Load())
	}
	if !replicas[1].HasExited() {
		t.Fatal("the killed replica is still running")
	}
	for _, i := range []int{0, 2} {
		replicas[i].RequireRunning(t)
	}
}

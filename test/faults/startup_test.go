package faults

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// TestStoreDownAtStart starts historyd against a port where no PostgreSQL
// listens yet. historyd must keep running, report NOT_SERVING and answer
// Unavailable; once PostgreSQL is up with a thread in it, historyd must turn
// SERVING and answer correctly without being restarted.
func TestStoreDownAtStart(t *testing.T) {
	skipIfShort(t)
	bin := buildHistoryd(t)
	pgPort := freePort(t)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/historyd_test?sslmode=disable&connect_timeout=2", pgPort)

	h := startHistoryd(t, bin, "--dsn", dsn)
	conn := dial(t, h.addr)
	client := historydv1.NewThreadHistoryClient(conn)

	// The server-wide status starts out SERVING in grpc's health server
	// until the first probe; historyd probes before it accepts calls.
	for _, svc := range []string{"", serviceName} {
		if st, err := health(conn, svc); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("health of %q with the store down = %v, %v; want NOT_SERVING", svc, st, err)
		}
	}
	calls := map[string]func(ctx context.Context) error{
		"Snapshots": func(ctx context.Context) error {
			_, err := client.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "rivers"})
			return err
		},
		"Snapshot": func(ctx context.Context) error {
			_, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: "rivers", Turn: 1})
			return err
		},
		"Turns": func(ctx context.Context) error {
			_, err := client.Turns(ctx, &historydv1.TurnsRequest{ThreadId: "rivers"})
			return err
		},
	}
	// Twice, across a health probe, to see the process neither exits nor
	// changes its answer while the store stays down.
	for round := range 2 {
		for name, call := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := call(ctx)
			cancel()
			if status.Code(err) != codes.Unavailable {
				t.Errorf("round %d: %s with the store down = %v, want Unavailable", round, name, err)
			}
		}
		if round == 0 {
			time.Sleep(2500 * time.Millisecond) // one health interval (2s) and then some
		}
		h.requireRunning(t)
	}
	if st, err := health(conn, ""); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health with the store still down = %v, %v; want NOT_SERVING", st, err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Now the database comes up, on the port historyd was given, and a
	// LangGraph checkpointer writes its tables and a thread.
	c := startCluster(t, pgPort)
	pool := connect(t, c.DSN)
	checkpointTables(t, pool, pgx.Identifier{"public"}.Sanitize())
	th := writeThread(t, pool, pgx.Identifier{"public"}.Sanitize(), "rivers", rivers)
	written := time.Now()

	serving := waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	t.Logf("SERVING %v after the tables and the thread were written (health probes every 2s)", serving.Sub(written).Round(time.Millisecond))
	h.requireRunning(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, err := client.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: th.id})
	if err != nil {
		t.Fatalf("Snapshots after the store came up: %v", err)
	}
	if err := th.checkSnapshots(all); err != nil {
		t.Errorf("Snapshots after the store came up: %v", err)
	}
	for n := int32(1); n <= int32(len(th.turns)); n++ {
		one, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: n})
		if err != nil {
			t.Fatalf("Snapshot turn %d: %v", n, err)
		}
		if err := th.checkSnapshot(n, one); err != nil {
			t.Error(err)
		}
	}
	turns, err := client.Turns(ctx, &historydv1.TurnsRequest{ThreadId: th.id})
	if err != nil {
		t.Fatalf("Turns: %v", err)
	}
	if err := th.checkTurns(turns); err != nil {
		t.Errorf("Turns: %v", err)
	}
}

// silentStore listens on a loopback port, accepts connections and never
// answers: a database that is hung rather than down. It returns the port.
func silentStore(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

// TestStoreSilentAtStart starts historyd against a database that accepts
// connections and never answers. From the moment historyd accepts calls its
// health must say NOT_SERVING, for the server and for ThreadHistory, and
// calls must fail with Unavailable once the DSN's connect_timeout passes,
// with the process staying up.
func TestStoreSilentAtStart(t *testing.T) {
	skipIfShort(t)
	bin := buildHistoryd(t)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/historyd_test?sslmode=disable&connect_timeout=1", silentStore(t))
	h := startHistoryd(t, bin, "--dsn", dsn)
	conn := dial(t, h.addr)
	// historyd's first health probe of a hung store lasts a whole probe
	// interval (2s); look during it and after it.
	for _, after := range []time.Duration{0, 3 * time.Second} {
		time.Sleep(after)
		for _, svc := range []string{"", serviceName} {
			if st, err := health(conn, svc); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Errorf("%v after historyd began listening: health of %q with the store hung = %v, %v; want NOT_SERVING", after, svc, st, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := historydv1.NewThreadHistoryClient(conn).Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: "rivers", Turn: 1})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Snapshot with the store hung = %v, want Unavailable", err)
	}
	h.requireRunning(t)
}

package faults

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/tcpproxy"
	"github.com/historyd/historyd/internal/testbin"
)

// viaProxy is dsn pointed at the proxy, without its sslmode: pgx's default
// (prefer) tries TLS first and then plaintext, two connections per attempt
// against a server without TLS, as a DSN that says nothing does.
func viaProxy(t *testing.T, dsn string, p *tcpproxy.Proxy) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	q := u.Query()
	q.Del("sslmode")
	u.RawQuery = q.Encode()
	return u.String()
}

// TestNoDialStormWhileStoreDown stops PostgreSQL under a load of callers
// that call again as soon as they are answered, as a busy agent fleet
// does. While it is down, historyd has at most one connection attempt in
// flight, makes few (backing off, not once per call), answers every call
// at once with UNAVAILABLE, and logs a handful of lines rather than one or
// two per call; once PostgreSQL is back, calls succeed again within
// maxRecovery.
func TestNoDialStormWhileStoreDown(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	c := startCluster(t, 0)
	pool := connect(t, c.DSN)
	public := pgx.Identifier{"public"}.Sanitize()
	checkpointTables(t, pool, public)
	th := writeThread(t, pool, public, "rivers", rivers)
	pool.Close()

	proxy := tcpproxy.Start(t, fmt.Sprintf("127.0.0.1:%d", c.Port))
	h := testbin.Start(t, bin, "--dsn", viaProxy(t, c.DSN, proxy))
	conn := dial(t, h.Addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	client := historydv1.NewThreadHistoryClient(conn)
	if _, err := client.Snapshot(context.Background(), &historydv1.SnapshotRequest{ThreadId: th.id, Turn: 1}); err != nil {
		t.Fatalf("Snapshot with the store up: %v", err)
	}

	c.run("halt", "fast")
	// The outage is noticed, by a call or the health probe.
	waitHealth(t, conn, healthpb.HealthCheckResponse_NOT_SERVING, 10*time.Second)

	const (
		workers = 4
		window  = 10 * time.Second
	)
	logsBefore := len(h.Logs.String())
	connsBefore := proxy.Conns()
	proxy.ResetMax()
	var (
		mu        sync.Mutex
		codesSeen = map[codes.Code]int{}
		slow      int // calls that took longer than failing fast does
		calls     int
	)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Since(start) < window {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				began := time.Now()
				_, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: 1})
				took := time.Since(began)
				cancel()
				mu.Lock()
				calls++
				codesSeen[status.Code(err)]++
				if took > 250*time.Millisecond {
					slow++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	conns := proxy.Conns() - connsBefore
	lines := strings.Count(h.Logs.String()[logsBefore:], "\n")
	rate := float64(conns) / elapsed.Seconds()
	t.Logf("PostgreSQL down for %v under %d callers: %d calls (%v), %d connections to PostgreSQL (%.1f/s), at most %d at once, %d log lines",
		elapsed.Round(time.Millisecond), workers, calls, codesSeen, conns, rate, proxy.MaxOpen(), lines)

	if codesSeen[codes.Unavailable] != calls {
		t.Errorf("calls while the store was down: %v, want every one UNAVAILABLE", codesSeen)
	}
	if slow > calls/100 {
		t.Errorf("%d of %d calls took over 250ms: calls must fail at once while the store is known to be down", slow, calls)
	}
	// Backing off to a connection attempt every half second or so, each of
	// a few connections (pgx tries TLS, then plaintext).
	if rate > 10 {
		t.Errorf("%.1f connections a second to a stopped PostgreSQL, want at most 10 (one attempt at a time, backing off to two a second, of up to three connections each)", rate)
	}
	if m := proxy.MaxOpen(); m > 1 {
		t.Errorf("%d connections to a stopped PostgreSQL open at once, want at most one attempt in flight", m)
	}
	if lines > 10 {
		t.Errorf("%d log lines in %v of outage, want a handful (a line per change of state and a summary now and then):\n%s",
			lines, elapsed.Round(time.Second), firstLines(h.Logs.String()[logsBefore:], 20))
	}

	// Recovery: PostgreSQL back, the next attempt finds it.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	probe := probeUntilUp(ctx, c.DSN)
	c.run("resume")
	<-probe.done
	if probe.up.IsZero() {
		t.Fatal("PostgreSQL did not accept connections again")
	}
	var recovered time.Duration
	for {
		_, err := client.Snapshot(context.Background(), &historydv1.SnapshotRequest{ThreadId: th.id, Turn: 1})
		if err == nil {
			recovered = time.Since(probe.up)
			break
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("while recovering: %v, want UNAVAILABLE until OK", err)
		}
		if time.Since(probe.up) > maxRecovery+5*time.Second {
			t.Fatalf("no call succeeded within %v of PostgreSQL accepting connections", maxRecovery+5*time.Second)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("first call succeeded %v after PostgreSQL accepted connections again", recovered.Round(time.Millisecond))
	if recovered > maxRecovery {
		t.Errorf("recovery took %v, want at most %v", recovered.Round(time.Millisecond), maxRecovery)
	}
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	h.RequireRunning(t)
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

package postgres

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/historyd/historyd/internal/tcpproxy"
	"github.com/historyd/historyd/store/backend"
)

// While the database refuses connections, the backend's reads fail at
// once with a NotConnectedError (backend.ErrUnavailable) without dialling,
// one attempt at a time reconnects, backing off, and once the database
// answers again reads succeed within about ReconnectMax.
func TestGateStopsDialling(t *testing.T) {
	_, schema, ro := newSchema(t)
	u, err := url.Parse(ro)
	if err != nil {
		t.Fatal(err)
	}
	p := tcpproxy.Start(t, u.Host)
	u.Host = p.Addr()
	b := openBackend(t, u.String(), schema)
	ctx := context.Background()
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("Ping through the proxy: %v", err)
	}
	b.pool.Reset() // the open connections would outlive the outage
	p.SetDown(true)
	before := p.Conns()

	const workers, each = 8, 200
	var notConnected, failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				err := b.Ping(ctx)
				if errors.Is(err, backend.ErrUnavailable) {
					failed.Add(1)
				}
				var nc *NotConnectedError
				if errors.As(err, &nc) {
					notConnected.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	dialled := p.Conns() - before
	t.Logf("%d Pings in %v with the database down: %d UNAVAILABLE, %d without dialling; %d connections made", workers*each, took.Round(time.Millisecond), failed.Load(), notConnected.Load(), dialled)
	if failed.Load() != workers*each {
		t.Errorf("%d of %d Pings failed UNAVAILABLE", failed.Load(), workers*each)
	}
	// The attempts in flight when the first failed, and those that callers
	// waiting for a connection started before that failure was classified
	// (the proxy accepts and hangs up, so the dial itself succeeds): at most
	// one per worker.
	if notConnected.Load() < workers*each-workers {
		t.Errorf("%d of %d Pings refused without dialling, want all but the first attempts, at most one per caller", notConnected.Load(), workers*each)
	}
	// The pool's first attempts, each of up to three connections (TLS,
	// then plaintext), and the backed-off retries within took.
	if limit := 3 * (int64(b.pool.Config().MaxConns) + 2 + int64(took/(ReconnectInitial/2))); dialled > limit {
		t.Errorf("%d connections for %d Pings, want at most %d", dialled, workers*each, limit)
	}

	p.SetDown(false)
	back := time.Now()
	for {
		err := b.Ping(ctx)
		if err == nil {
			break
		}
		if time.Since(back) > 3*ReconnectMax {
			t.Fatalf("still failing %v after the database came back: %v", time.Since(back).Round(time.Millisecond), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("reads succeeded again %v after the database came back", time.Since(back).Round(time.Millisecond))
}

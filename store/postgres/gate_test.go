package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/historyd/historyd/store"
)

// switchable is a TCP proxy to PostgreSQL that, while down, closes every
// connection at once, as a stopped server refuses them, and counts the
// connections made to it.
type switchable struct {
	lis    net.Listener
	target string
	down   atomic.Bool
	conns  atomic.Int64
}

func newSwitchable(t *testing.T, target string) *switchable {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	p := &switchable{lis: lis, target: target}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			p.conns.Add(1)
			go func() {
				defer c.Close()
				if p.down.Load() {
					return
				}
				up, err := net.Dial("tcp", p.target)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return p
}

// While the database refuses connections, the backend's reads fail at
// once with a NotConnectedError (store.ErrUnavailable) without dialling,
// one attempt at a time reconnects, backing off, and once the database
// answers again reads succeed within about ReconnectMax.
func TestGateStopsDialling(t *testing.T) {
	_, schema, ro := newSchema(t)
	u, err := url.Parse(ro)
	if err != nil {
		t.Fatal(err)
	}
	p := newSwitchable(t, u.Host)
	u.Host = p.lis.Addr().String()
	b := openBackend(t, u.String(), schema)
	ctx := context.Background()
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("Ping through the proxy: %v", err)
	}
	b.pool.Reset() // the open connections would outlive the outage
	p.down.Store(true)
	before := p.conns.Load()

	const workers, each = 8, 200
	var notConnected, failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				err := b.Ping(ctx)
				if errors.Is(err, store.ErrUnavailable) {
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
	dialled := p.conns.Load() - before
	t.Logf("%d Pings in %v with the database down: %d UNAVAILABLE, %d without dialling; %d connections made", workers*each, took.Round(time.Millisecond), failed.Load(), notConnected.Load(), dialled)
	if failed.Load() != workers*each {
		t.Errorf("%d of %d Pings failed UNAVAILABLE", failed.Load(), workers*each)
	}
	if notConnected.Load() < workers*each-int64(b.pool.Config().MaxConns) {
		t.Errorf("%d of %d Pings refused without dialling, want all but the pool's first attempts", notConnected.Load(), workers*each)
	}
	// The pool's first attempts, each of up to three connections (TLS,
	// then plaintext), and the backed-off retries within took.
	if limit := 3 * (int64(b.pool.Config().MaxConns) + 2 + int64(took/(ReconnectInitial/2))); dialled > limit {
		t.Errorf("%d connections for %d Pings, want at most %d", dialled, workers*each, limit)
	}

	p.down.Store(false)
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

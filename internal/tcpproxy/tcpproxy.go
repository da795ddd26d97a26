// Package tcpproxy is a TCP proxy for tests that stand between historyd
// and its database: it counts the connections made through it and how
// many were open at once, and can play the database down, closing each
// connection as it comes, as a stopped server refuses it.
//
//	p := tcpproxy.Start(t, "127.0.0.1:5432")
//	dsn := "postgres://…@" + p.Addr() + "/db"
//	p.SetDown(true)
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards the connections made to Addr to its target.
type Proxy struct {
	lis    net.Listener
	target string
	down   atomic.Bool
	conns  atomic.Int64
	open   atomic.Int64

	mu      sync.Mutex
	maxOpen int64 // most connections open at once since ResetMax
}

// Start listens on a free loopback port and forwards to target until the
// test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	p := &Proxy{lis: lis, target: target}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// SetDown makes the proxy close every new connection at once (true), or
// forward them again (false). Forwarded connections also end when the
// target refuses them.
func (p *Proxy) SetDown(down bool) { p.down.Store(down) }

// Conns counts the connections made to the proxy so far.
func (p *Proxy) Conns() int64 { return p.conns.Load() }

// MaxOpen is the most connections open through the proxy at once since
// ResetMax.
func (p *Proxy) MaxOpen() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxOpen
}

// ResetMax starts counting MaxOpen afresh.
func (p *Proxy) ResetMax() {
	p.mu.Lock()
	p.maxOpen = p.open.Load()
	p.mu.Unlock()
}

func (p *Proxy) serve(c net.Conn) {
	p.conns.Add(1)
	n := p.open.Add(1)
	p.mu.Lock()
	p.maxOpen = max(p.maxOpen, n)
	p.mu.Unlock()
	// The count drops before the client can see the connection end, so a
	// connection made after it is never counted as overlapping it.
	defer c.Close()
	defer p.open.Add(-1)
	if p.down.Load() {
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

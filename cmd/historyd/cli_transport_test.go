package main

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/historyd/historyd/auth/authtest"
	"github.com/historyd/historyd/demo"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
)

// A loopback --addr is dialled in plaintext, and so is 0.0.0.0, the address
// a server's --listen often names: the same machine.
func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"localhost:50051": true, "127.0.0.1:50051": true, "127.0.0.2:1": true, "[::1]:50051": true,
		"0.0.0.0:50051": true, "[::]:50051": true, "dns:///localhost:50051": true,
		"10.0.0.1:50051": false, "historyd.internal:8443": false, "dns:///historyd:8443": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
	addr := demoServer(t)
	_, port, _ := net.SplitHostPort(addr)
	if code, out, errs := cli(t, "0.0.0.0:"+port, "threads"); code != exitOK || !strings.Contains(out, "demo-pruned") {
		t.Errorf("--addr 0.0.0.0:%s: exit %d\n%s%s", port, code, out, errs)
	}
}

// The CLI and a server that disagree about TLS: one line saying which the
// server speaks and which flag to change, exit 5 (UNAVAILABLE).
func TestCLITransportMismatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "demo.db")
	if err := demo.Write(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	ca := authtest.NewCA(t, "historyd test CA")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tlsAddr := servertest.Start(t, server.Config{Service: service.Frontend{TLS: &tls.Config{Certificates: []tls.Certificate{ca.Server().Cert}}}},
		servertest.WithDSN(path, ""), servertest.WithTCP()).Addr()
	plainAddr := demoServer(t)

	if code, out, errs := cli(t, tlsAddr, "threads", "--tls-ca", caFile); code != exitOK || !strings.Contains(out, "demo-pruned") {
		t.Fatalf("over TLS: exit %d\n%s%s", code, out, errs)
	}
	for _, tt := range []struct {
		addr string
		args []string
		want string
	}{
		{tlsAddr, nil, "historyd threads: historyd at " + tlsAddr + " speaks TLS, not plaintext: a loopback --addr is dialled in plaintext unless a TLS flag is given: pass --tls-ca (or --tls-server-name)\n"},
		{tlsAddr, []string{"--plaintext"}, "historyd threads: historyd at " + tlsAddr + " speaks TLS, not plaintext: drop --plaintext (and pass --tls-ca for a private CA)\n"},
		{plainAddr, []string{"--tls-ca", caFile}, "historyd threads: historyd at " + plainAddr + " speaks plaintext, not TLS: pass --plaintext\n"},
	} {
		code, _, errs := cli(t, tt.addr, append([]string{"threads"}, tt.args...)...)
		if code != exitUnavailable || errs != tt.want {
			t.Errorf("%s %v: exit %d, stderr %q\nwant exit %d, %q", tt.addr, tt.args, code, errs, exitUnavailable, tt.want)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/auth/authtest"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

func TestServeHelpNamesEveryFlagAndVariable(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--help"}, &out, &errOut); code != 0 || errOut.Len() > 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	help := out.String()
	for _, want := range []string{
		"-auth-tokens", "HISTORYD_AUTH_TOKENS", "-tls-cert", "HISTORYD_TLS_CERT", "-tls-key", "HISTORYD_TLS_KEY",
		"-tls-client-ca", "HISTORYD_TLS_CLIENT_CA", "-reflection", "HISTORYD_REFLECTION",
		"-max-request-bytes", "HISTORYD_MAX_REQUEST_BYTES", "-max-response-bytes", "HISTORYD_MAX_RESPONSE_BYTES",
		"-rate-limit", "HISTORYD_RATE_LIMIT", "-rate-burst", "HISTORYD_RATE_BURST",
		"-max-call-duration", "HISTORYD_MAX_CALL_DURATION", "-max-concurrent-streams", "HISTORYD_MAX_CONCURRENT_STREAMS",
		"-keepalive-min-time", "-keepalive-time", "-keepalive-timeout",
		"-metrics-listen", "HISTORYD_METRICS_LISTEN", "-log-thread-ids", "HISTORYD_LOG_THREAD_SALT",
		"-cache-bytes", "HISTORYD_CACHE_BYTES", "GOMEMLIMIT", "-cache-threads", "HISTORYD_CACHE_THREADS", "-cache-state-bytes", "HISTORYD_CACHE_STATE_BYTES", "deprecated",
		"-log-level", "HISTORYD_LOG_LEVEL", "-metrics-all-methods", "HISTORYD_METRICS_ALL_METHODS",
		"SIGHUP", "docs/security.md", "default 64MiB", "-pooler", "HISTORYD_POOLER",
		"-page-token-key-file", "HISTORYD_PAGE_TOKEN_KEY_FILE",
		"-watch-max-age", "HISTORYD_WATCH_MAX_AGE", "default 1h0m0s",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// Bad values, from flags or the environment, stop the server before it
// opens the store, naming what is wrong.
func TestServeRejectsBadSettings(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"env duration", map[string]string{"HISTORYD_MAX_CALL_DURATION": "soon"}, nil, "HISTORYD_MAX_CALL_DURATION"},
		{"env size", map[string]string{"HISTORYD_MAX_RESPONSE_BYTES": "lots"}, nil, "HISTORYD_MAX_RESPONSE_BYTES"},
		{"env bool", map[string]string{"HISTORYD_REFLECTION": "perhaps"}, nil, "HISTORYD_REFLECTION"},
		{"cert without key", nil, []string{"--tls-cert", "x.pem"}, "--tls-key"},
		{"client CA without TLS", nil, []string{"--tls-client-ca", "ca.pem"}, "--tls-client-ca"},
		{"negative rate", nil, []string{"--rate-limit", "-1"}, "--rate-limit"},
		{"negative index cache", nil, []string{"--cache-threads", "-1"}, "--cache-threads"},
		{"env state cache", map[string]string{"HISTORYD_CACHE_STATE_BYTES": "-5"}, nil, "HISTORYD_CACHE_STATE_BYTES"},
		{"thread ids in plain", nil, []string{"--log-thread-ids", "plain"}, "--log-thread-ids"},
		{"missing token file", nil, []string{"--auth-tokens", "/nonexistent/tokens.json"}, "--auth-tokens"},
		{"log level", nil, []string{"--log-level", "verbose"}, `--log-level "verbose": want debug, info, warn or error`},
		{"env log level", map[string]string{"HISTORYD_LOG_LEVEL": "trace"}, nil, `--log-level "trace"`},
		{"burst without rate", nil, []string{"--rate-burst", "5"}, "--rate-burst 5 without --rate-limit"},
		{"env burst without rate", map[string]string{"HISTORYD_RATE_BURST": "5"}, nil, "--rate-burst 5 without --rate-limit"},
		{"reducer of a channel not served", nil, []string{"--channel-reducers", "files=merge"}, `channel "files" is neither --messages-channel nor one of --state-channels`},
		{"env bool metrics", map[string]string{"HISTORYD_METRICS_ALL_METHODS": "all"}, nil, "HISTORYD_METRICS_ALL_METHODS"},
		{"unknown pooler", nil, []string{"--pooler", "yes"}, "--pooler"},
		{"env pooler", map[string]string{"HISTORYD_POOLER": "pgbouncer"}, nil, "--pooler"},
		{"missing page token key file", nil, []string{"--page-token-key-file", "/nonexistent/key"}, "--page-token-key-file"},
		{"env page token key file", map[string]string{"HISTORYD_PAGE_TOKEN_KEY_FILE": "/nonexistent/key"}, nil, "--page-token-key-file"},
		{"negative stream age", nil, []string{"--watch-max-age", "-1s"}, "--watch-max-age -1s: must not be negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			useMemory(t, storetest.NewMemory())
			var out bytes.Buffer
			args := append([]string{"serve", "--dsn", "memory", "--listen", "127.0.0.1:0"}, tt.args...)
			if code := run(context.Background(), args, &out, &out); code == 0 || !strings.Contains(out.String(), tt.want) {
				t.Errorf("exit %d, output %q; want failure naming %s", code, out.String(), tt.want)
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "64MiB": 64 << 20, "512 KiB": 512 << 10, "2GiB": 2 << 30, "7B": 7} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5MiB", "1MB", "MiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) accepted", in)
		}
	}
	if b := byteSize(64 << 20); b.String() != "64MiB" {
		t.Errorf("String = %s", b.String())
	}
}

// useMemory makes serve read from m instead of opening --dsn.
func useMemory(t *testing.T, m backend.Backend) {
	t.Helper()
	old := newBackend
	newBackend = func(context.Context, string, string, []string, ...server.BackendOption) (backend.Backend, error) {
		return m, nil
	}
	t.Cleanup(func() { newBackend = old })
}

// The whole command: TLS, a token file named by the environment, the
// metrics listener, and SIGHUP rereading the token file and certificate.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "a/1"}, storetest.Demo)
	useMemory(t, mem)
	dir := t.TempDir()
	ca := authtest.NewCA(t, "test")
	firstCert := ca.Server()
	certFile, keyFile := firstCert.WriteFiles(t, dir, "server")
	tokens := filepath.Join(dir, "tokens.json")
	authtest.WriteFile(t, tokens, authtest.TokenFile(t, authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"first"}}))
	t.Setenv("HISTORYD_AUTH_TOKENS", tokens)

	grpcAddr, metricsAddr := startServe(t, "--metrics-listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := historydv1.NewThreadHistoryClient(conn)
	call := func(token string) codes.Code {
		ctx := context.Background()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: "a/1"})
		return status.Code(err)
	}
	if got := call("first"); got != codes.OK {
		t.Fatalf("first token: %v", got)
	}
	if got := call(""); got != codes.Unauthenticated {
		t.Errorf("no token: %v, want Unauthenticated", got)
	}

	authtest.WriteFile(t, tokens, authtest.TokenFile(t, authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"second"}}))
	secondCert := ca.Server()
	secondCert.WriteFiles(t, dir, "server")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second token to work after SIGHUP", func() bool { return call("second") == codes.OK })
	if got := call("first"); got != codes.Unauthenticated {
		t.Errorf("first token after SIGHUP: %v, want Unauthenticated", got)
	}
	eventually(t, "the second certificate to be served", func() bool {
		d := &net.Dialer{Timeout: 2 * time.Second}
		tc, err := tls.DialWithDialer(d, "tcp", grpcAddr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2"}})
		if err != nil {
			return false
		}
		defer tc.Close()
		return tc.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(secondCert.Serial) == 0
	})

	for path, want := range map[string]string{"/metrics": "grpc_server_handled_total", "/readyz": "ready", "/healthz": "ok"} {
		resp, err := http.Get("http://" + metricsAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("%s = %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startServe runs historyd serve on loopback with args added, over the
// store useMemory gave it, until the test ends, and returns the gRPC and
// metrics listeners' addresses.
func startServe(t *testing.T, args ...string) (grpcAddr, metricsAddr string) {
	t.Helper()
	addrs := make(chan [2]string, 1)
	servingHook = func(a server.Addrs) { addrs <- [2]string{a.GRPC, a.Metrics} }
	t.Cleanup(func() { servingHook = nil })
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	var out syncbuf.Buffer
	go func() {
		exited <- run(ctx, append([]string{"serve", "--dsn", "memory", "--listen", "127.0.0.1:0", "--shutdown-grace", "1s"}, args...), &out, &out)
	}()
	select {
	case a := <-addrs:
		grpcAddr, metricsAddr = a[0], a[1]
	case code := <-exited:
		cancel()
		t.Fatalf("serve exited %d: %s", code, out.String())
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("serve exited %d: %s", code, out.String())
		}
	})
	return grpcAddr, metricsAddr
}

// startPlainServe is startServe in plaintext, with a client.
func startPlainServe(t *testing.T, args ...string) historydv1.ThreadHistoryClient {
	t.Helper()
	addr, _ := startServe(t, args...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return historydv1.NewThreadHistoryClient(conn)
}

// With --page-token-key-file, a listing goes on across processes holding
// the same file (replicas, or one restarted), SIGHUP rereads the file, and
// without it each process's tokens are its own.
func TestServePageTokenKeyFile(t *testing.T) {
	mem := storetest.NewMemory()
	for _, id := range []string{"t/1", "t/2", "t/3"} {
		storetest.PutThread(mem, backend.Ref{ThreadID: id}, storetest.Base, 1)
	}
	useMemory(t, mem)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("first key, 32 bytes or more, as text\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	firstPage := func(c historydv1.ThreadHistoryClient) string {
		t.Helper()
		resp, err := c.Threads(ctx, &historydv1.ThreadsRequest{PageSize: 1})
		if err != nil || resp.NextPageToken == "" {
			t.Fatalf("first page: %v, %v", resp, err)
		}
		return resp.NextPageToken
	}
	next := func(c historydv1.ThreadHistoryClient, tok string) codes.Code {
		_, err := c.Threads(ctx, &historydv1.ThreadsRequest{PageSize: 1, PageToken: tok})
		return status.Code(err)
	}

	one := startPlainServe(t, "--page-token-key-file", keyFile)
	t.Setenv("HISTORYD_PAGE_TOKEN_KEY_FILE", keyFile)
	tok := firstPage(one)
	// The variable names the file as the flag does.
	t.Run("another process with the file", func(t *testing.T) {
		if got := next(startPlainServe(t), tok); got != codes.OK {
			t.Errorf("next page from another process with the same key file: %v", got)
		}
	})
	t.Setenv("HISTORYD_PAGE_TOKEN_KEY_FILE", "")
	t.Run("a process without it", func(t *testing.T) {
		if got := next(startPlainServe(t), tok); got != codes.InvalidArgument {
			t.Errorf("next page from a process with keys of its own: %v, want InvalidArgument", got)
		}
	})

	if err := os.WriteFile(keyFile, []byte("second key, 32 bytes or more, as text\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first key to be dropped after SIGHUP", func() bool { return next(one, tok) == codes.InvalidArgument })
	if got := next(one, firstPage(one)); got != codes.OK {
		t.Errorf("a token of the second key: %v", got)
	}
}

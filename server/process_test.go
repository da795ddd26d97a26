package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/pagetoken"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// Run sets the store, the credentials, the page token keys and the tracer
// itself, from the files and variables that name them, and refuses a
// configuration that sets them already.
func TestRunRefusesWhatItSets(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"backend", server.Config{Store: store.Config{Backend: storetest.NewMemory()}}, "RunConfig.DSN"},
		{"TLS", server.Config{Service: service.Frontend{TLS: &tls.Config{}}}, "RunConfig.TLSCert"},
		{"page tokens", server.Config{PageTokens: pagetoken.PerProcess()}, "RunConfig.PageTokenKeyFile"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := server.Run(context.Background(), server.RunConfig{Config: tt.cfg}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// Run serves gRPC and the metrics listener until its context is done,
// then shuts down and returns nil.
func TestRunServesUntilDone(t *testing.T) {
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "t"}, storetest.Demo)
	var log syncbuf.Buffer
	addrs := make(chan [2]string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan error, 1)
	go func() {
		exited <- server.Run(ctx, server.RunConfig{
			Config:        server.Config{Metrics: true, Service: service.Frontend{Logger: slog.New(slog.NewTextHandler(&log, nil))}},
			Listen:        "127.0.0.1:0",
			MetricsListen: "127.0.0.1:0",
			DSN:           "memory",
			ShutdownGrace: time.Second,
			OpenBackend: func(context.Context, string, string, []string, ...server.BackendOption) (backend.Backend, error) {
				return mem, nil
			},
			Serving: func(a server.Addrs) { addrs <- [2]string{a.GRPC, a.Metrics} },
		})
	}()
	var a [2]string
	select {
	case a = <-addrs:
	case err := <-exited:
		t.Fatalf("Run = %v before serving:\n%s", err, log.String())
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not serve")
	}
	conn, err := grpc.NewClient("passthrough:///"+a[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := historydv1.NewThreadHistoryClient(conn).Turns(ctx, &historydv1.TurnsRequest{ThreadId: "t"}); err != nil {
		t.Errorf("Turns: %v", err)
	}
	resp, err := http.Get("http://" + a[1] + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "ready") {
		t.Errorf("/readyz = %d %q", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("Run = %v after its context was done", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was done")
	}
	if !strings.Contains(log.String(), "historyd serving") || !strings.Contains(log.String(), "shutting down") {
		t.Errorf("log lacks the start and the shutdown:\n%s", log.String())
	}
}

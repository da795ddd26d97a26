package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

func TestNewRefusesBadConfig(t *testing.T) {
	mem := storetest.NewMemory()
	for _, tt := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"no backend", server.Config{}, "Config.Store.Backend is required"},
		{"metrics set by hand", server.Config{Store: store.Config{Backend: mem}, Service: service.Options{Metrics: grpcprom.NewServerMetrics()}}, "Config.Service.Metrics"},
		{"negative health interval", server.Config{Store: store.Config{Backend: mem}, HealthInterval: -time.Second}, "Config.HealthInterval -1s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := server.New(context.Background(), tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// The channels OpenBackend is given are the ones the store reads.
func TestChannels(t *testing.T) {
	if got := (server.Config{}).Channels(); !slices.Equal(got, []string{"messages", "tool_state", store.SavedValueChannel}) {
		t.Errorf("default channels = %v", got)
	}
	if got := store.New(store.Config{Backend: storetest.NewMemory()}).StateChannels()[0]; got != server.DefaultStateChannel {
		t.Errorf("store's own default state channel %q differs from the server's %q", got, server.DefaultStateChannel)
	}
	cfg := server.Config{Store: store.Config{MessagesChannel: "msgs", StateChannels: []string{"session"}}}
	if got := cfg.Channels(); !slices.Equal(got, []string{"msgs", "session", store.SavedValueChannel}) {
		t.Errorf("configured channels = %v", got)
	}
	cfg.Store.Backend = storetest.NewMemory()
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Store().StateChannels()[0]; got != "session" {
		t.Errorf("store reads state channel %q, want session", got)
	}
}

// A store without checkpoint tables fails New; one that does not answer
// is served NOT_SERVING until it does; one that answers is SERVING before
// anything is served.
func TestStartupProbe(t *testing.T) {
	mem := storetest.NewMemory()
	mem.SetErr(fmt.Errorf("%w: no checkpoints table", backend.ErrNotCheckpointStore))
	if _, err := server.New(context.Background(), server.Config{Store: store.Config{Backend: mem}}); !errors.Is(err, backend.ErrNotCheckpointStore) {
		t.Errorf("New over a store without tables = %v, want ErrNotCheckpointStore", err)
	}

	mem.SetErr(backend.ErrUnavailable)
	var logs syncbuf.Buffer
	srv := servertest.Start(t, server.Config{
		Store:          store.Config{Backend: mem},
		Service:        service.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		HealthInterval: 10 * time.Millisecond,
	})
	if srv.Serving() {
		t.Error("SERVING with the store down")
	}
	if !strings.Contains(logs.String(), "store unreachable at start") {
		t.Errorf("log %q does not say the store is unreachable", logs.String())
	}
	mem.SetErr(nil)
	eventually(t, "SERVING once the store answers", srv.Serving)

	up, err := server.New(context.Background(), server.Config{Store: store.Config{Backend: storetest.NewMemory()}})
	if err != nil {
		t.Fatal(err)
	}
	if !up.Serving() {
		t.Error("NOT_SERVING after a successful startup probe")
	}
}

// stalling blocks listing checkpoints until the call ends or release is
// closed, and says when a call has entered.
type stalling struct {
	*storetest.Memory
	entered chan struct{}
	release chan struct{}
}

func (s *stalling) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	s.entered <- struct{}{}
	select {
	case <-ctx.Done():
		return backend.Census{}, ctx.Err()
	case <-s.release:
		return s.Memory.List(ctx, ref, q, fn)
	}
}

// Shutdown lets a call in flight finish within the grace period, cancels
// one that outlasts it, and leaves health NOT_SERVING.
func TestShutdown(t *testing.T) {
	for _, tt := range []struct {
		name    string
		finish  bool // the call completes during the grace period
		wantErr codes.Code
	}{
		{"finishes within grace", true, codes.OK},
		{"cancelled after grace", false, codes.Unavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &stalling{Memory: storetest.NewMemory(), entered: make(chan struct{}, 1), release: make(chan struct{})}
			srv := servertest.Start(t, server.Config{Store: store.Config{Backend: b}})
			conn := srv.Conn(t)
			called := make(chan error, 1)
			go func() {
				_, err := historydv1.NewThreadHistoryClient(conn).Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "t"})
				called <- err
			}()
			<-b.entered
			const grace = 200 * time.Millisecond
			if tt.finish {
				time.AfterFunc(grace/4, func() { close(b.release) })
			}
			start := time.Now()
			srv.Shutdown(grace)
			took := time.Since(start)
			err := <-called
			if status.Code(err) != tt.wantErr {
				t.Errorf("call in flight: %v, want %v", err, tt.wantErr)
			}
			if !tt.finish && (took < grace || took > grace+5*time.Second) {
				t.Errorf("Shutdown took %v with a call outlasting the %v grace period", took, grace)
			}
			if srv.Serving() {
				t.Error("SERVING after Shutdown")
			}
			if _, err := healthpb.NewHealthClient(srv.Conn(t)).Check(context.Background(), &healthpb.HealthCheckRequest{}); err == nil {
				t.Error("health answered after Shutdown")
			}
		})
	}
}

// A thread whose parent links loop through checkpoints storing no value,
// written after its index was cached, answers DATA_LOSS naming the loop,
// and Shutdown still returns within its grace period.
func TestShutdownWhateverTheStoreHolds(t *testing.T) {
	mem := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "looped"}
	storetest.Build(mem, ref, storetest.Demo[:1])
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: mem}})
	client := historydv1.NewThreadHistoryClient(srv.Conn(t))
	if _, err := client.Snapshot(context.Background(), &historydv1.SnapshotRequest{ThreadId: ref.ThreadID, Turn: 1}); err != nil {
		t.Fatal(err)
	}
	// The next read refreshes the cached index in the call itself, to
	// check that turn 1's end is still there.
	for i, parent := range []string{"1f0d-3", "1f0d-1", "1f0d-2"} {
		mem.Put(ref, saver.Checkpoint{ID: fmt.Sprintf("1f0d-%d", i+1), Parent: parent, TS: storetest.Base.Add(time.Hour),
			Versions: write.Map{{Key: "messages", Value: 100 + i}},
			Metadata: write.Map{{Key: "source", Value: "loop"}}})
	}
	called := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: ref.ThreadID, Turn: 1})
		called <- err
	}()
	var err error
	answered := false
	select {
	case err = <-called:
		answered = true
	case <-time.After(3 * time.Second):
	}
	const grace = 200 * time.Millisecond
	if took := shutdownWithin(t, srv, grace); took > grace+5*time.Second {
		t.Errorf("Shutdown took %v with a %v grace period", took, grace)
	}
	if !answered {
		t.Fatal("the read of the looped thread had not answered 3s after it began, with a 2s deadline")
	}
	if status.Code(err) != codes.DataLoss || !strings.Contains(status.Convert(err).Message(), "1f0d-1 → 1f0d-3 → 1f0d-2 → 1f0d-1") {
		t.Errorf("read of the looped thread = %v, want DataLoss naming the loop", err)
	}
}

// ignoring, once armed, blocks listing checkpoints, whatever its context
// says, until release is closed: a driver stuck in a read.
type ignoring struct {
	*storetest.Memory
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *ignoring) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	if s.armed.Load() {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Memory.List(ctx, ref, q, fn)
}

// Shutdown returns soon after the grace period even when a call does not
// stop once cancelled: what it waits for is bounded.
func TestShutdownBounded(t *testing.T) {
	b := &ignoring{Memory: storetest.NewMemory(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(b.release)
	ref := backend.Ref{ThreadID: "stuck"}
	storetest.Build(b.Memory, ref, storetest.Demo[:1])
	// Counting on every refresh lists the thread in the call's own
	// goroutine, where a stuck read holds the call.
	srv, err := servertest.New(context.Background(), server.Config{Store: store.Config{Backend: b, RecountEvery: -1}})
	if err != nil {
		t.Fatal(err)
	}
	client := historydv1.NewThreadHistoryClient(srv.Conn(t))
	if _, err := client.Snapshot(context.Background(), &historydv1.SnapshotRequest{ThreadId: ref.ThreadID, Turn: 1}); err != nil {
		t.Fatal(err)
	}
	b.armed.Store(true)
	go func() {
		_, _ = client.Snapshot(context.Background(), &historydv1.SnapshotRequest{ThreadId: ref.ThreadID, Turn: 1})
	}()
	<-b.entered
	const grace = 100 * time.Millisecond
	took := shutdownWithin(t, srv, grace)
	t.Logf("Shutdown returned after %v with a call that ignores its cancellation", took)
	if took > grace+server.StopWait+5*time.Second {
		t.Errorf("Shutdown took %v, with a %v grace period and %v to wait for cancelled calls", took, grace, server.StopWait)
	}
}

// shutdownWithin shuts srv down with grace and returns how long it took,
// failing the test when it has not returned within 20 seconds.
func shutdownWithin(t *testing.T, srv *servertest.Server, grace time.Duration) time.Duration {
	t.Helper()
	var took time.Duration
	_ = storetest.ReturnsWithin(t, 20*time.Second, func() error {
		start := time.Now()
		srv.Shutdown(grace)
		took = time.Since(start)
		return nil
	})
	return took
}

// With metrics on, the handler exports calls, store queries and cache
// statistics; with them off there is none.
func TestMetricsHandler(t *testing.T) {
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "demo"}, storetest.Demo)
	off := servertest.Start(t, server.Config{Store: store.Config{Backend: mem}})
	if off.MetricsHandler() != nil {
		t.Error("a metrics handler with metrics off")
	}
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: mem}, Metrics: true})
	if _, err := srv.Client(t).Snapshots(context.Background(), &historydv1.SnapshotsRequest{ThreadId: "demo"}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.MetricsHandler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Snapshots",grpc_service="historyd.v1.ThreadHistory",grpc_type="unary"} 1`,
		`historyd_store_query_duration_seconds_count{method="Checkpoints"} 1`,
		`historyd_state_cache_misses_total 4`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestOpenBackendRefuses(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, tt := range []struct{ dsn, schema, want string }{
		{"", "", "--dsn or HISTORYD_DSN"},
		{"mysql://u:pw@db/app", "", "unrecognised DSN"},
		{missing, "", "no such file"},
		{"sqlite://" + missing, "app", "--schema applies to PostgreSQL only"},
	} {
		_, err := server.OpenBackend(ctx, tt.dsn, tt.schema, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("OpenBackend(%q, %q) = %v, want an error saying %q", tt.dsn, tt.schema, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("OpenBackend(%q) error shows the password: %v", tt.dsn, err)
		}
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://historyd:s3cret@db:5432/app": "postgres://historyd:xxxxx@db:5432/app",
		"postgres://historyd@db:5432/app":        "postgres://historyd@db:5432/app",
		"sqlite:///var/lib/app.db":               "sqlite:///var/lib/app.db",
	} {
		if got := server.RedactDSN(in); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
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
		time.Sleep(5 * time.Millisecond)
	}
}

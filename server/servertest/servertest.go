// Package servertest runs historyd's real server, as server.New builds it,
// inside a test process: on an in-memory listener (bufconn), and on a
// loopback TCP port as well for clients that need an address, such as the
// Python client. Tests get connections and clients to it, and everything
// stops when the test ends.
//
//	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: mem}})
//	c := srv.Client(t)
package servertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/store/backend"
)

// Target is the gRPC target to dial with Dialer: any name does, since the
// dialer ignores it.
const Target = "passthrough:///historyd.test"

// bufSize is the in-memory connection's buffer in each direction.
const bufSize = 1 << 20

// Option adds to what New starts.
type Option func(*options)

type options struct {
	tcp         bool
	dsn, schema string
	haveDSN     bool
}

// WithTCP serves on a loopback TCP port too; Addr returns it.
func WithTCP() Option { return func(o *options) { o.tcp = true } }

// WithDSN opens the store's backend from dsn (and schema, for
// PostgreSQL) with server.OpenBackend, listing the channels the server's
// configuration reads and tracing with its TracerProvider, as historyd
// serve does; the backend is closed with the server. Config.Store.Backend
// must then be nil.
func WithDSN(dsn, schema string) Option {
	return func(o *options) { o.dsn, o.schema, o.haveDSN = dsn, schema, true }
}

// Server is a historyd server running in the test process. The embedded
// server.Server gives its store, readiness, metrics handler and Shutdown.
type Server struct {
	*server.Server

	lis     *bufconn.Listener
	addr    string
	backend backend.Backend // opened by WithDSN, closed by Close
	served  chan error      // one result per listener
	n       int
	once    sync.Once
	err     error
}

// New builds cfg with server.New and serves it. A nil Service.Logger
// discards the server's logs. Close stops it; tests use Start, which
// does that when the test ends.
func New(ctx context.Context, cfg server.Config, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.Service.Logger == nil {
		cfg.Service.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{}
	if o.haveDSN {
		if cfg.Store.Backend != nil {
			return nil, errors.New("servertest: WithDSN and Config.Store.Backend both name a store")
		}
		b, err := server.OpenBackend(ctx, o.dsn, o.schema, cfg.Channels(), server.WithTracing(cfg.TracerProvider))
		if err != nil {
			return nil, err
		}
		s.backend = b
		cfg.Store.Backend = b
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		s.closeBackend()
		return nil, err
	}
	s.Server = srv
	listeners := []net.Listener{}
	s.lis = bufconn.Listen(bufSize)
	listeners = append(listeners, s.lis)
	if o.tcp {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			srv.Stop()
			s.closeBackend()
			return nil, fmt.Errorf("servertest: listen on loopback: %w", err)
		}
		s.addr = tl.Addr().String()
		listeners = append(listeners, tl)
	}
	s.n = len(listeners)
	s.served = make(chan error, s.n)
	for _, l := range listeners {
		go func() { s.served <- srv.Serve(l) }()
	}
	return s, nil
}

// Start is New for a test: it fails t when the server cannot be built,
// and stops the server when t ends, failing t if serving failed.
func Start(t testing.TB, cfg server.Config, opts ...Option) *Server {
	t.Helper()
	s, err := New(t.Context(), cfg, opts...)
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("servertest: %v", err)
		}
	})
	return s
}

// Close stops the server at once, waits for it to stop serving, and
// closes a backend WithDSN opened. It returns the first error a listener
// was served with. Closing twice is harmless.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.Stop()
		for range s.n {
			// A listener whose Serve had not begun when Stop ran reports
			// ErrServerStopped: stopped, as asked.
			if err := <-s.served; err != nil && !errors.Is(err, grpc.ErrServerStopped) && s.err == nil {
				s.err = fmt.Errorf("serve: %w", err)
			}
		}
		s.closeBackend()
	})
	return s.err
}

func (s *Server) closeBackend() {
	if s.backend != nil {
		s.backend.Close()
	}
}

// Dialer connects to the in-memory listener whatever the target; use it
// with Target.
func (s *Server) Dialer() grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return s.lis.DialContext(ctx) })
}

// Dial returns a connection to the in-memory listener: plaintext unless
// opts give transport credentials, which then replace plaintext.
func (s *Server) Dial(opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	all := append([]grpc.DialOption{s.Dialer(), grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	return grpc.NewClient(Target, all...)
}

// Conn is Dial for a test: it fails t on error and closes the connection
// when t ends.
func (s *Server) Conn(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := s.Dial(opts...)
	if err != nil {
		t.Fatalf("servertest: dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Client returns a ThreadHistory client over a plaintext connection from
// Conn.
func (s *Server) Client(t testing.TB) historydv1.ThreadHistoryClient {
	t.Helper()
	return historydv1.NewThreadHistoryClient(s.Conn(t))
}

// Metrics returns what the metrics handler exports now, in Prometheus's
// text format; it fails t when metrics are off.
func (s *Server) Metrics(t testing.TB) string {
	t.Helper()
	h := s.MetricsHandler()
	if h == nil {
		t.Fatal("servertest: metrics are off (server.Config.Metrics)")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("servertest: /metrics answered %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// Addr is the loopback TCP address served with WithTCP ("host:port"), or
// "" without it.
func (s *Server) Addr() string { return s.addr }

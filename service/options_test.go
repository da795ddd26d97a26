package service

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// served is a Server behind the full option set, reachable in memory.
type served struct {
	svc *Server
	lis *bufconn.Listener
}

// serveWith serves b with ServerOptions(o) over an in-memory listener.
func serveWith(t *testing.T, b store.Backend, o Options) *served {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(ServerOptions(o)...)
	svc := New(Config{Store: store.New(store.Config{Backend: b}), Logger: o.Logger})
	svc.Register(gs)
	svc.SetServing(true)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return &served{svc: svc, lis: lis}
}

// conn dials the server, in plaintext unless tc is given.
func (s *served) conn(t *testing.T, tc *tls.Config) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return s.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (s *served) client(t *testing.T) historydv1.ThreadHistoryClient {
	return historydv1.NewThreadHistoryClient(s.conn(t, nil))
}

// withToken returns ctx sending token as a bearer token.
func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// countingBackend records which threads the store was asked about.
type countingBackend struct {
	store.Backend
	mu   sync.Mutex
	asks map[string]int
}

func newCounting(b store.Backend) *countingBackend {
	return &countingBackend{Backend: b, asks: map[string]int{}}
}

func (c *countingBackend) note(ref store.Ref) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asks[ref.ThreadID]++
}

func (c *countingBackend) asked(thread string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asks[thread]
}

func (c *countingBackend) List(ctx context.Context, ref store.Ref, q store.Query, fn func(store.Row) error) (store.Census, error) {
	c.note(ref)
	return c.Backend.List(ctx, ref, q, fn)
}

func (c *countingBackend) EachValue(ctx context.Context, ref store.Ref, channel string, ids []string, fn func(int, store.Blob) error) error {
	c.note(ref)
	return c.Backend.EachValue(ctx, ref, channel, ids, fn)
}

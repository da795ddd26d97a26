package service_test

import (
	"context"
	"crypto/tls"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// served is historyd's server with options o, reachable in memory.
type served struct{ *servertest.Server }

// serveWith serves b with historyd's server and the service options o.
func serveWith(t *testing.T, b backend.Backend, o service.Options) served {
	t.Helper()
	return served{servertest.Start(t, server.Config{Store: store.Config{Backend: b}, Service: o})}
}

// conn dials the server, in plaintext unless tc is given.
func (s served) conn(t *testing.T, tc *tls.Config) *grpc.ClientConn {
	t.Helper()
	if tc == nil {
		return s.Conn(t)
	}
	return s.Conn(t, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
}

func (s served) client(t *testing.T) historydv1.ThreadHistoryClient {
	return s.Client(t)
}

// withToken returns ctx sending token as a bearer token.
func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// countingBackend records which threads the store was asked about.
type countingBackend struct {
	backend.Backend
	mu   sync.Mutex
	asks map[string]int
}

func newCounting(b backend.Backend) *countingBackend {
	return &countingBackend{Backend: b, asks: map[string]int{}}
}

func (c *countingBackend) note(ref backend.Ref) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asks[ref.ThreadID]++
}

func (c *countingBackend) asked(thread string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asks[thread]
}

func (c *countingBackend) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	c.note(ref)
	return c.Backend.List(ctx, ref, q, fn)
}

func (c *countingBackend) EachValue(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(int, backend.Blob) error) error {
	c.note(ref)
	return c.Backend.EachValue(ctx, ref, channel, ids, fn)
}

package service_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/auth/authtest"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// openWatch is a WatchTurns stream read on a goroutine: its messages, and
// once it ends, its error and trailer.
type openWatch struct {
	ch      chan *historydv1.WatchTurnsResponse
	end     chan error
	trailer func() metadata.MD
}

func startWatch(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread string) openWatch {
	t.Helper()
	stream, err := c.WatchTurns(ctx, &historydv1.WatchTurnsRequest{ThreadId: thread})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	w := openWatch{ch: make(chan *historydv1.WatchTurnsResponse, 100), end: make(chan error, 1), trailer: stream.Trailer}
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				w.end <- err
				return
			}
			w.ch <- m
		}
	}()
	return w
}

// ended waits for the stream's end.
func (w openWatch) ended(t *testing.T, within time.Duration) error {
	t.Helper()
	for {
		select {
		case <-w.ch:
		case err := <-w.end:
			return err
		case <-time.After(within):
			t.Fatalf("the stream still runs %v later", within)
		}
	}
}

// running checks that the stream has not ended, after draining what it
// sent.
func (w openWatch) running(t *testing.T) {
	t.Helper()
	for {
		select {
		case <-w.ch:
		case err := <-w.end:
			t.Fatalf("the stream ended: %v", err)
		case <-time.After(100 * time.Millisecond):
			return
		}
	}
}

// A reload of the token file holds every open stream to it, as a fresh
// call with the same credential would be held: a revoked token's watch
// ends UNAUTHENTICATED, a tenant no longer granted the thread's watch
// PERMISSION_DENIED, a stream in flight (StreamSnapshots) likewise, and a
// watch of a thread the tenant may now read, which tenant isolation had
// answered over its empty store, ends UNAVAILABLE with the resume trailer,
// so that the call made again reads the thread. Streams the new file
// still allows go on, and keep delivering turns.
func TestReloadReauthorizesStreams(t *testing.T) {
	m := storetest.NewMemory()
	runs := map[string]*runThread{}
	for _, id := range []string{"a/1", "a/2", "b/1", "c/1"} {
		r := &runThread{w: m, ref: backend.Ref{ThreadID: id}}
		r.put("input", "__start__")
		r.begin(1)
		r.end(1, 1.0)
		runs[id] = r
	}
	slow := &blockingValues{Backend: m, release: make(chan struct{}), blocked: make(chan struct{}, 1)}
	path := filepath.Join(t.TempDir(), "tokens.json")
	authtest.WriteFile(t, path, authtest.TokenFile(t,
		authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"token-a"}},
		authtest.Tenant{Name: "b", Prefixes: []string{"b/"}, Tokens: []string{"token-b"}},
		authtest.Tenant{Name: "c", Prefixes: []string{"c/"}, Tokens: []string{"token-c", "token-c2"}},
	))
	a := newAuth(t, path)
	c := watchServer(t, slow, service.WatchConfig{}, service.Options{Auth: a}).Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	revoked := startWatch(t, withToken(ctx, "token-a"), c, "a/1")
	narrowed := startWatch(t, withToken(ctx, "token-b"), c, "b/1")
	kept := startWatch(t, withToken(ctx, "token-c2"), c, "c/1")
	widened := startWatch(t, withToken(ctx, "token-c"), c, "b/1") // isolated: b's thread
	for _, w := range []openWatch{revoked, narrowed, kept, widened} {
		w.running(t)
	}
	slow.block.Store(true)
	inFlight := make(chan error, 1)
	go func() {
		_, err := readStream(withToken(ctx, "token-a"), c, &historydv1.StreamSnapshotsRequest{ThreadId: "a/2"})
		inFlight <- err
	}()
	slow.waitBlocked(t)

	authtest.WriteFile(t, path, authtest.TokenFile(t,
		authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"token-a-new"}},
		authtest.Tenant{Name: "b", Prefixes: []string{"b2/"}, Tokens: []string{"token-b"}},
		authtest.Tenant{Name: "c", Prefixes: []string{"c/", "b/"}, Tokens: []string{"token-c", "token-c2"}},
	))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		w      openWatch
		code   codes.Code
		resume string
	}{
		{"revoked token", revoked, codes.Unauthenticated, ""},
		{"tenant no longer granted the thread", narrowed, codes.PermissionDenied, ""},
		{"tenant now granted the thread", widened, codes.Unavailable, service.ResumeReauthorized},
	} {
		err := tt.w.ended(t, 2*time.Second)
		if status.Code(err) != tt.code {
			t.Errorf("%s: the watch ended with %v, want %v", tt.name, err, tt.code)
		}
		if got := tt.w.trailer().Get(service.ResumeTrailer); tt.resume == "" && len(got) != 0 || tt.resume != "" && (len(got) != 1 || got[0] != tt.resume) {
			t.Errorf("%s: resume trailer %v, want %q", tt.name, got, tt.resume)
		}
	}
	select {
	case err := <-inFlight:
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("StreamSnapshots in flight with the revoked token ended with %v, want Unauthenticated", err)
		}
	case <-time.After(2 * time.Second):
		t.Error("StreamSnapshots in flight with the revoked token still runs 2s after the reload")
	}
	slow.block.Store(false)
	close(slow.release)

	// What a fresh call gets, for comparison.
	if got := ask(withToken(ctx, "token-a"), c, "Turns", "a/1"); got.code != codes.Unauthenticated {
		t.Errorf("a fresh call with the revoked token: %v", got)
	}

	// The stream the new file still allows goes on, turns and all.
	kept.running(t)
	// The next run goes on from c/1's head, as the host's next question does.
	r := runs["c/1"]
	r.put("input", "__start__")
	r.begin(2)
	r.end(2, 2.0)
	select {
	case msg := <-kept.ch:
		if msg.GetTurnEnded() == nil {
			t.Errorf("kept watch got %v, want a turn", msg)
		}
	case err := <-kept.end:
		t.Fatalf("the allowed watch ended: %v", err)
	case <-time.After(2 * time.Second):
		t.Fatal("the allowed watch got no new turn within 2s")
	}
}

// blockingValues blocks listings of thread "a/2" while block is set,
// until release is closed or the call's context ends, so that a stream
// of it can be caught in flight.
type blockingValues struct {
	backend.Backend
	block   atomic.Bool
	release chan struct{}
	blocked chan struct{}
}

func (b *blockingValues) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	if ref.ThreadID == "a/2" && b.block.Load() {
		b.signal()
		select {
		case <-b.release:
		case <-ctx.Done():
			return backend.Census{}, ctx.Err()
		}
	}
	return b.Backend.List(ctx, ref, q, fn)
}

func (b *blockingValues) signal() {
	select {
	case b.blocked <- struct{}{}:
	default:
	}
}

func (b *blockingValues) waitBlocked(t *testing.T) {
	t.Helper()
	select {
	case <-b.blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream never reached the store")
	}
}

// A client certificate removed from the token file ends the streams made
// with it, over real mutual TLS.
func TestReloadRevokesClientCertificateStreams(t *testing.T) {
	ca, stls := mutualTLS(t)
	m := storetest.NewMemory()
	storetest.Build(m, backend.Ref{ThreadID: "a/1"}, demoTurns)
	path := filepath.Join(t.TempDir(), "tokens.json")
	authtest.WriteFile(t, path, authtest.TokenFile(t, authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, ClientCerts: []string{"cn:agent-a"}}))
	a := newAuth(t, path)
	s := watchServer(t, m, service.WatchConfig{}, service.Options{Auth: a, TLS: stls.Config()})
	tc := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{ca.Client(authtest.Identity{CN: "agent-a"}).Cert}}
	c := historydv1.NewThreadHistoryClient(served{s}.conn(t, tc))
	w := startWatch(t, context.Background(), c, "a/1")
	w.running(t)
	authtest.WriteFile(t, path, authtest.TokenFile(t, authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, ClientCerts: []string{"cn:agent-a2"}}))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := w.ended(t, 2*time.Second); status.Code(err) != codes.Unauthenticated {
		t.Errorf("the watch of a removed certificate ended with %v, want Unauthenticated", err)
	}
}

// A stream ends at the maximum age with UNAVAILABLE and the resume
// trailer; unary calls are not affected.
func TestStreamMaxAge(t *testing.T) {
	m := storetest.NewMemory()
	storetest.Build(m, backend.Ref{ThreadID: "t"}, demoTurns)
	const age = 300 * time.Millisecond
	s := watchServer(t, m, service.WatchConfig{}, service.Options{StreamMaxAge: age})
	c := s.Client(t)
	start := time.Now()
	w := startWatch(t, context.Background(), c, "t")
	err := w.ended(t, 5*time.Second)
	took := time.Since(start)
	if status.Code(err) != codes.Unavailable || took < age {
		t.Errorf("the watch ended after %v with %v, want UNAVAILABLE after %v", took, err, age)
	}
	if got := w.trailer().Get(service.ResumeTrailer); len(got) != 1 || got[0] != service.ResumeMaxAge {
		t.Errorf("resume trailer %v, want %q", got, service.ResumeMaxAge)
	}
	var hdr metadata.MD
	if _, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "t"}, grpc.Trailer(&hdr)); err != nil || len(hdr.Get(service.ResumeTrailer)) != 0 {
		t.Errorf("unary call: %v, trailer %v", err, hdr)
	}
}

// The resume trailer is the one every client knows (client/testdata/defaults.json).
func TestResumeTrailerIsTheClients(t *testing.T) {
	raw, err := os.ReadFile("../client/testdata/defaults.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		ResumeTrailer string `json:"resume_trailer"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.ResumeTrailer != service.ResumeTrailer {
		t.Errorf("clients resume on trailer %q, the server sends %q", d.ResumeTrailer, service.ResumeTrailer)
	}
}

// A watch the caller's deadline ends was not kept waiting by the store:
// the server says the deadline passed, and not that the store failed to
// answer.
func TestWatchDeadlineNotBlamedOnStore(t *testing.T) {
	m := storetest.NewMemory()
	storetest.Build(m, backend.Ref{ThreadID: "t"}, demoTurns)
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	// The deadline is set on the server's side, right before the handler,
	// so that it, and not the client's cancellation, ends the call.
	cfg := server.Config{Store: store.Config{Backend: m}, Service: service.Options{Logger: log},
		GRPCOptions: []grpc.ServerOption{grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, cancel := context.WithTimeout(ss.Context(), 300*time.Millisecond)
			defer cancel()
			return h(srv, &deadlineStream{ServerStream: ss, ctx: ctx})
		})}}
	cfg.Watch.PollInterval = 10 * time.Millisecond
	c := servertest.Start(t, cfg).Client(t)
	stream, err := c.WatchTurns(context.Background(), &historydv1.WatchTurnsRequest{ThreadId: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the watch ended with %v, want DEADLINE_EXCEEDED", err)
	}
	// The request log has the server's answer as it left.
	deadline := time.Now().Add(2 * time.Second)
	for {
		for _, r := range logged(t, &buf) {
			if r["msg"] == "finished call" && r["grpc.method"] == "WatchTurns" {
				if got := fmt.Sprint(r["grpc.error"]); got != "rpc error: code = DeadlineExceeded desc = "+service.MessageDeadline {
					t.Errorf("the server ended the watch with %q, want %q", got, service.MessageDeadline)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request log line for the watch:\n%s", buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logged is the log's records so far, none while it is empty.
func logged(t *testing.T, buf *syncBuffer) []map[string]any {
	t.Helper()
	if buf.String() == "" {
		return nil
	}
	return buf.records(t)
}

// deadlineStream is a stream with a context of the test's.
type deadlineStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *deadlineStream) Context() context.Context { return s.ctx }

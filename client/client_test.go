package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"maps"
	"math/big"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// running is historyd's server, serving in memory.
type running struct{ *servertest.Server }

// serve starts historyd over mem, with grpc options added to historyd's
// own (test interceptors) and service options o.
func serve(t *testing.T, mem *storetest.Memory, opts ...grpc.ServerOption) *running {
	t.Helper()
	return serveWith(t, mem, service.Options{}, opts...)
}

func serveWith(t *testing.T, mem *storetest.Memory, o service.Options, opts ...grpc.ServerOption) *running {
	t.Helper()
	return &running{servertest.Start(t, server.Config{Store: store.Config{Backend: mem}, Service: o, GRPCOptions: opts})}
}

// dial returns a Client over s, plaintext.
func (s *running) dial(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(servertest.Target, append([]client.Option{client.WithInsecure(), client.WithDialOptions(s.Dialer())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// conn returns a plain gRPC connection to s, for New.
func (s *running) conn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	return s.Conn(t)
}

var demo = []storetest.Turn{
	{Question: "sketch the Severn", Writes: map[string]any{"area": 11420.0, "name": "Severn"}},
	{Question: "now the Thames", Writes: map[string]any{"area": 12935.0, "name": "Thames"}},
	{Question: "compare them"},
	{Question: "and the Wye?", Writes: map[string]any{"name": "Wye", "shape": map[string]any{"type": "Point", "coordinates": []any{-2.7, 51.6}}}},
}

// pruned builds demo into a fresh backend and deletes turns 1 and 2.
func pruned(ref backend.Ref) *storetest.Memory {
	mem := storetest.NewMemory()
	written := storetest.Build(mem, ref, demo)
	var gone []string
	for _, w := range written[:2] {
		gone = append(gone, w.IDs...)
	}
	mem.Delete(ref, gone)
	return mem
}

func TestSnapshots(t *testing.T) {
	mem := storetest.NewMemory()
	written := storetest.Build(mem, backend.Ref{ThreadID: "demo"}, demo)
	c := serve(t, mem).dial(t)
	ctx := context.Background()

	h, err := c.Snapshots(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if h.Total != 4 || !slices.Equal(h.Retained(), []int{1, 2, 3, 4}) {
		t.Fatalf("total %d, retained %v; want 4, [1 2 3 4]", h.Total, h.Retained())
	}
	for i, ts := range h.Turns {
		if ts.Turn != i+1 || ts.Question != demo[i].Question || ts.CheckpointID != written[i].End || ts.EndedAt.IsZero() {
			t.Errorf("turn %d = %+v", i+1, ts)
		}
	}
	name := h.Turns[1].State["name"]
	want := client.Entry{Value: "Thames", Tool: "tool_name", Seq: 4, Turn: 2, TurnsWritten: 2}
	if name.Value != want.Value || name.Tool != want.Tool || name.Seq != want.Seq || name.Turn != want.Turn || name.TurnsWritten != want.TurnsWritten {
		t.Errorf("turn 2 name = %+v, want %+v", name, want)
	}
	shape := h.Turns[3].State["shape"].Value.(map[string]any)
	if shape["type"] != "Point" || shape["coordinates"].([]any)[0] != -2.7 {
		t.Errorf("turn 4 shape = %#v", shape)
	}
	if latest, ok := h.Latest(); !ok || latest.Turn != 4 {
		t.Errorf("Latest = %d, %v", latest.Turn, ok)
	}

	proj, err := c.Snapshots(ctx, "demo", client.WithKeys("name"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range proj.Turns {
		if got := slices.Collect(maps.Keys(ts.State)); !slices.Equal(got, []string{"name"}) {
			t.Errorf("projected turn %d has keys %v", ts.Turn, got)
		}
	}

	none, err := c.Snapshots(ctx, "no-such-thread")
	if err != nil || none.Total != 0 || len(none.Turns) != 0 {
		t.Errorf("unknown thread = %+v, %v; want total 0, no turns", none, err)
	}
}

func TestSnapshotOutcomes(t *testing.T) {
	ref := backend.Ref{ThreadID: "pruned"}
	c := serve(t, pruned(ref)).dial(t)
	ctx := context.Background()
	all, err := c.Snapshots(ctx, "pruned")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		turn int
		want client.Outcome
	}{
		{0, client.NoSuchTurn}, {1, client.NoLongerRetained}, {2, client.NoLongerRetained},
		{3, client.Found}, {4, client.Found}, {5, client.NoSuchTurn}, {client.MaxTurn, client.NoSuchTurn},
	} {
		s, err := c.Snapshot(ctx, "pruned", tt.turn)
		if err != nil {
			t.Fatalf("turn %d: %v", tt.turn, err)
		}
		if s.Outcome != tt.want || s.Turn != tt.turn || s.Total != 4 || !slices.Equal(s.Retained, []int{3, 4}) {
			t.Errorf("turn %d = %v turn %d total %d retained %v; want %v, 4, [3 4]", tt.turn, s.Outcome, s.Turn, s.Total, s.Retained, tt.want)
		}
		switch s.Outcome {
		case client.Found:
			if s.State == nil || s.CheckpointID == "" || s.Question != demo[tt.turn-1].Question {
				t.Errorf("turn %d found without its state: %+v", tt.turn, s)
			}
		case client.NoLongerRetained:
			if s.State != nil || s.CheckpointID != "" {
				t.Errorf("turn %d pruned but carries state: %+v", tt.turn, s)
			}
			if s.Question != demo[tt.turn-1].Question {
				t.Errorf("turn %d question = %q", tt.turn, s.Question)
			}
		case client.NoSuchTurn:
			if s.State != nil || s.Question != "" {
				t.Errorf("turn %d never happened but carries data: %+v", tt.turn, s)
			}
		}
		// History.At draws the same distinction from a Snapshots answer.
		if at := all.At(tt.turn); at.Outcome != s.Outcome || !slices.Equal(at.Retained, s.Retained) {
			t.Errorf("History.At(%d) = %v, Snapshot says %v", tt.turn, at.Outcome, s.Outcome)
		}
	}
	if s, _ := c.Snapshot(ctx, "pruned", 3, client.WithKeys("area")); len(s.State) != 1 || s.State["area"].Value != 12935.0 {
		t.Errorf("projected snapshot = %+v", s.State)
	}
}

// A turn number outside what its field takes (0, the default, to
// MaxTurn) is refused with InvalidArgument naming the field
// and its range, and nothing reaches the server: the wire's int32 would
// otherwise carry some other number, or the server refuse it.
func TestTurnsOutOfRangeRefusedBeforeSending(t *testing.T) {
	var calls atomic.Int32
	count := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		calls.Add(1)
		return h(ctx, req)
	})
	countStreams := grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		calls.Add(1)
		return h(srv, ss)
	})
	c := serve(t, pruned(backend.Ref{ThreadID: "pruned"}), count, countStreams).dial(t)
	ctx := context.Background()
	first := func(seq func(func(*client.TurnState, error) bool)) error {
		for _, err := range seq {
			return err
		}
		return nil
	}
	firstEvent := func(seq func(func(*client.WatchEvent, error) bool)) error {
		for _, err := range seq {
			return err
		}
		return nil
	}
	for _, tt := range []struct {
		name, field string
		call        func() error
	}{
		{"Snapshot -3", "turn -3: must be 0 to 2147483647", func() error { _, err := c.Snapshot(ctx, "pruned", -3); return err }},
		{"Snapshot 2^31", "turn 2147483648: must be 0 to 2147483647", func() error { _, err := c.Snapshot(ctx, "pruned", 1<<31); return err }},
		{"Snapshot 2^32+1", "turn 4294967297: must be 0 to 2147483647", func() error { _, err := c.Snapshot(ctx, "pruned", 1<<32+1); return err }},
		{"Diff to -1", "to_turn -1: must be 0 to 2147483647", func() error { _, err := c.Diff(ctx, "pruned", client.DiffQuery{To: -1}); return err }},
		{"Diff from 2^31", "from_turn 2147483648: must be 0 to 2147483647", func() error {
			_, err := c.Diff(ctx, "pruned", client.DiffQuery{To: 3, From: 1 << 31})
			return err
		}},
		{"StreamSnapshots from -1", "from_turn -1: must be 0 to 2147483647", func() error {
			return first(c.StreamSnapshots(ctx, "pruned", client.WithFromTurn(-1)))
		}},
		{"StreamSnapshots from 2^32+1", "from_turn 4294967297: must be 0 to 2147483647", func() error {
			return first(c.StreamSnapshots(ctx, "pruned", client.WithFromTurn(1<<32+1)))
		}},
		{"WatchTurns after 2^31", "after_turn 2147483648: must be 0 to 2147483647", func() error {
			return firstEvent(c.WatchTurns(ctx, "pruned", client.WatchQuery{AfterTurn: 1 << 31}))
		}},
		{"WatchTurns after -1", "after_turn -1: must be 0 to 2147483647", func() error {
			return firstEvent(c.WatchTurns(ctx, "pruned", client.WatchQuery{AfterTurn: -1}))
		}},
	} {
		err := tt.call()
		if st, _ := status.FromError(err); status.Code(err) != codes.InvalidArgument || !strings.Contains(st.Message(), tt.field) {
			t.Errorf("%s: %v; want InvalidArgument saying %q", tt.name, err, tt.field)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d calls reached the server", n)
	}
	// The edges are sent.
	for _, n := range []int{0, client.MaxTurn} {
		if s, err := c.Snapshot(ctx, "pruned", n); err != nil || s.Outcome != client.NoSuchTurn {
			t.Errorf("Snapshot of turn %d = %+v, %v; want NoSuchTurn", n, s, err)
		}
	}
	if _, err := c.Diff(ctx, "pruned", client.DiffQuery{To: 4, From: 0}); err != nil {
		t.Errorf("Diff to 4 from 0: %v", err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d calls reached the server, want 3", n)
	}
}

func TestCurrent(t *testing.T) {
	ref := backend.Ref{ThreadID: "pruned"}
	c := serve(t, pruned(ref)).dial(t)
	ctx := context.Background()
	s, err := client.Current(ctx, c, "pruned", client.WithKeys("name"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Outcome != client.Found || s.Turn != 4 || s.State["name"].Value != "Wye" || len(s.State) != 1 {
		t.Errorf("Current = %+v", s)
	}
	empty, err := client.Current(ctx, c, "nobody")
	if err != nil || empty.Outcome != client.NoSuchTurn || empty.Total != 0 {
		t.Errorf("Current of an unknown thread = %+v, %v", empty, err)
	}
	if _, err := client.Current(ctx, nil, "pruned"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Current over nil history = %v", err)
	}
}

func TestTurnsAndNamespace(t *testing.T) {
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "t", Namespace: "sub:1"}, demo[:2])
	c := serve(t, mem).dial(t)
	ctx := context.Background()

	root, err := c.Snapshots(ctx, "t")
	if err != nil || root.Total != 0 {
		t.Errorf("root namespace = %+v, %v; want nothing there", root, err)
	}
	sub, err := c.Snapshots(ctx, "t", client.WithNamespace("sub:1"))
	if err != nil || sub.Total != 2 {
		t.Errorf("sub namespace = %+v, %v; want 2 turns", sub, err)
	}
	turns, err := c.Turns(ctx, "t", client.WithNamespace("sub:1"), client.WithKeysWritten())
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 2 || turns[1].Question != "now the Thames" || !turns[1].Retained || !slices.Equal(turns[1].KeysWritten, []string{"area", "name"}) {
		t.Errorf("Turns = %+v", turns)
	}
}

// flaky fails the first n calls with UNAVAILABLE, counting every call and
// recording the retry attempt header.
type flaky struct {
	fail     int32
	calls    atomic.Int32
	mu       sync.Mutex
	attempts []string
}

func (f *flaky) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	n := f.calls.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.attempts = append(f.attempts, firstOf(md.Get("x-retry-attempt")))
	f.mu.Unlock()
	if n <= f.fail {
		return nil, status.Error(codes.Unavailable, "store restarting")
	}
	return h(ctx, req)
}

func firstOf(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func TestRetry(t *testing.T) {
	ctx := context.Background()
	t.Run("recovers after two UNAVAILABLE", func(t *testing.T) {
		f := &flaky{fail: 2}
		c := serve(t, pruned(backend.Ref{ThreadID: "p"}), grpc.UnaryInterceptor(f.intercept)).dial(t, client.WithRetry(3, time.Millisecond))
		s, err := c.Snapshot(ctx, "p", 3)
		if err != nil || s.Outcome != client.Found {
			t.Fatalf("Snapshot = %+v, %v", s, err)
		}
		if f.calls.Load() != 3 || !slices.Equal(f.attempts, []string{"", "1", "2"}) {
			t.Errorf("calls %d, attempt headers %q; want 3, [\"\" 1 2]", f.calls.Load(), f.attempts)
		}
	})
	t.Run("gives up with the status", func(t *testing.T) {
		f := &flaky{fail: 100}
		c := serve(t, storetest.NewMemory(), grpc.UnaryInterceptor(f.intercept)).dial(t, client.WithRetry(2, time.Millisecond))
		_, err := c.Snapshots(ctx, "p")
		if st, ok := status.FromError(err); !ok || st.Code() != codes.Unavailable || st.Message() != "store restarting" {
			t.Errorf("error = %v; want the server's UNAVAILABLE status", err)
		}
		if f.calls.Load() != 3 {
			t.Errorf("calls = %d, want 3 (one try, two retries)", f.calls.Load())
		}
	})
	t.Run("disabled", func(t *testing.T) {
		f := &flaky{fail: 1}
		c := serve(t, storetest.NewMemory(), grpc.UnaryInterceptor(f.intercept)).dial(t, client.WithRetry(0, 0))
		if _, err := c.Snapshots(ctx, "p"); status.Code(err) != codes.Unavailable || f.calls.Load() != 1 {
			t.Errorf("error %v after %d calls; want UNAVAILABLE after 1", err, f.calls.Load())
		}
	})
	t.Run("other codes are not retried", func(t *testing.T) {
		f := &flaky{}
		c := serve(t, storetest.NewMemory(), grpc.UnaryInterceptor(f.intercept)).dial(t, client.WithRetry(3, time.Millisecond))
		_, err := c.Snapshot(ctx, "", 1)
		if status.Code(err) != codes.InvalidArgument || f.calls.Load() != 1 {
			t.Errorf("error %v after %d calls; want INVALID_ARGUMENT after 1", err, f.calls.Load())
		}
		if st, _ := status.FromError(err); len(st.Details()) != 1 {
			t.Errorf("details = %v; want the server's BadRequest kept", st.Details())
		}
	})
	t.Run("store down", func(t *testing.T) {
		mem := storetest.NewMemory()
		mem.SetErr(backend.ErrUnavailable)
		c := serve(t, mem).New(t, client.WithRetry(1, time.Millisecond))
		if _, err := c.Snapshot(ctx, "p", 1); status.Code(err) != codes.Unavailable {
			t.Errorf("error = %v, want UNAVAILABLE", err)
		}
	})
}

// New returns a Client from New over a plaintext connection to s.
func (s *running) New(t *testing.T, opts ...client.Option) *client.Client {
	return client.New(s.conn(t), opts...)
}

// authSeen records the authorization header of each call.
type authSeen struct {
	mu  sync.Mutex
	got []string
}

func (a *authSeen) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	a.mu.Lock()
	a.got = append(a.got, firstOf(md.Get("authorization")))
	a.mu.Unlock()
	return h(ctx, req)
}

func TestToken(t *testing.T) {
	ctx := context.Background()
	t.Run("insecure allowed explicitly", func(t *testing.T) {
		seen := &authSeen{}
		s := serve(t, storetest.NewMemory(), grpc.UnaryInterceptor(seen.intercept))
		if _, err := s.dial(t, client.WithToken("s3cret")).Snapshots(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.New(t, client.WithToken("other"), client.WithInsecure()).Snapshots(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seen.got, []string{"Bearer s3cret", "Bearer other"}) {
			t.Errorf("authorization = %q", seen.got)
		}
	})
	t.Run("refused without transport security", func(t *testing.T) {
		seen := &authSeen{}
		s := serve(t, storetest.NewMemory(), grpc.UnaryInterceptor(seen.intercept))
		_, err := s.New(t, client.WithToken("s3cret")).Snapshots(ctx, "t")
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("error = %v, want UNAUTHENTICATED", err)
		}
		if len(seen.got) != 0 {
			t.Errorf("the server saw %d calls; the token must not leave the client", len(seen.got))
		}
	})
	t.Run("over TLS", func(t *testing.T) {
		cert, roots := selfSigned(t)
		seen := &authSeen{}
		s := serveWith(t, storetest.NewMemory(), service.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}, grpc.UnaryInterceptor(seen.intercept))
		c, err := client.Dial(servertest.Target,
			client.WithTLS(&tls.Config{RootCAs: roots, ServerName: "historyd.test"}),
			client.WithToken("s3cret"),
			client.WithDialOptions(s.Dialer()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Snapshots(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seen.got, []string{"Bearer s3cret"}) {
			t.Errorf("authorization = %q", seen.got)
		}
	})
}

// selfSigned makes a certificate for historyd.test and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "historyd.test"},
		DNSNames:     []string{"historyd.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots
}

func TestTimeout(t *testing.T) {
	slow := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Second):
			return h(ctx, req)
		}
	}
	c := serve(t, storetest.NewMemory(), grpc.UnaryInterceptor(slow)).dial(t, client.WithTimeout(50*time.Millisecond))
	start := time.Now()
	_, err := c.Snapshots(context.Background(), "t")
	if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v; want DEADLINE_EXCEEDED matching context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("call took %v despite a 50ms timeout", d)
	}
}

func TestNoConnection(t *testing.T) {
	ctx := context.Background()
	check := func(name string, c *client.Client, want codes.Code) {
		t.Helper()
		if _, err := c.Snapshot(ctx, "t", 1); status.Code(err) != want {
			t.Errorf("%s: Snapshot error = %v, want %v", name, err, want)
		}
		if _, err := c.Snapshots(ctx, "t"); status.Code(err) != want {
			t.Errorf("%s: Snapshots error = %v, want %v", name, err, want)
		}
		if _, err := c.Turns(ctx, "t"); status.Code(err) != want {
			t.Errorf("%s: Turns error = %v, want %v", name, err, want)
		}
	}
	check("nil connection", client.New(nil), codes.FailedPrecondition)
	check("typed nil connection", client.New((*grpc.ClientConn)(nil)), codes.FailedPrecondition)
	check("nil client", nil, codes.FailedPrecondition)
	var nilClient *client.Client
	if err := nilClient.Close(); err != nil {
		t.Errorf("nil Close = %v", err)
	}

	s := serve(t, storetest.NewMemory())
	dialed := s.dial(t)
	if _, err := dialed.Snapshots(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := dialed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dialed.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	check("closed client", dialed, codes.FailedPrecondition)

	// Close on a Client from New leaves the caller's connection usable.
	conn := s.conn(t)
	shared := client.New(conn)
	shared.Close()
	check("closed shared client", shared, codes.FailedPrecondition)
	if _, err := client.New(conn).Snapshots(ctx, "t"); err != nil {
		t.Errorf("connection closed by a Client that did not own it: %v", err)
	}

	// A connection its owner closed fails calls instead of panicking.
	conn.Close()
	if _, err := client.New(conn, client.WithRetry(0, 0)).Snapshots(ctx, "t"); err == nil {
		t.Error("call over a closed connection succeeded")
	}
}

func TestDialErrors(t *testing.T) {
	if _, err := client.Dial(""); err == nil {
		t.Error("Dial of an empty target succeeded")
	}
	if _, err := client.Dial("localhost:1", client.WithTLS(&tls.Config{}), client.WithInsecure()); err == nil {
		t.Error("Dial with both WithTLS and WithInsecure succeeded")
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[client.Outcome]string{client.Found: "found", client.NoSuchTurn: "no_such_turn", client.NoLongerRetained: "no_longer_retained", 0: "Outcome(0)"} {
		if o.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(o), o.String(), want)
		}
	}
}

func TestErrorText(t *testing.T) {
	c := serve(t, storetest.NewMemory()).dial(t)
	_, err := c.Snapshot(context.Background(), "", 1)
	if err == nil {
		t.Fatal("empty thread id accepted")
	}
	const want = `historyd Snapshot(thread ""): InvalidArgument: thread_id: is required`
	if err.Error() != want {
		t.Errorf("error text = %q, want %q", err.Error(), want)
	}
}

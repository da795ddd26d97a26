package service_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// Each tenant has its own bucket: a's calls past the burst are refused
// with a retry hint, while b's still pass.
func TestRateLimitPerTenant(t *testing.T) {
	b, path := twoTenants(t)
	c := serveWith(t, b, service.Options{Auth: newAuth(t, path), RateLimit: 0.5, RateBurst: 2}).client(t)
	ctxA := withToken(context.Background(), "token-a")
	for i := range 2 {
		if got := ask(ctxA, c, "Turns", "a/1"); got.code != codes.OK {
			t.Fatalf("call %d within the burst: %v", i+1, got)
		}
	}
	_, err := c.Turns(ctxA, &historydv1.TurnsRequest{ThreadId: "a/1"})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "retry in") || !strings.Contains(st.Message(), `"a"`) {
		t.Fatalf("call past the burst: %v, want ResourceExhausted naming the tenant and when to retry", err)
	}
	var hint *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			hint = r
		}
	}
	if hint == nil || hint.RetryDelay.AsDuration() <= 0 || hint.RetryDelay.AsDuration() > 2*time.Second {
		t.Errorf("RetryInfo = %v, want a delay of at most 2s (0.5 calls/s)", hint)
	}
	if got := ask(withToken(context.Background(), "token-b"), c, "Turns", "b/1"); got.code != codes.OK {
		t.Errorf("tenant b after a's burst: %v, want OK", got)
	}
}

// A Snapshots response larger than the limit fails with ResourceExhausted
// naming the limit and what to ask for instead; a projection that fits
// passes.
func TestResponseTooLarge(t *testing.T) {
	m := storetest.NewMemory()
	storetest.Build(m, backend.Ref{ThreadID: "demo"}, demoTurns)
	ctx := context.Background()
	full, err := serveWith(t, m, service.Options{}).client(t).Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	limit := proto.Size(full) - 1
	c := serveWith(t, m, service.Options{MaxResponseBytes: limit}).client(t)

	_, err = c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "demo"})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("Snapshots over the limit: %v, want ResourceExhausted", err)
	}
	for _, want := range []string{strconv.Itoa(limit), "`keys`", "Snapshot"} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("message %q does not mention %s", st.Message(), want)
		}
	}
	if _, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "demo", Keys: []string{"name"}}); err != nil {
		t.Errorf("projected Snapshots under the limit: %v", err)
	}
	if _, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: "demo", Turn: 2}); err != nil {
		t.Errorf("one turn under the limit: %v", err)
	}
}

// A StreamSnapshots message over the limit ends the stream with
// ResourceExhausted naming the limit; the turns before it were delivered.
func TestStreamMessageTooLarge(t *testing.T) {
	m := storetest.NewMemory()
	storetest.Build(m, backend.Ref{ThreadID: "demo"}, demoTurns)
	ctx := context.Background()
	all, err := readStream(ctx, serveWith(t, m, service.Options{}).client(t), &historydv1.StreamSnapshotsRequest{ThreadId: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	// One byte below the (first) largest message: the stream delivers
	// the turns before it, then fails.
	largest := 0
	for i, msg := range all {
		if proto.Size(msg) > proto.Size(all[largest]) {
			largest = i
		}
	}
	limit, delivered := proto.Size(all[largest])-1, largest
	got, err := readStream(ctx, serveWith(t, m, service.Options{MaxResponseBytes: limit}).client(t), &historydv1.StreamSnapshotsRequest{ThreadId: "demo"})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), strconv.Itoa(limit)) || !strings.Contains(st.Message(), "`keys`") {
		t.Fatalf("stream past the limit: %v, want ResourceExhausted naming %d and keys", err, limit)
	}
	if len(got) != delivered {
		t.Errorf("%d messages before the failure, want %d", len(got), delivered)
	}
}

func TestRequestTooLarge(t *testing.T) {
	c := serveWith(t, storetest.NewMemory(), service.Options{MaxRequestBytes: 1024}).client(t)
	keys := []string{strings.Repeat("k", 500), strings.Repeat("l", 500), strings.Repeat("m", 500)}
	_, err := c.Snapshots(context.Background(), &historydv1.SnapshotsRequest{ThreadId: "t", Keys: keys})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("request over the limit: %v, want ResourceExhausted", err)
	}
}

// stallingBackend blocks listing checkpoints until the call's context ends
// or release is closed.
type stallingBackend struct {
	backend.Backend
	entered atomic.Int32
	release chan struct{}
}

func (s *stallingBackend) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	s.entered.Add(1)
	select {
	case <-ctx.Done():
		return backend.Census{}, ctx.Err()
	case <-s.release:
		return s.Backend.List(ctx, ref, q, fn)
	}
}

// A call with no deadline, or a later one, ends at the server's cap and
// says so; an earlier deadline of the caller's still applies.
func TestDeadlineCap(t *testing.T) {
	b := &stallingBackend{Backend: storetest.NewMemory(), release: make(chan struct{})}
	c := serveWith(t, b, service.Options{MaxCallDuration: 100 * time.Millisecond}).client(t)
	for _, tt := range []struct {
		name     string
		deadline time.Duration // 0: none
		capped   bool
	}{
		{"no deadline", 0, true},
		{"later deadline", time.Minute, true},
		{"earlier deadline", 30 * time.Millisecond, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			start := time.Now()
			_, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: "t-" + tt.name})
			took := time.Since(start)
			if status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("err = %v, want DeadlineExceeded", err)
			}
			if took > 5*time.Second {
				t.Errorf("took %v; the cap is 100ms", took)
			}
			if named := strings.Contains(status.Convert(err).Message(), "limit of 100ms per call"); named != tt.capped {
				t.Errorf("message %q; mentions the server's cap: %v, want %v", status.Convert(err).Message(), named, tt.capped)
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		_, err := readStream(context.Background(), c, &historydv1.StreamSnapshotsRequest{ThreadId: "t-stream"})
		if st := status.Convert(err); st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "limit of 100ms per call") {
			t.Errorf("stream past the cap: %v", err)
		}
	})
	close(b.release)
	if _, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "t"}); err != nil {
		t.Errorf("a call within the cap: %v", err)
	}
}

// With one stream per connection, a second call waits for the first
// instead of reaching the store.
func TestMaxConcurrentStreams(t *testing.T) {
	b := &stallingBackend{Backend: storetest.NewMemory(), release: make(chan struct{})}
	c := serveWith(t, b, service.Options{MaxConcurrentStreams: 1}).client(t)
	first := make(chan error, 1)
	go func() {
		_, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "first"})
		first <- err
	}()
	for b.entered.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: "second"})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("second call while the first holds the only stream: %v, want DeadlineExceeded", err)
	}
	if n := b.entered.Load(); n != 1 {
		t.Errorf("store entered %d times, want 1", n)
	}
	close(b.release)
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
}

// panickingBackend panics on its first listing only.
type panickingBackend struct {
	backend.Backend
	panicked atomic.Bool
}

func (p *panickingBackend) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	if !p.panicked.Swap(true) {
		panic("backend bug")
	}
	return p.Backend.List(ctx, ref, q, fn)
}

func TestPanicRecovered(t *testing.T) {
	c := serveWith(t, &panickingBackend{Backend: storetest.NewMemory()}, service.Options{}).client(t)
	_, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "t"})
	if st := status.Convert(err); st.Code() != codes.Internal || strings.Contains(st.Message(), "backend bug") {
		t.Errorf("panicking call: %v, want Internal without the panic's text", err)
	}
	if _, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "t"}); err != nil {
		t.Errorf("call after a panic: %v", err)
	}
}

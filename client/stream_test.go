package client_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/client"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// streamDemo is a five-turn thread whose key "k" each turn rewrites, with
// turns 1 and 2 pruned: three retained turns to stream.
func streamDemo() *storetest.Memory {
	mem := storetest.NewMemory()
	var turns []storetest.Turn
	for i := range 5 {
		turns = append(turns, storetest.Turn{Question: "q" + string(rune('1'+i)), Writes: map[string]any{"k": float64(i + 1), "other": "x"}})
	}
	ref := backend.Ref{ThreadID: "t"}
	written := storetest.Build(mem, ref, turns)
	mem.Delete(ref, append(written[0].IDs, written[1].IDs...))
	return mem
}

// streamServer serves mem as historyd serves, in process, with a stream
// interceptor of the test's after historyd's own chain, and returns a
// Client dialled to it and a way to set that interceptor.
func streamServer(t *testing.T, mem *storetest.Memory, opts ...client.Option) (*client.Client, func(grpc.StreamServerInterceptor)) {
	t.Helper()
	var mu sync.Mutex
	var intercept grpc.StreamServerInterceptor
	srv := serve(t, mem, grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		mu.Lock()
		f := intercept
		mu.Unlock()
		if f == nil {
			return h(srv, ss)
		}
		return f(srv, ss, info, h)
	}))
	c := srv.dial(t, opts...)
	return c, func(f grpc.StreamServerInterceptor) { mu.Lock(); intercept = f; mu.Unlock() }
}

// collect reads the whole stream, failing the test on an error.
func collect(t *testing.T, seq func(func(*client.TurnState, error) bool)) []client.TurnState {
	t.Helper()
	var out []client.TurnState
	for ts, err := range seq {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		out = append(out, *ts)
	}
	return out
}

func turnNumbers(ts []client.TurnState) []int {
	var out []int
	for _, t := range ts {
		out = append(out, t.Turn)
	}
	return out
}

func TestStreamSnapshots(t *testing.T) {
	c, _ := streamServer(t, streamDemo())
	ctx := context.Background()

	whole, err := c.Snapshots(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, c.StreamSnapshots(ctx, "t"))
	if !slices.Equal(turnNumbers(got), []int{3, 4, 5}) {
		t.Fatalf("streamed turns %v, want [3 4 5]", turnNumbers(got))
	}
	for i, ts := range got {
		want := whole.Turns[i]
		if ts.Turn != want.Turn || ts.Question != want.Question || ts.CheckpointID != want.CheckpointID || !ts.EndedAt.Equal(want.EndedAt) ||
			len(ts.State) != 2 || ts.State["k"].Value != float64(ts.Turn) || ts.State["k"].TurnsWritten != ts.Turn {
			t.Errorf("streamed turn %d = %+v; Snapshots has %+v", ts.Turn, ts, want)
		}
	}

	proj := collect(t, c.StreamSnapshots(ctx, "t", client.WithKeys("k"), client.WithFromTurn(4)))
	if !slices.Equal(turnNumbers(proj), []int{4, 5}) || len(proj[0].State) != 1 || proj[0].State["k"].Value != 4.0 {
		t.Errorf("projected from turn 4: %+v", proj)
	}

	if none := collect(t, c.StreamSnapshots(ctx, "no-such-thread")); len(none) != 0 {
		t.Errorf("unknown thread streamed %v", none)
	}

	n := 0
	for ts, err := range c.StreamSnapshots(ctx, "t") {
		if err != nil || ts.Turn != 3 {
			t.Fatalf("first element %v, %v", ts, err)
		}
		n++
		break
	}
	if n != 1 {
		t.Errorf("break after the first turn read %d", n)
	}

	var errs []error
	for ts, err := range c.StreamSnapshots(ctx, "") {
		if ts != nil {
			t.Errorf("a turn %v alongside an error", ts)
		}
		errs = append(errs, err)
	}
	if len(errs) != 1 || status.Code(errs[0]) != codes.InvalidArgument {
		t.Errorf("empty thread id: %v; want one INVALID_ARGUMENT", errs)
	}
}

// cutAfter is a server stream that fails with UNAVAILABLE once it has sent
// n messages, as a restarting server's streams do.
type cutAfter struct {
	grpc.ServerStream
	n int
}

func (s *cutAfter) SendMsg(m any) error {
	if s.n == 0 {
		return status.Error(codes.Unavailable, "server going away")
	}
	s.n--
	return s.ServerStream.SendMsg(m)
}

func TestStreamSnapshotsResumes(t *testing.T) {
	ctx := context.Background()
	t.Run("after a cut, from the next turn", func(t *testing.T) {
		c, set := streamServer(t, streamDemo(), client.WithRetry(3, time.Millisecond))
		var mu sync.Mutex
		var froms []int32
		calls := 0
		set(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			mu.Lock()
			calls++
			cut := calls <= 2 // the first two calls send one turn each, then fail
			mu.Unlock()
			wrapped := ss
			if cut {
				wrapped = &cutAfter{ServerStream: ss, n: 1}
			}
			return h(srv, &recordFrom{ServerStream: wrapped, record: func(from int32) { mu.Lock(); froms = append(froms, from); mu.Unlock() }})
		})
		got := collect(t, c.StreamSnapshots(ctx, "t"))
		if !slices.Equal(turnNumbers(got), []int{3, 4, 5}) {
			t.Errorf("turns %v, want [3 4 5] each once", turnNumbers(got))
		}
		if !slices.Equal(froms, []int32{0, 4, 5}) {
			t.Errorf("from_turn of each call %v, want [0 4 5]", froms)
		}
	})
	t.Run("gives up after the retries in a row", func(t *testing.T) {
		c, set := streamServer(t, streamDemo(), client.WithRetry(2, time.Millisecond))
		var calls atomic.Int32
		set(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			calls.Add(1)
			return status.Error(codes.Unavailable, "store restarting")
		})
		var errs []error
		for _, err := range c.StreamSnapshots(ctx, "t") {
			errs = append(errs, err)
		}
		if len(errs) != 1 || status.Code(errs[0]) != codes.Unavailable || calls.Load() != 3 {
			t.Errorf("errors %v after %d calls; want one UNAVAILABLE after 3 (one try, two retries)", errs, calls.Load())
		}
	})
	t.Run("other codes are not retried", func(t *testing.T) {
		c, set := streamServer(t, streamDemo(), client.WithRetry(3, time.Millisecond))
		var calls atomic.Int32
		set(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			calls.Add(1)
			return status.Error(codes.ResourceExhausted, "turn too large")
		})
		for _, err := range c.StreamSnapshots(ctx, "t") {
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("error %v, want RESOURCE_EXHAUSTED", err)
			}
		}
		if calls.Load() != 1 {
			t.Errorf("%d calls, want 1", calls.Load())
		}
	})
	t.Run("the timeout bounds the whole read", func(t *testing.T) {
		c, set := streamServer(t, streamDemo(), client.WithTimeout(100*time.Millisecond), client.WithRetry(1000, 20*time.Millisecond))
		set(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return status.Error(codes.Unavailable, "down")
		})
		start := time.Now()
		var last error
		for _, err := range c.StreamSnapshots(ctx, "t") {
			last = err
		}
		if c := status.Code(last); c != codes.DeadlineExceeded && c != codes.Unavailable {
			t.Errorf("error %v; want the deadline (or the last UNAVAILABLE)", last)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("read took %v despite a 100ms timeout", d)
		}
	})
}

// recordFrom reports the from_turn of the request the stream receives.
type recordFrom struct {
	grpc.ServerStream
	record func(int32)
}

func (s *recordFrom) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if req, ok := m.(*historydv1.StreamSnapshotsRequest); ok && err == nil {
		s.record(req.GetFromTurn())
	}
	return err
}

// TestDefaults holds the client's defaults to client/testdata/defaults.json,
// the file the Python and TypeScript clients are held to as well, and checks
// the default timeout reaches the server as the call's deadline.
func TestDefaults(t *testing.T) {
	raw, err := os.ReadFile("testdata/defaults.json")
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		TLS             bool     `json:"tls"`
		TimeoutMS       int64    `json:"timeout_ms"`
		Retries         int      `json:"retries"`
		RetryCodes      []string `json:"retry_codes"`
		BackoffMS       int64    `json:"backoff_ms"`
		MaxReceiveBytes int      `json:"max_receive_bytes"`
		ValueFormat     string   `json:"value_format"`
		ResumeTrailer   string   `json:"resume_trailer"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if client.DefaultTimeout != time.Duration(want.TimeoutMS)*time.Millisecond || client.DefaultRetries != want.Retries ||
		client.DefaultBackoff != time.Duration(want.BackoffMS)*time.Millisecond || client.MaxResponseBytes != want.MaxReceiveBytes ||
		!slices.Equal(want.RetryCodes, []string{"UNAVAILABLE"}) || !want.TLS || (client.ReadConfig{}).ValueFormat.String() != want.ValueFormat ||
		client.ResumeTrailer != want.ResumeTrailer {
		t.Errorf("Go defaults (timeout %v, retries %d, backoff %v, receive limit %d, values %v) differ from testdata/defaults.json %+v",
			client.DefaultTimeout, client.DefaultRetries, client.DefaultBackoff, client.MaxResponseBytes, (client.ReadConfig{}).ValueFormat, want)
	}

	deadline := make(chan time.Duration, 1)
	srv := serve(t, storetest.NewMemory(), grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if info.FullMethod == historydv1.ThreadHistory_Snapshots_FullMethodName {
			dl, ok := ctx.Deadline()
			if !ok {
				deadline <- 0
			} else {
				deadline <- time.Until(dl)
			}
		}
		return h(ctx, req)
	}))
	conn := srv.conn(t)
	if _, err := client.New(conn).Snapshots(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if d := <-deadline; d <= client.DefaultTimeout-2*time.Second || d > client.DefaultTimeout {
		t.Errorf("the server saw a deadline %v away; want about DefaultTimeout (%v)", d, client.DefaultTimeout)
	}
	if _, err := client.New(conn, client.WithTimeout(0)).Snapshots(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if d := <-deadline; d != 0 {
		t.Errorf("WithTimeout(0): the server saw a deadline %v away; want none", d)
	}
}

// slowSends delays each message the server sends.
type slowSends struct {
	grpc.ServerStream
	d time.Duration
}

func (s *slowSends) SendMsg(m any) error {
	time.Sleep(s.d)
	return s.ServerStream.SendMsg(m)
}

// A stream the server ends at its maximum age is resumed at once from the
// next turn, as no failure: with no retries allowed, a long read still
// yields every turn once.
func TestStreamSnapshotsResumesAtMaxAge(t *testing.T) {
	var calls atomic.Int32
	srv := serveWith(t, streamDemo(), service.Options{StreamMaxAge: 150 * time.Millisecond},
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			calls.Add(1)
			return h(srv, &slowSends{ServerStream: ss, d: 100 * time.Millisecond})
		}))
	c := srv.dial(t, client.WithRetry(0, time.Millisecond))
	got := collect(t, c.StreamSnapshots(context.Background(), "t"))
	if !slices.Equal(turnNumbers(got), []int{3, 4, 5}) {
		t.Errorf("turns %v, want [3 4 5] each once", turnNumbers(got))
	}
	if calls.Load() < 2 {
		t.Errorf("%d calls: the stream was never ended at its maximum age", calls.Load())
	}
}

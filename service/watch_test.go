package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/auth/authtest"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// runThread writes turns as Python LangGraph's loop does, recording what
// each step updated: an input checkpoint, one that adds the question and
// routes to the agent, and one that ends the run with the answer and the
// turn's tool_state.
type runThread struct {
	w      storetest.Writer
	ref    backend.Ref
	step   int
	parent string
	msgs   []any
	state  map[string]any
	// noUpdated leaves updated_channels out, as LangGraph.js does.
	noUpdated bool
}

func (r *runThread) put(source string, updated ...string) string {
	id := fmt.Sprintf("1f10-%06d", r.step)
	cp := saver.Checkpoint{ID: id, Parent: r.parent, TS: time.Now().UTC(),
		Values:   write.Map{{Key: "messages", Value: slices.Clone(r.msgs)}},
		Metadata: write.Map{{Key: "source", Value: source}, {Key: "step", Value: r.step - 1}}}
	if len(r.state) > 0 {
		cp.Values = append(cp.Values, write.Field{Key: "tool_state", Value: r.state})
	}
	if !r.noUpdated {
		cp.UpdatedChannels = updated
	}
	r.w.Put(r.ref, cp)
	r.parent = id
	r.step++
	return id
}

// begin writes a turn's question: the run is still going.
func (r *runThread) begin(n int) {
	r.put("input", "__start__")
	r.msgs = append(r.msgs, write.Human(fmt.Sprintf("q-%d", n), fmt.Sprintf("question %d", n)))
	r.put("loop", "branch:to:agent", "messages")
}

// end writes the run's last step, storing value under key "k".
func (r *runThread) end(n int, value any) string {
	r.msgs = append(r.msgs, write.AI(fmt.Sprintf("a-%d", n), "answer"))
	r.state = map[string]any{"k": map[string]any{"value": value, "turn": n}, "other": map[string]any{"value": "x"}}
	return r.put("loop", "messages", "tool_state")
}

// events receives a watch's messages on a channel, and its end.
type events struct {
	ch  chan *historydv1.WatchTurnsResponse
	end chan error
}

func watch(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, req *historydv1.WatchTurnsRequest) events {
	t.Helper()
	stream, err := c.WatchTurns(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// The headers come once the watch is in place.
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	e := events{ch: make(chan *historydv1.WatchTurnsResponse, 100), end: make(chan error, 1)}
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				e.end <- err
				return
			}
			e.ch <- m
		}
	}()
	return e
}

// next waits up to two seconds for the next message.
func (e events) next(t *testing.T) *historydv1.WatchTurnsResponse {
	t.Helper()
	select {
	case m := <-e.ch:
		return m
	case err := <-e.end:
		t.Fatalf("the watch ended: %v", err)
	case <-time.After(2 * time.Second):
		t.Fatal("no message within 2s")
	}
	return nil
}

// quiet checks that nothing arrives for a while.
func (e events) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case m := <-e.ch:
		t.Fatalf("unexpected message %v", m)
	case err := <-e.end:
		t.Fatalf("the watch ended: %v", err)
	case <-time.After(d):
	}
}

func watchServer(t *testing.T, b backend.Backend, cfg service.WatchConfig, o service.Options) *servertest.Server {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	return servertest.Start(t, server.Config{Store: store.Config{Backend: b}, Watch: cfg, Service: o})
}

func TestWatchTurns(t *testing.T) {
	m := storetest.NewMemory()
	r := &runThread{w: m, ref: backend.Ref{ThreadID: "w"}}
	r.put("input", "__start__")
	r.begin(1)
	end1 := r.end(1, 1.0)
	c := watchServer(t, m, service.WatchConfig{}, service.Options{}).Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "w", Checkpoints: true, Keys: []string{"k"}})

	// Turn 1 had ended before the watch began.
	first := e.next(t)
	if te := first.GetTurnEnded(); te.GetTurn() != 1 || te.GetCheckpointId() != end1 || first.Total != 1 ||
		te.GetEntries()["k"].GetValue().GetNumberValue() != 1 || len(te.GetEntries()) != 1 {
		t.Fatalf("first message: %v", first)
	}
	e.quiet(t, 100*time.Millisecond)

	// Turn 2 runs: its checkpoints come one by one, and the turn once the
	// run has ended.
	r.begin(2)
	for _, want := range []int32{1, 2} { // the input checkpoint carries on turn 1
		if cp := e.next(t).GetCheckpoint(); cp.GetTurn() != want {
			t.Fatalf("checkpoint event %v, want turn %d", cp, want)
		}
	}
	e.quiet(t, 100*time.Millisecond)
	end2 := r.end(2, 2.0)
	if cp := e.next(t).GetCheckpoint(); cp.GetTurn() != 2 || cp.GetCheckpointId() != end2 {
		t.Fatalf("the last checkpoint: %v", cp)
	}
	ended := e.next(t)
	if te := ended.GetTurnEnded(); te.GetTurn() != 2 || te.GetCheckpointId() != end2 || te.GetQuestion() != "question 2" ||
		te.GetEntries()["k"].GetValue().GetNumberValue() != 2 || ended.Total != 2 || ended.Numbering != historydv1.TurnNumbering_TURN_NUMBERING_COMPLETE {
		t.Fatalf("turn 2 ended: %v", ended)
	}

	// A watch from after turn 1, without checkpoints: only turn 2.
	e2 := watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "w", AfterTurn: 1})
	if te := e2.next(t).GetTurnEnded(); te.GetTurn() != 2 || len(te.GetEntries()) != 2 {
		t.Fatalf("after turn 1: %v", te)
	}
	e2.quiet(t, 50*time.Millisecond)

	// Values as JSON text: the same turns, each value as its text.
	e3 := watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "w", Keys: []string{"k"}, ValueFormat: historydv1.ValueFormat_VALUE_FORMAT_JSON})
	for _, want := range []string{"1", "2"} {
		te := e3.next(t).GetTurnEnded()
		if e := te.GetEntries()["k"]; string(e.GetValueJson()) != want || e.GetValue() != nil {
			t.Fatalf("turn %d as JSON text: entry %v, want value_json %s", te.GetTurn(), e, want)
		}
	}
	// A format this server does not know: refused, as the stream's status.
	bad := watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "w", ValueFormat: 7})
	select {
	case err := <-bad.end:
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "value_format: is 7") {
			t.Errorf("value_format 7: %v", err)
		}
	case m := <-bad.ch:
		t.Errorf("value_format 7 answered %v", m)
	case <-time.After(2 * time.Second):
		t.Error("value_format 7: no refusal within 2s")
	}
}

// A thread rewound under a watcher (a new run from turn 1's end, the
// abandoned branch then deleted) gets history_rewound naming turn 1, the
// last turn the new lineage shares with what was sent, then the new
// branch's turn 2 as it ends; every message names the head it was read on.
func TestWatchTurnsRewound(t *testing.T) {
	m := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "fork"}
	r := &runThread{w: m, ref: ref}
	r.put("input", "__start__")
	r.begin(1)
	r.end(1, 1.0)
	forkStep := r.step
	forkPoint := r.put("input", "__start__") // turn 1's end, carried on to run 2's input
	msgs, state := slices.Clone(r.msgs), r.state
	r.msgs = append(r.msgs, write.Human("q-2", "question 2"))
	r.put("loop", "branch:to:agent", "messages")
	r.end(2, 2.0)
	r.begin(3)
	end3 := r.end(3, 3.0)
	// Counted on every read, so that the deletion is seen at once.
	c := servertest.Start(t, server.Config{Store: store.Config{Backend: m, RecountEvery: -1},
		Watch: service.WatchConfig{PollInterval: 10 * time.Millisecond}}).Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "fork", Keys: []string{"k"}})
	for n := int32(1); n <= 3; n++ {
		if m := e.next(t); m.GetTurnEnded().GetTurn() != n || m.GetHeadCheckpointId() != end3 {
			t.Fatalf("before the fork: %v, want turn %d read on head %s", m, n, end3)
		}
	}

	var abandoned []string
	for s := forkStep + 1; s < r.step; s++ {
		abandoned = append(abandoned, fmt.Sprintf("1f10-%06d", s))
	}
	m.Delete(ref, abandoned)
	r.parent, r.msgs, r.state = forkPoint, append(msgs, write.Human("q-2b", "question 2, asked again")), state
	r.put("loop", "branch:to:agent", "messages")
	newEnd := r.end(2, 20.0)

	rw := e.next(t)
	if ev := rw.GetHistoryRewound(); ev == nil || ev.GetTurn() != 1 || ev.GetFork() != nil {
		t.Fatalf("after the fork: %v, want history_rewound to turn 1 (the branch deleted: no fork)", rw)
	}
	ended := e.next(t)
	if te := ended.GetTurnEnded(); te.GetTurn() != 2 || te.GetCheckpointId() != newEnd || te.GetQuestion() != "question 2, asked again" ||
		te.GetEntries()["k"].GetValue().GetNumberValue() != 20 || ended.Total != 2 ||
		ended.GetHeadCheckpointId() != newEnd {
		t.Fatalf("the new branch's turn 2: %v", ended)
	}
	e.quiet(t, 100*time.Millisecond)
}

// Without updated_channels (LangGraph.js) a turn is known to have ended
// when the next question is asked.
func TestWatchTurnsWithoutUpdatedChannels(t *testing.T) {
	m := storetest.NewMemory()
	r := &runThread{w: m, ref: backend.Ref{ThreadID: "js"}, noUpdated: true}
	r.put("input")
	c := watchServer(t, m, service.WatchConfig{}, service.Options{}).Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "js"})
	r.begin(1)
	end1 := r.end(1, 1.0)
	e.quiet(t, 150*time.Millisecond)
	r.begin(2)
	// Turn 1 ends on the next run's input checkpoint, which carries its
	// state on (as Turns and Snapshot say).
	if te := e.next(t).GetTurnEnded(); te.GetTurn() != 1 || te.GetCheckpointId() <= end1 || te.GetEntries()["k"].GetValue().GetNumberValue() != 1 {
		t.Fatalf("turn 1 once turn 2 began: %v (its run ended at %s)", te, end1)
	}
	e.quiet(t, 100*time.Millisecond)
}

// A watch of a thread that does not exist yet waits for its turns.
func TestWatchTurnsUnknownThread(t *testing.T) {
	m := storetest.NewMemory()
	c := watchServer(t, m, service.WatchConfig{}, service.Options{}).Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "later"})
	e.quiet(t, 50*time.Millisecond)
	r := &runThread{w: m, ref: backend.Ref{ThreadID: "later"}}
	r.put("input", "__start__")
	r.begin(1)
	r.end(1, "v")
	if te := e.next(t).GetTurnEnded(); te.GetTurn() != 1 {
		t.Fatalf("turn 1: %v", te)
	}
	cancel()
	select {
	case err := <-e.end:
		if status.Code(err) != codes.Canceled {
			t.Errorf("a cancelled watch ended with %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Error("a cancelled watch did not end")
	}
}

// A watch outlives the server's cap on a call's duration, and ends with
// OK, promptly, when the server shuts down.
func TestWatchTurnsShutdown(t *testing.T) {
	m := storetest.NewMemory()
	srv := watchServer(t, m, service.WatchConfig{}, service.Options{MaxCallDuration: 100 * time.Millisecond})
	c := srv.Client(t)
	e := watch(t, context.Background(), c, &historydv1.WatchTurnsRequest{ThreadId: "t"})
	e.quiet(t, 300*time.Millisecond)
	start := time.Now()
	go srv.Shutdown(10 * time.Second)
	select {
	case err := <-e.end:
		if !errors.Is(err, io.EOF) {
			t.Errorf("the watch ended with %v, want OK", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end within 5s of Shutdown")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the watch ended %v after Shutdown", d)
	}
}

func TestWatchTurnsLimits(t *testing.T) {
	m := storetest.NewMemory()
	path := filepath.Join(t.TempDir(), "tokens.json")
	authtest.WriteFile(t, path, authtest.TokenFile(t,
		authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"token-a"}},
		authtest.Tenant{Name: "b", Prefixes: []string{"b/"}, Tokens: []string{"token-b"}},
	))
	srv := watchServer(t, m, service.WatchConfig{MaxPerTenant: 2, MaxTotal: 3}, service.Options{Auth: newAuth(t, path)})
	c := srv.Client(t)
	a, b := withToken(context.Background(), "token-a"), withToken(context.Background(), "token-b")
	open := func(ctx context.Context, thread string) (context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(ctx)
		stream, err := c.WatchTurns(ctx, &historydv1.WatchTurnsRequest{ThreadId: thread})
		if err == nil {
			_, err = stream.Header()
		}
		if err == nil {
			// A refusal arrives as the stream's status, after headers
			// that carry none.
			done := make(chan error, 1)
			go func() { _, err := stream.Recv(); done <- err }()
			select {
			case err = <-done:
			case <-time.After(100 * time.Millisecond):
			}
		}
		return cancel, err
	}
	// A thread of tenant b, watched by a, reads as an unknown thread and
	// counts against a's limit all the same.
	stopA1, err := open(a, "a/1")
	if err != nil {
		t.Fatal(err)
	}
	stopA2, err := open(a, "b/1")
	if err != nil {
		t.Fatalf("tenant a watching b/1: %v, want a watch of an unknown thread", err)
	}
	_, err = open(a, "a/2")
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--watch-max-per-tenant") {
		t.Errorf("a third watch of tenant a: %v", err)
	}
	stopB1, err := open(b, "b/1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = open(b, "b/2")
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--watch-max") {
		t.Errorf("a fourth watch on the server: %v", err)
	}
	stopA1()
	stopA2()
	stopB1()
	deadline := time.Now().Add(2 * time.Second)
	for {
		stop, err := open(b, "b/3")
		if err == nil {
			stop()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after closing every watch: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countingLists counts the reads of each thread: its listings and its
// freshness probes.
type countingLists struct {
	backend.Backend
	mu sync.Mutex
	n  map[string]int
}

func (c *countingLists) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	c.mu.Lock()
	c.n[ref.ThreadID]++
	c.mu.Unlock()
	return c.Backend.List(ctx, ref, q, fn)
}

func (c *countingLists) Probe(ctx context.Context, ps []backend.Probe) ([]backend.ProbeResult, error) {
	c.mu.Lock()
	for _, p := range ps {
		c.n[p.Ref.ThreadID]++
	}
	c.mu.Unlock()
	return c.Backend.Probe(ctx, ps)
}

func (c *countingLists) count(thread string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[thread]
}

// However many watch a thread, one poller reads it.
func TestWatchTurnsSharedPoller(t *testing.T) {
	m := storetest.NewMemory()
	storetest.Build(m, backend.Ref{ThreadID: "one"}, demoTurns)
	storetest.Build(m, backend.Ref{ThreadID: "many"}, demoTurns)
	b := &countingLists{Backend: m, n: map[string]int{}}
	c := watchServer(t, b, service.WatchConfig{PollInterval: 20 * time.Millisecond}, service.Options{}).Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "one", AfterTurn: 4})
	for range 8 {
		watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "many", AfterTurn: 4})
	}
	// Past each watch's first read, only the pollers read.
	time.Sleep(100 * time.Millisecond)
	one, many := b.count("one"), b.count("many")
	time.Sleep(600 * time.Millisecond)
	one, many = b.count("one")-one, b.count("many")-many
	if one == 0 || many > 2*one+2 {
		t.Errorf("reads in 600ms: %d of the thread one watch follows, %d of the thread eight watch", one, many)
	}
}

// TestWatchTurnsOpenedDuringOutage: a watch opened while the store is
// unavailable, on a thread another watch already follows and nobody
// writes to, gets the thread's turns once the store answers again,
// without waiting for the thread to change.
func TestWatchTurnsOpenedDuringOutage(t *testing.T) {
	m := storetest.NewMemory()
	r := &runThread{w: m, ref: backend.Ref{ThreadID: "quiet"}}
	r.put("input", "__start__")
	r.begin(1)
	end1 := r.end(1, 1.0)
	c := watchServer(t, m, service.WatchConfig{}, service.Options{}).Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "quiet"})
	if te := first.next(t).GetTurnEnded(); te.GetCheckpointId() != end1 {
		t.Fatalf("the first watch: %v", te)
	}

	m.SetErr(fmt.Errorf("%w: connection refused", backend.ErrUnavailable))
	late := watch(t, ctx, c, &historydv1.WatchTurnsRequest{ThreadId: "quiet"})
	late.quiet(t, 100*time.Millisecond)
	m.SetErr(nil)
	if te := late.next(t).GetTurnEnded(); te.GetTurn() != 1 || te.GetCheckpointId() != end1 {
		t.Fatalf("the watch opened during the outage: %v", te)
	}
	first.quiet(t, 50*time.Millisecond)
}

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/stateentry"
	"github.com/historyd/historyd/internal/syncbuf"
)

// The live thread: how many turns the writer appends and how long it waits
// before each (so that every total is seen for a while). The readers stop
// when the writer is done or after liveReadFor, whichever comes first (on an
// idle machine the writer takes about ten seconds); the writer may take
// liveMaxWrite on a machine busy with other work before the test gives up.
const (
	liveTurns    = 6
	livePause    = "0.3"
	liveReadFor  = 30 * time.Second
	liveMaxWrite = 4 * time.Minute
)

// liveKeys is the projection some of the live reads ask for: a key rewritten
// in several turns and one written once.
var liveKeys = []string{projectedKey, "sketch-ops/sketch_polygon/bbox"}

// TestConformanceSQLiteConcurrent has Python's SqliteSaver append turns to a
// file in WAL mode while historyd serves it, and reads Snapshots, Turns and
// Snapshot through historyd without pause for as long as the writer runs.
// Once the writer has finished, every answer is checked against what
// LangGraph reports about each checkpoint:
//
//   - no read fails;
//   - no reader ever sees the total go down, and every turn up to the total
//     is retained (nothing is pruned here);
//   - each served turn ends at one of that turn's checkpoints and carries
//     exactly the session state LangGraph holds at that checkpoint, its
//     question and its timestamp: a state torn between two writes, or taken
//     from another checkpoint than the one named, fails;
//   - a turn served while a later turn had already begun is served at the
//     checkpoint LangGraph finally reports as its end;
//   - after the writer is done, the thread is served exactly as LangGraph
//     reports it (checkThread), by the same server whose cache followed
//     the growing file.
func TestConformanceSQLiteConcurrent(t *testing.T) {
	s := loadSetup(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), liveMaxWrite+5*time.Minute)
	defer cancel()

	dir := t.TempDir()
	f := sqliteStore{path: filepath.Join(dir, "live.db")}
	thread := fmt.Sprintf("conformance-live-%d", time.Now().UnixNano())
	w := writers[0]
	if w.name != "python" {
		t.Fatalf("writers[0] is %s, want the Python writer", w.name)
	}
	argv := w.command(s, f, thread, filepath.Join(dir, "expected.json"), false,
		"--turns", fmt.Sprint(liveTurns), "--pause", livePause, "--ready", "--all-states", "--no-reference")

	writeCtx, stopWriter := context.WithTimeout(ctx, liveMaxWrite)
	defer stopWriter()
	start := time.Now()
	// The writer prints "ready" once the saver has created its tables;
	// historyd opens the file then, before any turn is written.
	stderr, writerDone := startReadyWriter(t, writerCmd(writeCtx, argv))
	t.Logf("writer ready after %s", time.Since(start).Round(10*time.Millisecond))

	client := serve(t, f, &expectation{})

	obs := &observations{states: map[[32]byte][]byte{}}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for _, r := range []func(context.Context, *testing.T, historydv1.ThreadHistoryClient, string, *observations, <-chan struct{}){
		readSnapshots, readTurns, readSnapshot,
	} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			r(ctx, t, client, thread, obs, stop)
		}()
	}
	var werr error
	select {
	case werr = <-writerDone:
		close(stop)
		readers.Wait()
	case <-time.After(liveReadFor):
		close(stop)
		readers.Wait()
		t.Logf("readers stopped after %s; waiting for the writer", liveReadFor)
		werr = <-writerDone
	}
	elapsed := time.Since(start)
	if werr != nil {
		t.Fatalf("writer (%s) failed after %s: %v\n%s", strings.Join(redactArgv(argv), " "), elapsed.Round(10*time.Millisecond), werr, tail(stderr.String(), 4000))
	}
	t.Logf("writer took %s: %s", elapsed.Round(10*time.Millisecond), strings.TrimSpace(tail(stderr.String(), 600)))

	fin := readExpectation(t, argAfter(argv, "--out"))
	if fin.Total != liveTurns || !slices.Equal(fin.Retained, seq(1, liveTurns)) {
		t.Fatalf("writer produced an unusable thread: total %d, retained %v", fin.Total, fin.Retained)
	}
	if len(fin.CheckpointStates) != len(fin.Checkpoints) {
		t.Fatalf("the writer described the state of %d checkpoints of %d", len(fin.CheckpointStates), len(fin.Checkpoints))
	}
	if n := f.rootCheckpoints(t, ctx, fin); n != len(fin.Checkpoints) {
		t.Fatalf("the file holds %d root checkpoints of thread %s, LangGraph's history listed %d", n, thread, len(fin.Checkpoints))
	}

	obs.check(t, fin)

	// And once the writer is done, the same server, its cache refreshed
	// along the way, serves the whole thread as LangGraph reports it.
	t.Run("final", func(t *testing.T) { checkThread(t, ctx, client, thread, fin) })
}

// observations collects what the readers were served, compactly: each
// distinct state is kept once, by digest of its deterministic protobuf
// encoding, and turned into JSON only when checked.
type observations struct {
	mu     sync.Mutex
	states map[[32]byte][]byte
	served []servedState
	turns  []servedTurns
	calls  map[string]int
	totals map[int32]bool
}

// servedState is one turn's state as one response served it.
type servedState struct {
	call         string
	total        int32 // the response's total
	turn         int
	checkpointID string
	question     string
	endedAt      *timestamppb.Timestamp
	keys         []string // the projection asked for; nil for all keys
	digest       [32]byte
}

// servedTurns is one Turns response.
type servedTurns struct {
	total    int32
	withKeys bool
	turns    []*historydv1.TurnInfo
}

func (o *observations) count(call string, total int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.calls == nil {
		o.calls, o.totals = map[string]int{}, map[int32]bool{}
	}
	o.calls[call]++
	o.totals[total] = true
}

// state records a served TurnState's entries.
func (o *observations) state(call string, total int32, keys []string, ts *historydv1.TurnState) error {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(&historydv1.TurnState{Entries: ts.GetEntries()})
	if err != nil {
		return err
	}
	d := sha256.Sum256(raw)
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.states[d]; !ok {
		o.states[d] = raw
	}
	o.served = append(o.served, servedState{
		call: call, total: total, turn: int(ts.GetTurn()), checkpointID: ts.GetCheckpointId(),
		question: ts.GetQuestion(), endedAt: ts.GetEndedAt(), keys: keys, digest: d,
	})
	return nil
}

// reader is what each reading loop shares: its own view of the total, which
// must never go down, and a cap on the errors it reports.
type reader struct {
	t      *testing.T
	name   string
	last   int32
	errors int
}

// failed reports an error of the reader and says whether to stop reading.
func (r *reader) failed(format string, args ...any) bool {
	r.t.Errorf(r.name+": "+format, args...)
	r.errors++
	return r.errors >= 5
}

// total checks a response's total against the reader's previous one.
func (r *reader) total(call string, total int32) bool {
	if total < r.last {
		return r.failed("%s: total %d after %d: the total went down", call, total, r.last)
	}
	if total > liveTurns {
		return r.failed("%s: total %d, more turns than the writer writes (%d)", call, total, liveTurns)
	}
	r.last = total
	return false
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

func readSnapshots(ctx context.Context, t *testing.T, c historydv1.ThreadHistoryClient, thread string, o *observations, stop <-chan struct{}) {
	r := &reader{t: t, name: "Snapshots reader"}
	for i := 0; !stopped(stop); i++ {
		var keys []string
		if i%3 == 2 {
			keys = liveKeys
		}
		call := fmt.Sprintf("Snapshots(keys=%v)", keys)
		resp, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread, Keys: keys})
		if err != nil {
			if r.failed("%s: %v", call, err) {
				return
			}
			continue
		}
		o.count("Snapshots", resp.GetTotal())
		if r.total(call, resp.GetTotal()) {
			return
		}
		if got, want := sortedTurns(resp.GetTurns()), seq(1, int(resp.GetTotal())); !slices.Equal(got, want) {
			if r.failed("%s: turns %v with total %d, want %v", call, got, resp.GetTotal(), want) {
				return
			}
		}
		for n, ts := range resp.GetTurns() {
			if int32(ts.GetTurn()) != n {
				r.failed("%s: turns[%d] holds turn %d", call, n, ts.GetTurn())
			}
			if err := o.state(call, resp.GetTotal(), keys, ts); err != nil {
				r.failed("%s: turn %d: %v", call, n, err)
			}
		}
	}
}

func readTurns(ctx context.Context, t *testing.T, c historydv1.ThreadHistoryClient, thread string, o *observations, stop <-chan struct{}) {
	r := &reader{t: t, name: "Turns reader"}
	for i := 0; !stopped(stop); i++ {
		withKeys := i%2 == 1
		call := fmt.Sprintf("Turns(include_keys_written=%v)", withKeys)
		resp, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread, IncludeKeysWritten: withKeys})
		if err != nil {
			if r.failed("%s: %v", call, err) {
				return
			}
			continue
		}
		o.count("Turns", resp.GetTotal())
		if r.total(call, resp.GetTotal()) {
			return
		}
		o.mu.Lock()
		o.turns = append(o.turns, servedTurns{total: resp.GetTotal(), withKeys: withKeys, turns: resp.GetTurns()})
		o.mu.Unlock()
	}
}

// readSnapshot asks for each turn in turn, one past the last included, so
// that turns are asked for both before and after they exist.
func readSnapshot(ctx context.Context, t *testing.T, c historydv1.ThreadHistoryClient, thread string, o *observations, stop <-chan struct{}) {
	r := &reader{t: t, name: "Snapshot reader"}
	for i := 0; !stopped(stop); i++ {
		n := int32(i%(liveTurns+1)) + 1
		var keys []string
		if (i/(liveTurns+1))%2 == 1 {
			keys = liveKeys
		}
		call := fmt.Sprintf("Snapshot(%d, keys=%v)", n, keys)
		resp, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: n, Keys: keys})
		if err != nil {
			if r.failed("%s: %v", call, err) {
				return
			}
			continue
		}
		total := resp.GetTotal()
		o.count("Snapshot", total)
		if r.total(call, total) {
			return
		}
		if got, want := ints(resp.GetRetainedTurns()), seq(1, int(total)); !slices.Equal(got, want) {
			r.failed("%s: retained_turns %v with total %d, want %v", call, got, total, want)
		}
		switch {
		case resp.GetState() != nil:
			if n > total {
				r.failed("%s: state of a turn past the total %d", call, total)
			}
			if resp.GetState().GetTurn() != n {
				r.failed("%s: state of turn %d", call, resp.GetState().GetTurn())
			}
			if err := o.state(call, total, keys, resp.GetState()); err != nil {
				r.failed("%s: %v", call, err)
			}
		case resp.GetNoSuchTurn() != nil:
			miss := resp.GetNoSuchTurn()
			if n <= total || miss.GetTurn() != n || miss.GetTotal() != total {
				r.failed("%s: no_such_turn{turn %d, total %d} with total %d", call, miss.GetTurn(), miss.GetTotal(), total)
			}
		default:
			if r.failed("%s: %T, but nothing was pruned", call, resp.GetResult()) {
				return
			}
		}
	}
}

// check compares everything served with fin, LangGraph's account of the
// finished thread and of each of its checkpoints.
func (o *observations) check(t *testing.T, fin *expectation) {
	t.Helper()
	humans := map[string]int{}
	created := map[string]string{}
	for _, c := range fin.Checkpoints {
		humans[c.CheckpointID] = c.Humans
		created[c.CheckpointID] = c.CreatedAt
	}
	// stateAt is LangGraph's state at a checkpoint, projected to keys.
	stateAt := func(id string, keys []string) map[string]any {
		out := map[string]any{}
		for k, i := range fin.CheckpointStates[id] {
			if keys == nil || slices.Contains(keys, k) {
				out[k] = fin.Entries[i]
			}
		}
		return out
	}
	// where checks that turn n, served while the thread had total turns, is
	// at one of its own checkpoints, and at its final end if a later turn
	// had begun.
	where := func(what string, n int, total int32, id string) bool {
		if h, ok := humans[id]; !ok || h != n {
			t.Errorf("%s: turn %d served at checkpoint %q, which LangGraph lists with %d questions (listed: %v)", what, n, id, h, ok)
			return false
		}
		if n < int(total) && id != fin.turn(n).CheckpointID {
			t.Errorf("%s: turn %d, over once turn %d had begun, served at checkpoint %s; it ended at %s", what, n, total, id, fin.turn(n).CheckpointID)
		}
		return true
	}
	endedAt := func(what string, got *timestamppb.Timestamp, id string) {
		w, err := time.Parse(time.RFC3339Nano, created[id])
		if err != nil {
			t.Errorf("%s: LangGraph's created_at %q of checkpoint %s: %v", what, created[id], id, err)
			return
		}
		if got == nil || !got.AsTime().Equal(w) {
			t.Errorf("%s: ended_at %v, want %s (checkpoint %s)", what, got.AsTime(), w.Format(time.RFC3339Nano), id)
		}
	}

	// The served states in the JSON form the writer records.
	served := map[[32]byte][]byte{}
	for d, raw := range o.states {
		var ts historydv1.TurnState
		if err := proto.Unmarshal(raw, &ts); err != nil {
			t.Fatal(err)
		}
		m, err := stateentry.Maps(ts.GetEntries())
		if err != nil {
			t.Fatalf("a served state: %v", err)
		}
		if served[d], err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	}

	inProgress, ended := 0, 0
	checked := map[string]bool{} // state comparisons already made
	for _, s := range o.served {
		what := fmt.Sprintf("%s with total %d", s.call, s.total)
		if s.turn < 1 || s.turn > int(s.total) {
			t.Errorf("%s: served turn %d", what, s.turn)
			continue
		}
		if s.question != fin.Questions[s.turn-1] {
			t.Errorf("%s: turn %d question %q, want %q", what, s.turn, s.question, fin.Questions[s.turn-1])
		}
		if !where(what, s.turn, s.total, s.checkpointID) {
			continue
		}
		if s.turn < int(s.total) || s.checkpointID == fin.turn(s.turn).CheckpointID {
			ended++
		} else {
			inProgress++
		}
		endedAt(what, s.endedAt, s.checkpointID)
		key := fmt.Sprintf("%x %s %v", s.digest, s.checkpointID, s.keys)
		if checked[key] {
			continue
		}
		checked[key] = true
		want, err := json.Marshal(stateAt(s.checkpointID, s.keys))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(want, served[s.digest]) {
			continue
		}
		var got, exp any
		_ = json.Unmarshal(served[s.digest], &got)
		_ = json.Unmarshal(want, &exp)
		for _, d := range diffJSON("entries", exp, got) {
			t.Errorf("%s: turn %d at checkpoint %s, against LangGraph's state there: %s", what, s.turn, s.checkpointID, d)
		}
	}

	for _, r := range o.turns {
		what := fmt.Sprintf("Turns(include_keys_written=%v) with total %d", r.withKeys, r.total)
		if len(r.turns) != int(r.total) {
			t.Errorf("%s: %d turns", what, len(r.turns))
			continue
		}
		for i, ti := range r.turns {
			n := i + 1
			if ti.GetNumber() != int32(n) || !ti.GetRetained() || ti.GetQuestion() != fin.Questions[i] {
				t.Errorf("%s: turns[%d] is {number %d, retained %v, question %q}, want {%d, true, %q}",
					what, i, ti.GetNumber(), ti.GetRetained(), ti.GetQuestion(), n, fin.Questions[i])
			}
			if !where(what, n, r.total, ti.GetCheckpointId()) {
				continue
			}
			endedAt(fmt.Sprintf("%s: turn %d", what, n), ti.GetEndedAt(), ti.GetCheckpointId())
			var want []string
			if r.withKeys {
				want = (&expTurn{Turn: n, ToolState: stateAt(ti.GetCheckpointId(), nil)}).keysWritten()
			}
			if got := ti.GetKeysWritten(); !slices.Equal(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Errorf("%s: turn %d keys_written %v, want %v", what, n, got, want)
			}
		}
	}

	totals := make([]int, 0, len(o.totals))
	for n := range o.totals {
		totals = append(totals, int(n))
	}
	slices.Sort(totals)
	t.Logf("served while the writer ran: %v calls, totals seen %v, %d turn states (%d of finished turns, %d of the turn then in progress, %d distinct states), %d Turns lists",
		o.calls, totals, len(o.served), ended, inProgress, len(o.states), len(o.turns))
	// The test proves nothing unless the reads overlapped the writes: some
	// turn must have been served while later ones were still to come.
	if !slices.ContainsFunc(o.served, func(s servedState) bool { return s.total < liveTurns }) {
		t.Errorf("no turn was served while the thread was still growing (totals seen: %v): the reads did not overlap the writes", totals)
	}
}

// startReadyWriter starts a writer that prints "ready" on a line of its
// own once the saver has created its tables, and returns when it has. It
// returns the writer's stderr as it grows and a channel that gets the
// writer's exit; a writer that ends without saying ready fails the test
// with its stderr.
func startReadyWriter(t *testing.T, cmd *exec.Cmd) (*syncbuf.Buffer, <-chan error) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the writer: %v", err)
	}
	ready, done := make(chan bool, 1), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			if !said && strings.TrimSpace(sc.Text()) == "ready" {
				said = true
				ready <- true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		if !said {
			ready <- false
		}
		done <- cmd.Wait()
	}()
	if !<-ready {
		err := <-done
		t.Fatalf("the writer ended without saying ready: %v\n%s", err, tail(stderr.String(), 4000))
	}
	return stderr, done
}

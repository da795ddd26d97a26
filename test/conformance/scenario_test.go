package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/store"
)

// truth is what a scenario writer (py/write_scenario.py,
// js/write_scenario.mjs) records: the thread as the host's own graph saw
// it, turn by turn, and every checkpoint as LangGraph rebuilds it. See the
// README's "The truth a scenario writer records".
type truth struct {
	Writer      string                  `json:"writer"`
	Scenario    string                  `json:"scenario"`
	ThreadID    string                  `json:"thread_id"`
	Schema      string                  `json:"schema"`
	Versions    map[string]string       `json:"versions"`
	Channels    map[string]truthChannel `json:"channels"`
	Served      []string                `json:"served"`
	Turns       []truthTurn             `json:"turns"`
	Total       int                     `json:"total"`
	Checkpoints []truthCheckpoint       `json:"checkpoints"`
	Reference   *struct {
		Total    int                `json:"total"`
		Retained []int              `json:"retained"`
		Turns    map[string]refTurn `json:"turns"`
	} `json:"reference"`
	ReferenceError string `json:"reference_error"`
	// Numbering is "complete" (questions are turns) or "runs" (a graph
	// without messages: each run is a turn, its question the input).
	Numbering string `json:"numbering"`
	// Head is the thread's head as get_state reports it after the last run.
	Head string `json:"head"`
	// Forks are the branches the lineage left, oldest first.
	Forks []truthFork `json:"forks"`
	// SQLite is the file the writer wrote to, empty for PostgreSQL.
	SQLite string `json:"sqlite"`
}

// truthFork is a branch a run from an older checkpoint abandoned: where it
// left the lineage and its turns as the host saw them then.
type truthFork struct {
	From      string      `json:"from_checkpoint_id"`
	Turn      int         `json:"turn"`
	Questions int         `json:"questions"`
	Newest    string      `json:"newest_checkpoint_id"`
	Turns     []truthTurn `json:"turns"`
}

type truthChannel struct {
	Delta             bool   `json:"delta"`
	SnapshotFrequency *int   `json:"snapshot_frequency"`
	Reducer           string `json:"reducer"`
}

type truthTurn struct {
	Turn         int            `json:"turn"`
	Question     string         `json:"question"`
	CheckpointID string         `json:"checkpoint_id"`
	AnsweredWith []int          `json:"answered_with"`
	Retained     bool           `json:"retained"`
	State        map[string]any `json:"state"`
	// Input is a runs-numbered turn's input, as the writer passed it.
	Input any `json:"input"`
}

type truthCheckpoint struct {
	ID       string  `json:"checkpoint_id"`
	Parent   *string `json:"parent_checkpoint_id"`
	Metadata struct {
		Source string `json:"source"`
	} `json:"metadata"`
	Stored map[string]string `json:"stored"`
	Values map[string]any    `json:"values"`
}

// scenario is one scenario a writer program writes.
type scenario struct {
	js   bool
	name string
}

var scenarios = []scenario{
	{name: "delta-messages-1"}, {name: "delta-messages-4"}, {name: "delta-messages-50"},
	{name: "delta-state"}, {name: "delta-exit"}, {name: "delta-interrupt"}, {name: "delta-fork"},
	{name: "delta-remove"}, {name: "deepagents"}, {name: "summarize"}, {name: "remove-node"},
	{js: true, name: "delta"}, {js: true, name: "summarize"},
	// Forks (time travel) and runs (graphs without messages): lineage_test.go.
	{name: "fork-question"}, {name: "fork-replay-tools"}, {name: "fork-replay-end"}, {name: "fork-update"},
	{name: "fork-of-fork"}, {name: "fork-first"}, {name: "fork-subgraph"},
	{name: "runs-graph"}, {name: "runs-resumed"}, {name: "functional"}, {name: "functional-messages"},
	{js: true, name: "fork-question"}, {js: true, name: "fork-replay-tools"}, {js: true, name: "fork-replay-end"},
	{js: true, name: "fork-update"}, {js: true, name: "fork-of-fork"}, {js: true, name: "fork-first"},
	{js: true, name: "runs-graph"}, {js: true, name: "runs-resumed"}, {js: true, name: "functional"},
	{js: true, name: "functional-messages"},
}

// reducers maps a truth's reducer names to historyd's.
var reducers = map[string]string{"messages": "messages", "files": "merge", "tool_state": "tool_state", "other:last_value": "last"}

// TestScenarios writes each scenario's thread with the real packages
// (DeltaChannel threads in Python and JS, a real deepagents agent, LangChain's
// summarization middleware, removed messages, two questions in one input,
// interrupts, forks, durability="exit"), to PostgreSQL and SQLite, and
// checks that historyd serves every turn of every served channel exactly as
// the host's graph saw it as the turn ended; then prunes the oldest
// checkpoints, a snapshot among them, and checks that every turn whose
// value can still be rebuilt is served unchanged and the others are not
// served at all.
func TestScenarios(t *testing.T) {
	s := loadSetup(t, true)
	for _, sc := range scenarios {
		lang := "python"
		if sc.js {
			lang = "js"
		}
		for _, kind := range []string{"postgres", "sqlite"} {
			t.Run(fmt.Sprintf("%s/%s/%s", lang, sc.name, kind), func(t *testing.T) {
				t.Parallel()
				checkScenario(t, s, sc, kind)
			})
		}
	}
}

func (sc scenario) command(s setup, flags []string, thread, out string, extra ...string) []string {
	var argv []string
	if sc.js {
		argv = []string{s.node, filepath.Join(s.nodeDir, "write_scenario.mjs")}
	} else {
		script, _ := filepath.Abs(filepath.Join("py", "write_scenario.py"))
		argv = []string{s.python, script}
	}
	argv = append(argv, "--scenario", sc.name, "--thread", thread, "--out", out)
	return append(append(argv, flags...), extra...)
}

func checkScenario(t *testing.T, s setup, sc scenario, kind string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	thread := fmt.Sprintf("scenario-%s-%d", sc.name, time.Now().UnixNano())
	var flags []string
	var st checkpointStore
	if kind == "postgres" {
		// A schema of its own: scenarios run in parallel, and each saver's
		// setup migrates its tables.
		flags = []string{"--dsn", s.dsn, "--schema", fmt.Sprintf("scen_%d", time.Now().UnixNano())}
		st = pgStore{dsn: s.dsn}
	} else {
		path := filepath.Join(t.TempDir(), "checkpoints.db")
		flags = []string{"--sqlite", path}
		st = sqliteStore{path: path}
	}
	out := filepath.Join(t.TempDir(), "truth.json")
	runProgram(t, ctx, sc.name, sc.command(s, flags, thread, out))
	want := readTruth(t, out)
	t.Logf("%s %s: %d questions, %d checkpoints, channels %v", want.Writer, sc.name, want.Total, len(want.Checkpoints), want.Channels)

	cfg := server.Config{Store: store.Config{StateChannels: want.Served, Reducers: map[string]string{}}}
	for ch, c := range want.Channels {
		r, ok := reducers[c.Reducer]
		if !ok {
			t.Fatalf("channel %s: reducer %q has no historyd counterpart", ch, c.Reducer)
		}
		cfg.Store.Reducers[ch] = r
	}
	client := serveConfig(t, st, &expectation{Schema: want.Schema}, cfg)

	if sc.js && kind == "postgres" && len(want.Forks) > 0 {
		// LangGraph.js's PostgresSaver loses a fork's values where the
		// abandoned branch wrote the same channel version, and its own
		// getState reads the other branch's: the same scenario written to
		// SQLite is the truth.
		sqlitePath := filepath.Join(t.TempDir(), "host.db")
		hostOut := filepath.Join(t.TempDir(), "host.json")
		runProgram(t, ctx, sc.name+" (sqlite, the truth)", sc.command(s, []string{"--sqlite", sqlitePath}, thread, hostOut))
		host := readTruth(t, hostOut)
		t.Run("lost-fork", func(t *testing.T) { checkLostFork(t, ctx, client, thread, host, want) })
		return
	}

	t.Run("turns", func(t *testing.T) { checkTruthTurns(t, ctx, client, thread, want) })
	t.Run("head", func(t *testing.T) { checkHead(t, ctx, client, thread, want) })
	if len(want.Forks) > 0 {
		t.Run("forks", func(t *testing.T) { checkForks(t, ctx, client, thread, want) })
		t.Run("branch", func(t *testing.T) { checkBranchReads(t, ctx, client, thread, want) })
	}
	for _, ch := range want.Served {
		t.Run("state/"+ch, func(t *testing.T) {
			checkTruthStates(t, ctx, client, thread, ch, want)
			checkValueFormats(t, ctx, client, thread, ch)
		})
	}
	t.Run("reference", func(t *testing.T) {
		switch {
		case want.Reference == nil:
			t.Logf("no reference reading: %s", want.ReferenceError)
		case len(want.Forks) > 0 && !want.Channels["messages"].Delta:
			// The reference counts human messages and breaks ties toward
			// the newer checkpoint, which on these forks prefers the
			// lineage: it must agree with the host.
			checkReferenceLineage(t, want)
		case want.Reference.Total != want.Total:
			// A documented difference: the reference counts the human
			// messages left in each checkpoint, and a DeltaChannel thread's
			// checkpoints hold none it can read; summarized or removed
			// messages count as fewer turns than were asked.
			t.Logf("documented difference: the reference says %d turns (retained %v), the host asked %d questions",
				want.Reference.Total, want.Reference.Retained, want.Total)
		}
	})

	// Prune the oldest checkpoints as a retention job would: through the
	// first snapshot after the first checkpoint for a DeltaChannel thread
	// (its chains break there), else through the second turn's end.
	doomed := pruneSet(want)
	if len(doomed) == 0 {
		return
	}
	if len(want.Forks) > 0 {
		// Retention reaching a fork: what is left of the abandoned branch
		// has lost its parent, and must not be taken for the lineage.
		t.Logf("pruning deletes the fork point %s: %v", want.Forks[0].From, slices.Contains(doomed, want.Forks[0].From))
		if sc.name == "fork-question" && !slices.Contains(doomed, want.Forks[0].From) {
			t.Fatalf("fork-question: pruning was meant to delete the fork point %s", want.Forks[0].From)
		}
	}
	if n := st.deleteRoot(t, ctx, &expectation{ThreadID: thread, Schema: want.Schema}, doomed); n != int64(len(doomed)) {
		t.Fatalf("deleted %d checkpoints, meant %d", n, len(doomed))
	}
	t.Run("pruned", func(t *testing.T) { checkPruned(t, ctx, client, thread, want, doomed) })
}

// serveConfig serves the store as historyd serve would, with cfg's store
// settings.
func serveConfig(t *testing.T, st checkpointStore, want *expectation, cfg server.Config) historydv1.ThreadHistoryClient {
	t.Helper()
	dsn, schema := st.source(t, want)
	cfg.Service.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := servertest.Start(t, cfg, servertest.WithDSN(dsn, schema), servertest.WithTCP())
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return historydv1.NewThreadHistoryClient(conn)
}

func runProgram(t *testing.T, ctx context.Context, name string, argv []string) {
	t.Helper()
	cmd := writerCmd(ctx, argv)
	var output strings.Builder
	cmd.Stderr, cmd.Stdout = &output, &output
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s writer (%s) failed: %v\n%s", name, strings.Join(redactArgv(argv), " "), err, tail(output.String(), 4000))
	}
	t.Logf("%s writer took %s: %s", name, time.Since(start).Round(10*time.Millisecond), strings.TrimSpace(tail(output.String(), 400)))
}

func readTruth(t *testing.T, path string) *truth {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr truth
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if tr.Total != len(tr.Turns) || tr.Total == 0 {
		t.Fatalf("%s: total %d with %d turns", path, tr.Total, len(tr.Turns))
	}
	return &tr
}

// others is answered_with without the turn itself: the truth lists every
// question of the input, historyd the other turns.
func others(n int, with []int) []int {
	var out []int
	for _, w := range with {
		if w != n {
			out = append(out, w)
		}
	}
	return out
}

func checkTruthTurns(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread string, want *truth) {
	r, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetTotal() != int32(want.Total) || r.GetNumbering() != want.numbering() {
		t.Fatalf("Turns: total %d, numbering %v; the host asked %d questions (%v), every checkpoint is there", r.GetTotal(), r.GetNumbering(), want.Total, want.numbering())
	}
	for i, w := range want.Turns {
		got := r.GetTurns()[i]
		if got.GetNumber() != int32(w.Turn) || !want.sameQuestion(got.GetQuestion(), w.Question) || !got.GetRetained() || !endsAt(want, got.GetCheckpointId(), w.CheckpointID) {
			t.Errorf("turn %d: %d %q retained %v at %s; the host: %q at %s", w.Turn, got.GetNumber(), got.GetQuestion(), got.GetRetained(),
				got.GetCheckpointId(), w.Question, w.CheckpointID)
		}
		if g, x := ints(got.GetAnsweredWith()), others(w.Turn, w.AnsweredWith); !slices.Equal(g, x) {
			t.Errorf("turn %d: answered with %v, the host asked it with %v", w.Turn, g, x)
		}
	}
}

// channelJSON is a served channel's entries in the form the truth records
// the channel's value: tool_state as StateEntry maps, any other map as
// its plain values, a value that is not a map as the one entry named for
// the channel.
func channelJSON(t *testing.T, channel string, entries map[string]*historydv1.StateEntry) any {
	t.Helper()
	got := entriesJSON(t, entries)
	if channel == "tool_state" {
		return got
	}
	plain := map[string]any{}
	for k, e := range got {
		plain[k] = e.(map[string]any)["value"]
	}
	if v, ok := plain[channel]; ok && len(plain) == 1 {
		if _, isMap := v.(map[string]any); !isMap {
			return v
		}
	}
	return plain
}

// emptyValue reports whether a recorded channel value holds nothing.
func emptyValue(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func sameChannel(t *testing.T, what, channel string, got map[string]*historydv1.StateEntry, want any) {
	t.Helper()
	g := channelJSON(t, channel, got)
	if emptyValue(want) && emptyValue(g) {
		return
	}
	for _, d := range diffJSON(channel, want, g) {
		t.Errorf("%s: %s", what, d)
	}
}

func checkTruthStates(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread, channel string, want *truth) {
	all, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread, Channel: channel})
	if err != nil {
		t.Fatal(err)
	}
	if all.GetTotal() != int32(want.Total) || len(all.GetTurns()) != want.Total {
		t.Fatalf("Snapshots: total %d, %d turns; the host asked %d questions", all.GetTotal(), len(all.GetTurns()), want.Total)
	}
	for _, w := range want.Turns {
		got := all.GetTurns()[int32(w.Turn)]
		if !endsAt(want, got.GetCheckpointId(), w.CheckpointID) {
			t.Errorf("Snapshots turn %d ends at %s; the host at %s", w.Turn, got.GetCheckpointId(), w.CheckpointID)
		}
		sameChannel(t, fmt.Sprintf("Snapshots turn %d", w.Turn), channel, got.GetEntries(), w.State[channel])
		one, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: int32(w.Turn), Channel: channel})
		if err != nil {
			t.Fatal(err)
		}
		if one.GetState() == nil {
			t.Errorf("Snapshot(%d): %T, want its state", w.Turn, one.GetResult())
			continue
		}
		sameChannel(t, fmt.Sprintf("Snapshot(%d)", w.Turn), channel, one.GetState().GetEntries(), w.State[channel])
	}
}

// pruneSet is what checkScenario deletes: the oldest checkpoints through the
// first that stores a DeltaChannel snapshot after the thread's first (a
// DeltaChannel thread), or through the second turn's end.
func pruneSet(want *truth) []string {
	cps := want.Checkpoints
	byID := map[string]int{}
	for i, c := range cps {
		byID[c.ID] = i
	}
	cut := -1
	for ch, c := range want.Channels {
		if !c.Delta {
			continue
		}
		for i, cp := range cps[1:] {
			if cp.Stored[ch] == "snapshot" && (cut < 0 || i+1 < cut) {
				cut = i + 1
				break
			}
		}
	}
	if cut < 0 && len(want.Turns) > 2 {
		cut = byID[want.Turns[1].CheckpointID]
	}
	if cut < 0 || cut >= len(cps)-1 {
		return nil
	}
	var out []string
	for _, c := range cps[:cut+1] {
		out = append(out, c.ID)
	}
	return out
}

// endsAt reports whether historyd's end of a turn, checkpoint got, is the
// host's, checkpoint host: the same, or the input checkpoint that opened
// the next run right after it (historyd, like the reference, ends a turn
// at the last checkpoint holding its state, and an input checkpoint holds
// its parent's state; the next question is only in its pending writes).
func endsAt(want *truth, got, host string) bool {
	if got == host {
		return true
	}
	for _, c := range want.Checkpoints {
		if c.ID == got {
			return c.Metadata.Source == "input" && c.Parent != nil && *c.Parent == host
		}
	}
	return false
}

// rebuildable reports whether channel's value at checkpoint id can still be
// rebuilt once the doomed checkpoints are gone: it is stored there, or
// empty, or every checkpoint from there back to one storing it (or to the
// thread's first) is left.
func rebuildable(want *truth, id, channel string, gone map[string]bool) bool {
	byID := map[string]truthCheckpoint{}
	for _, c := range want.Checkpoints {
		byID[c.ID] = c
	}
	c, ok := byID[id]
	if !ok || gone[id] {
		return false
	}
	// A served channel no checkpoint stores under its own name, and no
	// DeltaChannel (rebuilt from writes), lives inside another value
	// written whole at each run's end (the functional API's __previous__):
	// a checkpoint left holds all of it.
	if channel != "messages" && !want.Channels[channel].Delta && !anyStores(want, channel) {
		return true
	}
	if emptyValue(c.Values[channel]) && channel != "messages" {
		return true
	}
	for {
		if c.Stored[channel] != "" {
			return true
		}
		if c.Parent == nil {
			return true
		}
		if gone[*c.Parent] {
			return false
		}
		c = byID[*c.Parent]
	}
}

// anyStores says whether some checkpoint of want stores a value of channel.
func anyStores(want *truth, channel string) bool {
	for _, c := range want.Checkpoints {
		if c.Stored[channel] != "" {
			return true
		}
	}
	return false
}

// checkPruned compares historyd after pruning with the truth from before.
// Turns are matched by their question, since numbers after pruning rest on
// what is left:
//
//   - a turn whose end is left and whose messages can still be rebuilt is
//     served, at its end;
//   - a served turn is served at a checkpoint that is left, under its own
//     number unless the numbering says it is estimated (then never a
//     higher one), and each channel's value there exactly as before where
//     it can be rebuilt and as no longer retained where it cannot.
func checkPruned(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread string, want *truth, doomed []string) {
	gone := map[string]bool{}
	for _, id := range doomed {
		gone[id] = true
	}
	turns, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]*historydv1.TurnInfo{}
	for _, info := range turns.GetTurns() {
		if info.GetRetained() {
			served[want.questionKey(info.GetQuestion())] = info
		}
	}
	numbering := turns.GetNumbering()
	if len(want.Forks) > 0 {
		checkPrunedFork(t, turns, want)
	}
	t.Logf("pruned %d of %d checkpoints: historyd serves %d of %d turns (total %d, numbering %v)",
		len(doomed), len(want.Checkpoints), len(served), want.Total, turns.GetTotal(), numbering)
	for _, w := range want.Turns {
		info, ok := served[want.questionKey(w.Question)]
		// A turn is found by its messages, or for runs numbering (no
		// messages) by its served state.
		via := "messages"
		if want.Numbering == "runs" {
			via = want.Served[0]
		}
		exact := !gone[w.CheckpointID] && rebuildable(want, w.CheckpointID, via, gone)
		switch {
		case exact && !ok:
			t.Errorf("turn %q (was %d) is not served; its end %s is left and its state can be rebuilt", w.Question, w.Turn, w.CheckpointID)
			continue
		case exact && !endsAt(want, info.GetCheckpointId(), w.CheckpointID):
			t.Errorf("turn %q ends at %s after pruning; it ended at %s", w.Question, info.GetCheckpointId(), w.CheckpointID)
		case !ok:
			continue
		}
		at := info.GetCheckpointId()
		if gone[at] {
			t.Errorf("turn %q is served at %s, which was deleted", w.Question, at)
			continue
		}
		// Runs numbering counts no run before the oldest checkpoint left:
		// like an estimate, never too high.
		lower := numbering == historydv1.TurnNumbering_TURN_NUMBERING_ESTIMATED || numbering == historydv1.TurnNumbering_TURN_NUMBERING_RUNS
		switch n := int(info.GetNumber()); {
		case lower && n > w.Turn:
			t.Errorf("turn %q is numbered %d (%v); it was %d, and such a number is never too high", w.Question, n, numbering, w.Turn)
		case !lower && n != w.Turn:
			t.Errorf("turn %q is numbered %d (%v); it was %d", w.Question, n, numbering, w.Turn)
		}
		for _, ch := range want.Served {
			r, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: info.GetNumber(), Channel: ch})
			if err != nil {
				t.Fatal(err)
			}
			can := rebuildable(want, at, ch, gone)
			switch {
			case can && r.GetState() == nil:
				t.Errorf("turn %q channel %s: %T; its value can still be rebuilt", w.Question, ch, r.GetResult())
			case !can && r.GetNoLongerRetained() == nil:
				t.Errorf("turn %q channel %s: %T; a checkpoint it is rebuilt from was deleted", w.Question, ch, r.GetResult())
			case can:
				if r.GetState().GetCheckpointId() != at {
					t.Errorf("turn %q channel %s: state at %s, the turn at %s", w.Question, ch, r.GetState().GetCheckpointId(), at)
				}
				sameChannel(t, fmt.Sprintf("after pruning, turn %q", w.Question), ch, r.GetState().GetEntries(), w.State[ch])
			}
		}
	}
}

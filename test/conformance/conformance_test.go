package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
)

// The environment the suite needs; scripts/test.sh (run by `make test`) sets
// all of it.
const (
	envDSN       = "HISTORYD_TEST_DSN"       // PostgreSQL the writers and historyd share
	envPython    = "HISTORYD_TEST_PYTHON"    // python of the venv scripts/pyenv.sh builds
	envNode      = "HISTORYD_TEST_NODE"      // test/conformance/js with node_modules (scripts/nodeenv.sh)
	envReference = "HISTORYD_TEST_REFERENCE" // "required": fail when the reference cannot run
)

// The turns whose checkpoints are deleted to prove pruning is reported.
const pruneThrough = 2

// The key rewritten in later turns, used for projections.
const projectedKey = "sketch-ops/sketch_area/area"

type setup struct {
	dsn     string
	python  string
	nodeDir string
	node    string
}

// loadSetup reads the environment; the DSN is needed only by the tests
// against PostgreSQL (needDSN).
func loadSetup(t *testing.T, needDSN bool) setup {
	t.Helper()
	if testing.Short() {
		t.Skip("conformance suite skipped in -short mode: it runs real LangGraph writers against PostgreSQL and SQLite")
	}
	s := setup{dsn: os.Getenv(envDSN), python: os.Getenv(envPython), nodeDir: os.Getenv(envNode)}
	need := map[string]string{envPython: s.python, envNode: s.nodeDir}
	if needDSN {
		need[envDSN] = s.dsn
	}
	var missing []string
	for name, v := range need {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Fatalf("%s not set: run `make test`, which starts a throwaway PostgreSQL and builds the Python "+
			"and Node environments (scripts/test.sh), or set them as test/conformance/README.md says",
			strings.Join(missing, ", "))
	}
	if _, err := os.Stat(s.python); err != nil {
		t.Fatalf("%s=%s: %v (run scripts/pyenv.sh)", envPython, s.python, err)
	}
	if _, err := os.Stat(filepath.Join(s.nodeDir, "node_modules", "@langchain", "langgraph")); err != nil {
		t.Fatalf("%s=%s has no node_modules/@langchain/langgraph: %v (run scripts/nodeenv.sh)", envNode, s.nodeDir, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
	s.node = node
	return s
}

// writer runs one language's LangGraph thread writer.
type writer struct {
	name string
	// program is the interpreter and script to run.
	program func(s setup) []string
}

var writers = []writer{
	{
		name: "python",
		program: func(s setup) []string {
			script, _ := filepath.Abs(filepath.Join("py", "write_thread.py"))
			return []string{s.python, script}
		},
	},
	{
		name: "js",
		program: func(s setup) []string {
			return []string{s.node, filepath.Join(s.nodeDir, "write_thread.mjs")}
		},
	},
}

// command is the writer's argv for thread in st, writing its account of the
// thread to out, with extra flags after the common ones.
func (w writer) command(s setup, st checkpointStore, thread, out string, readOnly bool, extra ...string) []string {
	argv := append(w.program(s), st.flags()...)
	argv = append(argv, "--thread", thread, "--out", out)
	if readOnly {
		argv = append(argv, "--read-only")
	}
	return append(argv, extra...)
}

// checkpointStore is where a writer's LangGraph checkpointer keeps the
// thread, as the test reaches it: to point the writer at it, to serve it
// with historyd, and to count and delete checkpoints behind both their
// backs.
type checkpointStore interface {
	// flags name the store to a writer.
	flags() []string
	// source is where historyd serve's --dsn and --schema would point for
	// the store: the schema is the one the writer reported (PostgreSQL).
	source(t *testing.T, want *expectation) (dsn, schema string)
	// rootCheckpoints counts the thread's checkpoints in the root namespace.
	rootCheckpoints(t *testing.T, ctx context.Context, want *expectation) int
	// deleteRoot deletes the thread's root checkpoints with these ids
	// through a connection of its own, as a retention job would, and
	// returns how many it deleted.
	deleteRoot(t *testing.T, ctx context.Context, want *expectation, ids []string) int64
}

// TestConformance writes a real LangGraph thread per language to
// PostgreSQL, serves it with historyd over gRPC, and compares every answer
// with what LangGraph reports; then deletes the first turns' checkpoints and
// checks that historyd reports them as no longer retained and serves the
// rest unchanged.
func TestConformance(t *testing.T) {
	s := loadSetup(t, true)
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			checkWriter(t, s, w, pgStore{dsn: s.dsn})
		})
	}
}

func checkWriter(t *testing.T, s setup, w writer, st checkpointStore) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	thread := fmt.Sprintf("conformance-%s-%d", w.name, time.Now().UnixNano())
	want := runWriter(t, ctx, w.name, w.command(s, st, thread, filepath.Join(t.TempDir(), "expected.json"), false))
	t.Logf("%s writer: thread %s, %d turns, %d checkpoints, schema %q, versions %v",
		w.name, thread, want.Total, len(want.Checkpoints), want.Schema, want.Versions)
	if want.Total < 4 || !slices.Equal(want.Retained, seq(1, want.Total)) {
		t.Fatalf("writer produced an unusable thread: total %d, retained %v", want.Total, want.Retained)
	}
	if n := st.rootCheckpoints(t, ctx, want); n != len(want.Checkpoints) {
		t.Fatalf("the store holds %d root checkpoints of thread %s, LangGraph's history listed %d", n, want.ThreadID, len(want.Checkpoints))
	}

	client := serve(t, st, want)

	t.Run("full", func(t *testing.T) { checkThread(t, ctx, client, thread, want) })
	t.Run("reference", func(t *testing.T) { checkReference(t, ctx, client, thread, want, w.name == "python") })
	t.Run("unknown-thread", func(t *testing.T) { checkUnknownThread(t, ctx, client) })

	// Prune: delete every checkpoint holding at most pruneThrough questions,
	// as a retention job would.
	var doomed []string
	for _, c := range want.Checkpoints {
		if c.Humans <= pruneThrough {
			doomed = append(doomed, c.CheckpointID)
		}
	}
	if n := st.deleteRoot(t, ctx, want, doomed); n != int64(len(doomed)) {
		t.Fatalf("deleted %d checkpoints, meant %d", n, len(doomed))
	}
	t.Logf("pruned turns 1..%d: deleted %d checkpoints of thread %s", pruneThrough, len(doomed), thread)

	// What LangGraph itself now reports about the pruned thread.
	pruned := runWriter(t, ctx, w.name, w.command(s, st, thread, filepath.Join(t.TempDir(), "expected.json"), true))
	t.Run("langgraph-after-prune", func(t *testing.T) {
		if pruned.Total != want.Total {
			t.Errorf("LangGraph's total after pruning: %d, want %d", pruned.Total, want.Total)
		}
		if !slices.Equal(pruned.Retained, seq(pruneThrough+1, want.Total)) {
			t.Errorf("LangGraph's retained turns after pruning: %v, want %v", pruned.Retained, seq(pruneThrough+1, want.Total))
		}
		for _, n := range pruned.Retained {
			a, b := want.turn(n), pruned.turn(n)
			if a.CheckpointID != b.CheckpointID || a.Question != b.Question {
				t.Errorf("turn %d changed in LangGraph's own view after pruning: %s %q, was %s %q", n, b.CheckpointID, b.Question, a.CheckpointID, a.Question)
			}
			for _, d := range diffJSON("tool_state", a.ToolState, b.ToolState) {
				t.Errorf("turn %d in LangGraph's own view after pruning: %s", n, d)
			}
		}
	})
	t.Run("pruned", func(t *testing.T) {
		checkThread(t, ctx, client, thread, pruned)
		// And the turns that survived are served exactly as before.
		resp, err := client.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread})
		if err != nil {
			t.Fatalf("Snapshots after pruning: %v", err)
		}
		for n := pruneThrough + 1; n <= want.Total; n++ {
			checkTurnState(t, fmt.Sprintf("after pruning, Snapshots turn %d", n), resp.GetTurns()[int32(n)], want.turn(n))
		}
		for n := 1; n <= pruneThrough; n++ {
			r, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: int32(n)})
			if err != nil {
				t.Fatalf("Snapshot(%d) after pruning: %v", n, err)
			}
			gone := r.GetNoLongerRetained()
			if gone == nil {
				t.Errorf("Snapshot(%d) after pruning: got %T, want no_longer_retained", n, r.GetResult())
				continue
			}
			if r.GetTotal() != int32(want.Total) {
				t.Errorf("Snapshot(%d) after pruning: total %d, want %d (unchanged)", n, r.GetTotal(), want.Total)
			}
			if got, w := ints(r.GetRetainedTurns()), seq(pruneThrough+1, want.Total); !slices.Equal(got, w) {
				t.Errorf("Snapshot(%d) after pruning: retained_turns %v, want %v", n, got, w)
			}
		}
	})
	t.Run("reference-after-prune", func(t *testing.T) {
		checkReference(t, ctx, client, thread, pruned, w.name == "python")
	})
}

// checkThread compares every read historyd offers with want, LangGraph's
// own account of the thread as it now stands.
func checkThread(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread string, want *expectation) {
	t.Helper()
	total := int32(want.Total)

	// Snapshots: every retained turn, and the total.
	all, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread})
	if err != nil {
		t.Fatalf("Snapshots: %v", err)
	}
	if all.GetTotal() != total {
		t.Errorf("Snapshots: total %d, want %d", all.GetTotal(), total)
	}
	if got := sortedTurns(all.GetTurns()); !slices.Equal(got, want.Retained) {
		t.Errorf("Snapshots: turns %v, want %v", got, want.Retained)
	}
	for _, n := range want.Retained {
		checkTurnState(t, fmt.Sprintf("Snapshots turn %d", n), all.GetTurns()[int32(n)], want.turn(n))
	}
	checkValueFormats(t, ctx, c, thread, "")

	// Snapshot of each turn from 0 to total+1.
	for n := 0; n <= want.Total+1; n++ {
		what := fmt.Sprintf("Snapshot(%d)", n)
		r, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: int32(n)})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if r.GetTotal() != total {
			t.Errorf("%s: total %d, want %d", what, r.GetTotal(), total)
		}
		if got := ints(r.GetRetainedTurns()); !slices.Equal(got, want.Retained) {
			t.Errorf("%s: retained_turns %v, want %v", what, got, want.Retained)
		}
		switch {
		case n < 1 || n > want.Total:
			miss := r.GetNoSuchTurn()
			if miss == nil {
				t.Errorf("%s: got %T, want no_such_turn", what, r.GetResult())
				continue
			}
			if miss.GetTurn() != int32(n) || miss.GetTotal() != total {
				t.Errorf("%s: no_such_turn{turn %d, total %d}, want {turn %d, total %d}", what, miss.GetTurn(), miss.GetTotal(), n, total)
			}
		case want.retained(n):
			if r.GetState() == nil {
				t.Errorf("%s: got %T, want state", what, r.GetResult())
				continue
			}
			checkTurnState(t, what, r.GetState(), want.turn(n))
		default:
			gone := r.GetNoLongerRetained()
			if gone == nil {
				t.Errorf("%s: got %T, want no_longer_retained", what, r.GetResult())
				continue
			}
			if gone.GetTurn() != int32(n) {
				t.Errorf("%s: no_longer_retained.turn %d", what, gone.GetTurn())
			}
			if gone.GetQuestion() != want.Questions[n-1] {
				t.Errorf("%s: no_longer_retained.question %q, want %q", what, gone.GetQuestion(), want.Questions[n-1])
			}
		}
	}

	// The keys projection, on both reads, with a key no turn holds.
	keys := []string{projectedKey, "no/such/key"}
	proj, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread, Keys: keys})
	if err != nil {
		t.Fatalf("Snapshots(keys): %v", err)
	}
	if proj.GetTotal() != total {
		t.Errorf("Snapshots(keys): total %d, want %d", proj.GetTotal(), total)
	}
	if got := sortedTurns(proj.GetTurns()); !slices.Equal(got, want.Retained) {
		t.Errorf("Snapshots(keys): turns %v, want %v", got, want.Retained)
	}
	for _, n := range want.Retained {
		checkTurnState(t, fmt.Sprintf("Snapshots(keys) turn %d", n), proj.GetTurns()[int32(n)], want.turn(n).project(keys))
	}
	last := want.Retained[len(want.Retained)-1]
	one, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: int32(last), Keys: keys})
	if err != nil {
		t.Fatalf("Snapshot(%d, keys): %v", last, err)
	}
	checkTurnState(t, fmt.Sprintf("Snapshot(%d, keys)", last), one.GetState(), want.turn(last).project(keys))

	// Turns, without and with keys_written.
	for _, withKeys := range []bool{false, true} {
		what := fmt.Sprintf("Turns(include_keys_written=%v)", withKeys)
		r, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread, IncludeKeysWritten: withKeys})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if r.GetTotal() != total {
			t.Errorf("%s: total %d, want %d", what, r.GetTotal(), total)
		}
		if len(r.GetTurns()) != want.Total {
			t.Errorf("%s: %d turns, want %d", what, len(r.GetTurns()), want.Total)
			continue
		}
		for i, ti := range r.GetTurns() {
			n := i + 1
			if ti.GetNumber() != int32(n) {
				t.Errorf("%s: turns[%d].number %d, want %d", what, i, ti.GetNumber(), n)
			}
			if ti.GetQuestion() != want.Questions[i] {
				t.Errorf("%s: turn %d question %q, want %q", what, n, ti.GetQuestion(), want.Questions[i])
			}
			if ti.GetRetained() != want.retained(n) {
				t.Errorf("%s: turn %d retained %v, want %v", what, n, ti.GetRetained(), want.retained(n))
			}
			var wantID string
			var wantKeys []string
			if want.retained(n) {
				wt := want.turn(n)
				wantID = wt.CheckpointID
				if withKeys {
					wantKeys = wt.keysWritten()
				}
				checkEndedAt(t, fmt.Sprintf("%s: turn %d", what, n), ti.GetEndedAt(), wt.EndedAt)
			} else if ti.GetEndedAt() != nil {
				t.Errorf("%s: turn %d is not retained but has ended_at %v", what, n, ti.GetEndedAt().AsTime())
			}
			if ti.GetCheckpointId() != wantID {
				t.Errorf("%s: turn %d checkpoint_id %q, want %q", what, n, ti.GetCheckpointId(), wantID)
			}
			if got := ti.GetKeysWritten(); !slices.Equal(got, wantKeys) && (len(got) > 0 || len(wantKeys) > 0) {
				t.Errorf("%s: turn %d keys_written %v, want %v", what, n, got, wantKeys)
			}
		}
	}
}

// checkTurnState compares one TurnState with a turn of an expectation.
func checkTurnState(t *testing.T, what string, got *historydv1.TurnState, want *expTurn) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: no state", what)
		return
	}
	if got.GetTurn() != int32(want.Turn) {
		t.Errorf("%s: turn %d, want %d", what, got.GetTurn(), want.Turn)
	}
	if got.GetCheckpointId() != want.CheckpointID {
		t.Errorf("%s: checkpoint_id %q, want %q", what, got.GetCheckpointId(), want.CheckpointID)
	}
	if got.GetQuestion() != want.Question {
		t.Errorf("%s: question %q, want %q", what, got.GetQuestion(), want.Question)
	}
	checkEndedAt(t, what, got.GetEndedAt(), want.EndedAt)
	for _, d := range diffJSON("entries", want.ToolState, entriesJSON(t, got.GetEntries())) {
		t.Errorf("%s: %s", what, d)
	}
}

func checkEndedAt(t *testing.T, what string, got *timestamppb.Timestamp, want string) {
	t.Helper()
	if want == "" {
		return
	}
	w, err := time.Parse(time.RFC3339Nano, want)
	if err != nil {
		t.Fatalf("%s: expected ended_at %q: %v", what, want, err)
	}
	if got == nil {
		t.Errorf("%s: no ended_at, want %s", what, want)
		return
	}
	if g := got.AsTime(); !g.Equal(w) {
		t.Errorf("%s: ended_at %s, want %s", what, g.Format(time.RFC3339Nano), w.Format(time.RFC3339Nano))
	}
}

// checkReference compares historyd with mcp-toolsets-runtime's
// mcp_agent.history.turns_from, as the Python writer recorded it.
func checkReference(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread string, want *expectation, python bool) {
	t.Helper()
	ref := want.Reference
	if ref == nil {
		if python && os.Getenv(envReference) == "required" {
			t.Fatalf("reference implementation required (%s=required) but not run: %s", envReference, want.ReferenceError)
		}
		t.Logf("reference implementation not compared: %s", want.ReferenceError)
		return
	}
	resp, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread})
	if err != nil {
		t.Fatalf("Snapshots: %v", err)
	}
	if resp.GetTotal() != int32(ref.Total) {
		t.Errorf("total: historyd %d, reference %d", resp.GetTotal(), ref.Total)
	}
	if got := sortedTurns(resp.GetTurns()); !slices.Equal(got, ref.Retained) {
		t.Errorf("retained turns: historyd %v, reference %v", got, ref.Retained)
	}
	for _, n := range ref.Retained {
		rt := ref.Turns[strconv.Itoa(n)]
		got := resp.GetTurns()[int32(n)]
		if got == nil {
			continue
		}
		if got.GetCheckpointId() != rt.CheckpointID {
			t.Errorf("turn %d checkpoint_id: historyd %q, reference %q", n, got.GetCheckpointId(), rt.CheckpointID)
		}
		if got.GetQuestion() != rt.Question {
			t.Errorf("turn %d question: historyd %q, reference %q", n, got.GetQuestion(), rt.Question)
		}
		for _, d := range diffJSON("state", rt.State, entriesJSON(t, got.GetEntries())) {
			t.Errorf("turn %d, reference vs historyd: %s", n, d)
		}
	}
	t.Logf("reference implementation agrees on %d turns (total %d)", len(ref.Retained), ref.Total)
	for _, d := range ref.UnscopedDifferences {
		t.Logf("note: the reference read over every checkpoint namespace, as turns_from does when handed a saver, differs: %s", d)
	}
}

func checkUnknownThread(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient) {
	thread := fmt.Sprintf("conformance-never-written-%d", time.Now().UnixNano())
	r, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread})
	if err != nil {
		t.Fatalf("Snapshots(unknown thread): %v, want total 0", err)
	}
	if r.GetTotal() != 0 || len(r.GetTurns()) != 0 {
		t.Errorf("Snapshots(unknown thread): total %d, %d turns; want 0, 0", r.GetTotal(), len(r.GetTurns()))
	}
	one, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: 1})
	if err != nil {
		t.Fatalf("Snapshot(unknown thread, 1): %v", err)
	}
	if miss := one.GetNoSuchTurn(); miss == nil || miss.GetTotal() != 0 {
		t.Errorf("Snapshot(unknown thread, 1): %v, want no_such_turn with total 0", one)
	}
}

// serve starts historyd in process on a loopback TCP listener, its server
// built as historyd serve builds it, over st (opened from its DSN as
// historyd serve opens it, listing the channels the server's configuration
// reads), and returns a client connected to it.
func serve(t *testing.T, st checkpointStore, want *expectation) historydv1.ThreadHistoryClient {
	t.Helper()
	dsn, schema := st.source(t, want)
	// Warnings and errors (a store failure, an internal error's cause) are
	// worth seeing when a comparison fails; the request log is not.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := servertest.Start(t, server.Config{Service: service.Frontend{Logger: log}}, servertest.WithDSN(dsn, schema), servertest.WithTCP())
	conn, err := grpc.NewClient(srv.Addr(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// A thread carrying megabyte geometries in several turns is larger
		// than gRPC's 4 MiB default receive limit.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)),
	)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return historydv1.NewThreadHistoryClient(conn)
}

// runWriter runs a writer's argv and reads the expectation it wrote to the
// file after its --out.
func runWriter(t *testing.T, ctx context.Context, name string, argv []string) *expectation {
	t.Helper()
	cmd := writerCmd(ctx, argv)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s writer (%s) failed: %v\n%s", name, strings.Join(redactArgv(argv), " "), err, tail(stderr.String(), 4000))
	}
	t.Logf("%s writer%s took %s: %s", name, map[bool]string{true: " (read-only)"}[slices.Contains(argv, "--read-only")],
		time.Since(start).Round(10*time.Millisecond), strings.TrimSpace(tail(stderr.String(), 600)))
	return readExpectation(t, argAfter(argv, "--out"))
}

func writerCmd(ctx context.Context, argv []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	return cmd
}

// argAfter is the argument following flag in argv.
func argAfter(argv []string, flag string) string {
	if i := slices.Index(argv, flag); i >= 0 && i+1 < len(argv) {
		return argv[i+1]
	}
	return ""
}

func redactArgv(argv []string) []string {
	out := slices.Clone(argv)
	for i := range out {
		if i > 0 && out[i-1] == "--dsn" {
			out[i] = "<dsn>"
		}
	}
	return out
}

// pgStore is a PostgreSQL database: the writers' PostgresSaver writes the
// thread there, in the schema the writer reports (the JS writer's own,
// Python's the default search path).
type pgStore struct{ dsn string }

func (p pgStore) flags() []string { return []string{"--dsn", p.dsn} }

func (p pgStore) source(_ *testing.T, want *expectation) (string, string) { return p.dsn, want.Schema }

func (p pgStore) rootCheckpoints(t *testing.T, ctx context.Context, want *expectation) int {
	t.Helper()
	conn := p.connect(t, ctx)
	defer conn.Close(ctx)
	var n int
	q := `SELECT count(*) FROM ` + checkpointsTable(want.Schema) + ` WHERE thread_id = $1 AND checkpoint_ns = ''`
	if err := conn.QueryRow(ctx, q, want.ThreadID).Scan(&n); err != nil {
		t.Fatalf("count checkpoints: %v", err)
	}
	return n
}

func (p pgStore) deleteRoot(t *testing.T, ctx context.Context, want *expectation, ids []string) int64 {
	t.Helper()
	conn := p.connect(t, ctx)
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, `DELETE FROM `+checkpointsTable(want.Schema)+
		` WHERE thread_id = $1 AND checkpoint_ns = '' AND checkpoint_id = ANY($2)`, want.ThreadID, ids)
	if err != nil {
		t.Fatalf("delete checkpoints: %v", err)
	}
	return tag.RowsAffected()
}

func (p pgStore) connect(t *testing.T, ctx context.Context) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return conn
}

func checkpointsTable(schema string) string {
	if schema == "" {
		return pgx.Identifier{"checkpoints"}.Sanitize()
	}
	return pgx.Identifier{schema, "checkpoints"}.Sanitize()
}

func seq(from, to int) []int {
	var out []int
	for n := from; n <= to; n++ {
		out = append(out, n)
	}
	return out
}

func ints(in []int32) []int {
	out := make([]int, len(in))
	for i, v := range in {
		out[i] = int(v)
	}
	return out
}

func sortedTurns[V any](m map[int32]V) []int {
	out := make([]int, 0, len(m))
	for n := range m {
		out = append(out, int(n))
	}
	slices.Sort(out)
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

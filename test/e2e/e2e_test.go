package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/internal/testbin"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
)

// The environment these tests need; scripts/test.sh (run by `make test`)
// sets all of it.
const (
	envDSN       = "HISTORYD_TEST_DSN"       // PostgreSQL the writer and historyd share
	envPython    = "HISTORYD_TEST_PYTHON"    // python of the venv scripts/pyenv.sh builds
	envReference = "HISTORYD_TEST_REFERENCE" // "required": fail when mcp-toolsets-runtime cannot run
)

// The key the model compares across turns: written in turns 2, 4 and 5 of
// the conformance writer's thread, so turn 3 holds turn 2's value and the
// present holds turn 5's.
const key = "sketch-ops/sketch_area/area"

// The turn read from history, and the turns whose checkpoints are deleted.
const (
	readTurn     = 3
	pruneThrough = 2
)

// The answering script's exit code for "mcp-toolsets-runtime does not import".
const exitUnavailable = 3

func need(t *testing.T, names ...string) map[string]string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: runs the Python client against a real LangGraph thread in PostgreSQL")
	}
	got := map[string]string{}
	var missing []string
	for _, name := range names {
		if got[name] = os.Getenv(name); got[name] == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s not set: run `make test` (scripts/test.sh starts a throwaway PostgreSQL and builds the "+
			"Python virtualenv), or set them as test/e2e/README.md says", strings.Join(missing, ", "))
	}
	if p := got[envPython]; p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v (run scripts/pyenv.sh)", envPython, p, err)
		}
	}
	return got
}

// TestPythonClientUnit runs client/python's unit tests, which serve canned
// answers from an in-process Python gRPC server.
func TestPythonClientUnit(t *testing.T) {
	env := need(t, envPython)
	root := testbin.RepoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := python(ctx, env[envPython], root, "-m", "unittest", "discover", "-v",
		"-s", filepath.Join(root, "client", "python", "tests"))
	if err != nil {
		t.Fatalf("client/python unit tests: %v\n%s", err, tail(out, 8000))
	}
	t.Logf("client/python unit tests:\n%s", tail(out, 3000))
}

// TestInspectStateThroughHistoryd writes a real LangGraph thread, serves it
// with historyd, prunes its first turns, and asks mcp-toolsets-runtime's own
// inspect_state tool about it, with HistorydThreadHistory as the tool's
// history: the present, a retained earlier turn, a turn the thread never
// had, and a pruned turn.
func TestInspectStateThroughHistoryd(t *testing.T) {
	env := need(t, envDSN, envPython)
	root := testbin.RepoRoot(t)
	dsn, py := env[envDSN], env[envPython]
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// A real thread, written by LangGraph with PostgresSaver.
	thread := fmt.Sprintf("e2e-python-%d", time.Now().UnixNano())
	expectedPath := filepath.Join(t.TempDir(), "expected.json")
	start := time.Now()
	out, err := python(ctx, py, root, filepath.Join(root, "test", "conformance", "py", "write_thread.py"),
		"--dsn", dsn, "--thread", thread, "--out", expectedPath, "--no-reference")
	if err != nil {
		t.Fatalf("write_thread.py: %v\n%s", err, tail(out, 4000))
	}
	t.Logf("writer took %s: %s", time.Since(start).Round(10*time.Millisecond), strings.TrimSpace(tail(out, 400)))
	want := readExpectation(t, expectedPath)
	total := want.Total
	retainedAfter := seq(pruneThrough+1, total)
	then, now := want.value(t, readTurn, key), want.value(t, total, key)
	if total <= readTurn || reflect.DeepEqual(then, now) {
		t.Fatalf("the writer's thread no longer suits this test: total %d, %s at turn %d %v and now %v",
			total, key, readTurn, then, now)
	}

	target := serve(t, dsn, want.Schema)

	// Prune turns 1..pruneThrough, as a retention job would.
	var doomed []string
	for _, c := range want.Checkpoints {
		if c.Humans <= pruneThrough {
			doomed = append(doomed, c.CheckpointID)
		}
	}
	deleteCheckpoints(t, ctx, dsn, thread, doomed)

	// Ask inspect_state, with historyd as its history.
	asks := []map[string]any{
		{"key": key},
		{"key": key, "turn": readTurn},
		{"key": key, "turn": total + 1},
		{"key": key, "turn": 1},
	}
	argv := []string{filepath.Join(root, "test", "e2e", "inspect_via_historyd.py"),
		"--target", target, "--dsn", dsn, "--thread", thread}
	for _, a := range asks {
		raw, _ := json.Marshal(a)
		argv = append(argv, "--ask", string(raw))
	}
	answersPath := filepath.Join(t.TempDir(), "answers.json")
	argv = append(argv, "--out", answersPath, "--compare-reference")
	out, err = python(ctx, py, root, argv...)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == exitUnavailable {
		if os.Getenv(envReference) == "required" {
			t.Fatalf("%s=required but mcp-toolsets-runtime cannot run: %s", envReference, strings.TrimSpace(out))
		}
		t.Skipf("mcp-toolsets-runtime cannot run here, so there is no inspect_state to drive: %s", strings.TrimSpace(out))
	}
	if err != nil {
		t.Fatalf("inspect_via_historyd.py: %v\n%s", err, tail(out, 8000))
	}
	got := readAnswers(t, answersPath)
	t.Logf("versions: %v", got.Versions)
	for i, a := range got.Answers {
		t.Logf("inspect_state(%v) →\n%s", asks[i], tail(a.Content, 600))
	}
	if len(got.Answers) != len(asks) {
		t.Fatalf("%d answers for %d asks", len(got.Answers), len(asks))
	}
	for i, a := range got.Answers {
		if a.Status == "error" {
			t.Errorf("inspect_state(%v) failed: %s", asks[i], a.Content)
		}
	}

	// The reference answers the same calls with its own history, read off
	// the checkpointer in process; through historyd they must read the same.
	// The one difference allowed is the key order of a value's maps, which
	// google.protobuf.Struct does not carry (the client sorts keys).
	t.Run("same-as-reference", func(t *testing.T) {
		for i, a := range got.Answers {
			if a.Reference == nil {
				t.Fatalf("inspect_state(%v): no reference answer", asks[i])
			}
			switch identical, equivalent := sameAnswer(a.Content, *a.Reference); {
			case identical:
			case equivalent:
				t.Logf("inspect_state(%v): same as the reference but for key order:\nthrough historyd: %s\nreference:        %s",
					asks[i], a.Content, *a.Reference)
			default:
				t.Errorf("inspect_state(%v):\nthrough historyd: %s\nreference:        %s", asks[i], a.Content, *a.Reference)
			}
		}
	})

	t.Run("result-types", func(t *testing.T) {
		for what, pair := range map[string][2]string{
			"Snapshot": {got.SnapshotType, "mcp_state.history.Snapshot"},
			"History":  {got.HistoryType, "mcp_agent.history.History"},
			"Turn":     {got.TurnType, "mcp_agent.history.Turn"},
		} {
			if pair[0] != pair[1] {
				t.Errorf("%s came back as %s, want the reference's %s", what, pair[0], pair[1])
			}
		}
	})

	t.Run("present", func(t *testing.T) {
		a := got.Answers[0].Content
		value, note := splitNote(t, a)
		if !reflect.DeepEqual(value, now) {
			t.Errorf("present value %v, want %v (the newest turn's)", value, now)
		}
		if !strings.Contains(note, "turns of this conversation wrote this key") {
			t.Errorf("present read lacks the earlier-turns note: %q", note)
		}
	})

	t.Run("retained-turn", func(t *testing.T) {
		a := got.Answers[1].Content
		value, note := splitNote(t, a)
		if !reflect.DeepEqual(value, then) {
			t.Errorf("turn %d value %v, want %v (LangGraph's own at the end of turn %d)", readTurn, value, then, readTurn)
		}
		if reflect.DeepEqual(value, now) {
			t.Errorf("turn %d answered with the present value %v", readTurn, value)
		}
		if w := fmt.Sprintf("[%s as it stood at the end of turn %d.]", key, readTurn); note != w {
			t.Errorf("turn %d note %q, want %q", readTurn, note, w)
		}
	})

	t.Run("no-such-turn", func(t *testing.T) {
		var m struct {
			NoSuchTurn  *int   `json:"no_such_turn"`
			TurnsSoFar  *int   `json:"turns_so_far"`
			Reason      string `json:"reason"`
			Unretained  *int   `json:"turn_no_longer_retained"`
			ValueLeaked any    `json:"value"`
		}
		decode(t, got.Answers[2].Content, &m)
		if m.NoSuchTurn == nil || *m.NoSuchTurn != total+1 || m.TurnsSoFar == nil || *m.TurnsSoFar != total {
			t.Errorf("turn %d: %s; want no_such_turn %d with turns_so_far %d", total+1, got.Answers[2].Content, total+1, total)
		}
		if m.Unretained != nil {
			t.Errorf("turn %d reported as pruned: %s", total+1, got.Answers[2].Content)
		}
	})

	t.Run("pruned-turn", func(t *testing.T) {
		var m struct {
			Unretained    *int   `json:"turn_no_longer_retained"`
			RetainedTurns []int  `json:"retained_turns"`
			Reason        string `json:"reason"`
			NoSuchTurn    *int   `json:"no_such_turn"`
		}
		decode(t, got.Answers[3].Content, &m)
		if m.Unretained == nil || *m.Unretained != 1 {
			t.Errorf("turn 1: %s; want turn_no_longer_retained 1", got.Answers[3].Content)
		}
		if !slices.Equal(m.RetainedTurns, retainedAfter) {
			t.Errorf("turn 1: retained_turns %v, want %v", m.RetainedTurns, retainedAfter)
		}
		if !strings.Contains(m.Reason, "pruned") || m.NoSuchTurn != nil {
			t.Errorf("turn 1: %s; want a pruned answer, not a miscount", got.Answers[3].Content)
		}
	})

	// HistorydThreadHistory.snapshots against LangGraph's own account of
	// the surviving turns: every entry, value and bookkeeping alike.
	t.Run("snapshots", func(t *testing.T) {
		s := got.Snapshots
		if s.Total != total {
			t.Errorf("total %d, want %d", s.Total, total)
		}
		var turns []int
		for n := range s.Turns {
			i, _ := strconv.Atoi(n)
			turns = append(turns, i)
		}
		sort.Ints(turns)
		if !slices.Equal(turns, retainedAfter) {
			t.Errorf("retained turns %v, want %v", turns, retainedAfter)
		}
		for _, n := range retainedAfter {
			g, w := s.Turns[strconv.Itoa(n)], want.Turns[strconv.Itoa(n)]
			if w == nil {
				t.Fatalf("the writer recorded no turn %d", n)
			}
			if g.CheckpointID != w.CheckpointID || g.Question != w.Question {
				t.Errorf("turn %d: checkpoint %s %q, want %s %q", n, g.CheckpointID, g.Question, w.CheckpointID, w.Question)
			}
			for _, d := range diff(fmt.Sprintf("turn %d", n), w.ToolState, g.State) {
				t.Error(d)
			}
		}
		if got.Turns.Total != total || !slices.Equal(got.Turns.Retained, retainedAfter) ||
			!slices.Equal(got.Turns.Questions, want.Questions) {
			t.Errorf("turns(): total %d, retained %v, questions %q; want %d, %v, %q",
				got.Turns.Total, got.Turns.Retained, got.Turns.Questions, total, retainedAfter, want.Questions)
		}
	})
}

// expectation is the part of the conformance writer's expected.json used
// here: the thread as LangGraph reports it, state in historyd's JSON mapping.
type expectation struct {
	Total       int                 `json:"total"`
	Questions   []string            `json:"questions"`
	Retained    []int               `json:"retained"`
	Schema      string              `json:"schema"`
	Turns       map[string]*expTurn `json:"turns"`
	Checkpoints []struct {
		CheckpointID string `json:"checkpoint_id"`
		Humans       int    `json:"humans"`
	} `json:"checkpoints"`
}

type expTurn struct {
	CheckpointID string         `json:"checkpoint_id"`
	Question     string         `json:"question"`
	ToolState    map[string]any `json:"tool_state"`
}

func readExpectation(t *testing.T, path string) *expectation {
	t.Helper()
	var e expectation
	decodeFile(t, path, &e)
	if !slices.Equal(e.Retained, seq(1, e.Total)) {
		t.Fatalf("the writer's thread is not whole: total %d, retained %v", e.Total, e.Retained)
	}
	return &e
}

// value is key's value at the end of turn n, as LangGraph reports it.
func (e *expectation) value(t *testing.T, n int, key string) any {
	t.Helper()
	turn := e.Turns[strconv.Itoa(n)]
	if turn == nil {
		t.Fatalf("the writer recorded no turn %d", n)
	}
	entry, ok := turn.ToolState[key].(map[string]any)
	if !ok {
		t.Fatalf("turn %d holds no entry for %s", n, key)
	}
	return entry["value"]
}

// answers is what inspect_via_historyd.py writes.
type answers struct {
	Answers []struct {
		Args    map[string]any `json:"args"`
		Status  string         `json:"status"`
		Content string         `json:"content"`
		// The same call answered by the reference's own CheckpointHistory.
		Reference *string `json:"reference_content"`
	} `json:"answers"`
	SnapshotType string `json:"snapshot_type"`
	HistoryType  string `json:"history_type"`
	TurnType     string `json:"turn_type"`
	Snapshots    struct {
		Total int `json:"total"`
		Turns map[string]struct {
			CheckpointID string         `json:"checkpoint_id"`
			Question     string         `json:"question"`
			State        map[string]any `json:"state"`
		} `json:"turns"`
	} `json:"snapshots"`
	Turns struct {
		Total     int      `json:"total"`
		Retained  []int    `json:"retained"`
		Questions []string `json:"questions"`
	} `json:"turns"`
	Versions map[string]string `json:"versions"`
}

func readAnswers(t *testing.T, path string) *answers {
	t.Helper()
	var a answers
	decodeFile(t, path, &a)
	return &a
}

// sameAnswer says whether two inspect_state answers are identical, or
// equivalent: the same but for the key order of the JSON on their first line.
func sameAnswer(a, b string) (identical, equivalent bool) {
	if a == b {
		return true, true
	}
	aBody, aNote, _ := strings.Cut(a, "\n")
	bBody, bNote, _ := strings.Cut(b, "\n")
	if aNote != bNote {
		return false, false
	}
	var av, bv any
	if json.Unmarshal([]byte(aBody), &av) != nil || json.Unmarshal([]byte(bBody), &bv) != nil {
		return false, false
	}
	return false, reflect.DeepEqual(av, bv)
}

// splitNote splits an inspect_state read into its JSON value and the
// bracketed note on the line after it.
func splitNote(t *testing.T, content string) (any, string) {
	t.Helper()
	body, note, _ := strings.Cut(content, "\n")
	var v any
	decode(t, body, &v)
	return v, strings.TrimSpace(note)
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("not the JSON expected: %v\n%s", err, tail(s, 2000))
	}
}

func decodeFile(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}

// serve starts historyd in process on a loopback port, its server built as
// historyd serve builds it, over the checkpoint tables in schema (opened as
// historyd serve opens them, listing the channels the server's
// configuration reads), and returns its address.
func serve(t *testing.T, dsn, schema string) string {
	t.Helper()
	// Warnings and errors (a store failure, an internal error's cause) are
	// worth seeing when an answer is wrong; the request log is not.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return servertest.Start(t, server.Config{Service: service.Frontend{Logger: log}}, servertest.WithDSN(dsn, schema), servertest.WithTCP()).Addr()
}

func deleteCheckpoints(t *testing.T, ctx context.Context, dsn, thread string, ids []string) {
	t.Helper()
	if len(ids) == 0 {
		t.Fatalf("no checkpoints of turns 1..%d to delete", pruneThrough)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx,
		`DELETE FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '' AND checkpoint_id = ANY($2)`, thread, ids)
	if err != nil {
		t.Fatalf("delete checkpoints: %v", err)
	}
	if tag.RowsAffected() != int64(len(ids)) {
		t.Fatalf("deleted %d checkpoints, meant %d", tag.RowsAffected(), len(ids))
	}
	t.Logf("pruned turns 1..%d: deleted %d checkpoints of thread %s", pruneThrough, len(ids), thread)
}

// python runs the venv's interpreter from the repository root with
// client/python/src on PYTHONPATH, returning its combined output.
func python(ctx context.Context, py, root string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Dir = root
	path := filepath.Join(root, "client", "python", "src")
	if old := os.Getenv("PYTHONPATH"); old != "" {
		path += string(os.PathListSeparator) + old
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+path, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// diff lists where got differs from want, both decoded JSON, by path; at
// most a handful, as one bad conversion tends to repeat.
func diff(path string, want, got any) []string {
	var out []string
	var walk func(p string, w, g any)
	walk = func(p string, w, g any) {
		if len(out) >= 10 {
			return
		}
		switch wv := w.(type) {
		case map[string]any:
			gv, ok := g.(map[string]any)
			if !ok {
				out = append(out, fmt.Sprintf("%s: got %T, want an object", p, g))
				return
			}
			keys := map[string]bool{}
			for k := range wv {
				keys[k] = true
			}
			for k := range gv {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				a, inW := wv[k]
				b, inG := gv[k]
				switch {
				case !inG:
					out = append(out, fmt.Sprintf("%s.%s: missing, want %s", p, k, short(a)))
				case !inW:
					out = append(out, fmt.Sprintf("%s.%s: unexpected %s", p, k, short(b)))
				default:
					walk(p+"."+k, a, b)
				}
			}
		case []any:
			gv, ok := g.([]any)
			if !ok || len(gv) != len(wv) {
				out = append(out, fmt.Sprintf("%s: got %s, want %s", p, short(g), short(w)))
				return
			}
			for i := range wv {
				walk(fmt.Sprintf("%s[%d]", p, i), wv[i], gv[i])
			}
		default:
			if !reflect.DeepEqual(w, g) {
				out = append(out, fmt.Sprintf("%s: got %s, want %s", p, short(g), short(w)))
			}
		}
	}
	// Round-trip both through JSON so Go's decoded forms compare alike.
	walk(path, normalize(want), normalize(got))
	return out
}

func normalize(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return v
	}
	return out
}

func short(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(raw) > 200 {
		return string(raw[:200]) + "…"
	}
	return string(raw)
}

func seq(from, to int) []int {
	var out []int
	for n := from; n <= to; n++ {
		out = append(out, n)
	}
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

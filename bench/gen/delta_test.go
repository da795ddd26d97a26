package gen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/bench/gen"
	"github.com/historyd/historyd/bench/py"
)

type deepReadback struct {
	List    map[string]deepListed `json:"list"`
	History map[string]deepSnap   `json:"history"`
}

type deepListed struct {
	Step     *int              `json:"step"`
	Source   string            `json:"source"`
	Counters map[string][2]int `json:"counters"`
	Parent   *string           `json:"parent"`
	Writes   int               `json:"writes"`
}

type deepSnap struct {
	IDs       []string        `json:"ids"`
	Types     []string        `json:"types"`
	Humans    int             `json:"humans"`
	Files     json.RawMessage `json:"files"`
	ToolState json.RawMessage `json:"tool_state"`
	Next      []string        `json:"next"`
}

// TestPythonReadsDeepAgentThreads has LangGraph and deepagents read back a
// generated deepagents thread: every checkpoint through PostgresSaver.list()
// (metadata and its DeltaChannel counters) and every snapshot through
// get_state_history() of create_deep_agent's own graph, which rebuilds
// messages and files from the snapshots and writes with deepagents'
// reducers. Each must match what the generator meant to write: the
// messages (count, human count, ids), files and tool_state (as JSON) and
// the next tasks. The stored rows are checked too: a DeltaChannel has a
// blob, and `true` in channel_values, exactly at its snapshots.
func TestPythonReadsDeepAgentThreads(t *testing.T) {
	dsn := env(t, "HISTORYD_TEST_DSN", "run `make test` (or scripts/test.sh), which starts a throwaway PostgreSQL")
	python := env(t, "HISTORYD_TEST_PYTHON", "run scripts/pyenv.sh and set it to .cache/venv/bin/python (scripts/test.sh does)")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	schema := fmt.Sprintf("bench_deep_%d", rand.Uint32())
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
	})
	sdsn := schemaDSN(t, dsn, schema)
	if err := py.Run(ctx, python, nil, "setup", "--dsn", sdsn); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, sdsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	for _, p := range []gen.DeepParams{
		// Snapshots every few updates: many snapshot checkpoints, and
		// files deleted, edited and overwritten between them.
		{Turns: 16, Files: 10, FileBytes: 300, SnapshotFrequency: 4, StateKeys: 3, Seed: 3},
		// deepagents' frequency, long enough for snapshots of both.
		{Turns: 45, Files: 30, FileBytes: 200, SnapshotFrequency: 50, StateKeys: 4, Seed: 5},
	} {
		t.Run(p.Name("deep"), func(t *testing.T) {
			thread := p.Name("rt")
			sum, err := gen.WriteDeep(ctx, conn, thread, p, gen.Options{KeepDetail: true})
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := gen.DeepExists(ctx, conn, thread, p); err != nil || !ok {
				t.Fatalf("DeepExists after WriteDeep = %v, %v", ok, err)
			}
			// The thread exercises what it is for.
			for _, tool := range []string{"write_file", "edit_file", "delete", "survey_gauge"} {
				if sum.Calls[tool] == 0 {
					t.Errorf("no %s call in the thread (calls %v)", tool, sum.Calls)
				}
			}
			for _, ch := range []string{"messages", "files"} {
				if sum.Snapshots[ch] == 0 {
					t.Errorf("no %s snapshot in the thread", ch)
				}
			}
			checkStoredSnapshots(ctx, t, conn, thread, sum)

			var got deepReadback
			if err := py.Run(ctx, python, &got, "deepreadback", "--dsn", sdsn, "--thread", thread); err != nil {
				t.Fatal(err)
			}
			if len(got.List) != len(sum.Checkpoints) || len(got.History) != len(sum.Checkpoints) {
				t.Fatalf("LangGraph sees %d checkpoints in list() and %d in get_state_history(); the generator wrote %d",
					len(got.List), len(got.History), len(sum.Checkpoints))
			}
			var prev string
			for _, want := range sum.Checkpoints {
				l, ok := got.List[want.ID]
				h, ok2 := got.History[want.ID]
				if !ok || !ok2 {
					t.Fatalf("checkpoint %s (step %d) missing from list() or get_state_history()", want.ID, want.Step)
				}
				at := fmt.Sprintf("checkpoint %s (step %d)", want.ID, want.Step)
				if l.Step == nil || *l.Step != want.Step || l.Source != want.Source {
					t.Errorf("%s: step %v source %q, wrote %d %q", at, l.Step, l.Source, want.Step, want.Source)
				}
				if deref(l.Parent) != prev {
					t.Errorf("%s: parent %q, wrote %q", at, deref(l.Parent), prev)
				}
				if !sameCounters(l.Counters, want.Counters) {
					t.Errorf("%s: counters_since_delta_snapshot %v, wrote %v", at, l.Counters, want.Counters)
				}
				if l.Writes != want.Writes {
					t.Errorf("%s: %d pending writes, wrote %d", at, l.Writes, want.Writes)
				}
				if !slices.Equal(h.IDs, want.MessageIDs) || len(h.IDs) != want.Messages {
					t.Errorf("%s: %d messages %v, wrote %d %v", at, len(h.IDs), h.IDs, want.Messages, want.MessageIDs)
				}
				if h.Humans != want.Humans {
					t.Errorf("%s: %d human messages, wrote %d", at, h.Humans, want.Humans)
				}
				if !slices.Equal(h.Next, want.Next) && len(h.Next)+len(want.Next) > 0 {
					t.Errorf("%s: next tasks %v, wrote %v", at, h.Next, want.Next)
				}
				// Both channels read as {} before their first write.
				for _, c := range []struct {
					name string
					got  json.RawMessage
					want map[string]any
				}{{"files", h.Files, want.Files}, {"tool_state", h.ToolState, want.ToolState}} {
					w := c.want
					if w == nil {
						w = map[string]any{}
					}
					if err := sameJSON(c.got, w); err != nil {
						t.Errorf("%s: %s: %v", at, c.name, err)
					}
				}
				prev = want.ID
			}
			// Each turn ends where the generator says, with that many
			// questions asked.
			for n, id := range sum.TurnEnds {
				if h := got.History[id]; h.Humans != n {
					t.Errorf("turn %d ends at %s, which holds %d questions", n, id, h.Humans)
				}
			}
		})
	}
}

// checkStoredSnapshots checks the rows: messages and files have a blob,
// and `true` inline, at the snapshot checkpoints the generator reports and
// nowhere else, while their versions advance at every update.
func checkStoredSnapshots(ctx context.Context, t *testing.T, conn *pgx.Conn, thread string, sum *gen.DeepSummary) {
	t.Helper()
	rows, err := conn.Query(ctx, `
		SELECT c.checkpoint_id, ch,
		       c.checkpoint -> 'channel_values' -> ch,
		       c.checkpoint -> 'channel_versions' ->> ch,
		       EXISTS (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = '' AND b.channel = ch
		               AND b.version = c.checkpoint -> 'channel_versions' ->> ch AND b.type = 'msgpack' AND get_byte(b.blob, 0) IN (199, 200, 201) AND get_byte(b.blob, CASE get_byte(b.blob, 0) WHEN 199 THEN 2 WHEN 200 THEN 3 ELSE 5 END) = 7)
		FROM checkpoints c, unnest(ARRAY['messages', 'files']) ch
		WHERE c.thread_id = $1 AND c.checkpoint_ns = ''`, thread)
	if err != nil {
		t.Fatal(err)
	}
	type stored struct {
		inline  *bool
		version *string
		blob    bool
	}
	got := map[[2]string]stored{}
	for rows.Next() {
		var id, ch string
		var s stored
		if err := rows.Scan(&id, &ch, &s.inline, &s.version, &s.blob); err != nil {
			t.Fatal(err)
		}
		got[[2]string{id, ch}] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// A checkpoint after a snapshot that did not update the channel keeps
	// its version, and so reads the same blob.
	var versions int
	snapVersion := map[string]string{}
	for _, c := range sum.Checkpoints {
		for _, ch := range []string{"messages", "files"} {
			s := got[[2]string{c.ID, ch}]
			snap := slices.Contains(c.Snapshots, ch)
			if snap != (s.inline != nil && *s.inline) {
				t.Errorf("checkpoint %s (step %d) %s: snapshot %v, but channel_values holds %v", c.ID, c.Step, ch, snap, s.inline)
			}
			if snap && s.version != nil {
				snapVersion[ch] = *s.version
			}
			if s.version == nil {
				continue
			}
			versions++
			if want := *s.version == snapVersion[ch]; s.blob != want {
				t.Errorf("checkpoint %s (step %d) %s: an extension-7 blob %v, want %v (snapshot %v)", c.ID, c.Step, ch, s.blob, want, snap)
			}
		}
	}
	var blobs int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM checkpoint_blobs WHERE thread_id = $1 AND channel IN ('messages', 'files')`, thread).Scan(&blobs); err != nil {
		t.Fatal(err)
	}
	if want := sum.Snapshots["messages"] + sum.Snapshots["files"]; blobs != want {
		t.Errorf("%d messages and files blobs, want one per snapshot (%d)", blobs, want)
	}
	if versions == 0 {
		t.Error("no checkpoint has a version of messages or files")
	}
}

func sameCounters(got, want map[string][2]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

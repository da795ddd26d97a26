package gen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/bench/gen"
	"github.com/historyd/historyd/bench/py"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/postgres"
)

// env returns a variable the integration suite sets; without it the test
// fails rather than passes unrun, unless -short.
func env(t *testing.T, name, how string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if testing.Short() {
			t.Skipf("%s not set (-short)", name)
		}
		t.Fatalf("%s is not set: %s", name, how)
	}
	return v
}

// schemaDSN is dsn with search_path set to schema, for pgx and psycopg alike.
func schemaDSN(t *testing.T, dsn, schema string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("HISTORYD_TEST_DSN is not a URL: %v", err)
	}
	q := u.Query()
	q.Set("options", "-c search_path="+schema)
	// libpq decodes only %XX in URIs, not "+" for a space.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

type readback struct {
	List    map[string]pyCheckpoint `json:"list"`
	History map[string]pyCheckpoint `json:"history"`
}

type pyCheckpoint struct {
	Types     []string        `json:"types"`
	Classes   []string        `json:"classes"`
	Humans    int             `json:"humans"`
	ToolState json.RawMessage `json:"tool_state"`
	Step      *int            `json:"step"`
	Source    string          `json:"source"`
	Parent    *string         `json:"parent"`
	Writes    [][]string      `json:"writes"`
	TS        string          `json:"ts"`
}

// TestPythonReadsGeneratedThreads has LangGraph itself read back what the
// generator wrote: every checkpoint through PostgresSaver.list() and every
// snapshot through a graph's get_state_history(), compared checkpoint by
// checkpoint with what the generator says it wrote.
func TestPythonReadsGeneratedThreads(t *testing.T) {
	dsn := env(t, "HISTORYD_TEST_DSN", "run `make test` (or scripts/test.sh), which starts a throwaway PostgreSQL")
	python := env(t, "HISTORYD_TEST_PYTHON", "run scripts/pyenv.sh and set it to .cache/venv/bin/python (scripts/test.sh does)")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	schema := fmt.Sprintf("bench_gen_%d", rand.Uint32())
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

	for _, p := range []gen.Params{
		{Turns: 3, CheckpointsPerTurn: 5, Keys: 3, StateBytes: 6000, Seed: 1},
		{Turns: 2, CheckpointsPerTurn: 7, Keys: 20, StateBytes: 70000, Seed: 2},
	} {
		t.Run(p.Name("thread"), func(t *testing.T) {
			thread := p.Name("rt")
			sum, err := gen.Write(ctx, conn, thread, p, gen.Options{KeepDetail: true})
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := gen.Exists(ctx, conn, thread, p); err != nil || !ok {
				t.Fatalf("Exists after Write = %v, %v", ok, err)
			}
			var got readback
			if err := py.Run(ctx, python, &got, "readback", "--dsn", sdsn, "--thread", thread); err != nil {
				t.Fatal(err)
			}
			if len(got.List) != len(sum.Checkpoints) || len(got.History) != len(sum.Checkpoints) {
				t.Fatalf("LangGraph sees %d checkpoints in list() and %d in get_state_history(); the generator wrote %d",
					len(got.List), len(got.History), len(sum.Checkpoints))
			}
			var prev string
			for _, want := range sum.Checkpoints {
				for _, via := range []struct {
					name string
					m    map[string]pyCheckpoint
				}{{"list", got.List}, {"get_state_history", got.History}} {
					c, ok := via.m[want.ID]
					if !ok {
						t.Fatalf("%s: checkpoint %s missing", via.name, want.ID)
					}
					if !slices.Equal(c.Types, want.Types) {
						t.Errorf("%s: checkpoint %s (step %d): message types %v, wrote %v", via.name, want.ID, want.Step, c.Types, want.Types)
					}
					for _, cls := range c.Classes {
						if cls != "HumanMessage" && cls != "AIMessage" && cls != "ToolMessage" {
							t.Errorf("%s: checkpoint %s: a message came back as %s", via.name, want.ID, cls)
						}
					}
					if c.Humans != want.Humans {
						t.Errorf("%s: checkpoint %s: %d human messages, wrote %d", via.name, want.ID, c.Humans, want.Humans)
					}
					wantState := want.State
					if wantState == nil && via.name == "get_state_history" {
						// The graph's reducer channel reads as {} before its first write.
						wantState = map[string]any{}
					}
					if err := sameJSON(c.ToolState, wantState); err != nil {
						t.Errorf("%s: checkpoint %s (step %d): tool_state: %v", via.name, want.ID, want.Step, err)
					}
				}
				c := got.List[want.ID]
				if c.Step == nil || *c.Step != want.Step {
					t.Errorf("list: checkpoint %s: step %v, wrote %d", want.ID, c.Step, want.Step)
				}
				if p := deref(c.Parent); p != prev {
					t.Errorf("list: checkpoint %s: parent %q, wrote %q", want.ID, p, prev)
				}
				if len(c.Writes) != want.Writes {
					t.Errorf("list: checkpoint %s: %d pending writes, wrote %d", want.ID, len(c.Writes), want.Writes)
				}
				if _, err := time.Parse(time.RFC3339Nano, c.TS); err != nil {
					t.Errorf("list: checkpoint %s: ts %q: %v", want.ID, c.TS, err)
				}
				prev = want.ID
			}
			// The state at each turn's end is the last write of every key.
			for n, id := range sum.TurnEnds {
				var state map[string]map[string]any
				if err := json.Unmarshal(got.List[id].ToolState, &state); err != nil {
					t.Fatal(err)
				}
				if len(state) != p.Keys {
					t.Errorf("turn %d ends at %s with %d keys, want %d", n, id, len(state), p.Keys)
				}
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sameJSON compares Python's JSON with the generator's value as plain data.
func sameJSON(got json.RawMessage, want map[string]any) error {
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return err
	}
	if want != nil {
		raw, err := json.Marshal(want)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &w); err != nil {
			return err
		}
	}
	if !reflect.DeepEqual(g, w) {
		gs, _ := json.Marshal(g)
		ws, _ := json.Marshal(w)
		return fmt.Errorf("LangGraph read %.300s…, generator wrote %.300s…", gs, ws)
	}
	return nil
}

// TestManyThreads writes a small ManyThreads store and reads it back with
// historyd's own PostgreSQL backend: every thread listed once, with its
// checkpoint count, times in order, and its tenant's prefix.
func TestManyThreads(t *testing.T) {
	dsn := env(t, "HISTORYD_TEST_DSN", "run `make test` (or scripts/test.sh), which starts a throwaway PostgreSQL")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) }) // after the schema is dropped
	m := gen.ManyThreads{Schema: fmt.Sprintf("many_threads_test_%d", rand.Uint64()), N: 503}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{m.Schema}.Sanitize()+" CASCADE")
	})
	if ok, err := m.Exists(ctx, conn); err != nil || ok {
		t.Fatalf("before writing: exists %v, %v", ok, err)
	}
	if err := m.Write(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.Exists(ctx, conn); err != nil || !ok {
		t.Fatalf("after writing: exists %v, %v", ok, err)
	}
	b, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: m.Schema})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Config{Backend: b})
	seen, checkpoints := map[string]bool{}, 0
	q := store.ThreadsQuery{Limit: 97}
	for {
		page, err := st.Threads(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range page.Threads {
			if seen[th.ThreadID] {
				t.Errorf("%s listed twice", th.ThreadID)
			}
			seen[th.ThreadID] = true
			checkpoints += int(th.Checkpoints)
			if th.Checkpoints < 1 || th.Checkpoints > 5 || !th.LastAt.After(th.FirstAt) && th.Checkpoints > 1 ||
				th.LastAt.Sub(th.FirstAt) != time.Duration(th.Checkpoints-1)*7*time.Second || !strings.HasPrefix(th.ThreadID, "tenant-") {
				t.Errorf("thread %+v", th)
			}
		}
		if page.Next == nil {
			break
		}
		q.After = page.Next
	}
	if len(seen) != m.N || checkpoints != m.Checkpoints() {
		t.Errorf("%d threads with %d checkpoints; want %d with %d", len(seen), checkpoints, m.N, m.Checkpoints())
	}
	page, err := st.Threads(ctx, store.ThreadsQuery{Prefixes: []string{m.Prefix(7)}, Limit: 1000, Order: store.ByLastActivity})
	if err != nil || len(page.Threads) != 10 {
		t.Errorf("tenant 7, newest first: %d threads, %v; want 10", len(page.Threads), err)
	}
	// The last checkpoint of each thread ends its run.
	h, err := st.History(ctx, backend.Ref{ThreadID: page.Threads[0].ThreadID})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(h.Steps); n == 0 || h.Steps[n-1].Checkpoint.Rest != store.AtRest || n > 1 && h.Steps[0].Checkpoint.Rest != store.Running {
		t.Errorf("steps of %s: %+v", page.Threads[0].ThreadID, h.Steps)
	}
}

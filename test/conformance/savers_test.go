package conformance

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/postgres"
	"github.com/historyd/historyd/store/sqlite"
	"github.com/historyd/historyd/store/storetest"
)

// readBack is what py/read_back.py and js/read_back.mjs print of one
// checkpoint, as the real saver loads it.
type readBack struct {
	ID       string            `json:"id"`
	Parent   *string           `json:"parent"`
	Metadata map[string]any    `json:"metadata"`
	Versions map[string]string `json:"versions"`
	Values   map[string]any    `json:"values"`
	Writes   [][3]any          `json:"writes"`
}

// TestSaverLayouts checks lgsaver, the writers historyd's tests, demo and
// benchmark store threads with, against the real savers: a thread each
// writer stores is read back by the saver whose layout it mimics, and the
// saver must see exactly what was written — the values, the versions
// historyd reads, the parents, the metadata and the pending writes — and
// historyd must serve the same thread from it.
func TestSaverLayouts(t *testing.T) {
	s := loadSetup(t, true)
	for _, layout := range saver.Savers {
		t.Run(layout.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			w, b, reader := saverStore(t, ctx, s, layout)
			ref := backend.Ref{ThreadID: "layout-" + layout.String()}
			written := writeLayoutThread(w, ref)

			var got []readBack
			out, err := exec.CommandContext(ctx, reader[0], append(reader[1:], "--thread", ref.ThreadID)...).Output()
			if err != nil {
				t.Fatalf("%v: %v\n%s", reader, err, stderrOf(err))
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("reader output: %v\n%s", err, out)
			}
			versions := listedVersions(t, ctx, b, ref)
			if len(got) != len(written) {
				t.Fatalf("the saver lists %d checkpoints, %d were written", len(got), len(written))
			}
			for i, cp := range written {
				rb := got[i]
				where := fmt.Sprintf("checkpoint %s", cp.ID)
				if rb.ID != cp.ID || (rb.Parent == nil) != (cp.Parent == "") || rb.Parent != nil && *rb.Parent != cp.Parent {
					t.Errorf("%s: saver reads id %s parent %v; want parent %q", where, rb.ID, rb.Parent, cp.Parent)
				}
				if want := jsonOf(t, plainValues(cp.Values)); !reflect.DeepEqual(jsonOf(t, rb.Values), want) {
					t.Errorf("%s: saver reads values\n %v\nwant\n %v", where, rb.Values, want)
				}
				if rb.Metadata["source"] != metaString(cp.Metadata, "source") || rb.Metadata["step"] != metaNumber(cp.Metadata, "step") {
					t.Errorf("%s: saver reads metadata %v; want %v", where, rb.Metadata, cp.Metadata)
				}
				if !reflect.DeepEqual(rb.Versions, versions[cp.ID]) {
					t.Errorf("%s: saver reads versions %v, historyd %v", where, rb.Versions, versions[cp.ID])
				}
				var wantWrites [][3]any
				for _, wr := range cp.Writes {
					wantWrites = append(wantWrites, [3]any{wr.TaskID, wr.Channel, plainValue(wr.Value)})
				}
				if !reflect.DeepEqual(jsonOf(t, sortWrites(rb.Writes)), jsonOf(t, sortWrites(wantWrites))) {
					t.Errorf("%s: saver reads pending writes %v; want %v", where, rb.Writes, wantWrites)
				}
			}
			// And historyd serves the thread it holds.
			st := store.New(store.Config{Backend: b})
			h, turns, states := storetest.Read(t, st, ref, storetest.Retained, nil)
			if h.Total != len(storetest.Demo[:2]) || len(turns) != h.Total {
				t.Fatalf("historyd serves %d of %d turns", len(turns), h.Total)
			}
			if v := states[1]["sketch-ops/sketch_area/name"]["value"]; v != "Thames" {
				t.Errorf("historyd serves turn 2's name as %v", v)
			}
		})
	}
}

// saverStore makes an empty store in saver's layout and returns a writer
// into it, historyd's backend over it, and the command line of the real
// saver's reader.
func saverStore(t *testing.T, ctx context.Context, s setup, layout saver.Saver) (*storetest.SaverWriter, backend.Backend, []string) {
	t.Helper()
	pyReader, _ := filepath.Abs(filepath.Join("py", "read_back.py"))
	jsReader := filepath.Join(s.nodeDir, "read_back.mjs")
	reader := []string{s.python, pyReader}
	if !layout.Python() {
		reader = []string{s.node, jsReader}
	}
	if !layout.Postgres() {
		path := filepath.Join(t.TempDir(), "checkpoints.db")
		db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path}).String())
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		exec := func(ctx context.Context, q string, args ...any) error {
			_, err := db.ExecContext(ctx, q, args...)
			return err
		}
		for _, stmt := range append([]string{saver.SQLiteWAL}, layout.DDL("")...) {
			if err := exec(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		b, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return storetest.NewSaverWriter(t, saver.NewWriter(layout, exec, "")), b, append(reader, "--sqlite", path)
	}
	pool, err := pgxpool.New(ctx, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	schema := fmt.Sprintf("layout_%d", rand.Uint64())
	q := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range append([]string{"CREATE SCHEMA " + q}, layout.DDL(q)...) {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+q+" CASCADE") })
	exec := func(ctx context.Context, q string, args ...any) error {
		_, err := pool.Exec(ctx, q, args...)
		return err
	}
	b, err := postgres.Open(ctx, postgres.Config{DSN: s.dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return storetest.NewSaverWriter(t, saver.NewWriter(layout, exec, q)), b, append(reader, "--dsn", s.dsn, "--schema", schema)
}

// recording is a storetest.Writer that keeps what it forwards.
type recording struct {
	storetest.Writer
	cps []saver.Checkpoint
}

func (r *recording) Put(ref backend.Ref, cp saver.Checkpoint) {
	r.cps = append(r.cps, cp)
	r.Writer.Put(ref, cp)
}

// writeLayoutThread writes two turns of the demo conversation, then a
// checkpoint with what else a saver splits its own way: an inline
// primitive, a DeltaChannel snapshot, and pending writes of two tasks. It
// returns every checkpoint written, in order.
func writeLayoutThread(w storetest.Writer, ref backend.Ref) []saver.Checkpoint {
	rec := &recording{Writer: w}
	storetest.Build(rec, ref, storetest.Demo[:2])
	last := rec.cps[len(rec.cps)-1]
	task := "1ef4f797-8335-6428-8001-8a1503f9b875"
	rec.Put(ref, saver.Checkpoint{
		ID: last.ID + "-x", Parent: last.ID, TS: last.TS.Add(time.Second),
		Values: append(slices.Clone(last.Values),
			write.Field{Key: "title", Value: "Severn"},
			write.Field{Key: "files", Value: write.DeltaSnapshot{Value: map[string]any{"/notes/severn.md": map[string]any{"content": "11420 km²"}}}},
		),
		Metadata: write.Map{{Key: "source", Value: "loop"}, {Key: "step", Value: 99}},
		Writes: []saver.Write{
			{TaskID: "00000000-0000-0000-0000-000000000000", Idx: 0, Channel: "messages", Value: []any{write.Human("q3", "and the Trent?")}},
			{TaskID: task, TaskPath: "~__pregel_pull, tools", Idx: 0, Channel: "files", Value: map[string]any{"/notes/trent.md": map[string]any{"content": "10452 km²"}}},
			{TaskID: task, TaskPath: "~__pregel_pull, tools", Idx: 1, Channel: "title", Value: "Trent"},
		},
	})
	return rec.cps
}

// listedVersions is the channel versions historyd reads of each checkpoint.
func listedVersions(t *testing.T, ctx context.Context, b backend.Backend, ref backend.Ref) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	_, err := b.List(ctx, ref, backend.Query{}, func(r backend.Row) error {
		cp, err := codec.ParseCheckpoint(r.Checkpoint.Type, r.Checkpoint.Data, nil)
		if err != nil {
			return err
		}
		out[r.ID] = cp.Versions
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// plainValues is what the readers print for a checkpoint's values.
func plainValues(values write.Map) map[string]any {
	out := map[string]any{}
	for _, f := range values {
		out[f.Key] = plainValue(f.Value)
	}
	return out
}

func plainValue(v any) any {
	switch x := v.(type) {
	case write.Message:
		ak := x.AdditionalKwargs
		if ak == nil {
			ak = map[string]any{}
		}
		var id any
		if x.ID != "" {
			id = x.ID
		}
		return map[string]any{"type": x.Type, "id": id, "content": x.Content, "additional_kwargs": ak}
	case write.DeltaSnapshot:
		return map[string]any{"delta_snapshot": plainValue(x.Value)}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainValue(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = plainValue(e)
		}
		return out
	case map[string]map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = plainValue(e)
		}
		return out
	}
	return v
}

func sortWrites(ws [][3]any) [][3]any {
	out := append([][3]any{}, ws...)
	slices.SortFunc(out, func(a, b [3]any) int {
		ka, kb := fmt.Sprint(a[0], a[1]), fmt.Sprint(b[0], b[1])
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return out
}

// jsonOf is v after a JSON round trip, so that numbers compare alike.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func metaString(m write.Map, k string) any {
	v, _ := m.Get(k)
	return v
}

func metaNumber(m write.Map, k string) any {
	v, ok := m.Get(k)
	if !ok {
		return nil
	}
	return float64(v.(int))
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

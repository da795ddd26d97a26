package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/store/postgres"
	"github.com/historyd/historyd/store/storetest"
)

// pgDemo is a schema name no other test uses, dropped (with the check's
// copies of it) when the test ends, and a pool to look into it.
type pgDemo struct {
	dsn, schema string
	pool        *pgxpool.Pool
}

func newPGDemo(t *testing.T) pgDemo {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	d := pgDemo{dsn: dsn, schema: fmt.Sprintf("demo_%d", rand.Uint64()), pool: pool}
	t.Cleanup(func() {
		for _, s := range []string{d.schema, d.schema + "_resume", d.schema + "_replay"} {
			if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", s, err)
			}
		}
		pool.Close()
	})
	return d
}

func (d pgDemo) config(replace bool) PostgresConfig {
	return PostgresConfig{DSN: d.dsn, Schema: d.schema, Replace: replace}
}

func (d pgDemo) table(name string) string { return pgx.Identifier{d.schema, name}.Sanitize() }

func (d pgDemo) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := d.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (d pgDemo) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := d.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// image is every row of the three tables, as text, in key order.
func (d pgDemo) image(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		"SELECT row(c.*)::text FROM " + d.table("checkpoints") + " c ORDER BY thread_id, checkpoint_ns, checkpoint_id",
		"SELECT row(b.*)::text FROM " + d.table("checkpoint_blobs") + " b ORDER BY thread_id, checkpoint_ns, channel, version",
		"SELECT row(w.*)::text FROM " + d.table("checkpoint_writes") + " w ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
	} {
		rows, err := d.pool.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, texts...)
	}
	return out
}

// readThread reads a thread's checkpoints in id order, each with its
// channel values put together as PostgresSaver does (inline ones from the
// checkpoint, the others from the blobs of its channel versions) and
// decoded with the decoder historyd serves from.
func (d pgDemo) readThread(t *testing.T, thread string) []dbRow {
	t.Helper()
	ctx := context.Background()
	rows, err := d.pool.Query(ctx, `SELECT checkpoint_id, COALESCE(parent_checkpoint_id, ''), checkpoint::text, metadata::text
FROM `+d.table("checkpoints")+` WHERE thread_id = $1 AND checkpoint_ns = '' ORDER BY checkpoint_id`, thread)
	if err != nil {
		t.Fatal(err)
	}
	type raw struct{ id, parent, cp, meta string }
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (raw, error) {
		var x raw
		return x, r.Scan(&x.id, &x.parent, &x.cp, &x.meta)
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []dbRow
	for _, x := range list {
		r := dbRow{id: x.id, parent: x.parent}
		if err := json.Unmarshal([]byte(x.cp), &r.cp); err != nil {
			t.Fatalf("checkpoint %s: %v", x.id, err)
		}
		if err := json.Unmarshal([]byte(x.meta), &r.metadata); err != nil {
			t.Fatalf("checkpoint %s: metadata %q: %v", x.id, x.meta, err)
		}
		r.values, _ = r.cp["channel_values"].(map[string]any)
		if r.values == nil {
			r.values = map[string]any{}
		}
		for ch, version := range r.cp["channel_versions"].(map[string]any) {
			var typ string
			var blob []byte
			err := d.pool.QueryRow(ctx, "SELECT type, blob FROM "+d.table("checkpoint_blobs")+
				" WHERE thread_id = $1 AND checkpoint_ns = '' AND channel = $2 AND version = $3", thread, ch, version).Scan(&typ, &blob)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			v, ok, err := codec.Decode(typ, blob, codec.Limits{})
			if err != nil || !ok {
				t.Fatalf("checkpoint %s channel %s: Decode(%q) = %v, %v", x.id, ch, typ, ok, err)
			}
			r.values[ch] = v
		}
		r.messages, _ = r.values["messages"].([]any)
		for _, m := range r.messages {
			if m.(map[string]any)["type"] == "human" {
				r.humans++
			}
		}
		r.toolState, _ = r.values["tool_state"].(map[string]any)
		out = append(out, r)
	}
	return out
}

// TestWritePostgres writes the demo into a schema of its own and reads it
// back: PostgresSaver's tables and migrations, the rows, and what
// historyd's PostgreSQL backend serves from them.
func TestWritePostgres(t *testing.T) {
	d := newPGDemo(t)
	if err := WritePostgres(context.Background(), d.config(false)); err != nil {
		t.Fatal(err)
	}
	if n := d.count(t, "SELECT max(v) FROM "+d.table("checkpoint_migrations")); n != pythonMigrations-1 {
		t.Errorf("migrations up to %d, want %d as PostgresSaver.setup leaves them", n, pythonMigrations-1)
	}
	infos, err := Threads()
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if got := len(d.readThread(t, info.ID)); got != info.Checkpoints {
			t.Errorf("%s: %d checkpoints, want %d", info.ID, got, info.Checkpoints)
		}
	}
	// The same counts of pending writes as in the SQLite file, none of
	// them orphaned, and a blob for every value not kept inline.
	if n := d.count(t, "SELECT count(*) FROM "+d.table("checkpoint_writes")+" WHERE thread_id = $1", Thread); n != 22 {
		t.Errorf("%s: %d writes, want 22", Thread, n)
	}
	if n := d.count(t, "SELECT count(*) FROM "+d.table("checkpoint_writes")+" WHERE thread_id = $1", PrunedThread); n != 4 {
		t.Errorf("%s: %d writes, want 4", PrunedThread, n)
	}
	if n := d.count(t, "SELECT count(*) FROM "+d.table("checkpoint_writes")+" w WHERE NOT EXISTS (SELECT 1 FROM "+d.table("checkpoints")+
		" c WHERE c.thread_id = w.thread_id AND c.checkpoint_id = w.checkpoint_id)"); n != 0 {
		t.Errorf("%d writes name no checkpoint", n)
	}
	ends := turnEnds(d.readThread(t, Thread))
	for n := 1; n <= Turns; n++ {
		for key, want := range wantState(n) {
			checkEntry(t, fmt.Sprintf("end of turn %d %s", n, key), ends[n].toolState[key], want)
		}
	}

	b, err := postgres.Open(context.Background(), postgres.Config{DSN: d.dsn, Schema: d.schema})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	checkServes(t, b)
}

// Without a schema the tables go where PostgresSaver's would: the first
// schema of the connection's search_path.
func TestWritePostgresSearchPath(t *testing.T) {
	d := newPGDemo(t)
	d.exec(t, "CREATE SCHEMA "+pgx.Identifier{d.schema}.Sanitize())
	u, err := url.Parse(d.dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", d.schema)
	u.RawQuery = q.Encode()
	if err := WritePostgres(context.Background(), PostgresConfig{DSN: u.String()}); err != nil {
		t.Fatal(err)
	}
	if n := d.count(t, "SELECT count(*) FROM "+d.table("checkpoints")); n != 21 {
		t.Errorf("%d checkpoints in the search_path's schema, want 21", n)
	}
}

// Only the demo's own threads are ever written, and only replaced when
// asked; tables that are not Python PostgresSaver's are left alone.
func TestWritePostgresRefuses(t *testing.T) {
	ctx := context.Background()
	t.Run("existing demo", func(t *testing.T) {
		d := newPGDemo(t)
		if err := WritePostgres(ctx, d.config(false)); err != nil {
			t.Fatal(err)
		}
		// Someone else's thread, which nothing may touch.
		d.exec(t, "INSERT INTO "+d.table("checkpoints")+` (thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata)
VALUES ('customer-42', '', '1f0', '{"v": 4}', '{"source": "loop"}')`)
		before := d.image(t)
		err := WritePostgres(ctx, d.config(false))
		if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "--force") {
			t.Fatalf("second WritePostgres = %v, want ErrExists saying --force replaces", err)
		}
		if !reflect.DeepEqual(d.image(t), before) {
			t.Error("the refused write changed the tables")
		}
		// An earlier demo cut short is replaced whole.
		d.exec(t, "DELETE FROM "+d.table("checkpoints")+" WHERE thread_id = $1 AND checkpoint_id > (SELECT min(checkpoint_id) FROM "+d.table("checkpoints")+" WHERE thread_id = $1)", Thread)
		if err := WritePostgres(ctx, d.config(true)); err != nil {
			t.Fatalf("WritePostgres with Replace: %v", err)
		}
		if got := d.image(t); !reflect.DeepEqual(got, before) {
			t.Errorf("after Replace the tables differ from the first write: %d rows, want %d", len(got), len(before))
		}
	})
	t.Run("thread not the demo's", func(t *testing.T) {
		d := newPGDemo(t)
		if err := WritePostgres(ctx, d.config(false)); err != nil {
			t.Fatal(err)
		}
		d.exec(t, "UPDATE "+d.table("checkpoints")+` SET metadata = '{"source": "loop"}' WHERE thread_id = $1 AND checkpoint_id = (SELECT max(checkpoint_id) FROM `+d.table("checkpoints")+` WHERE thread_id = $1)`, PrunedThread)
		before := d.image(t)
		for _, replace := range []bool{false, true} {
			if err := WritePostgres(ctx, d.config(replace)); !errors.Is(err, ErrNotDemo) || !strings.Contains(err.Error(), PrunedThread) {
				t.Errorf("Replace %v: WritePostgres = %v, want ErrNotDemo naming %s", replace, err, PrunedThread)
			}
		}
		if !reflect.DeepEqual(d.image(t), before) {
			t.Error("the refused write changed the tables")
		}
	})
	t.Run("writes without checkpoints", func(t *testing.T) {
		d := newPGDemo(t)
		if err := WritePostgres(ctx, d.config(false)); err != nil {
			t.Fatal(err)
		}
		d.exec(t, "DELETE FROM "+d.table("checkpoints")+" WHERE thread_id = ANY($1)", demoThreads)
		if err := WritePostgres(ctx, d.config(true)); !errors.Is(err, ErrNotDemo) {
			t.Errorf("WritePostgres = %v, want ErrNotDemo", err)
		}
	})
	for _, tt := range []struct {
		name  string
		setup func(d pgDemo, t *testing.T)
		want  string
	}{
		{"LangGraph.js tables", func(d pgDemo, t *testing.T) {
			for _, stmt := range saver.PostgresJS.DDL(pgx.Identifier{d.schema}.Sanitize()) {
				d.exec(t, stmt)
			}
		}, "at migration 4"},
		{"some tables", func(d pgDemo, t *testing.T) {
			d.exec(t, "CREATE TABLE "+d.table("checkpoints")+" (thread_id TEXT)")
		}, "has checkpoints but not checkpoint_migrations, checkpoint_blobs, checkpoint_writes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := newPGDemo(t)
			d.exec(t, "CREATE SCHEMA "+pgx.Identifier{d.schema}.Sanitize())
			tt.setup(d, t)
			err := WritePostgres(ctx, d.config(true))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("WritePostgres = %v, want an error saying %q", err, tt.want)
			}
			if n := d.count(t, "SELECT count(*) FROM "+d.table("checkpoints")); n != 0 {
				t.Errorf("%d checkpoints written into refused tables", n)
			}
		})
	}
}

// Demo writers racing on one database are serialised: one writes, the
// others find its threads.
func TestWritePostgresConcurrent(t *testing.T) {
	d := newPGDemo(t)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = WritePostgres(context.Background(), d.config(false)) })
	}
	wg.Wait()
	wrote := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wrote++
		case !errors.Is(err, ErrExists):
			t.Errorf("WritePostgres: %v", err)
		}
	}
	if wrote != 1 {
		t.Errorf("%d writers wrote, want 1", wrote)
	}
	if n := d.count(t, "SELECT count(*) FROM "+d.table("checkpoints")); n != 21 {
		t.Errorf("%d checkpoints, want 21", n)
	}
}

// TestPostgresSaverReadsDemo is TestLangGraphReadsDemo for PostgreSQL:
// Python's PostgresSaver and the demo's graph read every checkpoint as the
// Go decoder does and can continue the thread, and the same conversation
// played through LangGraph with PostgresSaver (tables from its own setup)
// gives the same rows, up to ids, times and random version suffixes.
func TestPostgresSaverReadsDemo(t *testing.T) {
	py := testPython(t)
	d := newPGDemo(t)
	if err := WritePostgres(context.Background(), d.config(false)); err != nil {
		t.Fatal(err)
	}
	before := d.image(t)
	rep := runLangGraphCheck(t, py, "postgres", d.dsn, d.schema, writeTranscript(t, t.TempDir()))
	if !reflect.DeepEqual(d.image(t), before) {
		t.Fatal("the check changed the demo's rows")
	}
	checkLangGraphReport(t, rep, d.readThread)
}

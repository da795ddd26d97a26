package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/lgcodec"
	"github.com/historyd/historyd/store/storetest"
)

// testDSN returns the PostgreSQL the integration tests use. `make test`
// starts one; without it these tests fail rather than pass unrun.
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("HISTORYD_TEST_DSN")
	if dsn == "" {
		if testing.Short() {
			t.Skip("HISTORYD_TEST_DSN not set (-short)")
		}
		t.Fatal("HISTORYD_TEST_DSN is not set: run `make test`, which starts a throwaway PostgreSQL, or point it at a database you can create schemas in")
	}
	return dsn
}

// schemaDDL creates the tables LangGraph's PostgresSaver migrations create.
const schemaDDL = `
CREATE TABLE %[1]s.checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE TABLE %[1]s.checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);`

// pgWriter writes checkpoints the way Python's PostgresSaver splits them:
// primitives inline in the checkpoint's channel_values, everything else a
// blob (here in the "json" format LangGraph.js uses).
type pgWriter struct {
	t      *testing.T
	pool   *pgxpool.Pool
	schema string
}

func (w *pgWriter) Put(ref store.Ref, id string, ts time.Time, values map[string]any) {
	ctx := context.Background()
	cp := map[string]any{"v": 4, "id": id, "ts": ts.Format(time.RFC3339Nano), "channel_values": map[string]any{}, "channel_versions": map[string]any{}, "versions_seen": map[string]any{}}
	for ch, v := range values {
		blob := storetest.JSON(v)
		version := storetest.Version(blob.Data)
		cp["channel_versions"].(map[string]any)[ch] = version
		switch v.(type) {
		case nil, string, bool, int, int64, float64:
			cp["channel_values"].(map[string]any)[ch] = v
			continue
		}
		_, err := w.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.checkpoint_blobs VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`, w.schema),
			ref.ThreadID, ref.Namespace, ch, version, blob.Type, blob.Data)
		if err != nil {
			w.t.Fatal(err)
		}
	}
	raw, _ := json.Marshal(cp)
	if _, err := w.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint) VALUES ($1, $2, $3, $4)`, w.schema),
		ref.ThreadID, ref.Namespace, id, raw); err != nil {
		w.t.Fatal(err)
	}
}

func (w *pgWriter) Delete(ref store.Ref, ids []string) {
	if _, err := w.pool.Exec(context.Background(), fmt.Sprintf(`DELETE FROM %s.checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY($3)`, w.schema),
		ref.ThreadID, ref.Namespace, ids); err != nil {
		w.t.Fatal(err)
	}
}

// newSchema creates a fresh schema holding empty LangGraph tables, and a
// role that may only SELECT from them.
func newSchema(t *testing.T) (admin *pgxpool.Pool, schema, readOnlyDSN string) {
	t.Helper()
	dsn := testDSN(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	schema = fmt.Sprintf("checkpoints_test_%d", rand.Uint64()) // the name holds "checkpoints" on purpose
	role := schema + "_ro"
	q := pgx.Identifier{schema}.Sanitize()
	r := pgx.Identifier{role}.Sanitize()
	for _, stmt := range []string{
		"CREATE SCHEMA " + q,
		fmt.Sprintf(schemaDDL, q),
		"CREATE ROLE " + r + " LOGIN",
		"GRANT USAGE ON SCHEMA " + q + " TO " + r,
		"GRANT SELECT ON ALL TABLES IN SCHEMA " + q + " TO " + r,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+q+" CASCADE")
		_, _ = pool.Exec(context.Background(), "DROP ROLE "+r)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("HISTORYD_TEST_DSN must be a URL: %v", err)
	}
	u.User = url.User(role)
	return pool, schema, u.String()
}

func openBackend(t *testing.T, dsn, schema string, channels ...string) *Backend {
	t.Helper()
	b, err := Open(context.Background(), Config{DSN: dsn, Schema: schema, Channels: channels})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// TestSuite runs the shared store suite as a role granted only SELECT on
// the checkpoint tables: historyd must never need more. It runs as
// historyd serve opens the backend, listing only the versions of the
// channels it reads, and listing them all.
func TestSuite(t *testing.T) {
	for name, channels := range map[string][]string{"two channels": {"messages", "tool_state"}, "all channels": nil} {
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) (store.Backend, storetest.Writer) {
				admin, schema, ro := newSchema(t)
				return openBackend(t, ro, schema, channels...), &pgWriter{t: t, pool: admin, schema: pgx.Identifier{schema}.Sanitize()}
			})
		})
	}
}

// TestChannelNames: names are quoted into the listing, and the ones that
// cannot be are refused when the backend is opened.
func TestChannelNames(t *testing.T) {
	admin, schema, ro := newSchema(t)
	w := &pgWriter{t: t, pool: admin, schema: pgx.Identifier{schema}.Sanitize()}
	ref := store.Ref{ThreadID: "quoted"}
	storetest.Build(w, ref, storetest.Demo[:1])
	b := openBackend(t, ro, schema, "it's", "messages")
	cps, err := b.Checkpoints(context.Background(), ref)
	if err != nil || len(cps) == 0 {
		t.Fatalf("listing with a quoted channel name: %v, %v", cps, err)
	}
	for _, c := range cps {
		if _, ok := c.Versions["tool_state"]; ok || len(c.Versions) > 1 {
			t.Errorf("checkpoint %s lists %v; want at most the messages version", c.ID, c.Versions)
		}
	}
	for _, bad := range []string{"", "a\\b", "nul\x00"} {
		if _, err := Open(context.Background(), Config{DSN: ro, Schema: schema, Channels: []string{bad}}); err == nil {
			t.Errorf("channel %q accepted", bad)
		}
	}
}

func TestInlineAndEmptyValues(t *testing.T) {
	admin, schema, ro := newSchema(t)
	b := openBackend(t, ro, schema)
	w := &pgWriter{t: t, pool: admin, schema: pgx.Identifier{schema}.Sanitize()}
	ref := store.Ref{ThreadID: "inline"}
	w.Put(ref, "c1", time.Now(), map[string]any{"title": "Severn", "count": 3.0, "tool_state": map[string]any{"a": 1.0}})
	ctx := context.Background()
	// An "empty" blob row with an inline value falls back to the inline
	// reading, as LangGraph's loader does.
	if _, err := admin.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.checkpoint_blobs VALUES ('inline', '', 'title', (SELECT checkpoint->'channel_versions'->>'title' FROM %[1]s.checkpoints WHERE checkpoint_id = 'c1'), 'empty', NULL)`, pgx.Identifier{schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		channel, typ, data string
	}{
		{"title", "json", `"Severn"`},
		{"count", "json", `3`},
		{"tool_state", "json", `{"a":1}`},
		{"absent", "empty", ``},
	} {
		blobs, err := b.Values(ctx, ref, tt.channel, []string{"c1"})
		if err != nil {
			t.Fatal(err)
		}
		if blobs[0].Type != tt.typ || string(blobs[0].Data) != tt.data {
			t.Errorf("%s = %s %q, want %s %q", tt.channel, blobs[0].Type, blobs[0].Data, tt.typ, tt.data)
		}
	}
}

func TestWrongSchemaAndDownDatabase(t *testing.T) {
	_, _, ro := newSchema(t)
	ctx := context.Background()
	b := openBackend(t, ro, "no_such_schema")
	if err := b.Ping(ctx); !errors.Is(err, store.ErrNotCheckpointStore) {
		t.Errorf("Ping with a wrong schema = %v, want ErrNotCheckpointStore", err)
	}
	if _, err := b.Checkpoints(ctx, store.Ref{ThreadID: "t"}); !errors.Is(err, store.ErrNotCheckpointStore) {
		t.Errorf("Checkpoints with a wrong schema = %v, want ErrNotCheckpointStore", err)
	}
	// Nothing listens on port 1.
	down := openBackend(t, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", "")
	if err := down.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping of a down database = %v, want ErrUnavailable", err)
	}
	if _, err := down.Checkpoints(ctx, store.Ref{ThreadID: "t"}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Checkpoints of a down database = %v, want ErrUnavailable", err)
	}
}

func TestOpenRejectsBadDSN(t *testing.T) {
	if _, err := Open(context.Background(), Config{DSN: "postgres://u:secret@host:notaport/db"}); err == nil {
		t.Fatal("Open accepted a DSN with a bad port")
	} else if got := err.Error(); strings.Contains(got, "secret") {
		t.Errorf("error %q shows the password", got)
	}
}

func TestPingWithoutGrants(t *testing.T) {
	admin, schema, ro := newSchema(t)
	q := pgx.Identifier{schema}.Sanitize()
	role := schema + "_ro"
	if _, err := admin.Exec(context.Background(), "REVOKE SELECT ON "+q+".checkpoint_blobs FROM "+pgx.Identifier{role}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	b := openBackend(t, ro, schema)
	err := b.Ping(context.Background())
	if !errors.Is(err, store.ErrNotCheckpointStore) || !strings.Contains(err.Error(), "SELECT") {
		t.Errorf("Ping without SELECT on checkpoint_blobs = %v; want ErrNotCheckpointStore saying to grant SELECT", err)
	}
	w := &pgWriter{t: t, pool: admin, schema: q}
	storetest.Build(w, store.Ref{ThreadID: "t"}, storetest.Demo[:1])
	_, err = store.New(store.Config{Backend: b}).History(context.Background(), store.Ref{ThreadID: "t"})
	if !errors.Is(err, store.ErrNotCheckpointStore) {
		t.Errorf("History without SELECT on checkpoint_blobs = %v; want ErrNotCheckpointStore", err)
	}
}

// TestHostileThreadIDs reads threads whose ids would break a query built by
// string concatenation; every query is parameterized, so they are ordinary
// threads (written ones found, others empty), never an SQL error.
func TestHostileThreadIDs(t *testing.T) {
	admin, schema, ro := newSchema(t)
	b := openBackend(t, ro, schema)
	w := &pgWriter{t: t, pool: admin, schema: pgx.Identifier{schema}.Sanitize()}
	st := store.New(store.Config{Backend: b})
	ids := []string{
		`'; DROP TABLE checkpoints; --`, `" OR 1=1 --`, `\'`, `%`, `_`, `$1`, "tab\tnew\nline",
		"ümlaut-🌊", strings.Repeat("x", 10<<10), `t'1"; --`,
	}
	for i, id := range ids {
		ref := store.Ref{ThreadID: id, Namespace: id}
		if i%2 == 0 {
			storetest.Build(w, ref, storetest.Demo[:1])
		}
		h, err := st.History(context.Background(), ref)
		if err != nil {
			t.Fatalf("thread %q: %v", id[:min(len(id), 40)], err)
		}
		want := 0
		if i%2 == 0 {
			want = 1
		}
		if h.Total != want {
			t.Errorf("thread %q: total %d, want %d", id[:min(len(id), 40)], h.Total, want)
		}
	}
}

// TestDeltaChannelRefused marks one checkpoint's metadata as LangGraph does
// for graphs with DeltaChannel channels: the thread is refused, not misread.
func TestDeltaChannelRefused(t *testing.T) {
	admin, schema, ro := newSchema(t)
	b := openBackend(t, ro, schema)
	q := pgx.Identifier{schema}.Sanitize()
	w := &pgWriter{t: t, pool: admin, schema: q}
	ref := store.Ref{ThreadID: "delta"}
	written := storetest.Build(w, ref, storetest.Demo[:2])
	st := store.New(store.Config{Backend: b})
	if h, err := st.History(context.Background(), ref); err != nil || h.Total != 2 {
		t.Fatalf("before marking: %v, %v", h, err)
	}
	if _, err := admin.Exec(context.Background(), `UPDATE `+q+`.checkpoints SET metadata = '{"delta_writes_versioned": true}' WHERE checkpoint_id = $1`, written[1].End); err != nil {
		t.Fatal(err)
	}
	// A marked checkpoint rewritten in place is seen once the cache rereads
	// the thread; a new store reads it fresh.
	_, err := store.New(store.Config{Backend: b}).History(context.Background(), ref)
	var unsupported *lgcodec.UnsupportedError
	if !errors.As(err, &unsupported) || unsupported.Feature != "DeltaChannel" {
		t.Errorf("History of a delta thread = %v; want an UnsupportedError naming DeltaChannel", err)
	}
}

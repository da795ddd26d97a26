package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// newWriter writes checkpoints into schema in saver's layout, through the
// admin connection, failing t on errors.
func newWriter(t *testing.T, admin *pgxpool.Pool, schema string, layout saver.Saver) *storetest.SaverWriter {
	return storetest.NewPostgresWriter(t, admin, schema, layout)
}

// newSchema creates a fresh schema holding empty LangGraph tables, and a
// role that may only SELECT from them.
func newSchema(t *testing.T) (admin *pgxpool.Pool, schema, readOnlyDSN string) {
	t.Helper()
	return newSchemaFor(t, saver.PostgresPython)
}

// newSchemaFor is newSchema with the tables as saver's migrations leave
// them.
func newSchemaFor(t *testing.T, layout saver.Saver) (admin *pgxpool.Pool, schema, readOnlyDSN string) {
	t.Helper()
	return storetest.PostgresSchema(t, storetest.PostgresDSN(t), layout)
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
// channels it reads, and listing them all; and through PgBouncer in
// transaction and in session mode, with the pooler setting historyd serve
// --pooler gives, and in transaction mode also with the DSN choosing the
// simple protocol (text-format results) itself.
func TestSuite(t *testing.T) {
	for _, layout := range []saver.Saver{saver.PostgresPython, saver.PostgresJS} {
		for name, channels := range map[string][]string{"the channels read": {"messages", "tool_state", "files", store.SavedValueChannel}, "all channels": nil} {
			t.Run(layout.String()+"/"+name, func(t *testing.T) {
				storetest.Run(t, func(t *testing.T) (backend.Backend, storetest.Writer) {
					admin, schema, ro := newSchemaFor(t, layout)
					return openBackend(t, ro, schema, channels...), newWriter(t, admin, schema, layout)
				})
			})
		}
		for _, via := range pooled {
			t.Run(layout.String()+"/"+via.name, func(t *testing.T) {
				storetest.Run(t, func(t *testing.T) (backend.Backend, storetest.Writer) {
					admin, schema, _ := newSchemaFor(t, layout)
					dsn := pooledDSN(t, admin, schema, via.env, via.query)
					return openPooled(t, dsn, schema, via.pooler, "messages", "tool_state", "files", store.SavedValueChannel), newWriter(t, admin, schema, layout)
				})
			})
		}
	}
}

// pooled are the ways the tests reach PostgreSQL through PgBouncer.
var pooled = []struct {
	name   string
	env    string // the variable holding the pooler's DSN for the mode
	pooler Pooler
	query  string // extra DSN parameters
}{
	{"PgBouncer transaction mode", "HISTORYD_TEST_POOLER_TX_DSN", PoolerTransaction, ""},
	{"PgBouncer session mode", "HISTORYD_TEST_POOLER_SESSION_DSN", PoolerSession, ""},
	{"PgBouncer transaction mode, simple protocol", "HISTORYD_TEST_POOLER_TX_DSN", PoolerTransaction, "default_query_exec_mode=simple_protocol"},
}

// pooledDSN is the test database through the PgBouncer the variable env
// names (scripts/test.sh starts it), as the role PgBouncer lets in, granted
// SELECT on schema's tables only; query is added to the DSN's parameters.
func pooledDSN(t *testing.T, admin *pgxpool.Pool, schema, env, query string) string {
	t.Helper()
	dsn := os.Getenv(env)
	role := os.Getenv("HISTORYD_TEST_POOLER_ROLE")
	if dsn == "" || role == "" {
		t.Fatalf("%s and HISTORYD_TEST_POOLER_ROLE are not set: run `make test` (scripts/test.sh starts PgBouncer with scripts/pg-test.sh pooler start), or point them at a PgBouncer in front of HISTORYD_TEST_DSN", env)
	}
	q, r := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{role}.Sanitize()
	for _, stmt := range []string{"GRANT USAGE ON SCHEMA " + q + " TO " + r, "GRANT SELECT ON ALL TABLES IN SCHEMA " + q + " TO " + r} {
		if _, err := admin.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s must be a URL: %v", env, err)
	}
	u.User = url.User(role)
	if query != "" {
		u.RawQuery += "&" + query
	}
	return u.String()
}

func openPooled(t *testing.T, dsn, schema string, pooler Pooler, channels ...string) *Backend {
	t.Helper()
	b, err := Open(context.Background(), Config{DSN: dsn, Schema: schema, Channels: channels, Pooler: pooler})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// TestPoolerUnderConcurrency reads one thread through PgBouncer in
// transaction mode from 8 goroutines at once, every backend method, and
// requires every read to succeed with the answer the direct connection
// gives: configured for the pooler (PoolerTransaction); not configured
// (PoolerNone), the pooler found before the first connection; and not
// configured with that look left out, the pooler recognised by the errors
// of the first reads, which are made again. That last case also shows the
// load reaches the pooler's server connections: only a transaction pooler's
// error turns the backend pooler-safe. Connected directly, and through
// PgBouncer in session mode, nothing is taken for a transaction pooler.
func TestPoolerUnderConcurrency(t *testing.T) {
	admin, schema, ro := newSchema(t)
	w := newWriter(t, admin, schema, saver.PostgresPython)
	ref := backend.Ref{ThreadID: "pooled"}
	written := storetest.Build(w, ref, storetest.Demo)
	var ids []string
	for _, wr := range written {
		ids = append(ids, wr.End)
	}
	direct := openBackend(t, ro, schema, "messages", "tool_state")
	want := readAll(t, direct, ref, ids)
	if direct.PoolerSafe() {
		t.Error("a direct connection was taken for a transaction pooler")
	}

	dsn := pooledDSN(t, admin, schema, "HISTORYD_TEST_POOLER_TX_DSN", "")
	const workers, rounds = 8, 40
	load := func(b *Backend) (calls, failed int, first error) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					got, err := readAllErr(b, ref, ids)
					if err == nil && got != want {
						err = fmt.Errorf("answer differs from the direct connection's:\n%s\nwant\n%s", got, want)
					}
					mu.Lock()
					calls++
					if err != nil {
						failed++
						if first == nil {
							first = err
						}
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return calls, failed, first
	}
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"--pooler transaction", Config{Pooler: PoolerTransaction}},
		{"--pooler none, found at the first connection", Config{Pooler: PoolerNone}},
		{"--pooler none, recognised by reads", Config{Pooler: PoolerNone, skipPoolerDetect: true}},
	} {
		var log syncbuf.Buffer
		tt.cfg.DSN, tt.cfg.Schema, tt.cfg.Channels = dsn, schema, []string{"messages", "tool_state"}
		tt.cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
		b, err := Open(context.Background(), tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		calls, failed, first := load(b)
		b.Close()
		t.Logf("%s: %d of %d rounds failed; log: %s", tt.name, failed, calls, strings.TrimSpace(log.String()))
		if failed > 0 {
			t.Errorf("%s: %d of %d rounds failed, first: %v", tt.name, failed, calls, first)
		}
		if !b.PoolerSafe() {
			t.Errorf("%s: the backend does not run pooler-safe", tt.name)
		}
		if warned := strings.Count(log.String(), "transaction pooler that --pooler does not name"); tt.cfg.Pooler == PoolerNone && warned != 1 {
			t.Errorf("%s: %d warnings, want 1:\n%s", tt.name, warned, log.String())
		}
	}
	session := openPooled(t, pooledDSN(t, admin, schema, "HISTORYD_TEST_POOLER_SESSION_DSN", ""), schema, PoolerNone, "messages", "tool_state")
	if got := readAll(t, session, ref, ids); got != want {
		t.Errorf("through a session pooler: %s, want %s", got, want)
	}
	if session.PoolerSafe() {
		t.Error("a session pooler was taken for a transaction pooler")
	}
}

// TestPoolerSignOnThreads lists threads through PgBouncer in transaction
// mode with the backend not told of it and its look at the first
// connection left out, after one of its connections, held, has prepared
// the statement the listing starts with on the server connection the
// pooler hands on next: the listing's own connection prepares it again
// there, and PostgreSQL answers 42P05. The listing is made again,
// pooler-safe, and answers; so does the plan the benchmark reads.
func TestPoolerSignOnThreads(t *testing.T) {
	admin, schema, _ := newSchema(t)
	w := newWriter(t, admin, schema, saver.PostgresPython)
	storetest.Build(w, backend.Ref{ThreadID: "listed"}, storetest.Demo[:1])
	ctx := context.Background()
	for _, read := range []struct {
		name string
		call func(*Backend) error
	}{
		{"Threads", func(b *Backend) error {
			var got []string
			_, err := b.Threads(ctx, backend.ThreadQuery{Limit: 10}, func(r backend.ThreadRow) error { got = append(got, r.ThreadID); return nil })
			if err == nil && !slices.Equal(got, []string{"listed"}) {
				err = fmt.Errorf("listed %q, want [listed]", got)
			}
			return err
		}},
		{"ExplainThreads", func(b *Backend) error {
			_, err := b.ExplainThreads(ctx, backend.ThreadQuery{Limit: 10})
			return err
		}},
	} {
		t.Run(read.name, func(t *testing.T) {
			var log syncbuf.Buffer
			b, err := Open(ctx, Config{DSN: pooledDSN(t, admin, schema, "HISTORYD_TEST_POOLER_TX_DSN", ""), Schema: schema,
				Pooler: PoolerNone, skipPoolerDetect: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			held, err := b.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// A server connection left from an earlier run may hold the
			// statement already: so much the better.
			var column, db, indexes string
			err = held.QueryRow(ctx, walkOrderSQL, b.name("checkpoints")).Scan(&column, &db, &indexes)
			if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && poolerSign(pgErr) {
				err = nil
			}
			if err == nil {
				err = read.call(b)
			}
			held.Release()
			if err != nil {
				t.Fatalf("%s after a transaction pooler's sign: %v", read.name, err)
			}
			if !b.PoolerSafe() {
				t.Errorf("%s: the backend does not run pooler-safe; log: %s", read.name, log.String())
			}
			if warned := strings.Count(log.String(), "a read failed with SQLSTATE 42P05"); warned != 1 {
				t.Errorf("%s: %d warnings of a read's SQLSTATE 42P05, want 1:\n%s", read.name, warned, log.String())
			}
		})
	}
}

// readAll is readAllErr failing t on error.
func readAll(t *testing.T, b *Backend, ref backend.Ref, ids []string) string {
	t.Helper()
	s, err := readAllErr(b, ref, ids)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAllErr calls every read the backend offers once, and returns what
// they answered as text.
func readAllErr(b *Backend, ref backend.Ref, ids []string) (string, error) {
	ctx := context.Background()
	var out strings.Builder
	if err := b.Ping(ctx); err != nil {
		return "", err
	}
	census, err := b.List(ctx, ref, backend.Query{}, func(r backend.Row) error {
		fmt.Fprintf(&out, "row %s %s %s %s\n", r.ID, r.Parent, r.Checkpoint.Data, r.Metadata.Data)
		return nil
	})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&out, "census %+v\n", census)
	// The warm path: nothing new since the newest, its ids checked.
	census, err = b.List(ctx, ref, backend.Query{After: ids[len(ids)-1], Verify: ids[:1]}, func(r backend.Row) error {
		return fmt.Errorf("row %s listed after the newest", r.ID)
	})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&out, "probe %+v\n", census)
	for _, ch := range []string{"messages", "tool_state"} {
		vals := make([]string, len(ids))
		if err := b.EachValue(ctx, ref, ch, ids, func(i int, v backend.Blob) error {
			vals[i] = fmt.Sprintf("%s %x", v.Type, v.Data)
			return nil
		}); err != nil {
			return "", err
		}
		fmt.Fprintf(&out, "%s %v\n", ch, vals)
	}
	var writes []string
	if err := b.EachWrite(ctx, ref, "tool_state", ids, func(w backend.Write) error {
		writes = append(writes, fmt.Sprintf("%s/%s/%d %s %x", w.CheckpointID, w.TaskID, w.Idx, w.Value.Type, w.Value.Data))
		return nil
	}); err != nil {
		return "", err
	}
	slices.Sort(writes)
	fmt.Fprintf(&out, "writes %v\n", writes)
	return out.String(), nil
}

// TestChannelNames: names are quoted into the listing, and the ones that
// cannot be are refused when the backend is opened.
func TestChannelNames(t *testing.T) {
	admin, schema, ro := newSchema(t)
	w := newWriter(t, admin, schema, saver.PostgresPython)
	ref := backend.Ref{ThreadID: "quoted"}
	storetest.Build(w, ref, storetest.Demo[:1])
	b := openBackend(t, ro, schema, "it's", "messages")
	n := 0
	_, err := b.List(context.Background(), ref, backend.Query{}, func(r backend.Row) error {
		n++
		cp, err := codec.ParseCheckpoint(r.Checkpoint.Type, r.Checkpoint.Data, nil)
		if err != nil {
			return err
		}
		if _, ok := cp.Versions["tool_state"]; ok || len(cp.Versions) > 1 {
			t.Errorf("checkpoint %s lists %v; want at most the messages version", r.ID, cp.Versions)
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("listing with a quoted channel name: %d rows, %v", n, err)
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
	w := newWriter(t, admin, schema, saver.PostgresPython)
	ref := backend.Ref{ThreadID: "inline"}
	w.Put(ref, saver.Checkpoint{ID: "c1", TS: time.Now(), Values: write.Map{
		{Key: "title", Value: "Severn"}, {Key: "count", Value: 3.5}, {Key: "tool_state", Value: map[string]any{"a": 1.0}},
		{Key: "snapshot", Value: write.DeltaSnapshot{Value: []any{"x"}}},
	}})
	ctx := context.Background()
	// An "empty" blob row with an inline value falls back to the inline
	// reading, as LangGraph's loader does.
	if _, err := admin.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.checkpoint_blobs VALUES ('inline', '', 'title', (SELECT checkpoint->'channel_versions'->>'title' FROM %[1]s.checkpoints WHERE checkpoint_id = 'c1'), 'empty', NULL)`, pgx.Identifier{schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	ts, _ := write.EncodeMsgpack(map[string]any{"a": 1.0})
	snap, _ := write.EncodeMsgpack(write.DeltaSnapshot{Value: []any{"x"}})
	for _, tt := range []struct {
		channel, typ, data string
	}{
		{"title", "json", `"Severn"`},
		{"count", "json", `3.5`},
		{"tool_state", "msgpack", string(ts)},
		// A snapshot's blob wins over the marker Python leaves inline.
		{"snapshot", "msgpack", string(snap)},
		{"absent", "empty", ``},
	} {
		blobs, err := backend.Values(ctx, b, ref, tt.channel, []string{"c1"})
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
	if err := b.Ping(ctx); !errors.Is(err, backend.ErrNotCheckpointStore) {
		t.Errorf("Ping with a wrong schema = %v, want ErrNotCheckpointStore", err)
	}
	if _, err := b.List(ctx, backend.Ref{ThreadID: "t"}, backend.Query{}, func(backend.Row) error { return nil }); !errors.Is(err, backend.ErrNotCheckpointStore) {
		t.Errorf("List with a wrong schema = %v, want ErrNotCheckpointStore", err)
	}
	if err := b.EachWrite(ctx, backend.Ref{ThreadID: "t"}, "messages", []string{"x"}, func(backend.Write) error { return nil }); !errors.Is(err, backend.ErrNotCheckpointStore) {
		t.Errorf("EachWrite with a wrong schema = %v, want ErrNotCheckpointStore", err)
	}
	// Nothing listens on port 1.
	down := openBackend(t, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", "")
	if err := down.Ping(ctx); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Ping of a down database = %v, want ErrUnavailable", err)
	}
	if _, err := down.List(ctx, backend.Ref{ThreadID: "t"}, backend.Query{}, func(backend.Row) error { return nil }); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("List of a down database = %v, want ErrUnavailable", err)
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
	if !errors.Is(err, backend.ErrNotCheckpointStore) || !strings.Contains(err.Error(), "SELECT") {
		t.Errorf("Ping without SELECT on checkpoint_blobs = %v; want ErrNotCheckpointStore saying to grant SELECT", err)
	}
	w := newWriter(t, admin, schema, saver.PostgresPython)
	storetest.Build(w, backend.Ref{ThreadID: "t"}, storetest.Demo[:1])
	_, err = store.New(store.Config{Backend: b}).History(context.Background(), backend.Ref{ThreadID: "t"})
	if !errors.Is(err, backend.ErrNotCheckpointStore) {
		t.Errorf("History without SELECT on checkpoint_blobs = %v; want ErrNotCheckpointStore", err)
	}
}

// TestHostileThreadIDs reads threads whose ids would break a query built by
// string concatenation; every query is parameterized, so they are ordinary
// threads (written ones found, others empty), never an SQL error.
func TestHostileThreadIDs(t *testing.T) {
	admin, schema, ro := newSchema(t)
	b := openBackend(t, ro, schema)
	w := newWriter(t, admin, schema, saver.PostgresJS)
	st := store.New(store.Config{Backend: b})
	ids := []string{
		`'; DROP TABLE checkpoints; --`, `" OR 1=1 --`, `\'`, `%`, `_`, `$1`, "tab\tnew\nline",
		"ümlaut-🌊", strings.Repeat("x", 10<<10), `t'1"; --`,
	}
	for i, id := range ids {
		ref := backend.Ref{ThreadID: id, Namespace: id}
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

// TestOwnSessionIsReadOnly: a connection whose session is historyd's own
// (no pooler, or one in session mode) refuses writes, even as a superuser,
// and plans prepared statements generically; a transaction-mode pooler's
// shared sessions get no such setting, and no named prepared statement.
func TestOwnSessionIsReadOnly(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := ownSession(ctx, conn); err != nil {
		t.Fatal(err)
	}
	for setting, want := range map[string]string{"default_transaction_read_only": "on", "plan_cache_mode": "force_generic_plan"} {
		var got string
		if err := conn.QueryRow(ctx, "SHOW "+setting).Scan(&got); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", setting, got, err, want)
		}
	}
	var pgErr *pgconn.PgError
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE historyd_must_not_write (a int)"); !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Errorf("a write in historyd's session = %v; want SQLSTATE 25006 (read-only transaction)", err)
	}

	for _, tt := range []struct {
		pooler Pooler
		dsn    string
		mode   pgx.QueryExecMode
		own    bool
	}{
		{PoolerNone, "postgres://u@h/db", pgx.QueryExecModeCacheStatement, true},
		{PoolerSession, "postgres://u@h/db", pgx.QueryExecModeCacheStatement, true},
		{PoolerTransaction, "postgres://u@h/db", pgx.QueryExecModeCacheDescribe, false},
		{PoolerTransaction, "postgres://u@h/db?default_query_exec_mode=cache_statement", pgx.QueryExecModeCacheStatement, false},
		{PoolerTransaction, "host=h user=u default_query_exec_mode=exec", pgx.QueryExecModeExec, false},
	} {
		b, err := Open(ctx, Config{DSN: tt.dsn, Pooler: tt.pooler})
		if err != nil {
			t.Fatal(err)
		}
		cc := b.pool.Config().ConnConfig
		if cc.DefaultQueryExecMode != tt.mode || (b.pool.Config().AfterConnect != nil) != tt.own {
			t.Errorf("%s, %s: query mode %v, session set up %v; want %v, %v", tt.pooler, tt.dsn, cc.DefaultQueryExecMode, b.pool.Config().AfterConnect != nil, tt.mode, tt.own)
		}
		for k := range cc.RuntimeParams {
			if k != "application_name" {
				t.Errorf("%s: startup parameter %s sent; a pooler refuses those it does not know", tt.pooler, k)
			}
		}
		b.Close()
	}
}

// TestCorruptionIsDataLoss: PostgreSQL reporting a damaged page of a table
// (XX001) or of an index (XX002) is a backend.CorruptError naming the part
// by what it is to historyd, whatever names the server's words hold, and
// neither an outage nor a misconfiguration. The server's words, which
// name the relation, stay in the error for the operator's log.
func TestCorruptionIsDataLoss(t *testing.T) {
	for _, tt := range []struct {
		code, message, role string
	}{
		{"XX001", "invalid page in block 7 of relation base/16384/24601", "the PostgreSQL checkpoint database"},
		{"XX002", `index "checkpoints_pkey" contains unexpected zero page at block 3`, "an index of the PostgreSQL checkpoint tables"},
	} {
		err := sortError(fmt.Errorf("list: %w", &pgconn.PgError{Code: tt.code, Message: tt.message}))
		var ce *backend.CorruptError
		if !errors.As(err, &ce) || ce.Role != tt.role {
			t.Errorf("SQLSTATE %s: %v; want a CorruptError for %s", tt.code, err, tt.role)
			continue
		}
		if !strings.Contains(err.Error(), tt.message) || !strings.Contains(err.Error(), tt.code) {
			t.Errorf("SQLSTATE %s: %q leaves out the server's words", tt.code, err)
		}
		if errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrNotCheckpointStore) {
			t.Errorf("SQLSTATE %s: damage reported as an outage or a misconfiguration: %v", tt.code, err)
		}
	}
}

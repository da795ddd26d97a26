package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// TestMain builds historyd once for the package's tests (testbin.Main).
func TestMain(m *testing.M) { testbin.Main(m) }

// serviceName is what health checks of ThreadHistory name.
var serviceName = historydv1.ThreadHistory_ServiceDesc.ServiceName

// skipIfShort skips in -short mode: every test here builds and runs the
// historyd binary, and most run PostgreSQL.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("fault-injection tests run the historyd binary, most against PostgreSQL (-short)")
	}
}

// dial connects a client to addr; the connection is closed with the test.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// health asks for service's health status ("" is the server as a whole).
func health(conn *grpc.ClientConn, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return r.GetStatus(), err
}

// waitHealth polls until both the server's and ThreadHistory's health are
// want, and returns when that was first seen.
func waitHealth(t *testing.T, conn *grpc.ClientConn, want healthpb.HealthCheckResponse_ServingStatus, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		all, errAll := health(conn, "")
		svc, errSvc := health(conn, serviceName)
		if errAll == nil && errSvc == nil && all == want && svc == want {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("health not %v after %v: server %v (%v), %s %v (%v)", want, timeout, all, errAll, serviceName, svc, errSvc)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cluster is a PostgreSQL cluster of the test's own, run by
// scripts/pg-test.sh with an env file in the test's temporary directory.
type cluster struct {
	t       *testing.T
	script  string
	envFile string
	DSN     string
	Port    int
}

// startCluster starts a throwaway cluster on port, or on a free port the
// test picks when port is 0, and removes it at the end of the test. Its
// scripts/pg-test.sh runs get none of the PG_TEST_* settings of the shared
// cluster the test's environment may name (command), so that setting
// PG_TEST_PORT for that one does not send the test's own there.
func startCluster(t *testing.T, port int) *cluster {
	t.Helper()
	c := &cluster{t: t, script: filepath.Join(testbin.RepoRoot(t), "scripts", "pg-test.sh"), envFile: filepath.Join(t.TempDir(), "pg-test.env")}
	if port == 0 {
		port = testbin.FreePort(t)
	}
	extra := []string{fmt.Sprintf("PG_TEST_PORT=%d", port)}
	if out, err := c.command(extra, "start").CombinedOutput(); err != nil {
		t.Fatalf("a PostgreSQL cluster of the test's own is needed: scripts/pg-test.sh start: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := c.command(nil, "stop").CombinedOutput(); err != nil {
			t.Errorf("scripts/pg-test.sh stop: %v\n%s", err, out)
		}
	})
	env, err := os.ReadFile(c.envFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(env), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, "'\"")
		switch k {
		case "HISTORYD_TEST_SUPERUSER_DSN":
			c.DSN = v
		case "HISTORYD_TEST_PGPORT":
			c.Port, _ = strconv.Atoi(v)
		}
	}
	if c.DSN == "" || c.Port == 0 {
		t.Fatalf("scripts/pg-test.sh wrote no DSN or port to %s:\n%s", c.envFile, env)
	}
	return c
}

// env returns the value the cluster's env file gives the variable key
// (scripts/pg-test.sh writes it; the standby and pooler commands add to
// it), failing the test when it is not there.
func (c *cluster) env(key string) string {
	c.t.Helper()
	env, err := os.ReadFile(c.envFile)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, line := range strings.Split(string(env), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && k == key {
			return strings.Trim(v, "'\"")
		}
	}
	c.t.Fatalf("scripts/pg-test.sh wrote no %s to %s:\n%s", key, c.envFile, env)
	return ""
}

// ownSettings are the scripts/pg-test.sh settings that name one cluster:
// the test's own clusters set them themselves rather than inherit the
// shared cluster's. (PG_TEST_BIN and PG_TEST_DB are inherited: where
// PostgreSQL is installed, and the database the tests expect.)
var ownSettings = []string{"PG_TEST_ENV_FILE=", "PG_TEST_PORT=", "PG_TEST_STANDBY_PORT=", "PG_TEST_POOLER_PORT="}

// command is a scripts/pg-test.sh run on the test's own cluster, with the
// settings extraEnv adds.
func (c *cluster) command(extraEnv []string, args ...string) *exec.Cmd {
	cmd := exec.Command(c.script, args...)
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc(ownSettings, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "PG_TEST_ENV_FILE="+c.envFile), extraEnv...)
	return cmd
}

// run runs a pg-test.sh subcommand (halt, resume, restart, standby start)
// and fails the test when it fails. A standby it starts listens on a free
// port the test picks.
func (c *cluster) run(args ...string) {
	c.t.Helper()
	var extra []string
	if args[0] == "standby" {
		extra = append(extra, fmt.Sprintf("PG_TEST_STANDBY_PORT=%d", testbin.FreePort(c.t)))
	}
	if out, err := c.command(extra, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("scripts/pg-test.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// sharedDSN is the test database scripts/test.sh provides, for tests that
// only read and write their own schema in it.
func sharedDSN(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"HISTORYD_TEST_SUPERUSER_DSN", "HISTORYD_TEST_DSN"} {
		if v := os.Getenv(name); v != "" {
			return v
		}
	}
	t.Fatal("HISTORYD_TEST_DSN is not set: run `make test` (or scripts/test.sh), which starts a throwaway PostgreSQL, or point HISTORYD_TEST_SUPERUSER_DSN at a database you may create schemas in")
	return ""
}

// connect opens a pool on dsn, closed with the test.
func connect(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// checkpointTables creates the tables LangGraph.js's PostgresSaver
// migrations create, in the given (already quoted) schema.
func checkpointTables(t *testing.T, pool *pgxpool.Pool, schema string) {
	t.Helper()
	for _, stmt := range saver.PostgresJS.DDL(schema) {
		if _, err := pool.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("create checkpoint tables: %v", err)
		}
	}
}

// newSchema creates a schema of the test's own holding empty checkpoint
// tables in the shared test database, dropped at the end of the test. It
// returns the schema's name, unquoted, as --schema takes it; label tells
// the tests' schemas apart.
func newSchema(t *testing.T, pool *pgxpool.Pool, label string) string {
	t.Helper()
	name := fmt.Sprintf("faults_%s_%d", label, time.Now().UnixNano())
	q := pgx.Identifier{name}.Sanitize()
	if _, err := pool.Exec(context.Background(), "CREATE SCHEMA "+q); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+q+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", q, err)
		}
	})
	checkpointTables(t, pool, q)
	return name
}

// newWriter is a storetest.Writer into the quoted schema's checkpoint
// tables, in LangGraph.js's PostgresSaver layout: every value a "json"
// blob.
func newWriter(t *testing.T, pool *pgxpool.Pool, schema string) *storetest.SaverWriter {
	exec := func(ctx context.Context, q string, args ...any) error {
		_, err := pool.Exec(ctx, q, args...)
		return err
	}
	return storetest.NewSaverWriter(t, saver.NewWriter(saver.PostgresJS, exec, schema))
}

// rivers is the conversation most tests write: every turn writes state, so
// every turn ends on a state blob of its own.
var rivers = []storetest.Turn{
	{Question: "sketch the Severn catchment and call it Severn", Writes: map[string]any{"area_km2": 11420.0, "name": "Severn"}},
	{Question: "now the Thames", Writes: map[string]any{"area_km2": 12935.0, "name": "Thames"}},
	{Question: "and the Trent?", Writes: map[string]any{"area_km2": 10452.0, "name": "Trent"}},
	{Question: "Wie groß ist die Themse? 🌊", Writes: map[string]any{"lang": "de"}},
	{Question: "list the three", Writes: map[string]any{"summary": []any{"Severn", "Thames", "Trent"}}},
}

// thread is a conversation as written, to check answers against.
type thread struct {
	id      string
	turns   []storetest.Turn
	written []storetest.Written
}

// writeThread writes turns as thread id into the quoted schema.
func writeThread(t *testing.T, pool *pgxpool.Pool, schema, id string, turns []storetest.Turn) thread {
	t.Helper()
	w := newWriter(t, pool, schema)
	return thread{id: id, turns: turns, written: storetest.Build(w, backend.Ref{ThreadID: id}, turns)}
}

// checkTurn compares one turn's state as served with what was written.
func (th thread) checkTurn(n int32, got *historydv1.TurnState) error {
	if n < 1 || int(n) > len(th.written) {
		return fmt.Errorf("turn %d is not one of the %d written", n, len(th.written))
	}
	w := th.written[n-1]
	if got.GetTurn() != n || got.GetCheckpointId() != w.End || got.GetQuestion() != th.turns[n-1].Question {
		return fmt.Errorf("turn %d: got turn %d, checkpoint %q, question %q; want checkpoint %q, question %q",
			n, got.GetTurn(), got.GetCheckpointId(), got.GetQuestion(), w.End, th.turns[n-1].Question)
	}
	if len(got.GetEntries()) != len(w.State) {
		return fmt.Errorf("turn %d: %d keys, want %d", n, len(got.GetEntries()), len(w.State))
	}
	for k, want := range w.State {
		e := got.GetEntries()[k]
		if e == nil {
			return fmt.Errorf("turn %d: key %q missing", n, k)
		}
		gotValue, _ := json.Marshal(e.GetValue().AsInterface())
		wantValue, _ := json.Marshal(want["value"])
		if !bytes.Equal(gotValue, wantValue) {
			return fmt.Errorf("turn %d key %q: value %s, want %s", n, k, gotValue, wantValue)
		}
		if int(e.GetTurn()) != want["turn"].(int) || int(e.GetTurnsWritten()) != want["turns_written"].(int) ||
			int(e.GetSeq()) != want["seq"].(int) || e.GetTool() != want["tool"].(string) {
			return fmt.Errorf("turn %d key %q: turn %d, turns_written %d, seq %d, tool %q; want %v",
				n, k, e.GetTurn(), e.GetTurnsWritten(), e.GetSeq(), e.GetTool(), want)
		}
	}
	return nil
}

// checkSnapshot checks a Snapshot answer for a retained turn.
func (th thread) checkSnapshot(n int32, resp *historydv1.SnapshotResponse) error {
	if int(resp.GetTotal()) != len(th.written) {
		return fmt.Errorf("turn %d: total %d, want %d", n, resp.GetTotal(), len(th.written))
	}
	var all []int32
	for i := range th.written {
		all = append(all, int32(i+1))
	}
	if !reflect.DeepEqual(resp.GetRetainedTurns(), all) {
		return fmt.Errorf("turn %d: retained %v, want %v", n, resp.GetRetainedTurns(), all)
	}
	if resp.GetState() == nil {
		return fmt.Errorf("turn %d: no state in %v", n, resp)
	}
	return th.checkTurn(n, resp.GetState())
}

// checkSnapshots checks a Snapshots answer for the whole thread.
func (th thread) checkSnapshots(resp *historydv1.SnapshotsResponse) error {
	if int(resp.GetTotal()) != len(th.written) || len(resp.GetTurns()) != len(th.written) {
		return fmt.Errorf("total %d with %d turns, want %d", resp.GetTotal(), len(resp.GetTurns()), len(th.written))
	}
	for n, ts := range resp.GetTurns() {
		if err := th.checkTurn(n, ts); err != nil {
			return err
		}
	}
	return nil
}

// checkTurns checks a Turns answer.
func (th thread) checkTurns(resp *historydv1.TurnsResponse) error {
	if int(resp.GetTotal()) != len(th.written) || len(resp.GetTurns()) != len(th.written) {
		return fmt.Errorf("total %d with %d turns, want %d", resp.GetTotal(), len(resp.GetTurns()), len(th.written))
	}
	for i, ti := range resp.GetTurns() {
		if int(ti.GetNumber()) != i+1 || !ti.GetRetained() || ti.GetCheckpointId() != th.written[i].End || ti.GetQuestion() != th.turns[i].Question {
			return fmt.Errorf("turn %d: %v; want retained, checkpoint %q, question %q", i+1, ti, th.written[i].End, th.turns[i].Question)
		}
	}
	return nil
}

// generated describes a thread written by fillThread in a few SQL
// statements rather than checkpoint by checkpoint: Turns turns of PerTurn
// checkpoints each (PerTurn ≥ 2). A turn's first checkpoint adds the
// question to the messages, its last the answer; the ones between leave the
// messages alone and so share their blob, as LangGraph's super-steps that
// write other channels do. From its second checkpoint on, turn t's tool_state
// holds "counter" (value t) and "big" (the integers 1 to BigItems). AI answers carry
// Filler bytes of text, to make the messages blobs as large as wanted.
type generated struct {
	ID               string
	Turns, PerTurn   int
	BigItems, Filler int
}

// endID is the id of the checkpoint turn n (1-based) ends on.
func (g generated) endID(n int) string { return checkpointID((n-1)*g.PerTurn + g.PerTurn - 1) }

func checkpointID(k int) string { return fmt.Sprintf("1f0c-%09d", k) }

func (g generated) question(n int) string { return fmt.Sprintf("question %d", n) }

// fillThread writes g into the quoted schema.
func fillThread(t *testing.T, pool *pgxpool.Pool, schema string, g generated) {
	t.Helper()
	if g.PerTurn < 2 || g.Turns < 1 {
		t.Fatalf("generated thread needs at least one turn of two checkpoints: %+v", g)
	}
	ctx := context.Background()
	// A version is a zero-padded number, so versions order as numbers.
	stmts := []struct {
		what string
		sql  string
		args []any
	}{
		// Message i (from 1) is the question (i+1)/2 when odd, the answer
		// i/2 when even. Version v's blob lists messages 1..v: the first
		// bytes of one text listing them all, so that writing the blobs
		// costs copying them rather than building each anew.
		{"messages blobs", `
WITH msgs AS (
	SELECT i, CASE WHEN i % 2 = 1
		THEN '{"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "HumanMessage"], "kwargs": {"content": "question ' || (i + 1) / 2 || '", "id": "h' || i || '"}}'
		ELSE '{"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "AIMessage"], "kwargs": {"content": "answer ' || i / 2 || repeat('.', $3::int) || '", "id": "a' || i || '"}}'
		END AS m
	FROM generate_series(1, 2 * $2::int) AS i),
prefix AS (SELECT i, sum(length(m) + 1) OVER (ORDER BY i) - 1 AS chars FROM msgs),
whole AS (SELECT string_agg(m, ',' ORDER BY i) AS text FROM msgs)
INSERT INTO ` + schema + `.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
SELECT $1, '', 'messages', lpad(prefix.i::text, 32, '0'), 'json', convert_to('[' || left(whole.text, prefix.chars::int) || ']', 'UTF8')
FROM prefix, whole`, []any{g.ID, g.Turns, g.Filler}},
		{"tool_state blobs", `
INSERT INTO ` + schema + `.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
SELECT $1, '', 'tool_state', lpad(n::text, 32, '0'), 'json', convert_to(jsonb_build_object(
	'counter', jsonb_build_object('value', n, 'tool', 'count', 'seq', 2 * n - 1, 'turn', n, 'turns_written', n),
	'big', jsonb_build_object('value', big.items, 'tool', 'load', 'seq', 2 * n, 'turn', n, 'turns_written', n))::text, 'UTF8')
FROM generate_series(1, $2::int) AS n,
	(SELECT coalesce(jsonb_agg(i ORDER BY i), '[]'::jsonb) AS items FROM generate_series(1, $3::int) AS i) AS big`, []any{g.ID, g.Turns, g.BigItems}},
		{"checkpoints", `
INSERT INTO ` + schema + `.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint)
SELECT $1, '', '1f0c-' || lpad(k::text, 9, '0'), CASE WHEN k > 0 THEN '1f0c-' || lpad((k - 1)::text, 9, '0') END, jsonb_build_object(
	'v', 4,
	'id', '1f0c-' || lpad(k::text, 9, '0'),
	'ts', to_char(timestamp '2026-11-01 12:00:00' + k * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
	'channel_values', '{}'::jsonb,
	'channel_versions', jsonb_build_object('messages', lpad((CASE WHEN s = $3::int - 1 THEN 2 * n ELSE 2 * n - 1 END)::text, 32, '0'))
		|| CASE WHEN s >= 1 THEN jsonb_build_object('tool_state', lpad(n::text, 32, '0'))
		        WHEN n > 1 THEN jsonb_build_object('tool_state', lpad((n - 1)::text, 32, '0'))
		        ELSE '{}'::jsonb END,
	'versions_seen', '{}'::jsonb)
FROM (SELECT k, k / $3::int + 1 AS n, k % $3::int AS s FROM generate_series(0, $2::int * $3::int - 1) AS k) AS steps`, []any{g.ID, g.Turns, g.PerTurn}},
	}
	start := time.Now()
	for _, s := range stmts {
		if _, err := pool.Exec(ctx, s.sql, s.args...); err != nil {
			t.Fatalf("write generated thread's %s: %v", s.what, err)
		}
	}
	t.Logf("wrote thread %q: %d turns of %d checkpoints, in %v", g.ID, g.Turns, g.PerTurn, time.Since(start).Round(time.Millisecond))
}

// checkTurn compares a turn of a generated thread as served, with only
// keys when keys are given.
func (g generated) checkTurn(n int32, ts *historydv1.TurnState, keys ...string) error {
	if ts.GetTurn() != n || ts.GetCheckpointId() != g.endID(int(n)) || ts.GetQuestion() != g.question(int(n)) {
		return fmt.Errorf("turn %d: got turn %d, checkpoint %q, question %q; want checkpoint %q, question %q",
			n, ts.GetTurn(), ts.GetCheckpointId(), ts.GetQuestion(), g.endID(int(n)), g.question(int(n)))
	}
	want := []string{"big", "counter"}
	if len(keys) > 0 {
		want = keys
	}
	if len(ts.GetEntries()) != len(want) {
		return fmt.Errorf("turn %d: %d keys, want %v", n, len(ts.GetEntries()), want)
	}
	for _, k := range want {
		e := ts.GetEntries()[k]
		if e == nil || e.GetTurn() != n {
			return fmt.Errorf("turn %d: key %q = %v, want one written in turn %d", n, k, e, n)
		}
		switch k {
		case "counter":
			if v := e.GetValue().GetNumberValue(); v != float64(n) {
				return fmt.Errorf("turn %d: counter %v, want %d", n, v, n)
			}
		case "big":
			l := e.GetValue().GetListValue().GetValues()
			if len(l) != g.BigItems || len(l) > 0 && l[len(l)-1].GetNumberValue() != float64(g.BigItems) {
				return fmt.Errorf("turn %d: big has %d items, want 1 to %d", n, len(l), g.BigItems)
			}
		}
	}
	return nil
}

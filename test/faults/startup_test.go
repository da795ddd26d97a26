package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
	"github.com/historyd/historyd/server"
)

// TestStoreDownAtStart starts historyd against a port where no PostgreSQL
// listens yet. historyd must keep running, report NOT_SERVING and answer
// Unavailable; once PostgreSQL is up with a thread in it, historyd must turn
// SERVING and answer correctly without being restarted.
func TestStoreDownAtStart(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	pgPort := testbin.FreePort(t)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/historyd_test?sslmode=disable&connect_timeout=2", pgPort)

	h := testbin.Start(t, bin, "--dsn", dsn)
	conn := dial(t, h.Addr)
	client := historydv1.NewThreadHistoryClient(conn)

	// The server-wide status starts out SERVING in grpc's health server
	// until the first probe; historyd probes before it accepts calls.
	for _, svc := range []string{"", serviceName} {
		if st, err := health(conn, svc); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("health of %q with the store down = %v, %v; want NOT_SERVING", svc, st, err)
		}
	}
	calls := map[string]func(ctx context.Context) error{
		"Snapshots": func(ctx context.Context) error {
			_, err := client.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "rivers"})
			return err
		},
		"Snapshot": func(ctx context.Context) error {
			_, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: "rivers", Turn: 1})
			return err
		},
		"Turns": func(ctx context.Context) error {
			_, err := client.Turns(ctx, &historydv1.TurnsRequest{ThreadId: "rivers"})
			return err
		},
	}
	// Twice, across a health probe, to see the process neither exits nor
	// changes its answer while the store stays down.
	for round := range 2 {
		for name, call := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := call(ctx)
			cancel()
			if status.Code(err) != codes.Unavailable {
				t.Errorf("round %d: %s with the store down = %v, want Unavailable", round, name, err)
			}
		}
		if round == 0 {
			time.Sleep(2500 * time.Millisecond) // one health interval (2s) and then some
		}
		h.RequireRunning(t)
	}
	if st, err := health(conn, ""); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health with the store still down = %v, %v; want NOT_SERVING", st, err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Now the database comes up, on the port historyd was given, and a
	// LangGraph checkpointer writes its tables and a thread.
	c := startCluster(t, pgPort)
	pool := connect(t, c.DSN)
	checkpointTables(t, pool, pgx.Identifier{"public"}.Sanitize())
	th := writeThread(t, pool, pgx.Identifier{"public"}.Sanitize(), "rivers", rivers)
	written := time.Now()

	serving := waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	t.Logf("SERVING %v after the tables and the thread were written (health probes every 2s)", serving.Sub(written).Round(time.Millisecond))
	h.RequireRunning(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, err := client.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: th.id})
	if err != nil {
		t.Fatalf("Snapshots after the store came up: %v", err)
	}
	if err := th.checkSnapshots(all); err != nil {
		t.Errorf("Snapshots after the store came up: %v", err)
	}
	for n := int32(1); n <= int32(len(th.turns)); n++ {
		one, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: n})
		if err != nil {
			t.Fatalf("Snapshot turn %d: %v", n, err)
		}
		if err := th.checkSnapshot(n, one); err != nil {
			t.Error(err)
		}
	}
	turns, err := client.Turns(ctx, &historydv1.TurnsRequest{ThreadId: th.id})
	if err != nil {
		t.Fatalf("Turns: %v", err)
	}
	if err := th.checkTurns(turns); err != nil {
		t.Errorf("Turns: %v", err)
	}
}

// silentStore listens on a loopback port, accepts connections and never
// answers: a database that is hung rather than down. It returns the port.
func silentStore(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

// TestStoreSilentAtStart starts historyd against a database that accepts
// connections and never answers. From the moment historyd accepts calls its
// health must say NOT_SERVING, for the server and for ThreadHistory, and
// calls must fail with Unavailable once the DSN's connect_timeout passes,
// with the process staying up.
func TestStoreSilentAtStart(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/historyd_test?sslmode=disable&connect_timeout=1", silentStore(t))
	h := testbin.Start(t, bin, "--dsn", dsn)
	conn := dial(t, h.Addr)
	// historyd's first health probe of a hung store lasts a whole probe
	// interval (2s); look during it and after it.
	for _, after := range []time.Duration{0, 3 * time.Second} {
		time.Sleep(after)
		for _, svc := range []string{"", serviceName} {
			if st, err := health(conn, svc); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Errorf("%v after historyd began listening: health of %q with the store hung = %v, %v; want NOT_SERVING", after, svc, st, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := historydv1.NewThreadHistoryClient(conn).Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: "rivers", Turn: 1})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Snapshot with the store hung = %v, want Unavailable", err)
	}
	h.RequireRunning(t)
}

// TestUnhealableAtStart starts historyd against databases that refuse it
// in ways waiting cannot fix: an unknown database, an unknown role, a
// wrong password, a role without the SELECT grant, and through PgBouncer
// an unknown database, an unknown user and a startup parameter it refuses.
// Each must stop historyd at once with a non-zero exit and one line naming
// the DSN, its password masked, and what to fix.
func TestUnhealableAtStart(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	shared := sharedDSN(t)
	pool := connect(t, shared)
	u, err := url.Parse(shared)
	if err != nil {
		t.Fatal(err)
	}
	with := func(user, password, db, extra string) string {
		v := *u
		if password != "" {
			v.User = url.UserPassword(user, password)
		} else {
			v.User = url.User(user)
		}
		v.Path = "/" + db
		if extra != "" {
			v.RawQuery += "&" + extra
		}
		return v.String()
	}
	sharedDB := strings.TrimPrefix(u.Path, "/")

	// A role that may log in and use the schema, but not read its tables.
	schema := newSchema(t, pool, "nogrant")
	role := schema + "_ro"
	r := pgx.Identifier{role}.Sanitize()
	for _, stmt := range []string{"CREATE ROLE " + r + " LOGIN", "GRANT USAGE ON SCHEMA " + pgx.Identifier{schema}.Sanitize() + " TO " + r} {
		if _, err := pool.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP ROLE "+r) })

	// A wrong password needs a server that asks for one: a cluster of the
	// test's own whose pg_hba.conf asks this role for it.
	c := startCluster(t, 0)
	own := connect(t, c.DSN)
	if _, err := own.Exec(context.Background(), "CREATE ROLE historyd_pw LOGIN PASSWORD 'the-right-one'"); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(c.env("HISTORYD_TEST_PGDIR"), "data", "pg_hba.conf")
	rules, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("host all historyd_pw 127.0.0.1/32 scram-sha-256\n"), rules...), 0o600); err != nil {
		t.Fatal(err)
	}
	execSQL(t, own, "SELECT pg_reload_conf()")
	ownURL, err := url.Parse(c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	ownURL.User = url.UserPassword("historyd_pw", "not-the-password")
	wrongPassword := ownURL.String()

	pooled := func(user, db, extra string) string {
		t.Helper()
		p, err := url.Parse(os.Getenv("HISTORYD_TEST_POOLER_TX_DSN"))
		if err != nil || p.Host == "" {
			t.Fatalf("HISTORYD_TEST_POOLER_TX_DSN is not set: run `make test` (scripts/test.sh starts PgBouncer): %v", err)
		}
		p.User, p.Path = url.User(user), "/"+db
		if extra != "" {
			p.RawQuery += "&" + extra
		}
		return p.String()
	}

	for _, tt := range []struct {
		name, dsn string
		args      []string
		want      []string // in the line, besides the DSN
	}{
		{"unknown database", with("postgres", "s3cr3t-pw", "no_such_database", ""), nil,
			[]string{`database "no_such_database" does not exist`, "point --dsn at the database"}},
		{"unknown role", with("no_such_role", "", sharedDB, ""), nil,
			[]string{`role "no_such_role" does not exist`, "check the user in --dsn"}},
		{"wrong password", wrongPassword, nil,
			[]string{`password authentication failed for user "historyd_pw"`, "check the password in --dsn"}},
		{"no SELECT grant", with(role, "", sharedDB, ""), []string{"--schema", schema},
			[]string{fmt.Sprintf("role %q may not SELECT", role), "GRANT SELECT ON"}},
		{"PgBouncer: unknown database", pooled("postgres", "no_such_alias", ""), []string{"--pooler", "transaction"},
			[]string{"no such database: no_such_alias", "point --dsn at the database"}},
		{"PgBouncer: unknown user", pooled("no_such_role", sharedDB+"_tx", ""), []string{"--pooler", "transaction"},
			[]string{"authentication failed", "check the user in --dsn"}},
		{"PgBouncer: refused startup parameter", pooled("postgres", sharedDB+"_tx", "search_path=public"), []string{"--pooler", "transaction"},
			[]string{"unsupported startup parameter: search_path", "ignore_startup_parameters"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--dsn", tt.dsn}, tt.args...)...)
			cmd.Env = cleanEnv()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() == 0 {
				t.Fatalf("historyd ran on (%v) with %s:\n%s", err, tt.dsn, out)
			}
			line := strings.TrimSuffix(string(out), "\n")
			t.Logf("exit %d after %v: %s", exitErr.ExitCode(), took.Round(time.Millisecond), line)
			if strings.ContainsAny(line, "\n\r\t") {
				t.Errorf("output is not one line:\n%s", out)
			}
			masked := server.RedactDSN(tt.dsn)
			if !strings.Contains(line, "store "+masked+": ") {
				t.Errorf("output does not name the DSN as %q", masked)
			}
			for _, secret := range []string{"s3cr3t-pw", "not-the-password"} {
				if strings.Contains(line, secret) {
					t.Errorf("output shows the password %q", secret)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(line, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if took > 10*time.Second {
				t.Errorf("took %v to give up; want it at once", took)
			}
		})
	}
}

// cleanEnv is the test's environment without HISTORYD_* variables, so that
// only what a test passes configures historyd.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HISTORYD_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestStoreStartingUpAtStart starts historyd against a PostgreSQL that
// answers every connection with SQLSTATE 57P03, "not accepting
// connections" (a standby replaying with hot_standby off, as a server
// still starting up does): historyd must serve NOT_SERVING and Unavailable
// and keep running, then, once the server accepts connections (the
// standby promoted), turn SERVING and answer, without a restart.
func TestStoreStartingUpAtStart(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	c := startCluster(t, 0)
	primary := connect(t, c.DSN)
	public := pgx.Identifier{"public"}.Sanitize()
	checkpointTables(t, primary, public)
	th := writeThread(t, primary, public, "starting-up", rivers)
	c.run("standby", "start", "--no-hot-standby")
	dsn := c.env("HISTORYD_TEST_STANDBY_DSN")

	h := testbin.Start(t, bin, "--dsn", dsn)
	conn := dial(t, h.Addr)
	client := historydv1.NewThreadHistoryClient(conn)
	for round := range 2 {
		if st, err := health(conn, ""); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("round %d: health with the server not accepting connections = %v, %v; want NOT_SERVING", round, st, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: 1})
		cancel()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("round %d: Snapshot = %v, want Unavailable", round, err)
		}
		if round == 0 {
			time.Sleep(2500 * time.Millisecond) // one health interval and then some
		}
		h.RequireRunning(t)
	}
	if !strings.Contains(h.Logs.String(), "57P03") {
		t.Errorf("historyd's log does not show SQLSTATE 57P03:\n%s", h.Logs)
	}
	if t.Failed() {
		t.FailNow()
	}

	c.run("standby", "promote")
	promoted := time.Now()
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 15*time.Second)
	t.Logf("SERVING %v after the promotion", time.Since(promoted).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, err := client.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: th.id})
	if err != nil {
		t.Fatalf("Snapshots once the server accepts connections: %v", err)
	}
	if err := th.checkSnapshots(all); err != nil {
		t.Error(err)
	}
	h.RequireRunning(t)
}

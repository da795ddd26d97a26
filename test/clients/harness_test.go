package clients_test

import (
	"bytes"
	"context"
	"database/sql"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// repoRoot is the module's root directory (this package is test/clients).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from %s: %v", root, err)
	}
	return root
}

// need returns the environment variable's value, failing the test with
// why it is needed and how to get it when it is not set.
func need(t testing.TB, name, why string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: %s. `make test` sets it (scripts/test.sh); see test/clients/README.md to run this by hand", name, why)
	}
	return v
}

// buildHistoryd builds ./cmd/historyd from this tree into a temporary
// directory, so the clients are tested against the code as it is now.
func buildHistoryd(t testing.TB) string {
	t.Helper()
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	bin := filepath.Join(t.TempDir(), "historyd")
	cmd := exec.Command(goCmd, "build", "-o", bin, "./cmd/historyd")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/historyd: %v\n%s", err, out)
	}
	return bin
}

// writeFixture writes the demo file with `historyd demo` and adds the
// threads of fixtureThreads to it, returning its path. They are written as
// LangChain.js's SqliteSaver writes (JSON rows) into the file the demo
// wrote as Python's does (msgpack rows): historyd reads each row by its own
// type, so both live in one file.
func writeFixture(t testing.TB, bin string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clients.db")
	if out, err := exec.Command(bin, "demo", "--out", path).CombinedOutput(); err != nil {
		t.Fatalf("historyd demo --out %s: %v\n%s", path, err, out)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	execSQL := func(ctx context.Context, query string, args ...any) error {
		_, err := db.ExecContext(ctx, query, args...)
		return err
	}
	w := storetest.NewSaverWriter(t, saver.NewWriter(saver.SQLiteJS, execSQL, ""))
	for id, turns := range fixtureThreads() {
		b := storetest.NewBuilderWithPrefix(w, backend.Ref{ThreadID: id}, "1f21")
		for _, turn := range turns {
			b.Turn(turn)
		}
	}
	scriptedThreads(w)
	return path
}

// startHistoryd runs `historyd serve --listen 127.0.0.1:PORT args...`, waits
// until its health check answers SERVING and returns its address. The
// process is stopped at the end of the test, and its log shown when the
// test failed.
func startHistoryd(t testing.TB, bin string, args ...string) string {
	t.Helper()
	return startHistorydWith(t, insecure.NewCredentials(), bin, args...)
}

// startHistorydWith is startHistoryd for a server the health check reaches
// with creds (TLS, for one started with --tls-cert).
func startHistorydWith(t testing.TB, creds credentials.TransportCredentials, bin string, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("no free loopback port: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr}, args...)...)
	// Only what the test passes configures it: no HISTORYD_* from outside.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HISTORYD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("historyd log:\n%s", logs.String())
		}
	})

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return addr
		}
		select {
		case <-exited:
			t.Fatalf("historyd exited before serving:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("historyd not SERVING on %s after 30s (%v):\n%s", addr, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run runs a child process in dir with extra environment, failing the test
// with its output when it fails. It returns what the child wrote to stdout.
func run(t testing.TB, dir string, env []string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v after %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), err, time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
	}
	t.Logf("%s: %v", strings.Join(argv, " "), time.Since(start).Round(time.Millisecond))
	if s := stderr.String(); s != "" && testing.Verbose() {
		t.Logf("stderr:\n%s", s)
	}
	return stdout.String()
}

// skipIfShort skips in -short mode: these tests build and run historyd and
// the Python and Node clients.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s runs historyd with the Python and TypeScript clients (-short)", t.Name())
	}
}

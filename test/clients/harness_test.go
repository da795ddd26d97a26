package clients_test

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/historyd/historyd/internal/testbin"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// TestMain builds historyd once for the package's tests (testbin.Main).
func TestMain(m *testing.M) { testbin.Main(m) }

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

// startHistoryd runs `historyd serve args...` on a port of its own, waits
// until its health check answers SERVING and returns its address. The
// process is stopped (SIGINT) at the end of the test, and its log shown
// when the test failed.
func startHistoryd(t testing.TB, bin string, args ...string) string {
	t.Helper()
	return startHistorydWith(t, insecure.NewCredentials(), bin, args...)
}

// startHistorydWith is startHistoryd for a server the health check reaches
// with creds (TLS, for one started with --tls-cert).
func startHistorydWith(t testing.TB, creds credentials.TransportCredentials, bin string, args ...string) string {
	t.Helper()
	return testbin.StartWith(t, testbin.Config{Serving: creds, Graceful: true}, bin, args...).Addr
}

// run runs a child process in dir with extra environment, failing the test
// with its output when it fails. It returns what the child wrote to stdout.
// The child's temporary files (TMPDIR: the TLS keys and expected.json the
// TypeScript client's tests write, Python's tempfile) go to the test's
// temporary directory, removed when the test ends.
func run(t testing.TB, dir string, env []string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "TMPDIR="+t.TempDir()), env...)
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

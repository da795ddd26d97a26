// Package testbin builds the historyd binary from the module's tree and
// runs it for tests that need the real process: `historyd serve` on a
// loopback port the harness chose, its output captured, and the process
// stopped when the test ends.
//
// A package building the binary calls Main from its TestMain, so that the
// binary is built once per test binary and removed when the tests end:
//
//	func TestMain(m *testing.M) { testbin.Main(m) }
//
//	bin := testbin.Build(t)
//	h := testbin.Start(t, bin, "--dsn", dsn)
//	conn := dial(h.Addr)
package testbin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/historyd/historyd/internal/syncbuf"
)

// module is the module path RepoRoot looks for in go.mod.
const module = "github.com/historyd/historyd"

// RepoRoot is the module's root directory: the nearest directory above the
// working directory (a test's package directory) whose go.mod is this
// module's.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("module root: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if mod, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if line, _, _ := bytes.Cut(mod, []byte("\n")); strings.TrimSpace(string(line)) == "module "+module {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of %s at or above %s", module, dir)
		}
	}
}

// goTool is the go command: $GO when set, else go from PATH.
func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// The one build a test binary shares: built by the first Build, removed by
// Main once the tests have run.
var built struct {
	sync.Mutex
	main bool   // Main runs the tests
	dir  string // holds the binary
	bin  string
	err  error
}

// Main runs the package's tests (m.Run) and then removes the binary Build
// built, and exits with the tests' code. Call it from TestMain.
func Main(m *testing.M) {
	built.Lock()
	built.main = true
	built.Unlock()
	code := m.Run()
	built.Lock()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	built.Unlock()
	os.Exit(code)
}

// Build builds ./cmd/historyd from the module's tree, so that tests run
// the code as it is now, not some older bin/. The first call in a test
// binary builds it; later calls return the same binary, or the same
// failure. The package's TestMain must call Main, which removes it.
func Build(t testing.TB) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if !built.main {
		t.Fatal("testbin.Build: the package's TestMain must call testbin.Main, which removes the binary after the tests")
	}
	if built.bin == "" && built.err == nil {
		built.bin, built.err = build()
	}
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func build() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	if built.dir, err = os.MkdirTemp("", "historyd-testbin-"); err != nil {
		return "", fmt.Errorf("directory for the historyd binary: %w", err)
	}
	bin := filepath.Join(built.dir, "historyd")
	cmd := exec.Command(goTool(), "build", "-o", bin, "./cmd/historyd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/historyd: %w\n%s", err, out)
	}
	return bin, nil
}

// BuildWith builds ./cmd/historyd with extra go build flags (-ldflags, …)
// into the test's temporary directory: a build of the test's own, for
// tests of how the binary is built.
func BuildWith(t testing.TB, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "historyd")
	cmd := exec.Command(goTool(), append(append([]string{"build", "-o", bin}, flags...), "./cmd/historyd")...)
	cmd.Dir = RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s ./cmd/historyd: %v\n%s", strings.Join(flags, " "), err, out)
	}
	return bin
}

// FreePort returns a loopback TCP port nothing listens on right now, as
// the kernel picks one for a listener on 127.0.0.1:0, for a child process
// to listen on.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("no free loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreeAddr is FreePort as a 127.0.0.1:PORT address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}

// Config tunes Start.
type Config struct {
	// Env is added to the process's environment (KEY=value). Nothing
	// from the test's own environment configures it: HISTORYD_* and
	// GOMEMLIMIT are left out of what it inherits.
	Env []string
	// Serving, when not nil, makes Start wait until the health check,
	// made with these credentials, answers SERVING; otherwise Start waits
	// only until the port accepts connections.
	Serving credentials.TransportCredentials
	// Graceful stops the process at the test's end with SIGINT, killing
	// it only when it has not exited 10s later; otherwise it is killed.
	Graceful bool
}

// Process is one running `historyd serve`.
type Process struct {
	// Cmd is the process's command.
	Cmd *exec.Cmd
	// Addr is the address it listens on, 127.0.0.1:PORT.
	Addr string
	// Logs is what it wrote to stdout and stderr.
	Logs *syncbuf.Buffer

	exited chan struct{} // closed once the process has exited
	err    error         // what Wait returned; read only after exited
	exitAt time.Time     // when Wait returned
}

// Start runs `historyd serve --listen 127.0.0.1:PORT args...` on a free
// port and waits until it accepts connections (historyd pings its store
// before it listens). The process is killed at the end of the test if still
// running, and its log is shown when the test failed.
func Start(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	return StartWith(t, Config{}, bin, args...)
}

// StartWith is Start as c configures it.
func StartWith(t testing.TB, c Config, bin string, args ...string) *Process {
	t.Helper()
	addr := FreeAddr(t)
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HISTORYD_") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, c.Env...)
	p := &Process{Cmd: cmd, Addr: addr, Logs: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Logs, p.Logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		p.err = cmd.Wait()
		p.exitAt = time.Now()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop(c.Graceful)
		if t.Failed() {
			t.Logf("historyd log:\n%s", p.Logs)
		}
	})
	if c.Serving != nil {
		p.waitServing(t, c.Serving)
	} else {
		p.waitListening(t)
	}
	return p
}

// stop ends the process if it still runs.
func (p *Process) stop(graceful bool) {
	if p.HasExited() {
		return
	}
	if graceful {
		_ = p.Cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
			return
		case <-time.After(10 * time.Second):
		}
	}
	_ = p.Cmd.Process.Kill()
	<-p.exited
}

func (p *Process) waitListening(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if p.HasExited() {
			t.Fatalf("historyd exited before listening on %s: %v\n%s", p.Addr, p.err, p.Logs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("historyd not listening on %s after 20s: %v\n%s", p.Addr, err, p.Logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *Process) waitServing(t testing.TB, creds credentials.TransportCredentials) {
	t.Helper()
	conn, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(creds))
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
			return
		}
		if p.HasExited() {
			t.Fatalf("historyd exited before serving:\n%s", p.Logs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("historyd not SERVING on %s after 30s (%v):\n%s", p.Addr, err, p.Logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// HasExited reports whether the process has exited.
func (p *Process) HasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// ExitAt is when the process exited; call it only once Exited is closed.
func (p *Process) ExitAt() time.Time { return p.exitAt }

// RequireRunning fails the test when the process has exited.
func (p *Process) RequireRunning(t testing.TB) {
	t.Helper()
	if p.HasExited() {
		t.Fatalf("historyd exited: %v\n%s", p.err, p.Logs)
	}
}

// Signal sends sig to the process and returns when it was sent.
func (p *Process) Signal(t testing.TB, sig syscall.Signal) time.Time {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal historyd: %v", err)
	}
	return time.Now()
}

// WaitExit waits up to timeout for the process to exit and returns its
// exit code.
func (p *Process) WaitExit(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("historyd still running %v after it was told to stop\n%s", timeout, p.Logs)
	}
	var exitErr *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &exitErr):
		return exitErr.ExitCode()
	}
	t.Fatalf("waiting for historyd: %v", p.err)
	return -1
}

// PeakRSS reads the process's peak resident set size (VmHWM, Linux), in
// bytes.
func (p *Process) PeakRSS(t testing.TB) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read historyd's memory use: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM line %q: %v", s.Text(), err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", p.Cmd.Process.Pid)
	return 0
}

package testbin

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// TestRepoRoot finds the module's root from a package two levels down.
func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "internal", "testbin", "testbin.go")); err != nil {
		t.Fatalf("RepoRoot = %s, which does not hold this package: %v", root, err)
	}
}

// TestFreePort returns a port a listener can take.
func TestFreePort(t *testing.T) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t))))
	if err != nil {
		t.Fatalf("listen on the free port: %v", err)
	}
	l.Close()
}

// TestStart serves the demo's file with the binary Build built, and stops
// it at the test's end.
func TestStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the historyd binary (-short)")
	}
	bin := Build(t)
	if again := Build(t); again != bin {
		t.Fatalf("a second Build gave %s, want the first's %s", again, bin)
	}
	db := filepath.Join(t.TempDir(), "demo.db")
	if out, err := exec.Command(bin, "demo", "--out", db).CombinedOutput(); err != nil {
		t.Fatalf("historyd demo: %v\n%s", err, out)
	}
	p := Start(t, bin, "--dsn", db)
	p.RequireRunning(t)
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatalf("dial %s: %v", p.Addr, err)
	}
	c.Close()
}

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/store/storetest"
)

// runDemoCLI is runCLI for demo, whose report goes to demoOutput.
func runDemoCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var report strings.Builder
	old := demoOutput
	demoOutput = &report
	defer func() { demoOutput = old }()
	code, stdout, stderr := runCLI(t, append([]string{"demo"}, args...)...)
	return code, stdout + report.String(), stderr
}

// Combinations demo cannot honour are refused, one line each, before
// anything is written.
func TestDemoRefusesIgnoredFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "demo.db")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", out, "--dsn", "postgres://localhost/app"}, "--out and --dsn name two places to write"},
		{[]string{"--out", out, "--schema", "demo"}, "--schema applies to --dsn postgres://… only"},
		{[]string{"--dsn", "sqlite://" + out, "--schema", "demo"}, "--schema applies to --dsn postgres://… only"},
		{[]string{"--out", out, "--force"}, "--force applies to --dsn postgres://… only"},
		{[]string{"--dsn", "mysql://localhost/app"}, "--dsn mysql://localhost/app: want postgres://…"},
	} {
		code, stdout, stderr := runDemoCLI(t, tt.args...)
		if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) {
			t.Errorf("historyd demo %v: exit %d, stdout %q, stderr %q; want exit 1 and one line saying %q", tt.args, code, stdout, stderr, tt.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused demo wrote its file")
	}
	// An SQLite DSN is the same as --out.
	if code, stdout, stderr := runDemoCLI(t, "--dsn", "sqlite://"+out); code != 0 || !strings.Contains(stdout, "historyd serve --dsn "+out) {
		t.Errorf("historyd demo --dsn sqlite://…: exit %d, %q %q", code, stdout, stderr)
	}
}

// historyd demo --dsn postgres://… writes the threads once, refuses to
// write them again, and replaces them with --force.
func TestDemoPostgres(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	schema := fmt.Sprintf("cli_demo_%d", rand.Uint64())
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	args := []string{"--dsn", dsn, "--schema", schema}
	code, stdout, stderr := runDemoCLI(t, args...)
	if code != 0 || !strings.Contains(stdout, "PostgresSaver (Python) checkpoints, 2 threads") || !strings.Contains(stdout, "--schema "+schema) {
		t.Fatalf("first demo: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = runDemoCLI(t, args...)
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "already exist") || !strings.Contains(stderr, "--force") {
		t.Errorf("second demo: exit %d, stderr %q; want one line saying the threads exist and --force replaces them", code, stderr)
	}
	if code, _, stderr := runDemoCLI(t, append(args, "--force")...); code != 0 {
		t.Errorf("demo --force: exit %d, stderr %q", code, stderr)
	}
}

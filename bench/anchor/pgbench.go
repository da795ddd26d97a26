// Package anchor measures what the machine itself can do, so that
// historyd's numbers read as a fraction of a ceiling: PostgreSQL's own
// select-only rate (pgbench -S) on the same cluster.
package anchor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Database is the database the pgbench tables live in, next to the
// checkpoint database, so they never mix with LangGraph's tables.
const Database = "historyd_bench_pgbench"

// FindPGBench returns the pgbench binary: on PATH, or the newest under
// /usr/lib/postgresql/*/bin.
func FindPGBench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(matches) == 0 {
		return "", errors.New("pgbench not found on PATH or under /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql-contrib or postgresql)")
	}
	sort.Slice(matches, func(i, j int) bool { return version(matches[i]) < version(matches[j]) })
	return matches[len(matches)-1], nil
}

func version(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// PGBenchResult is one select-only run.
type PGBenchResult struct {
	Clients, Threads int
	Seconds          int
	TPS              float64 // without initial connection time
	Load1            float64
	Command          string
}

// PGBench runs `pgbench -S` (select-only: one primary-key SELECT on
// pgbench_accounts per transaction) against the cluster dsn points at,
// after creating and initializing (scale 1) its own database there when it
// does not exist yet.
func PGBench(ctx context.Context, bin, dsn string, clients, threads int, dur time.Duration, loadAvg func() float64) (PGBenchResult, error) {
	target, err := initialize(ctx, bin, dsn)
	if err != nil {
		return PGBenchResult{}, err
	}
	secs := max(1, int(dur.Round(time.Second)/time.Second))
	args := []string{"-S", "-n", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads), "-T", strconv.Itoa(secs), target}
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return PGBenchResult{}, fmt.Errorf("pgbench -S: %w\n%s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindSubmatch(out)
	if m == nil {
		return PGBenchResult{}, fmt.Errorf("pgbench -S: no tps line in output:\n%s", out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	return PGBenchResult{
		Clients: clients, Threads: threads, Seconds: secs, TPS: tps, Load1: loadAvg(),
		Command: "pgbench " + strings.Join(args[:len(args)-1], " ") + " <" + Database + ">",
	}, nil
}

// initialize creates the pgbench database and tables when missing and
// returns a DSN for it.
func initialize(ctx context.Context, bin, dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("pgbench anchor needs a postgres:// URL DSN")
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, Database).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{Database}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s for pgbench: %w", Database, err)
		}
	}
	u.Path = "/" + Database
	target := u.String()
	bc, err := pgx.Connect(ctx, target)
	if err != nil {
		return "", err
	}
	defer bc.Close(context.Background())
	var ready bool
	if err := bc.QueryRow(ctx, `SELECT to_regclass('pgbench_accounts') IS NOT NULL`).Scan(&ready); err != nil {
		return "", err
	}
	if !ready {
		cmd := exec.CommandContext(ctx, bin, "-i", "-q", "-s", "1", target)
		cmd.Env = os.Environ()
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("pgbench -i: %w\n%s", err, out)
		}
	}
	return target, nil
}

// Command bench is historyd's benchmark harness.
//
//	bench gen     --dsn DSN [--python PY] --turns T --checkpoints C --keys K --state-bytes S [--thread ID]
//	bench gen     --deepagents --dsn DSN [--python PY] --turns T --files F --file-bytes B
//	              [--snapshot-frequency N] [--state-keys K] [--thread ID]
//	bench run     --dsn DSN [--python PY] [--full] [--concurrency N] [--work DIR] [--profile] [--out FILE] [--pooler-dsn DSN]
//	bench profile --dsn DSN --thread ID [--op Snapshot] [--turn N] [--concurrency N]
//	              [--seconds S | --requests N] [--cold] [--dir DIR] [--name NAME]
//
// gen writes one synthetic thread in Python PostgresSaver's format (with
// --deepagents, one shaped like a deepagents agent's, messages and files
// as DeltaChannels); run is
// the whole suite (see docs/benchmarks.md), which prints one table; profile
// drives a profiling build of historyd (see bench/prof) against one thread
// and writes CPU and allocation profiles with their pprof reports.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/bench/gen"
	"github.com/historyd/historyd/bench/load"
	"github.com/historyd/historyd/bench/prof"
	"github.com/historyd/historyd/bench/py"
	"github.com/historyd/historyd/bench/run"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = genCmd(ctx, os.Args[2:])
	case "run":
		err = runCmd(ctx, os.Args[2:])
	case "profile":
		err = profileCmd(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: bench gen|run|profile [flags]; bench <command> -h for flags")
	os.Exit(2)
}

func genCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench gen", flag.ExitOnError)
	dsn := fs.String("dsn", os.Getenv("HISTORYD_BENCH_DSN"), "PostgreSQL DSN (env HISTORYD_BENCH_DSN)")
	python := fs.String("python", "", "venv python, used to create the tables with PostgresSaver.setup() when they are missing")
	thread := fs.String("thread", "", "thread id (default: bench-T…-C…-K…-S…)")
	var p gen.Params
	fs.IntVar(&p.Turns, "turns", 10, "turns T")
	fs.IntVar(&p.CheckpointsPerTurn, "checkpoints", 5, "checkpoints per turn C (odd, ≥ 5)")
	fs.IntVar(&p.Keys, "keys", 8, "tool_state keys K")
	fs.IntVar(&p.StateBytes, "state-bytes", 1_000_000, "approximate tool_state size S in bytes")
	seed := fs.Uint64("seed", 1, "random seed")
	deep := fs.Bool("deepagents", false, "a deepagents-shaped thread: messages and files as DeltaChannels (--turns, --files, --file-bytes, --snapshot-frequency, --state-keys)")
	var dp gen.DeepParams
	fs.IntVar(&dp.Files, "files", 300, "--deepagents: files the thread grows to")
	fs.IntVar(&dp.FileBytes, "file-bytes", 3000, "--deepagents: mean file size in bytes")
	fs.IntVar(&dp.SnapshotFrequency, "snapshot-frequency", 50, "--deepagents: DeltaChannel snapshot_frequency of messages and files")
	fs.IntVar(&dp.StateKeys, "state-keys", 8, "--deepagents: tool_state keys")
	fs.Parse(args) //nolint:errcheck // ExitOnError
	p.Seed = *seed
	dp.Turns, dp.Seed = p.Turns, *seed
	if *dsn == "" {
		return fmt.Errorf("--dsn is required")
	}
	conn, err := pgx.Connect(ctx, *dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	ok, err := gen.TablesExist(ctx, conn)
	if err != nil {
		return err
	}
	if !ok {
		if *python == "" {
			return gen.ErrNoTables
		}
		if err := py.Run(ctx, *python, nil, "setup", "--dsn", *dsn); err != nil {
			return err
		}
	}
	id := *thread
	t0 := time.Now()
	if *deep {
		if id == "" {
			id = dp.Name("bench-deep")
		}
		sum, err := gen.WriteDeep(ctx, conn, id, dp, gen.Options{})
		if err != nil {
			return err
		}
		fmt.Printf("thread %s: %d checkpoints, %d blobs, %d writes, snapshots %v, %d files (%.1f MB) at the end, largest files snapshot %d bytes, %.1f MB of blobs and writes, %.1fs\n",
			id, len(sum.Checkpoints), sum.Rows["checkpoint_blobs"], sum.Rows["checkpoint_writes"], sum.Snapshots, sum.LiveFiles, float64(sum.FileBytes)/1e6, sum.FilesBlobBytes, float64(sum.TotalBlobBytes)/1e6, time.Since(t0).Seconds())
		return nil
	}
	if id == "" {
		id = p.Name("bench")
	}
	sum, err := gen.Write(ctx, conn, id, p, gen.Options{})
	if err != nil {
		return err
	}
	fmt.Printf("thread %s: %d checkpoints, %d blobs, %d writes, largest tool_state blob %d bytes, %.1f MB of blobs and writes, %.1fs\n",
		id, len(sum.Checkpoints), sum.Rows["checkpoint_blobs"], sum.Rows["checkpoint_writes"], sum.StateBlobBytes, float64(sum.TotalBlobBytes)/1e6, time.Since(t0).Seconds())
	return nil
}

func runCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench run", flag.ExitOnError)
	var cfg run.Config
	fs.StringVar(&cfg.DSN, "dsn", os.Getenv("HISTORYD_BENCH_DSN"), "PostgreSQL DSN (env HISTORYD_BENCH_DSN)")
	fs.StringVar(&cfg.Python, "python", "", "venv python with langgraph and mcp-toolsets-runtime (default: <repo>/.cache/venv/bin/python)")
	fs.StringVar(&cfg.Repo, "repo", ".", "historyd repository")
	fs.StringVar(&cfg.Work, "work", "", "directory for the binary, logs, profiles and results (default: <repo>/var/bench)")
	fs.StringVar(&cfg.PGBench, "pgbench", "", "pgbench binary (default: PATH, then /usr/lib/postgresql/*/bin)")
	fs.StringVar(&cfg.PoolerDSN, "pooler-dsn", os.Getenv("HISTORYD_BENCH_POOLER_DSN"), "the --dsn database through PgBouncer in transaction mode, for the pooler row (env HISTORYD_BENCH_POOLER_DSN; default: that row measures direct connections only)")
	fs.BoolVar(&cfg.Full, "full", false, "full mode: more threads, turns, repeats and time")
	fs.IntVar(&cfg.Concurrency, "concurrency", 8, "driver and pgbench concurrency")
	fs.BoolVar(&cfg.Regenerate, "regenerate", false, "rewrite threads that already exist")
	fs.BoolVar(&cfg.Profile, "profile", false, "profile the path behind any missed floor (default: on with --full)")
	fs.StringVar(&cfg.Baseline, "baseline", "", "historyd binary built from an earlier commit, which P7 times against this build")
	fs.StringVar(&cfg.BaselineName, "baseline-name", "", "what --baseline was built from (a commit), for the table")
	out := fs.String("out", "", "also write the table to this file")
	fs.Func("only", "run only this step besides generating and building (anchors, operations, P1, P2, P3, P4, P5, P7, deepagents, forks, pooler, threads, profiles); repeatable", func(v string) error {
		cfg.Only = append(cfg.Only, v)
		return nil
	})
	fs.Parse(args) //nolint:errcheck // ExitOnError
	if cfg.DSN == "" {
		return fmt.Errorf("--dsn is required")
	}
	if cfg.Full {
		explicit := false
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "profile" })
		if !explicit {
			cfg.Profile = true
		}
	}
	repo, err := filepath.Abs(cfg.Repo)
	if err != nil {
		return err
	}
	cfg.Repo = repo
	if cfg.Python == "" {
		cfg.Python = filepath.Join(repo, ".cache", "venv", "bin", "python")
	}
	if cfg.Work == "" {
		cfg.Work = filepath.Join(repo, "var", "bench")
	}
	cfg.Log = os.Stderr
	rep, err := run.Run(ctx, cfg)
	if rep != nil && len(rep.Rows) > 0 {
		run.Table(os.Stdout, rep)
		if *out != "" {
			f, ferr := os.Create(*out)
			if ferr == nil {
				run.Table(f, rep)
				f.Close()
			}
		}
	}
	return err
}

func profileCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench profile", flag.ExitOnError)
	dsn := fs.String("dsn", os.Getenv("HISTORYD_BENCH_DSN"), "PostgreSQL DSN (env HISTORYD_BENCH_DSN)")
	repo := fs.String("repo", ".", "historyd repository")
	thread := fs.String("thread", "", "thread id (required)")
	op := fs.String("op", "Snapshot", "Snapshot, Snapshots, StreamSnapshots or Turns")
	turn := fs.Int("turn", 1, "turn, for Snapshot")
	conc := fs.Int("concurrency", 1, "concurrency")
	secs := fs.Float64("seconds", 10, "how long to drive, with a CPU profile")
	requests := fs.Int("requests", 0, "instead of --seconds: this many requests, no CPU profile (for memory)")
	cold := fs.Bool("cold", false, "do not warm the thread's index before profiling")
	dir := fs.String("dir", "var/bench/profiles", "output directory")
	name := fs.String("name", "profile", "output name: NAME.cpu.pprof, NAME.allocs.pprof, NAME.txt")
	fs.Parse(args) //nolint:errcheck // ExitOnError
	if *dsn == "" || *thread == "" {
		return fmt.Errorf("--dsn and --thread are required")
	}
	abs, err := filepath.Abs(*repo)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(*dir, "historyd-profiling")
	if err := prof.Build(ctx, abs, bin); err != nil {
		return err
	}
	target := load.Target{Thread: *thread, Turn: *turn}
	job := run.ProfileJob{Name: *name, Op: load.Op(*op), Concurrency: *conc, Requests: *requests,
		Duration: time.Duration(*secs * float64(time.Second)),
		Target:   func(int, int) load.Target { return target }}
	if !*cold {
		job.Warm = []load.Target{target}
	}
	res, err := run.RunProfile(ctx, bin, *dsn, *dir, job)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(res.Report)
	if err != nil {
		return err
	}
	os.Stdout.Write(b)
	return nil
}

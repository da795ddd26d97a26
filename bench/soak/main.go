// Command soak runs historyd for a long mixed load over PostgreSQL behind
// PgBouncer in transaction mode, restarts both underneath it, and checks
// every answer afterwards against direct reads of the checkpoints it was
// served from.
//
//	soak --dsn DSN --pooler-dsn DSN --role ROLE --repo DIR --work DIR [--calls N] [--concurrency N]
//
// --dsn reaches PostgreSQL directly as a role that may create and fill the
// checkpoint tables (the writer, retention and the direct reads use it);
// --pooler-dsn reaches the same database through PgBouncer, as --role,
// which is granted SELECT on the tables and is what historyd serves with,
// with --pooler transaction. Restarts are done with scripts/pg-test.sh
// restart and pooler restart, with the environment (PG_TEST_ENV_FILE) the
// caller gives: scripts/soak.sh sets all of it up.
//
// While --calls calls (Snapshot, Snapshots, Turns, Threads, Diff,
// StreamSnapshots and WatchTurns, from --concurrency callers spread over
// three tenants, each a bearer token confined to a thread-id prefix) are
// made, a writer appends turns to each tenant's live threads, a retention
// job deletes all but each thread's newest turns, PostgreSQL is restarted
// twice and PgBouncer once. Every answer is checked at once for what the
// caller knows (totals between the turns written before the call and
// those begun by its end, no thread of another tenant, the asked-for
// turn), and its claims (turn n ended at checkpoint c with this question
// and this state; turn n is no longer retained; this is the diff from c1
// to c2) are checked after the run against the checkpoints read directly
// from PostgreSQL, those retention deleted included (it reads them just
// before deleting: the writer only appends and retention only deletes, so
// a checkpoint's state never changes once written).
//
// The report (stdout, and report.md and report.json in --work) gives the
// calls by operation and status code, the OK answers by outcome, the wrong
// answers, historyd's resident memory every --rss-every and its goroutines
// before and after; soak exits 1 when any check failed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// config is the soak's flags.
type config struct {
	dsn, poolerDSN, role string
	repo, work           string
	calls, concurrency   int
	writeEvery           time.Duration
	pruneEvery           time.Duration
	keepTurns, maxTurns  int
	liveThreads          int
	seedTurns            int
	rssEvery             time.Duration
	warmup               float64
	cacheBytes           string
	restartsAt           []float64
	noRestarts           bool
	maxDuration          time.Duration
	profile              bool
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	fs.StringVar(&cfg.dsn, "dsn", "", "PostgreSQL, directly, as a role that may create tables (required)")
	fs.StringVar(&cfg.poolerDSN, "pooler-dsn", "", "the same database through PgBouncer in transaction mode (required)")
	fs.StringVar(&cfg.role, "role", "", "the role historyd connects through PgBouncer as; granted SELECT on the tables (required)")
	fs.StringVar(&cfg.repo, "repo", ".", "the repository, for scripts/pg-test.sh and building historyd")
	fs.StringVar(&cfg.work, "work", "var/soak", "directory for historyd's binary, log, token file and the report")
	fs.IntVar(&cfg.calls, "calls", 1_000_000, "calls to make")
	fs.IntVar(&cfg.concurrency, "concurrency", 64, "callers making them at once")
	fs.DurationVar(&cfg.writeEvery, "write-every", 500*time.Millisecond, "how often the writer appends a turn (to the next live thread)")
	fs.DurationVar(&cfg.pruneEvery, "prune-every", 2*time.Second, "how often retention prunes every thread")
	fs.IntVar(&cfg.keepTurns, "keep-turns", 10, "turns retention keeps per thread")
	fs.IntVar(&cfg.maxTurns, "max-turns", 30, "turns a thread gets before the writer replaces it by a new one")
	fs.IntVar(&cfg.liveThreads, "live-threads", 4, "threads per tenant the writer appends to and callers read")
	fs.IntVar(&cfg.seedTurns, "seed-turns", 6, "turns each first thread has before the calls start")
	fs.DurationVar(&cfg.rssEvery, "rss-every", 10*time.Second, "how often historyd's resident memory is sampled")
	fs.Float64Var(&cfg.warmup, "warmup", 0.2, "part of the calls after which memory must stay flat (within 10%)")
	fs.StringVar(&cfg.cacheBytes, "cache-bytes", "1MiB", "historyd's --cache-bytes: small, so that the caches are full by the end of warm-up and memory after it measures leaks rather than caches filling (the state cache fills at about what the writer writes)")
	fs.DurationVar(&cfg.maxDuration, "max-duration", 0, "stop making calls after this long, however many were made (0: no limit); the report says how many")
	fs.BoolVar(&cfg.profile, "profile", false, "serve with bench/prof's profiling build of historyd and write its heap profile at the end of warm-up and at the end (heap-warm.pb.gz, heap-end.pb.gz in --work: compare with go tool pprof -sample_index=inuse_space -base)")
	fs.BoolVar(&cfg.noRestarts, "no-restarts", false, "restart nothing (for comparison)")
	_ = fs.Parse(os.Args[1:])
	if cfg.dsn == "" || cfg.poolerDSN == "" || cfg.role == "" {
		fmt.Fprintln(os.Stderr, "soak: --dsn, --pooler-dsn and --role are required (scripts/soak.sh sets them)")
		os.Exit(2)
	}
	if cfg.calls < 1 || cfg.concurrency < 1 {
		fmt.Fprintf(os.Stderr, "soak: --calls %d and --concurrency %d must be at least 1\n", cfg.calls, cfg.concurrency)
		os.Exit(2)
	}
	// PostgreSQL at a quarter and at a half of the calls, PgBouncer at
	// three quarters.
	cfg.restartsAt = []float64{0.25, 0.5, 0.75}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, cfg)
	if rep != nil {
		text := rep.markdown()
		fmt.Print(text)
		_ = os.WriteFile(cfg.work+"/report.md", []byte(text), 0o644)
		if b, jerr := json.MarshalIndent(rep, "", "  "); jerr == nil {
			_ = os.WriteFile(cfg.work+"/report.json", b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if fails := rep.failures(); len(fails) > 0 {
		for _, f := range fails {
			fmt.Fprintln(os.Stderr, "soak: FAILED:", f)
		}
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "soak: every check passed")
}

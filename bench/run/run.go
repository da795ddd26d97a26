// Package run is the benchmark suite: it generates the threads, runs
// historyd as a separate process against them, times the Python reference
// on the same threads and the same database, measures the machine's
// anchors, and reports one table with the project's floors (P1–P7) met or
// missed.
package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/bench/anchor"
	"github.com/historyd/historyd/bench/gen"
	"github.com/historyd/historyd/bench/load"
	"github.com/historyd/historyd/bench/py"
)

// Config configures a run.
type Config struct {
	// Repo is the historyd repository (built with go build ./cmd/historyd).
	Repo string
	// Work is the directory for the binary, logs, profiles and results.
	Work string
	// DSN is the PostgreSQL database holding (or to hold) the threads.
	DSN string
	// Python is the venv interpreter with langgraph and
	// mcp-toolsets-runtime.
	Python string
	// PGBench is the pgbench binary; empty means look it up.
	PGBench string
	// Full selects the long mode: more threads, turns, repeats and time.
	Full bool
	// PoolerDSN, when set, is DSN's database through a PgBouncer in
	// transaction mode, for the pooler step's third variant.
	PoolerDSN string
	// Concurrency is the driver's (and pgbench's) concurrency.
	Concurrency int
	// Regenerate rewrites threads that already exist with the right shape.
	Regenerate bool
	// Profile takes in-process CPU and heap profiles of the path behind
	// any floor that is missed.
	Profile bool
	// Baseline, when set, is a historyd binary built from an earlier
	// commit (BaselineName), which P7 times against this build.
	Baseline, BaselineName string
	// Only, when not empty, names the steps to run besides describing
	// the machine, generating the threads and building historyd: any of
	// anchors, operations, P1, P2, P3 (which needs anchors and
	// operations), P4, P5, P6, P7, deepagents, forks, pooler, threads and
	// profiles. For iterating on one measurement.
	Only []string
	// Log receives progress lines.
	Log io.Writer
}

// plan is what a mode measures.
type plan struct {
	mode         string
	warm         gen.Params
	small        gen.Params
	smallThreads int
	p1           gen.Params
	p1Turns      []int
	p1Repeat     int // reference calls per turn
	p1Warm       int // historyd sequential requests per turn after the cold one
	p2Short      gen.Params
	p2Long       gen.Params
	p2Rounds     int // rounds of 50+50 interleaved requests
	p4           gen.Params
	p4Turns      []int
	p4Reference  bool
	tracemalloc  bool
	opTime       time.Duration // per warm load run
	pgbenchTime  time.Duration
	noopTime     time.Duration
	profileTime  time.Duration
	largeOps     []load.Op
	smallOps     []load.Op
	manyThreads  int        // threads of the Threads rows' store
	forks        gen.Params // the forks row's rewound thread: p2Long with forks
	forkReads    int        // cold reads of each thread in the forks row
}

func newPlan(full bool) plan {
	p := plan{
		mode:         "small",
		warm:         gen.Params{Turns: 2, CheckpointsPerTurn: 5, Keys: 2, StateBytes: 2048, Seed: 7},
		small:        gen.Params{Turns: 20, CheckpointsPerTurn: 5, Keys: 4, StateBytes: 4096, Seed: 11},
		smallThreads: 16,
		p1:           gen.Params{Turns: 50, CheckpointsPerTurn: 5, Keys: 8, StateBytes: 1_000_000, Seed: 13},
		p1Turns:      []int{25},
		p1Repeat:     1,
		p1Warm:       30,
		p2Short:      gen.Params{Turns: 5, CheckpointsPerTurn: 5, Keys: 4, StateBytes: 4096, Seed: 17},
		p2Long:       gen.Params{Turns: 500, CheckpointsPerTurn: 5, Keys: 4, StateBytes: 4096, Seed: 19},
		p2Rounds:     6,
		p4:           gen.Params{Turns: 10, CheckpointsPerTurn: 5, Keys: 8, StateBytes: 4_300_000, Seed: 23},
		p4Turns:      []int{1, 5, 10},
		opTime:       2 * time.Second,
		pgbenchTime:  10 * time.Second,
		noopTime:     5 * time.Second,
		profileTime:  4 * time.Second,
		largeOps:     []load.Op{load.Snapshot, load.Turns},
		smallOps:     []load.Op{load.Snapshot, load.Snapshots, load.StreamSnapshots, load.Turns},
		manyThreads:  1_000_000,
		forkReads:    3,
	}
	p.forks = p.p2Long
	p.forks.Forks = 10
	if full {
		p.mode = "full"
		p.smallThreads = 64
		p.p1Turns = []int{1, 25, 50}
		p.p1Repeat = 5
		p.p1Warm = 100
		p.p2Rounds = 20
		p.p4Turns = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
		p.p4Reference = true
		p.largeOps = []load.Op{load.Snapshot, load.StreamSnapshots, load.Turns}
		p.tracemalloc = true
		p.opTime = 15 * time.Second
		p.pgbenchTime = 30 * time.Second
		p.noopTime = 15 * time.Second
		p.profileTime = 15 * time.Second
		p.forkReads = 7
	}
	return p
}

// Row is one line of the table.
type Row struct {
	ID       string  `json:"id"`
	What     string  `json:"what"`
	Historyd string  `json:"historyd"`
	Other    string  `json:"other"`
	Ratio    string  `json:"ratio"`
	Floor    string  `json:"floor"`
	Verdict  string  `json:"verdict"`
	Load1    float64 `json:"load1"`
}

// Report is everything a run measured.
type Report struct {
	Mode     string            `json:"mode"`
	Started  time.Time         `json:"started"`
	Seconds  float64           `json:"seconds"`
	Machine  map[string]string `json:"machine"`
	Versions map[string]string `json:"versions"`
	Threads  map[string]string `json:"threads"`
	Rows     []Row             `json:"rows"`
	// Phases records the load average at the end of each phase.
	Phases   []Phase        `json:"phases"`
	Details  map[string]any `json:"details"`
	Profiles []string       `json:"profiles,omitempty"`
}

// Phase is a step of the run with the load average when it ended.
type Phase struct {
	Name    string     `json:"name"`
	Seconds float64    `json:"seconds"`
	Load    [3]float64 `json:"load"`
}

type runner struct {
	cfg     Config
	plan    plan
	bin     string
	rep     *Report
	names   map[string]string
	log     io.Writer
	started time.Time
	phaseT  time.Time
	misses  map[string]bool

	pgbenchTPS float64
	noopRPS    float64
	ops        map[string]opResult
}

// Run runs the suite and returns its report. The table is rendered by
// Table.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 8
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if err := os.MkdirAll(filepath.Join(cfg.Work, "logs"), 0o755); err != nil {
		return nil, err
	}
	r := &runner{
		cfg: cfg, plan: newPlan(cfg.Full), log: cfg.Log, names: map[string]string{}, misses: map[string]bool{}, ops: map[string]opResult{},
		rep: &Report{Started: time.Now().UTC(), Machine: map[string]string{}, Versions: map[string]string{}, Threads: map[string]string{}, Details: map[string]any{}},
	}
	r.rep.Mode = r.plan.mode
	r.started, r.phaseT = time.Now(), time.Now()
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"machine and versions", r.describe},
		{"generate threads", r.generate},
		{"build historyd", r.build},
		{"anchors", r.anchors},
		{"operations", r.operations},
		{"P1", r.p1},
		{"P2", r.p2},
		{"P3", r.p3},
		{"P4", r.p4},
		{"P5", r.p5},
		{"P7", r.p7},
		{"deepagents", r.deepagents},
		{"forks", r.forks},
		{"pooler", r.pooler},
		{"threads", r.threadsList},
		{"P6", r.host},
		{"profiles", r.profiles},
	}
	always := map[string]bool{"machine and versions": true, "generate threads": true, "build historyd": true}
	only := map[string]bool{}
	for _, o := range cfg.Only {
		only[o] = true
		if o == "P3" {
			only["anchors"], only["operations"] = true, true
		}
	}
	for _, s := range steps {
		if len(only) > 0 && !always[s.name] && !only[s.name] {
			continue
		}
		r.logf("== %s (load %s)", s.name, loadText())
		if err := s.fn(ctx); err != nil {
			return r.rep, fmt.Errorf("%s: %w", s.name, err)
		}
		r.phase(s.name)
	}
	r.rep.Seconds = time.Since(r.started).Seconds()
	b, _ := json.MarshalIndent(r.rep, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.Work, "results.json"), b, 0o644); err != nil {
		return r.rep, err
	}
	return r.rep, nil
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "bench: "+format+"\n", args...)
}

func (r *runner) phase(name string) {
	r.rep.Phases = append(r.rep.Phases, Phase{Name: name, Seconds: time.Since(r.phaseT).Seconds(), Load: load.LoadAvg()})
	r.phaseT = time.Now()
}

func loadText() string {
	l := load.LoadAvg()
	return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2])
}

func (r *runner) detail(key string, v any) { r.rep.Details[key] = v }

func (r *runner) add(row Row) {
	if row.Load1 == 0 {
		row.Load1 = load.LoadAvg()[0]
	}
	r.rep.Rows = append(r.rep.Rows, row)
	r.logf("%s | %s | %s | %s | %s | %s | %s | load %.2f", row.ID, row.What, row.Historyd, row.Other, row.Ratio, row.Floor, row.Verdict, row.Load1)
}

// ---------------------------------------------------------------------------

func (r *runner) describe(ctx context.Context) error {
	m := r.rep.Machine
	m["nproc"] = fmt.Sprint(runtime.NumCPU())
	m["cpu"] = cpuModel()
	if out, err := exec.CommandContext(ctx, "free", "-h").Output(); err == nil {
		m["free -h"] = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "uname", "-srm").Output(); err == nil {
		m["kernel"] = strings.TrimSpace(string(out))
	}
	m["load at start"] = loadText()
	v := r.rep.Versions
	v["historyd"] = "unknown commit"
	if out, err := exec.CommandContext(ctx, "git", "-C", r.cfg.Repo, "rev-parse", "--short", "HEAD").Output(); err == nil {
		v["historyd"] = "commit " + strings.TrimSpace(string(out))
		if dirty, err := exec.CommandContext(ctx, "git", "-C", r.cfg.Repo, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(dirty))) > 0 {
			v["historyd"] += " with uncommitted changes"
		}
	}
	if out, err := exec.CommandContext(ctx, "go", "version").Output(); err == nil {
		v["go"] = strings.TrimSpace(string(out))
	}
	conn, err := pgx.Connect(ctx, r.cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var pgv string
	if err := conn.QueryRow(ctx, `SELECT version()`).Scan(&pgv); err != nil {
		return err
	}
	v["postgresql"] = pgv
	var pyv map[string]*string
	if err := py.Run(ctx, r.cfg.Python, &pyv, "versions"); err != nil {
		return err
	}
	for k, s := range pyv {
		if s != nil {
			v[k] = *s
		} else {
			v[k] = "not installed"
		}
	}
	if v["mcp-toolsets-runtime"] == "not installed" {
		return fmt.Errorf("mcp-toolsets-runtime is not installed in %s: run scripts/pyenv.sh", r.cfg.Python)
	}
	return nil
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// threads lists every thread the plan needs, by role.
func (r *runner) threads() map[string]gen.Params {
	p := r.plan
	out := map[string]gen.Params{
		"warm":    p.warm,
		"p1":      p.p1,
		"p2short": p.p2Short,
		"p2long":  p.p2Long,
		"p4":      p.p4,
		"forks":   p.forks,
	}
	for i := range p.smallThreads {
		q := p.small
		q.Seed += uint64(i)
		out[fmt.Sprintf("small%03d", i)] = q
	}
	return out
}

func (r *runner) name(role string) string { return r.names[role] }

func (r *runner) generate(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, r.cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	ok, err := gen.TablesExist(ctx, conn)
	if err != nil {
		return err
	}
	if !ok {
		r.logf("creating LangGraph's tables with PostgresSaver.setup()")
		if err := py.Run(ctx, r.cfg.Python, nil, "setup", "--dsn", r.cfg.DSN); err != nil {
			return err
		}
	}
	roles := r.threads()
	keys := make([]string, 0, len(roles))
	for k := range roles {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	wrote := map[string]any{}
	for _, role := range keys {
		p := roles[role]
		id := p.Name("bench-" + role)
		r.names[role] = id
		r.rep.Threads[role] = id
		if !r.cfg.Regenerate {
			if ok, err := gen.Exists(ctx, conn, id, p); err != nil {
				return err
			} else if ok {
				continue
			}
		}
		t0 := time.Now()
		sum, err := gen.Write(ctx, conn, id, p, gen.Options{})
		if err != nil {
			return fmt.Errorf("generate %s: %w", id, err)
		}
		r.logf("generated %s: %d checkpoints, largest tool_state blob %.2f MB, %.1f MB of blobs and writes, in %.1fs",
			id, len(sum.Checkpoints), float64(sum.StateBlobBytes)/1e6, float64(sum.TotalBlobBytes)/1e6, time.Since(t0).Seconds())
		wrote[id] = map[string]any{"checkpoints": len(sum.Checkpoints), "state_blob_bytes": sum.StateBlobBytes, "blob_bytes": sum.TotalBlobBytes, "seconds": time.Since(t0).Seconds()}
	}
	if len(wrote) > 0 {
		// A long-lived database is vacuumed and analyzed by autovacuum;
		// freshly loaded tables are not yet.
		for _, t := range []string{"checkpoints", "checkpoint_blobs", "checkpoint_writes"} {
			if _, err := conn.Exec(ctx, `VACUUM ANALYZE `+t); err != nil {
				return err
			}
		}
	}
	r.detail("generated", wrote)
	// The size of what is actually stored, per thread of interest.
	sizes := map[string]any{}
	for _, role := range []string{"p1", "p4", "p2long"} {
		var blobs, toast int64
		var stateMax int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(length(blob)),0), coalesce(sum(pg_column_size(blob)),0), coalesce(max(length(blob)) FILTER (WHERE channel = 'tool_state'),0) FROM checkpoint_blobs WHERE thread_id = $1`, r.name(role)).Scan(&blobs, &toast, &stateMax); err != nil {
			return err
		}
		sizes[role] = map[string]any{"blob_bytes": blobs, "stored_bytes": toast, "largest_tool_state_blob": stateMax}
	}
	r.detail("stored", sizes)
	return nil
}

func (r *runner) build(ctx context.Context) error {
	r.bin = filepath.Join(r.cfg.Work, "historyd")
	return load.Build(ctx, r.cfg.Repo, r.bin)
}

// start runs a fresh historyd. With warm, it first serves one Snapshot of
// the small warm-up thread, so that code paths and the connection pool are
// in use; then it waits for the process to settle and resets its peak RSS.
func (r *runner) start(ctx context.Context, label string, warm bool, env ...string) (*load.Server, load.Mem, error) {
	s, err := load.Start(ctx, r.bin, r.cfg.DSN, filepath.Join(r.cfg.Work, "logs", "historyd-"+label+".log"), env...)
	if err != nil {
		return nil, load.Mem{}, err
	}
	if warm {
		if _, err := s.Do(ctx, load.Snapshot, load.Target{Thread: r.name("warm"), Turn: 1}); err != nil {
			s.Stop()
			return nil, load.Mem{}, fmt.Errorf("warm-up request: %w", err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	base, err := load.ReadMem(s.Pid)
	if err == nil {
		err = load.ResetPeak(s.Pid)
	}
	if err != nil {
		s.Stop()
		return nil, load.Mem{}, err
	}
	return s, base, nil
}

// growth is the process's peak RSS since base was taken, above base.
func growth(s *load.Server, base load.Mem) (int64, error) {
	m, err := load.ReadMem(s.Pid)
	if err != nil {
		return 0, err
	}
	return m.HWM - base.RSS, nil
}

// ---------------------------------------------------------------------------

func (r *runner) anchors(ctx context.Context) error {
	c := r.cfg.Concurrency
	bin := r.cfg.PGBench
	if bin == "" {
		var err error
		if bin, err = anchor.FindPGBench(); err != nil {
			return err
		}
	}
	res, err := anchor.PGBench(ctx, bin, r.cfg.DSN, c, min(c, runtime.NumCPU()), r.plan.pgbenchTime, func() float64 { return load.LoadAvg()[0] })
	if err != nil {
		return err
	}
	r.detail("pgbench", res)
	r.add(Row{ID: "A1", What: fmt.Sprintf("PostgreSQL ceiling: `%s`", res.Command), Other: fmt.Sprintf("%.0f TPS", res.TPS), Load1: res.Load1})

	s, _, err := r.start(ctx, "noop", false)
	if err != nil {
		return err
	}
	defer s.Stop()
	one := load.Drive(ctx, 1, 0, r.plan.noopTime/2, func(ctx context.Context, _, _ int) error {
		_, err := s.Do(ctx, load.Health, load.Target{})
		return err
	})
	snap0, err := r.cpuNow(ctx, s)
	if err != nil {
		return err
	}
	many := load.Drive(ctx, c, 0, r.plan.noopTime, func(ctx context.Context, _, _ int) error {
		_, err := s.Do(ctx, load.Health, load.Target{})
		return err
	})
	snap1, err := r.cpuNow(ctx, s)
	if err != nil {
		return err
	}
	noopCPU := share(snap0, snap1, many.Requests)
	r.detail("noop", map[string]any{"c1": one, fmt.Sprintf("c%d", c): many, "cpu": noopCPU})
	if one.Errors+many.Errors > 0 {
		return fmt.Errorf("health checks failed: %s %s", one.FirstError, many.FirstError)
	}
	r.add(Row{ID: "A2", What: fmt.Sprintf("gRPC ceiling: no-op unary RPC (grpc.health.v1 Check on historyd), c=%d", c),
		Historyd: fmt.Sprintf("%.0f req/s; c=1 p50 %s; %s", many.RPS, msText(one.P50), noopCPU), Load1: many.Load1})
	r.pgbenchTPS = res.TPS
	r.noopRPS = many.RPS
	return nil
}

func msText(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f ms", float64(d)/1e6)
}

// mbText is a memory size in decimal megabytes (10^6 bytes), the unit of
// every size in the report.
func mbText(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

// ---------------------------------------------------------------------------

type opResult struct {
	Thread   string          `json:"thread"`
	Op       load.Op         `json:"op"`
	Colds    []time.Duration `json:"cold_ns"`
	Cold     time.Duration   `json:"cold_median_ns"`
	ColdErr  string          `json:"cold_error,omitempty"`
	One      load.Result     `json:"c1"`
	OneCPU   time.Duration   `json:"c1_cpu_per_request_ns"`
	Many     load.Result     `json:"cN"`
	ManyCPU  CPUShare        `json:"cN_cpu"`
	Growth   int64           `json:"rss_growth_bytes"`
	BaseRSS  int64           `json:"idle_rss_bytes"`
	Failures string          `json:"failures,omitempty"`
}

// smallTarget picks a random turn of a random small thread.
func (r *runner) smallTarget(rng *rand.Rand) load.Target {
	return load.Target{Thread: r.name(fmt.Sprintf("small%03d", rng.IntN(r.plan.smallThreads))), Turn: 1 + rng.IntN(r.plan.small.Turns)}
}

// coldRuns is how many fresh processes the cold latency is the median of.
const coldRuns = 3

// operations measures each request kind on the small threads and on the
// 50-turn 1 MB thread: cold (the first request of a fresh process, median
// of three processes) and warm at concurrency 1 and N, with the process's
// CPU time per request and peak RSS growth.
func (r *runner) operations(ctx context.Context) error {
	var all []opResult
	groups := []struct {
		label string
		ops   []load.Op
		pick  func(rng *rand.Rand) load.Target
		desc  string
	}{
		{"small", r.plan.smallOps, r.smallTarget, fmt.Sprintf("%d threads × %d turns, %s state", r.plan.smallThreads, r.plan.small.Turns, sizeText(r.plan.small.StateBytes))},
		{"p1", r.plan.largeOps, func(rng *rand.Rand) load.Target {
			return load.Target{Thread: r.name("p1"), Turn: 1 + rng.IntN(r.plan.p1.Turns)}
		}, fmt.Sprintf("%d turns, %s state", r.plan.p1.Turns, sizeText(r.plan.p1.StateBytes))},
	}
	c := r.cfg.Concurrency
	for _, g := range groups {
		for _, op := range g.ops {
			res, err := r.measureOp(ctx, g.label, op, g.pick)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", op, g.label, err)
			}
			all = append(all, res)
			r.ops[g.label+"/"+string(op)] = res
			text := fmt.Sprintf("cold %s (median of %d fresh processes); warm c=1 p50/p95/p99 %s/%s/%s, %s CPU per request; c=%d %.0f req/s p50/p99 %s/%s; peak RSS +%s",
				msText(res.Cold), len(res.Colds), msText(res.One.P50), msText(res.One.P95), msText(res.One.P99), msText(res.OneCPU),
				c, res.Many.RPS, msText(res.Many.P50), msText(res.Many.P99), mbText(res.Growth))
			if res.Failures != "" {
				text += "; " + res.Failures
			}
			r.add(Row{ID: "O", What: fmt.Sprintf("%s, %s", op, g.desc), Historyd: text, Load1: res.Many.Load1})
		}
	}
	r.detail("operations", all)
	return nil
}

func (r *runner) measureOp(ctx context.Context, label string, op load.Op, pick func(*rand.Rand) load.Target) (opResult, error) {
	res := opResult{Thread: label, Op: op}
	rng := rand.New(rand.NewPCG(1, 2))
	first := pick(rng)
	var s *load.Server
	var base load.Mem
	for i := range coldRuns {
		var err error
		s, base, err = r.start(ctx, fmt.Sprintf("op-%s-%s-%d", label, op, i), false)
		if err != nil {
			return res, err
		}
		t0 := time.Now()
		_, err = s.Do(ctx, op, first)
		res.Colds = append(res.Colds, time.Since(t0))
		if err != nil && res.ColdErr == "" {
			res.ColdErr = err.Error()
		}
		if i < coldRuns-1 {
			s.Stop()
		}
	}
	defer s.Stop()
	sorted := slices.Clone(res.Colds)
	slices.Sort(sorted)
	res.Cold = sorted[len(sorted)/2]
	res.BaseRSS = base.RSS
	c := r.cfg.Concurrency
	rngs := make([]*rand.Rand, c)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(uint64(i)+3, 4))
	}
	call := func(ctx context.Context, w, _ int) error {
		_, err := s.Do(ctx, op, pick(rngs[w]))
		return err
	}
	cpu0, err := load.CPUTime(s.Pid)
	if err != nil {
		return res, err
	}
	res.One = load.Drive(ctx, 1, 0, r.plan.opTime, call)
	cpu1, err := load.CPUTime(s.Pid)
	if err != nil {
		return res, err
	}
	if res.One.Requests > 0 {
		res.OneCPU = (cpu1 - cpu0) / time.Duration(res.One.Requests)
	}
	snap0, err := r.cpuNow(ctx, s)
	if err != nil {
		return res, err
	}
	res.Many = load.Drive(ctx, c, 0, r.plan.opTime, call)
	snap1, err := r.cpuNow(ctx, s)
	if err != nil {
		return res, err
	}
	res.ManyCPU = share(snap0, snap1, res.Many.Requests)
	if res.Growth, err = growth(s, base); err != nil {
		return res, err
	}
	res.Failures = failures(res.ColdErr, res.One, res.Many)
	return res, nil
}

// failures describes failed requests and requests slower than historyd's
// default call cap, which the bench lifts.
func failures(coldErr string, rs ...load.Result) string {
	var parts []string
	if coldErr != "" {
		parts = append(parts, "cold request failed: "+coldErr)
	}
	for _, r := range rs {
		if r.Errors > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d requests failed at c=%d, first: %s", r.Errors, r.Requests, r.Concurrency, r.FirstError))
		}
		if r.Max > load.DefaultCallCap {
			parts = append(parts, fmt.Sprintf("slowest request at c=%d took %s, past historyd's default 30 s call cap", r.Concurrency, msText(r.Max)))
		}
	}
	return strings.Join(parts, "; ")
}

func sizeText(b int) string {
	switch {
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.0f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}

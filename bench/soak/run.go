package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/bench/load"
	"github.com/historyd/historyd/bench/prof"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/langgraph/saver"
)

// restart is one restart done during the run.
type restart struct {
	What       string    `json:"what"`
	AtCalls    int64     `json:"at_calls"`
	Start, End time.Time `json:"-"`
	StartS     float64   `json:"start_s"`
	Took       string    `json:"took"`
	// Unavailable counts the calls answered UNAVAILABLE around it, and
	// LastUnavailable how long after it ended the last of them was answered.
	Unavailable     int    `json:"unavailable"`
	LastUnavailable string `json:"last_unavailable_after_end"`
	Err             string `json:"error,omitempty"`
}

// sample is one reading of historyd's resident memory.
type sample struct {
	AtS   float64 `json:"at_s"`
	Calls int64   `json:"calls"`
	RSS   int64   `json:"rss"`
	// From /metrics at the same moment: what the caches hold, the Go
	// heap in use, the goroutines.
	CacheBytes int64 `json:"cache_bytes"`
	CacheCap   int64 `json:"cache_capacity"`
	HeapInuse  int64 `json:"heap_inuse"`
	Goroutines int   `json:"goroutines"`
}

// report is what the soak found.
type report struct {
	Calls, Concurrency int
	Requested          int // calls asked for; Calls is those made, fewer when --max-duration cut the run short
	Duration           time.Duration
	CallsPerSecond     float64
	P50, P99, Max      time.Duration
	Codes              map[string]map[string]int
	Outcomes           map[string]int
	MeanMS, MaxMS      map[string]float64 // per operation
	ErrorExamples      map[string]string
	UnavailableOutside int // UNAVAILABLE calls not overlapping a restart (±grace)
	Restarts           []restart
	Immediate          int // answers wrong by what the caller knew at once
	ImmediateExamples  []string
	Verdict            verdict
	RSS                []sample
	RSSWarmMin         int64
	RSSWarmMax         int64
	// RSSLevels is the median of each fifth of the samples after warm-up
	// (none when the caches never filled or fewer than 10 samples came
	// after it: memory is then not judged):
	// memory is flat when none is more than 10 % above the first. The
	// median, so that one sample caught at a garbage collector's peak or in
	// a restart's pile-up of calls does not pass for growth.
	RSSLevels []int64
	// WarmCalls is where warm-up ended: cfg.warmup of the calls, or when
	// the caches were first full (CachesFullAt; -1: never), if later.
	WarmCalls, CachesFullAt int64
	GoroutinesStart         int
	GoroutinesEnd           int
	Threads                 int
	TurnsWritten            int
	CheckpointsDeleted      int64
	WriterRetries           int64
	cfg                     config
}

// unavailableGrace is how long after a restart ends UNAVAILABLE is still
// expected: historyd's reconnection backoff, PgBouncer's own.
const unavailableGrace = 10 * time.Second

// run runs the soak. stop ending (SIGINT, SIGTERM) ends the calls early;
// the run is then checked and reported on as far as it went.
//
// It is one function because it is the soak's timeline (start the store,
// the pooler and historyd, run writers, callers and disruptions, stop,
// check) and its parts share the processes it starts and their cleanup.
func run(stop context.Context, cfg config) (*report, error) {
	ctx := context.WithoutCancel(stop)
	if err := os.MkdirAll(cfg.work, 0o755); err != nil {
		return nil, err
	}
	db, err := pgxpool.New(ctx, cfg.dsn)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", cfg.dsn, err)
	}
	defer db.Close()
	if err := setupTables(ctx, db, cfg.role); err != nil {
		return nil, err
	}
	logf("writing %d threads of %d turns for each of %d tenants", cfg.liveThreads, cfg.seedTurns, len(tenants))
	reg := &registry{}
	w := newWriter(db, reg, cfg)
	if err := w.seed(); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}

	bin := filepath.Join(cfg.work, "historyd")
	logf("building historyd")
	build := load.Build
	var pprofEnv []string
	var profiler prof.Client
	if cfg.profile {
		build = prof.Build
		port, err := load.FreePort()
		if err != nil {
			return nil, err
		}
		profiler.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		pprofEnv = []string{prof.EnvVar + "=" + profiler.Addr}
	}
	if err := build(ctx, cfg.repo, bin); err != nil {
		return nil, err
	}
	tokens := filepath.Join(cfg.work, "tokens.json")
	if err := writeTokens(tokens); err != nil {
		return nil, err
	}
	mport, err := load.FreePort()
	if err != nil {
		return nil, err
	}
	metricsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(mport))
	logPath := filepath.Join(cfg.work, "historyd.log")
	_ = os.Remove(logPath)
	env := append([]string{"HISTORYD_POOLER=transaction", "HISTORYD_AUTH_TOKENS=" + tokens, "HISTORYD_METRICS_LISTEN=" + metricsAddr,
		"HISTORYD_CACHE_BYTES=" + cfg.cacheBytes, "HISTORYD_MAX_CALL_DURATION=30s"}, pprofEnv...)
	srv, err := load.Start(ctx, bin, cfg.poolerDSN, logPath, env...)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	logf("historyd (pid %d) on %s through %s; log %s", srv.Pid, srv.Addr, cfg.poolerDSN, logPath)

	var clients []historydv1.ThreadHistoryClient
	for range 4 {
		c, err := load.Dial(srv.Addr)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		clients = append(clients, historydv1.NewThreadHistoryClient(c))
	}
	rec, tl := newRecorder(), newTally()
	var progress atomic.Int64
	cl := &caller{clients: clients, reg: reg, rec: rec, tally: tl}
	for i := range cfg.concurrency {
		cl.rngs = append(cl.rngs, rand.New(rand.NewPCG(uint64(i), 20)))
	}
	// One call on each connection, so that the goroutines counted at the
	// start include every connection's.
	for i := range clients {
		if err := cl.call(ctx, i, 0); err != nil {
			return nil, fmt.Errorf("first call: %w", err)
		}
	}
	rep := &report{Calls: cfg.calls, Concurrency: cfg.concurrency, cfg: cfg}
	time.Sleep(2 * time.Second)
	if rep.GoroutinesStart, err = goroutines(metricsAddr); err != nil {
		return nil, err
	}

	bg, stopBG := context.WithCancel(ctx)
	defer stopBG()
	var wg sync.WaitGroup
	var bgErr error
	var bgMu sync.Mutex
	fail := func(err error) {
		if err != nil {
			bgMu.Lock()
			if bgErr == nil {
				bgErr = err
			}
			bgMu.Unlock()
		}
	}
	ret := &retention{w: w, archive: map[string]map[string]facts{}}
	wg.Add(2)
	go func() { defer wg.Done(); fail(w.run(bg)) }()
	go func() { defer wg.Done(); fail(ret.run(bg)) }()

	start := time.Now()
	var rssMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(cfg.rssEvery)
		defer tick.Stop()
		for {
			m, err := load.ReadMem(srv.Pid)
			if err == nil {
				s := sample{AtS: time.Since(start).Seconds(), Calls: progress.Load(), RSS: m.RSS}
				if mm, err := metrics(metricsAddr); err == nil {
					s.CacheBytes, s.HeapInuse, s.Goroutines = int64(mm["historyd_cache_bytes"]), int64(mm["go_memstats_heap_inuse_bytes"]), int(mm["go_goroutines"])
					s.CacheCap = int64(mm["historyd_cache_capacity_bytes"])
				}
				rssMu.Lock()
				rep.RSS = append(rep.RSS, s)
				rssMu.Unlock()
			}
			select {
			case <-bg.Done():
				return
			case <-tick.C:
			}
		}
	}()
	if cfg.profile {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for progress.Load() < int64(cfg.warmup*float64(cfg.calls)) {
				select {
				case <-bg.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			fail(profiler.Allocs(bg, filepath.Join(cfg.work, "heap-warm.pb.gz")))
		}()
	}
	var restarts []restart
	var restartsMu sync.Mutex
	if !cfg.noRestarts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			steps := []struct{ what, args string }{
				{"PostgreSQL restart (pg_ctl restart -m fast)", "restart fast"},
				{"PostgreSQL restart (pg_ctl restart -m fast)", "restart fast"},
				{"PgBouncer restart (stopped, started again on its port)", "pooler restart"},
			}
			for i, s := range steps {
				at := int64(cfg.restartsAt[i] * float64(cfg.calls))
				for progress.Load() < at {
					select {
					case <-bg.Done():
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
				r := restart{What: s.what, AtCalls: progress.Load(), Start: time.Now()}
				out, err := pgTest(bg, cfg.repo, strings.Fields(s.args)...)
				r.End = time.Now()
				r.StartS, r.Took = r.Start.Sub(start).Seconds(), r.End.Sub(r.Start).Round(time.Millisecond).String()
				if err != nil {
					r.Err = fmt.Sprintf("%v: %s", err, out)
				}
				logf("%s at call %d: %s %s", s.what, r.AtCalls, r.Took, r.Err)
				restartsMu.Lock()
				restarts = append(restarts, r)
				restartsMu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-tick.C:
				n := progress.Load()
				logf("%d calls (%.0f/s), %d threads, %d wrong so far", n, float64(n)/time.Since(start).Seconds(), len(reg.threads()), rec.wrongCount())
			}
		}
	}()

	logf("%d calls at concurrency %d", cfg.calls, cfg.concurrency)
	res := load.Drive(stop, cfg.concurrency, cfg.calls, cfg.maxDuration, func(ctx context.Context, w, i int) error {
		defer progress.Add(1)
		return cl.call(ctx, w, i)
	})
	rep.Duration = time.Since(start)
	stopBG()
	wg.Wait()
	if stop.Err() != nil {
		logf("interrupted: checking the %d calls made", progress.Load())
	}
	rep.Requested, rep.Calls = cfg.calls, res.Requests
	rep.CallsPerSecond, rep.P50, rep.P99, rep.Max = res.RPS, res.P50, res.P99, res.Max
	rep.Restarts = restarts
	if bgErr != nil {
		return rep, bgErr
	}
	if err := w.err(); err != nil {
		return rep, err
	}
	rep.WriterRetries = w.retries.Load()
	rep.CheckpointsDeleted = ret.deleted.Load()

	// Goroutines at the end: once the calls' streams and the pool's spare
	// connections have gone, which may take a little while.
	logf("waiting for historyd's goroutines to settle")
	deadline := time.Now().Add(90 * time.Second)
	for {
		if rep.GoroutinesEnd, err = goroutines(metricsAddr); err != nil {
			return rep, err
		}
		if rep.GoroutinesEnd <= rep.GoroutinesStart || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}

	if cfg.profile {
		if err := profiler.Allocs(ctx, filepath.Join(cfg.work, "heap-end.pb.gz")); err != nil {
			return rep, err
		}
	}

	// The direct read: every checkpoint left, with those retention read
	// before deleting them.
	logf("reading every thread directly")
	direct := map[string]map[string]facts{}
	retained := map[string]map[string]bool{}
	for _, th := range reg.threads() {
		got, err := readFacts(ctx, db, th.id, nil)
		if err != nil {
			return rep, err
		}
		retained[th.id] = map[string]bool{}
		direct[th.id] = map[string]facts{}
		for id, f := range got {
			retained[th.id][id] = true
			direct[th.id][id] = f
		}
		for id, f := range ret.archive[th.id] {
			if _, ok := direct[th.id][id]; ok {
				return rep, fmt.Errorf("%s: checkpoint %s deleted by retention is still there", th.id, id)
			}
			direct[th.id][id] = f
		}
		rep.Threads++
		rep.TurnsWritten += int(th.done.Load())
	}
	rep.Verdict = rec.verify(direct, retained)
	rep.Immediate, rep.ImmediateExamples = rec.wrong, rec.examples

	rep.Codes = map[string]map[string]int{}
	for op, m := range tl.codes {
		rep.Codes[op] = map[string]int{}
		for c, n := range m {
			rep.Codes[op][c.String()] = n
		}
	}
	rep.Outcomes = tl.outcomes
	rep.MeanMS, rep.MaxMS = map[string]float64{}, map[string]float64{}
	for op, d := range tl.took {
		n := 0
		for _, k := range tl.codes[op] {
			n += k
		}
		rep.MeanMS[op] = float64(d) / 1e6 / float64(max(n, 1))
		rep.MaxMS[op] = float64(tl.slowest[op]) / 1e6
	}
	rep.ErrorExamples = map[string]string{}
	for c, e := range tl.examples {
		rep.ErrorExamples[c.String()] = e
	}
	last := make([]time.Duration, len(restarts))
	for _, u := range tl.unavailable {
		ok := false
		for i, r := range restarts {
			if u[1].After(r.Start.Add(-time.Second)) && u[0].Before(r.End.Add(unavailableGrace)) {
				ok = true
				rep.Restarts[i].Unavailable++
				last[i] = max(last[i], u[1].Sub(r.End))
				break
			}
		}
		if !ok {
			rep.UnavailableOutside++
		}
	}
	for i := range rep.Restarts {
		rep.Restarts[i].LastUnavailable = last[i].Round(time.Millisecond).String()
	}
	// Warm-up ends after cfg.warmup of the calls, and not before the
	// caches are full (90 % of their bound): until then they grow by
	// design.
	warm := int64(cfg.warmup * float64(cfg.calls))
	rep.CachesFullAt = -1
	for _, s := range rep.RSS {
		if s.CacheCap > 0 && s.CacheBytes >= s.CacheCap*9/10 {
			warm = max(warm, s.Calls)
			rep.CachesFullAt = s.Calls
			break
		}
	}
	rep.WarmCalls = warm
	for _, s := range rep.RSS {
		if s.Calls < warm {
			continue
		}
		if rep.RSSWarmMin == 0 || s.RSS < rep.RSSWarmMin {
			rep.RSSWarmMin = s.RSS
		}
		rep.RSSWarmMax = max(rep.RSSWarmMax, s.RSS)
	}
	if rep.CachesFullAt >= 0 {
		rep.RSSLevels = levels(rep.RSS, warm)
	}
	return rep, nil
}

// levels is the median RSS of each fifth of the samples taken after warm
// calls.
func levels(samples []sample, warm int64) []int64 {
	var after []int64
	for _, s := range samples {
		if s.Calls >= warm {
			after = append(after, s.RSS)
		}
	}
	if len(after) < 10 {
		return nil
	}
	out := make([]int64, 5)
	for i := range out {
		part := slices.Clone(after[i*len(after)/5 : (i+1)*len(after)/5])
		slices.Sort(part)
		out[i] = part[len(part)/2]
	}
	return out
}

func (r *recorder) wrongCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrong
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "soak: %s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// setupTables creates LangGraph.js's PostgresSaver tables in the DSN's
// search_path, empties them, and lets role read them.
func setupTables(ctx context.Context, db *pgxpool.Pool, role string) error {
	stmts := saver.PostgresJS.DDL("")
	stmts = append(stmts, "TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")
	r := pgx.Identifier{role}.Sanitize()
	stmts = append(stmts, "GRANT USAGE ON SCHEMA public TO "+r, "GRANT SELECT ON checkpoints, checkpoint_blobs, checkpoint_writes TO "+r)
	for _, s := range stmts {
		if _, err := db.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", firstLine(s), err)
		}
	}
	return nil
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// writeTokens writes the token file: each tenant's token, hashed, mapped
// to its prefix.
func writeTokens(path string) error {
	var ts []any
	for _, t := range tenants {
		ts = append(ts, map[string]any{"name": t.name, "thread_prefixes": []string{t.prefix}, "token_sha256": []string{auth.HashToken(t.token)}})
	}
	b, err := json.Marshal(map[string]any{"tenants": ts})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// pgTest runs scripts/pg-test.sh with args, in the caller's environment
// (PG_TEST_ENV_FILE names the cluster).
func pgTest(ctx context.Context, repo string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "scripts", "pg-test.sh"), args...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// metrics reads historyd's /metrics and sums each metric's series by
// name (historyd_cache_bytes over its caches, …).
func metrics(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("read /metrics: %w", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name, _, _ := strings.Cut(line[:i], "{")
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[name] += v
		}
	}
	return out, sc.Err()
}

// goroutines reads go_goroutines from historyd's /metrics.
func goroutines(addr string) (int, error) {
	m, err := metrics(addr)
	if err != nil {
		return 0, err
	}
	n, ok := m["go_goroutines"]
	if !ok {
		return 0, fmt.Errorf("no go_goroutines in /metrics")
	}
	return int(n), nil
}

// failures lists the checks the run failed.
func (r *report) failures() []string {
	var out []string
	for op, m := range r.Codes {
		for c, n := range m {
			if c != codes.OK.String() && c != codes.Unavailable.String() {
				out = append(out, fmt.Sprintf("%d %s calls answered %s (%s)", n, op, c, r.ErrorExamples[c]))
			}
		}
	}
	if r.UnavailableOutside > 0 {
		out = append(out, fmt.Sprintf("%d calls answered UNAVAILABLE outside every restart", r.UnavailableOutside))
	}
	if r.Immediate > 0 {
		out = append(out, fmt.Sprintf("%d answers wrong at once: %s", r.Immediate, strings.Join(r.ImmediateExamples, "; ")))
	}
	if r.Verdict.Wrong > 0 {
		out = append(out, fmt.Sprintf("%d claims (%d answers) wrong against the direct read: %s", r.Verdict.Wrong, r.Verdict.WrongAnswers, strings.Join(r.Verdict.Examples, "; ")))
	}
	for _, rs := range r.Restarts {
		if rs.Err != "" {
			out = append(out, rs.What+" failed: "+rs.Err)
		}
	}
	if !r.cfg.noRestarts && len(r.Restarts) != 3 {
		out = append(out, fmt.Sprintf("%d of 3 restarts done", len(r.Restarts)))
	}
	if len(r.RSSLevels) > 0 && float64(slices.Max(r.RSSLevels)) > 1.1*float64(r.RSSLevels[0]) {
		out = append(out, fmt.Sprintf("resident memory after warm-up rose from %s to %s (medians of each fifth of the samples): more than 10%%", mib(r.RSSLevels[0]), mib(slices.Max(r.RSSLevels))))
	}
	if r.GoroutinesEnd != r.GoroutinesStart {
		out = append(out, fmt.Sprintf("goroutines %d at the start, %d at the end", r.GoroutinesStart, r.GoroutinesEnd))
	}
	slices.Sort(out)
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Soak: %d calls at concurrency %d\n\n", r.Calls, r.Concurrency)
	if r.Calls < r.Requested {
		fmt.Fprintf(&b, "- **cut short (--max-duration %s, or interrupted): %d of the %d calls asked for were made**\n", r.cfg.maxDuration, r.Calls, r.Requested)
	}
	fmt.Fprintf(&b, "- duration %s, %.0f calls/s, latency p50 %s, p99 %s, max %s\n", r.Duration.Round(time.Second), r.CallsPerSecond,
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(time.Millisecond))
	fmt.Fprintf(&b, "- %d threads, %d turns written, %d checkpoints deleted by retention, %d writer statements retried\n",
		r.Threads, r.TurnsWritten, r.CheckpointsDeleted, r.WriterRetries)
	b.WriteString("- restarts:\n")
	for _, rs := range r.Restarts {
		fmt.Fprintf(&b, "  - %s at call %d (%.0f s in), took %s; %d calls UNAVAILABLE, the last answered %s after it ended %s\n",
			rs.What, rs.AtCalls, rs.StartS, rs.Took, rs.Unavailable, rs.LastUnavailable, rs.Err)
	}
	b.WriteString("\n| call | " + strings.Join(codeCols(r.Codes), " | ") + " | mean | max |\n|---|" + strings.Repeat("---:|", len(codeCols(r.Codes))+2) + "\n")
	ops := slices.Sorted(maps.Keys(r.Codes))
	totals := map[string]int{}
	for _, op := range ops {
		fmt.Fprintf(&b, "| %s |", op)
		for _, c := range codeCols(r.Codes) {
			fmt.Fprintf(&b, " %d |", r.Codes[op][c])
			totals[c] += r.Codes[op][c]
		}
		fmt.Fprintf(&b, " %.1f ms | %.0f ms |\n", r.MeanMS[op], r.MaxMS[op])
	}
	b.WriteString("| **all** |")
	for _, c := range codeCols(r.Codes) {
		fmt.Fprintf(&b, " **%d** |", totals[c])
	}
	b.WriteString(" | |\n\nOK answers by outcome:\n\n")
	for _, k := range slices.Sorted(maps.Keys(r.Outcomes)) {
		fmt.Fprintf(&b, "- %s: %d\n", k, r.Outcomes[k])
	}
	for _, c := range slices.Sorted(maps.Keys(r.ErrorExamples)) {
		fmt.Fprintf(&b, "- first %s: %s\n", c, r.ErrorExamples[c])
	}
	fmt.Fprintf(&b, "\n- UNAVAILABLE outside the restarts (±%s): %d\n", unavailableGrace, r.UnavailableOutside)
	fmt.Fprintf(&b, "- wrong at once (totals, turns, tenants, listings): %d\n", r.Immediate)
	fmt.Fprintf(&b, "- checked against the direct read: %d claims made by %d answers; wrong: %d claims, %d answers\n",
		r.Verdict.Claims, r.Verdict.Answers, r.Verdict.Wrong, r.Verdict.WrongAnswers)
	for _, e := range append(append([]string{}, r.ImmediateExamples...), r.Verdict.Examples...) {
		fmt.Fprintf(&b, "  - %s\n", e)
	}
	var lo, hi int64
	for _, s := range r.RSS {
		if lo == 0 || s.RSS < lo {
			lo = s.RSS
		}
		hi = max(hi, s.RSS)
	}
	full := "never"
	if r.CachesFullAt >= 0 {
		full = fmt.Sprintf("at call %d", r.CachesFullAt)
	}
	fmt.Fprintf(&b, "- historyd RSS, %d samples every %s: %s–%s overall; after warm-up (call %d: %.0f%% of the calls, and the caches full, %s) %s–%s (max/min %.3f)\n",
		len(r.RSS), r.cfg.rssEvery, mib(lo), mib(hi), r.WarmCalls, 100*r.cfg.warmup, full, mib(r.RSSWarmMin), mib(r.RSSWarmMax), ratio(r.RSSWarmMax, r.RSSWarmMin))
	var lv []string
	for _, l := range r.RSSLevels {
		lv = append(lv, mib(l))
	}
	if len(lv) == 0 {
		b.WriteString("- memory not judged: the caches never filled, or fewer than 10 samples came after warm-up (a short run)\n")
	} else {
		fmt.Fprintf(&b, "- historyd RSS after warm-up, median of each fifth of the samples: %s (highest/first %.3f)\n",
			strings.Join(lv, ", "), ratio(slices.Max(r.RSSLevels), r.RSSLevels[0]))
	}
	fmt.Fprintf(&b, "- go_goroutines: %d at the start, %d at the end\n", r.GoroutinesStart, r.GoroutinesEnd)
	b.WriteString("\n| s | calls | RSS | caches hold | Go heap in use | goroutines |\n|---:|---:|---:|---:|---:|---:|\n")
	step := max(1, len(r.RSS)/20)
	for i, s := range r.RSS {
		if i%step == 0 || i == len(r.RSS)-1 {
			fmt.Fprintf(&b, "| %.0f | %d | %s | %s | %s | %d |\n", s.AtS, s.Calls, mib(s.RSS), mib(s.CacheBytes), mib(s.HeapInuse), s.Goroutines)
		}
	}
	return b.String()
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func codeCols(m map[string]map[string]int) []string {
	set := map[string]bool{codes.OK.String(): true}
	for _, cs := range m {
		for c := range cs {
			set[c] = true
		}
	}
	out := slices.Sorted(maps.Keys(set))
	slices.SortStableFunc(out, func(a, b string) int {
		if a == codes.OK.String() {
			return -1
		}
		if b == codes.OK.String() {
			return 1
		}
		return 0
	})
	return out
}

package run

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/historyd/historyd/bench/load"
	"github.com/historyd/historyd/bench/prof"
	"github.com/historyd/historyd/bench/py"
)

// Floors the project reports against.
const (
	p1MinSpeedup     = 20.0
	p1MaxMemoryShare = 0.10
	p2MaxRatio       = 1.5
	p3MinShare       = 0.6  // of the no-op RPC's rate
	p4MaxGrowth      = 40e6 // bytes
)

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// refCall is one timed turns_from call of the reference.
type refCall struct {
	Turn         int     `json:"turn"`
	Seconds      float64 `json:"seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	Total        int     `json:"total"`
	CheckpointID *string `json:"checkpoint_id"`
	Keys         *int    `json:"keys"`
}

type refOut struct {
	Thread           string           `json:"thread"`
	Calls            []refCall        `json:"calls"`
	BaselineRSS      int64            `json:"baseline_rss_bytes"`
	PeakRSS          int64            `json:"peak_rss_bytes"`
	RSSGrowth        int64            `json:"rss_growth_bytes"`
	RUMaxRSSDelta    int64            `json:"ru_maxrss_delta_bytes"`
	HWMReset         bool             `json:"hwm_reset"`
	TracemallocPeaks map[string]int64 `json:"tracemalloc_peak_bytes,omitempty"`
}

func (r *runner) reference(ctx context.Context, thread string, turns []int, repeat int, tracemalloc bool) (refOut, error) {
	var ts []string
	for _, t := range turns {
		ts = append(ts, strconv.Itoa(t))
	}
	args := []string{"reference", "--dsn", r.cfg.DSN, "--thread", thread, "--turns", strings.Join(ts, ","), "--repeat", strconv.Itoa(repeat), "--warm", r.name("warm")}
	if tracemalloc {
		args = append(args, "--tracemalloc")
	}
	var out refOut
	err := py.Run(ctx, r.cfg.Python, &out, args...)
	return out, err
}

func (o refOut) median(turn int) time.Duration {
	return o.medianOf(turn, func(c refCall) float64 { return c.Seconds })
}

func (o refOut) medianCPU(turn int) time.Duration {
	return o.medianOf(turn, func(c refCall) float64 { return c.CPUSeconds })
}

func (o refOut) medianOf(turn int, f func(refCall) float64) time.Duration {
	var s []float64
	for _, c := range o.Calls {
		if c.Turn == turn {
			s = append(s, f(c))
		}
	}
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	return time.Duration(s[len(s)/2] * float64(time.Second))
}

// hdTurn is historyd serving one turn in a fresh process.
type hdTurn struct {
	Turn         int           `json:"turn"`
	Cold         time.Duration `json:"cold_ns"`
	Warm         load.Result   `json:"warm"`
	WarmCPU      time.Duration `json:"warm_cpu_per_request_ns"`
	Growth       int64         `json:"rss_growth_bytes"`
	IdleRSS      int64         `json:"idle_rss_bytes"`
	CheckpointID string        `json:"checkpoint_id"`
	Entries      int           `json:"entries"`
	Total        int           `json:"total"`
}

// serveTurn starts a fresh historyd (warmed on the small warm-up thread),
// asks for one turn once cold and then warm times in a row, and returns
// the latencies and the peak RSS growth over the idle process.
func (r *runner) serveTurn(ctx context.Context, label, thread string, turn, warm int) (hdTurn, error) {
	s, base, err := r.start(ctx, label, true)
	if err != nil {
		return hdTurn{}, err
	}
	defer s.Stop()
	res := hdTurn{Turn: turn, IdleRSS: base.RSS}
	target := load.Target{Thread: thread, Turn: turn}
	t0 := time.Now()
	rep, err := s.Do(ctx, load.Snapshot, target)
	if err != nil {
		return res, err
	}
	res.Cold = time.Since(t0)
	res.CheckpointID, res.Entries, res.Total = rep.CheckpointID, rep.Entries, rep.Total
	if warm > 0 {
		cpu0, err := load.CPUTime(s.Pid)
		if err != nil {
			return res, err
		}
		res.Warm = load.Drive(ctx, 1, warm, 0, func(ctx context.Context, _, _ int) error {
			_, err := s.Do(ctx, load.Snapshot, target)
			return err
		})
		if res.Warm.Errors > 0 {
			return res, fmt.Errorf("Snapshot(%s, %d): %s", thread, turn, res.Warm.FirstError)
		}
		cpu1, err := load.CPUTime(s.Pid)
		if err != nil {
			return res, err
		}
		res.WarmCPU = (cpu1 - cpu0) / time.Duration(res.Warm.Requests)
	}
	res.Growth, err = growth(s, base)
	return res, err
}

// p1: one turn of a 50-turn thread with ~1 MB of state, historyd against
// the reference: latency, and peak memory growth.
func (r *runner) p1(ctx context.Context) error {
	thread := r.name("p1")
	var hd []hdTurn
	for _, turn := range r.plan.p1Turns {
		res, err := r.serveTurn(ctx, fmt.Sprintf("p1-turn%d", turn), thread, turn, r.plan.p1Warm)
		if err != nil {
			return err
		}
		r.logf("P1 historyd turn %d: cold %s, warm %s, peak RSS +%s", turn, msText(res.Cold), res.Warm, mbText(res.Growth))
		hd = append(hd, res)
	}
	loadHD := load.LoadAvg()[0]
	r.logf("P1 reference: turns_from(saver, %s, keep=%v) × %d", thread, r.plan.p1Turns, r.plan.p1Repeat)
	ref, err := r.reference(ctx, thread, r.plan.p1Turns, r.plan.p1Repeat, false)
	if err != nil {
		return err
	}
	loadRef := load.LoadAvg()[0]
	detail := map[string]any{"historyd": hd, "reference": ref}
	if r.plan.tracemalloc {
		tm, err := r.reference(ctx, thread, r.plan.p1Turns, 1, true)
		if err != nil {
			return err
		}
		detail["reference_tracemalloc"] = tm.TracemallocPeaks
	}
	r.detail("p1", detail)

	// Same question, same answer: the turn ends on the same checkpoint.
	for _, h := range hd {
		for _, c := range ref.Calls {
			if c.Turn == h.Turn && (c.CheckpointID == nil || *c.CheckpointID != h.CheckpointID || c.Total != h.Total) {
				return fmt.Errorf("turn %d: historyd ends it at %s (total %d), the reference at %v (total %d)", h.Turn, h.CheckpointID, h.Total, c.CheckpointID, c.Total)
			}
		}
	}

	minWarm, minCold := 0.0, 0.0
	var hdText, refText, ratioText []string
	var hdGrowth int64
	for i, h := range hd {
		med := ref.median(h.Turn)
		warm := float64(med) / float64(h.Warm.P50)
		cold := float64(med) / float64(h.Cold)
		if i == 0 || warm < minWarm {
			minWarm = warm
		}
		if i == 0 || cold < minCold {
			minCold = cold
		}
		medCPU := ref.medianCPU(h.Turn)
		hdText = append(hdText, fmt.Sprintf("turn %d: warm p50 %s (p99 %s, %s CPU per request), cold %s",
			h.Turn, msText(h.Warm.P50), msText(h.Warm.P99), msText(h.WarmCPU), msText(h.Cold)))
		refText = append(refText, fmt.Sprintf("turn %d: %s (%s CPU), median of %d", h.Turn, msText(med), msText(medCPU), r.plan.p1Repeat))
		ratioText = append(ratioText, fmt.Sprintf("%.0f× warm, %.0f× cold; CPU %.0f×", warm, cold, float64(medCPU)/float64(h.WarmCPU)))
		hdGrowth = max(hdGrowth, h.Growth)
	}
	desc := fmt.Sprintf("%d turns, tool_state %s", r.plan.p1.Turns, sizeText(r.plan.p1.StateBytes))
	r.add(Row{ID: "P1", What: "latency of `Snapshot(turn)` vs `turns_from(saver, thread, keep=turn)`, " + desc,
		Historyd: strings.Join(hdText, "; "), Other: strings.Join(refText, "; "), Ratio: strings.Join(ratioText, "; "),
		Floor: fmt.Sprintf("≥ %.0f× faster", p1MinSpeedup), Verdict: verdict(minWarm >= p1MinSpeedup) + " (on warm p50)", Load1: max(loadHD, loadRef)})
	if minWarm < p1MinSpeedup {
		r.misses["P1 latency"] = true
	}
	share := float64(hdGrowth) / float64(ref.RSSGrowth)
	other := fmt.Sprintf("+%s (VmHWM − idle VmRSS, %d call(s) after a warm-up call)", mbText(ref.RSSGrowth), len(ref.Calls))
	if tm, ok := detail["reference_tracemalloc"].(map[string]int64); ok {
		var parts []string
		for _, t := range r.plan.p1Turns {
			parts = append(parts, fmt.Sprintf("turn %d %s", t, mbText(tm[strconv.Itoa(t)])))
		}
		other += "; tracemalloc peak " + strings.Join(parts, ", ")
	}
	r.add(Row{ID: "P1", What: "peak RSS growth answering the same question, " + desc,
		Historyd: fmt.Sprintf("+%s (VmHWM − idle VmRSS, cold + %d warm requests)", mbText(hdGrowth), r.plan.p1Warm),
		Other:    other, Ratio: fmt.Sprintf("historyd = %.2f × reference", share),
		Floor: "≤ 1/10 of the reference", Verdict: verdict(share <= p1MaxMemoryShare), Load1: loadRef})
	if share > p1MaxMemoryShare {
		r.misses["P1 memory"] = true
	}
	return nil
}

// p2: warm Snapshot latency at 500 turns against 5 turns, interleaved in
// blocks so that both see the same machine load. Warm means every turn the
// measurement asks for has been served once, so that both threads are
// answered from historyd's caches; a 5-turn thread is after five requests,
// a 500-turn thread only after every turn was asked. A second process with
// the state cache off measures the path that reads and decodes the turn's
// state on every request, which must be as flat.
func (r *runner) p2(ctx context.Context) error {
	warm, err := r.p2Run(ctx, "p2", true)
	if err != nil {
		return err
	}
	ratio := warm.ratio()
	r.add(warm.row("P2", "warm `Snapshot(turn)` p50, every asked turn served once before", ratio, fmt.Sprintf("≤ %.1f", p2MaxRatio), verdict(ratio <= p2MaxRatio)))
	if ratio > p2MaxRatio {
		r.misses["P2"] = true
	}
	uncached, err := r.p2Run(ctx, "p2-nocache", false, "HISTORYD_CACHE_STATE_BYTES=0")
	if err != nil {
		return err
	}
	r.add(uncached.row("P2′", "the same with the state cache off (`--cache-state-bytes 0`): every request reads and decodes its turn's state", uncached.ratio(), "–", "–"))
	return nil
}

// p2Result is one P2 measurement.
type p2Result struct {
	plan                    plan
	short, long             load.Result
	cpuShort, cpuLong       CPUShare
	coldShort, coldLong     time.Duration
	coldGrowth, idle, after int64
	requests                int
}

func (p p2Result) ratio() float64 { return float64(p.long.P50) / float64(p.short.P50) }

func (p p2Result) row(id, what string, ratio float64, floor, verdict string) Row {
	return Row{ID: id, What: fmt.Sprintf("%s, %d turns vs %d turns (%s state, c=1, %d requests each, interleaved)",
		what, p.plan.p2Long.Turns, p.plan.p2Short.Turns, sizeText(p.plan.p2Long.StateBytes), p.requests),
		Historyd: fmt.Sprintf("%s (p99 %s) vs %s (p99 %s); CPU per request historyd %s vs %s, PostgreSQL %s vs %s; cold first request %s vs %s, peak RSS +%s for both, RSS %s a second later (idle %s)",
			msText(p.long.P50), msText(p.long.P99), msText(p.short.P50), msText(p.short.P99),
			msText(p.cpuLong.Historyd), msText(p.cpuShort.Historyd), msText(p.cpuLong.Postgres), msText(p.cpuShort.Postgres),
			msText(p.coldLong), msText(p.coldShort), mbText(p.coldGrowth), mbText(p.after), mbText(p.idle)),
		Ratio: fmt.Sprintf("%.2f", ratio), Floor: floor, Verdict: verdict}
}

func (r *runner) p2Run(ctx context.Context, label string, warmAll bool, env ...string) (p2Result, error) {
	s, base, err := r.start(ctx, label, false, env...)
	if err != nil {
		return p2Result{}, err
	}
	defer s.Stop()
	short, long := r.name("p2short"), r.name("p2long")
	cold := map[string]time.Duration{}
	for _, th := range []string{short, long} {
		t0 := time.Now()
		if _, err := s.Do(ctx, load.Snapshot, load.Target{Thread: th, Turn: 1}); err != nil {
			return p2Result{}, err
		}
		cold[th] = time.Since(t0)
	}
	// What the first request of the long thread cost in memory, and what
	// the process still holds afterwards.
	coldGrowth, err := growth(s, base)
	if err != nil {
		return p2Result{}, err
	}
	threads := []struct {
		id    string
		turns int
	}{{short, r.plan.p2Short.Turns}, {long, r.plan.p2Long.Turns}}
	const block = 50
	turnOf := func(round, i, turns int) int { return 1 + (round*block+i)*7919%turns }
	if warmAll {
		for _, th := range threads {
			seen := map[int]bool{}
			for round := range r.plan.p2Rounds {
				for i := range block {
					if n := turnOf(round, i, th.turns); !seen[n] {
						seen[n] = true
						if _, err := s.Do(ctx, load.Snapshot, load.Target{Thread: th.id, Turn: n}); err != nil {
							return p2Result{}, err
						}
					}
				}
			}
		}
	}
	time.Sleep(time.Second)
	after, err := load.ReadMem(s.Pid)
	if err != nil {
		return p2Result{}, err
	}
	lat := map[string][]time.Duration{}
	cpu := map[string]cpuSnap{}
	for round := range r.plan.p2Rounds {
		for _, th := range threads {
			s0, err := r.cpuNow(ctx, s)
			if err != nil {
				return p2Result{}, err
			}
			for i := range block {
				t0 := time.Now()
				if _, err := s.Do(ctx, load.Snapshot, load.Target{Thread: th.id, Turn: turnOf(round, i, th.turns)}); err != nil {
					return p2Result{}, err
				}
				lat[th.id] = append(lat[th.id], time.Since(t0))
			}
			s1, err := r.cpuNow(ctx, s)
			if err != nil {
				return p2Result{}, err
			}
			acc := cpu[th.id]
			acc.historyd += s1.historyd - s0.historyd
			acc.postgres += s1.postgres - s0.postgres
			acc.driver += s1.driver - s0.driver
			cpu[th.id] = acc
		}
	}
	res := p2Result{
		plan: r.plan, short: load.Summarize(lat[short]), long: load.Summarize(lat[long]),
		cpuShort: share(cpuSnap{}, cpu[short], len(lat[short])), cpuLong: share(cpuSnap{}, cpu[long], len(lat[long])),
		coldShort: cold[short], coldLong: cold[long], coldGrowth: coldGrowth, idle: base.RSS, after: after.RSS,
		requests: len(lat[long]),
	}
	r.detail(label, map[string]any{"warm_all": warmAll, "env": env, "cold": cold, "short": res.short, "long": res.long,
		"cpu_short": res.cpuShort, "cpu_long": res.cpuLong,
		"cold_rss_growth_bytes": coldGrowth, "idle_rss_bytes": base.RSS, "rss_after_cold_bytes": after.RSS})
	return res, nil
}

// p3: warm small-state Snapshot throughput against half pgbench -S.
func (r *runner) p3(ctx context.Context) error {
	op, ok := r.ops["small/"+string(load.Snapshot)]
	if !ok {
		return fmt.Errorf("no small Snapshot measurement")
	}
	c := r.cfg.Concurrency
	share := op.Many.RPS / r.noopRPS
	r.add(Row{ID: "P3", What: fmt.Sprintf("warm small-state `Snapshot` throughput through the Go client (JSON values, decoded), c=%d (%d threads × %d turns, %s state), against the no-op unary RPC on the same server", c, r.plan.smallThreads, r.plan.small.Turns, sizeText(r.plan.small.StateBytes)),
		Historyd: fmt.Sprintf("%.0f req/s (p50 %s, p99 %s); %s", op.Many.RPS, msText(op.Many.P50), msText(op.Many.P99), op.ManyCPU),
		Other:    fmt.Sprintf("no-op gRPC c=%d: %.0f req/s; pgbench -S: %.0f TPS", c, r.noopRPS, r.pgbenchTPS),
		Ratio:    fmt.Sprintf("%.2f × no-op", share), Floor: fmt.Sprintf("≥ %.1f × no-op (%.0f req/s)", p3MinShare, p3MinShare*r.noopRPS),
		Verdict: verdict(share >= p3MinShare), Load1: op.Many.Load1})
	if share < p3MinShare {
		r.misses["P3"] = true
	}
	return r.p3Raw(ctx)
}

// p3Raw repeats P3's load with a driver that takes each answer as bytes
// without decoding it: the same requests and answers on the wire, minus
// the client's work of turning state into Go values, which runs on the
// same two CPUs. It says what the server side sustains; the verdict stays
// with P3.
func (r *runner) p3Raw(ctx context.Context) error {
	s, _, err := r.start(ctx, "p3-raw", false)
	if err != nil {
		return err
	}
	defer s.Stop()
	// Warm: every turn of every small thread served once.
	for i := range r.plan.smallThreads {
		for n := 1; n <= r.plan.small.Turns; n++ {
			if _, err := s.Do(ctx, load.Snapshot, load.Target{Thread: r.name(fmt.Sprintf("small%03d", i)), Turn: n}); err != nil {
				return err
			}
		}
	}
	c := r.cfg.Concurrency
	rngs := make([]*rand.Rand, c)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(uint64(i), 3))
	}
	s0, err := r.cpuNow(ctx, s)
	if err != nil {
		return err
	}
	res := load.Drive(ctx, c, 0, r.plan.opTime, func(ctx context.Context, w, _ int) error {
		_, err := s.SnapshotRaw(ctx, r.smallTarget(rngs[w]))
		return err
	})
	s1, err := r.cpuNow(ctx, s)
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("raw Snapshot load: %d errors, first: %s", res.Errors, res.FirstError)
	}
	cpu := share(s0, s1, res.Requests)
	r.detail("p3_raw", map[string]any{"result": res, "cpu": cpu})
	r.add(Row{ID: "P3′", What: fmt.Sprintf("the same load, the driver taking each answer as bytes without decoding it, c=%d", c),
		Historyd: fmt.Sprintf("%.0f req/s (p50 %s, p99 %s); %s", res.RPS, msText(res.P50), msText(res.P99), cpu),
		Other:    fmt.Sprintf("no-op gRPC c=%d: %.0f req/s; pgbench -S: %.0f TPS", c, r.noopRPS, r.pgbenchTPS),
		Ratio:    fmt.Sprintf("%.2f × no-op", res.RPS/r.noopRPS), Floor: "–", Verdict: "–", Load1: res.Load1})
	return nil
}

// p4: peak RSS growth while serving one turn of a 10-turn thread with
// 4.3 MB of state, each turn in a fresh process.
func (r *runner) p4(ctx context.Context) error {
	thread := r.name("p4")
	var hd []hdTurn
	worst := hdTurn{}
	for _, turn := range r.plan.p4Turns {
		res, err := r.serveTurn(ctx, fmt.Sprintf("p4-turn%d", turn), thread, turn, 4)
		if err != nil {
			return err
		}
		r.logf("P4 turn %d: cold %s, peak RSS +%s over idle %s", turn, msText(res.Cold), mbText(res.Growth), mbText(res.IdleRSS))
		hd = append(hd, res)
		if res.Growth > worst.Growth {
			worst = res
		}
	}
	detail := map[string]any{"historyd": hd}
	other := ""
	if r.plan.p4Reference {
		ref, err := r.reference(ctx, thread, []int{5}, 2, false)
		if err != nil {
			return err
		}
		detail["reference"] = ref
		other = fmt.Sprintf("reference turns_from keep=5: +%s, median %s", mbText(ref.RSSGrowth), msText(ref.median(5)))
	}
	r.detail("p4", detail)
	var turns []string
	for _, t := range r.plan.p4Turns {
		turns = append(turns, strconv.Itoa(t))
	}
	r.add(Row{ID: "P4", What: fmt.Sprintf("peak RSS growth serving one turn, %d turns × %s state (turns %s, each in a fresh process, 1 cold + 4 warm requests)",
		r.plan.p4.Turns, sizeText(r.plan.p4.StateBytes), strings.Join(turns, ", ")),
		Historyd: fmt.Sprintf("max +%s (turn %d; idle RSS %s; cold %s, warm p50 %s)", mbText(worst.Growth), worst.Turn, mbText(worst.IdleRSS), msText(worst.Cold), msText(worst.Warm.P50)),
		Other:    other, Floor: "≤ 40 MB", Verdict: verdict(worst.Growth <= p4MaxGrowth)})
	if worst.Growth > p4MaxGrowth {
		r.misses["P4"] = true
	}
	return nil
}

// profiles profiles the path behind each missed floor, on the profiling
// variant of the historyd binary (see bench/prof).
func (r *runner) profiles(ctx context.Context) error {
	if !r.cfg.Profile || len(r.misses) == 0 {
		return nil
	}
	c := r.cfg.Concurrency
	var jobs []ProfileJob
	p1 := r.name("p1")
	if r.misses["P1 latency"] {
		t := load.Target{Thread: p1, Turn: r.plan.p1Turns[0]}
		jobs = append(jobs, ProfileJob{Name: "p1-snapshot-warm", Op: load.Snapshot, Concurrency: 1, Duration: r.plan.profileTime,
			Target: func(int, int) load.Target { return t }, Warm: []load.Target{t}})
	}
	if r.misses["P2"] {
		long := r.name("p2long")
		jobs = append(jobs, ProfileJob{Name: "p2-snapshot-500turns", Op: load.Snapshot, Concurrency: 1, Duration: r.plan.profileTime,
			Target: func(_, i int) load.Target { return load.Target{Thread: long, Turn: 1 + i*7919%r.plan.p2Long.Turns} },
			Warm:   []load.Target{{Thread: long, Turn: 1}}})
	}
	if r.misses["P3"] {
		rngs := make([]*rand.Rand, c)
		for i := range rngs {
			rngs[i] = rand.New(rand.NewPCG(uint64(i), 9))
		}
		var warm []load.Target
		for i := range r.plan.smallThreads {
			warm = append(warm, load.Target{Thread: r.name(fmt.Sprintf("small%03d", i)), Turn: 1})
		}
		jobs = append(jobs, ProfileJob{Name: "p3-snapshot-small", Op: load.Snapshot, Concurrency: c, Duration: r.plan.profileTime,
			Target: func(w, _ int) load.Target {
				return load.Target{Thread: r.name(fmt.Sprintf("small%03d", rngs[w].IntN(r.plan.smallThreads))), Turn: 1 + rngs[w].IntN(r.plan.small.Turns)}
			},
			Warm: warm})
	}
	if r.misses["P1 memory"] || r.misses["P4"] {
		t := load.Target{Thread: r.name("p4"), Turn: r.plan.p4.Turns}
		jobs = append(jobs, ProfileJob{Name: "p4-snapshot-memory", Op: load.Snapshot, Concurrency: 1, Requests: 5,
			Target: func(int, int) load.Target { return t }, Warm: []load.Target{{Thread: r.name("warm"), Turn: 1}}})
	}
	bin := filepath.Join(r.cfg.Work, "historyd-profiling")
	if err := prof.Build(ctx, r.cfg.Repo, bin); err != nil {
		return err
	}
	dir := filepath.Join(r.cfg.Work, "profiles")
	if err := mkdir(dir); err != nil {
		return err
	}
	for _, j := range jobs {
		res, err := RunProfile(ctx, bin, r.cfg.DSN, dir, j)
		if err != nil {
			return fmt.Errorf("profile %s: %w", j.Name, err)
		}
		r.logf("profile %s: %s; peak RSS +%s, Go heap in use peak %s → %s", j.Name, res.Load, mbText(res.RSSGrowth), mbText(int64(res.Mem.PeakHeapInuse)), res.Report)
		r.rep.Profiles = append(r.rep.Profiles, res.Report)
	}
	return nil
}

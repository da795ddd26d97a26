package run

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"

	"github.com/historyd/historyd/bench/load"
)

// poolerVariant is one way historyd reaches PostgreSQL.
type poolerVariant struct {
	label string
	dsn   string
	env   []string
}

// poolerResult is one variant's measurement of one load.
type poolerResult struct {
	Variant string      `json:"variant"`
	Load    string      `json:"load"`
	One     load.Result `json:"c1"`
	Many    load.Result `json:"cN"`
	ManyCPU CPUShare    `json:"cN_cpu"`
}

// pooler measures what --pooler transaction costs: the warm small-state
// Snapshot of P3, and the same with historyd's caches off (every request
// lists the thread and reads its state from PostgreSQL), each served by
// historyd connected directly with its default settings (named prepared
// statements, generic plans), directly with --pooler transaction (each
// statement parsed and planned where it runs, no session settings), and,
// when the bench has a PgBouncer (Config.PoolerDSN), through PgBouncer in
// transaction mode with --pooler transaction.
func (r *runner) pooler(ctx context.Context) error {
	variants := []poolerVariant{
		{"direct, default", r.cfg.DSN, nil},
		{"direct, --pooler transaction", r.cfg.DSN, []string{"HISTORYD_POOLER=transaction"}},
	}
	if r.cfg.PoolerDSN != "" {
		variants = append(variants, poolerVariant{"PgBouncer transaction mode, --pooler transaction", r.cfg.PoolerDSN, []string{"HISTORYD_POOLER=transaction"}})
	}
	loads := []struct {
		label string
		env   []string
	}{
		{"warm Snapshot", nil},
		{"Snapshot, caches off", []string{"HISTORYD_CACHE_THREADS=0", "HISTORYD_CACHE_STATE_BYTES=0"}},
	}
	c := r.cfg.Concurrency
	var all []poolerResult
	for _, l := range loads {
		var got []poolerResult
		var parts []string
		for _, v := range variants {
			res, err := r.poolerLoad(ctx, v, l.label, append(append([]string{}, v.env...), l.env...))
			if err != nil {
				return fmt.Errorf("%s, %s: %w", l.label, v.label, err)
			}
			got = append(got, res)
			text := fmt.Sprintf("%s: c=1 p50 %s; c=%d %.0f req/s p50/p99 %s/%s, %s CPU per request (historyd %s, PostgreSQL %s)",
				v.label, msText(res.One.P50), c, res.Many.RPS, msText(res.Many.P50), msText(res.Many.P99),
				msText(res.ManyCPU.Total()), msText(res.ManyCPU.Historyd), msText(res.ManyCPU.Postgres))
			if len(got) > 1 {
				text += fmt.Sprintf(" (%.2f × direct's req/s)", res.Many.RPS/got[0].Many.RPS)
			}
			parts = append(parts, text)
		}
		all = append(all, got...)
		r.add(Row{ID: "B1", What: fmt.Sprintf("pooler-safe query mode (--pooler transaction), %s, %d threads × %d turns, %s state", l.label, r.plan.smallThreads, r.plan.small.Turns, sizeText(r.plan.small.StateBytes)),
			Historyd: strings.Join(parts, "; "), Other: "the same historyd connected directly, default settings",
			Ratio: fmt.Sprintf("%.2f × req/s", got[1].Many.RPS/got[0].Many.RPS), Floor: "–", Verdict: "–", Load1: got[0].Many.Load1})
	}
	r.detail("pooler", all)
	return nil
}

func (r *runner) poolerLoad(ctx context.Context, v poolerVariant, label string, env []string) (poolerResult, error) {
	res := poolerResult{Variant: v.label, Load: label}
	name := strings.NewReplacer(" ", "-", ",", "", "--", "").Replace(v.label + "-" + label)
	s, err := load.Start(ctx, r.bin, v.dsn, filepath.Join(r.cfg.Work, "logs", "historyd-pooler-"+name+".log"), env...)
	if err != nil {
		return res, err
	}
	defer s.Stop()
	// Warm: every turn of every small thread served once.
	for i := range r.plan.smallThreads {
		for n := 1; n <= r.plan.small.Turns; n++ {
			if _, err := s.Do(ctx, load.Snapshot, load.Target{Thread: r.name(fmt.Sprintf("small%03d", i)), Turn: n}); err != nil {
				return res, err
			}
		}
	}
	c := r.cfg.Concurrency
	rngs := make([]*rand.Rand, c)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(uint64(i), 5))
	}
	call := func(ctx context.Context, w, _ int) error {
		_, err := s.Do(ctx, load.Snapshot, r.smallTarget(rngs[w]))
		return err
	}
	res.One = load.Drive(ctx, 1, 0, r.plan.opTime, call)
	s0, err := r.cpuNow(ctx, s)
	if err != nil {
		return res, err
	}
	res.Many = load.Drive(ctx, c, 0, r.plan.opTime, call)
	s1, err := r.cpuNow(ctx, s)
	if err != nil {
		return res, err
	}
	res.ManyCPU = share(s0, s1, res.Many.Requests)
	if res.One.Errors+res.Many.Errors > 0 {
		return res, fmt.Errorf("%d requests failed, first: %s%s", res.One.Errors+res.Many.Errors, res.One.FirstError, res.Many.FirstError)
	}
	return res, nil
}

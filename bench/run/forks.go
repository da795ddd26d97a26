package run

// The forks row: turns are numbered on the lineage of the thread's head,
// so a thread rewound now and then (time travel: a question asked again
// from an older turn's end) costs its lineage, its abandoned branches
// listed as forks beside it. The row reads the last turn of a long thread
// rewound p.forks.Forks times, cold (the first Snapshot of a fresh
// process), against the same thread never rewound.

import (
	"context"
	"fmt"
	"time"
)

// forksMaxRatio is the floor: the rewound thread's cold read costs at most
// this many times the one never rewound.
const forksMaxRatio = 1.2

func (r *runner) forks(ctx context.Context) error {
	p := r.plan.forks
	plain, forked := r.name("p2long"), r.name("forks")
	turn := p.Turns
	var cold [2][]time.Duration
	// Alternated, so that a machine busier for a while weighs on both.
	for i := range r.plan.forkReads {
		for j, thread := range []string{plain, forked} {
			res, err := r.serveTurn(ctx, fmt.Sprintf("forks-%d-%d", j, i), thread, turn, 0)
			if err != nil {
				return fmt.Errorf("Snapshot(%s, %d): %w", thread, turn, err)
			}
			if res.Total != p.Turns {
				return fmt.Errorf("Snapshot(%s, %d): total %d, want %d: the abandoned turns were counted", thread, turn, res.Total, p.Turns)
			}
			cold[j] = append(cold[j], res.Cold)
		}
	}
	seconds := func(d time.Duration) float64 { return d.Seconds() }
	noForks, withForks := medianOf(cold[0], seconds), medianOf(cold[1], seconds)
	ratio := float64(withForks) / float64(noForks)
	r.detail("forks", map[string]any{"plain_cold_ns": cold[0], "forked_cold_ns": cold[1]})
	r.logf("forks: cold Snapshot %s with %d forks vs %s without", msText(withForks), p.Forks, msText(noForks))
	r.add(Row{ID: "F1", What: fmt.Sprintf("cold first `Snapshot(turn %d)` of a %d-turn thread rewound %d times (each fork an abandoned turn) vs the same thread never rewound (%s state, a fresh process each, median of %d)",
		turn, p.Turns, p.Forks, sizeText(p.StateBytes), r.plan.forkReads),
		Historyd: fmt.Sprintf("%s vs %s", msText(withForks), msText(noForks)),
		Ratio:    fmt.Sprintf("%.2f", ratio), Floor: fmt.Sprintf("≤ %.1f", forksMaxRatio), Verdict: verdict(ratio <= forksMaxRatio)})
	if ratio > forksMaxRatio {
		r.misses["F1"] = true
	}
	return nil
}

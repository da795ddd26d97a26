package run

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/historyd/historyd/bench/gen"
	"github.com/historyd/historyd/bench/py"
)

// The P6 floor: a Python host reading one turn through historyd's Python
// client against reading it through the reference in its own process.
const (
	p6MinSpeedup     = 50.0
	p6MaxMemoryShare = 0.2
)

// hostCase is one thread the host step measures, and how often.
type hostCase struct {
	role     string // the thread's role (r.name)
	params   gen.Params
	turns    []int
	client   int // client calls per turn: one cold (a fresh historyd), the rest warm
	refCalls int // reference calls per turn
	floor    bool
}

// hostCases is what the host step measures in the run's mode: the 50-turn
// 1 MB thread (the P6 floor) and the 10-turn 4.3 MB one.
func (r *runner) hostCases() []hostCase {
	if r.cfg.Full {
		return []hostCase{
			{role: "p1", params: r.plan.p1, turns: []int{1, 25, 50}, client: 51, refCalls: 3, floor: true},
			{role: "p4", params: r.plan.p4, turns: []int{1, 5, 10}, client: 11, refCalls: 2},
		}
	}
	return []hostCase{
		{role: "p1", params: r.plan.p1, turns: []int{25}, client: 21, refCalls: 1, floor: true},
		{role: "p4", params: r.plan.p4, turns: []int{5}, client: 6, refCalls: 1},
	}
}

// hostCall is one timed snapshot call of lgbench.py host.
type hostCall struct {
	Turn       int     `json:"turn"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	Total      int     `json:"total"`
	Retained   int     `json:"retained"`
	Keys       *int    `json:"keys"`
}

// hostTurn is the memory of one turn's calls, and the state they returned.
type hostTurn struct {
	BaselineRSS int64 `json:"baseline_rss_bytes"`
	// MemoryCalls is how many calls Growth covers: the first ones, as many
	// as the reference makes.
	MemoryCalls int   `json:"memory_calls"`
	Growth      int64 `json:"rss_growth_bytes"`
	// AllGrowth covers every call of the turn.
	AllGrowth int64   `json:"all_calls_rss_growth_bytes"`
	HWMReset  bool    `json:"hwm_reset"`
	Digest    *string `json:"digest"`
}

// hostOut is what lgbench.py host reports for one side.
type hostOut struct {
	Side        string              `json:"side"`
	ValueFormat string              `json:"value_format,omitempty"`
	Thread      string              `json:"thread"`
	Calls       []hostCall          `json:"calls"`
	Turns       map[string]hostTurn `json:"turns"`
}

// of returns the calls for turn, in the order they were made.
func (o hostOut) of(turn int) []hostCall {
	var out []hostCall
	for _, c := range o.Calls {
		if c.Turn == turn {
			out = append(out, c)
		}
	}
	return out
}

// median is the median of f over calls.
func median(calls []hostCall, f func(hostCall) float64) time.Duration {
	if len(calls) == 0 {
		return 0
	}
	s := make([]float64, len(calls))
	for i, c := range calls {
		s[i] = f(c)
	}
	slices.Sort(s)
	return time.Duration(s[len(s)/2] * float64(time.Second))
}

func wall(c hostCall) float64 { return c.Seconds }
func cpu(c hostCall) float64  { return c.CPUSeconds }

// hostSide is one side's figures for one turn: the first call (for the
// client, the first read of the thread by a fresh historyd: cold), the
// median of the calls after it (warm; for the reference, whose calls are all
// alike, of every call), their CPU time, and the peak RSS growth over the
// turn's calls.
type hostSide struct {
	cold, warm, cpuCold, cpuWarm time.Duration
	growth, allGrowth            int64
	calls                        int
}

func sideOf(o hostOut, turn int, coldFirst bool) hostSide {
	calls := o.of(turn)
	t := o.Turns[strconv.Itoa(turn)]
	s := hostSide{growth: t.Growth, allGrowth: t.AllGrowth, calls: len(calls)}
	if len(calls) == 0 {
		return s
	}
	s.cold = time.Duration(calls[0].Seconds * float64(time.Second))
	s.cpuCold = time.Duration(calls[0].CPUSeconds * float64(time.Second))
	rest := calls
	if coldFirst && len(calls) > 1 {
		rest = calls[1:]
	}
	s.warm, s.cpuWarm = median(rest, wall), median(rest, cpu)
	return s
}

// runHost runs lgbench.py host for one side: repeat calls per turn, the
// first memoryCalls of them measured for memory.
func (r *runner) runHost(ctx context.Context, side, target, format, thread string, turns []int, repeat, memoryCalls int) (hostOut, error) {
	var ts []string
	for _, t := range turns {
		ts = append(ts, strconv.Itoa(t))
	}
	args := []string{"host", "--side", side, "--thread", thread, "--turns", strings.Join(ts, ","), "--repeat", strconv.Itoa(repeat),
		"--memory-calls", strconv.Itoa(memoryCalls), "--warm", r.name("warm")}
	if side == "reference" {
		args = append(args, "--dsn", r.cfg.DSN)
	} else {
		args = append(args, "--target", target, "--client-src", filepath.Join(r.cfg.Repo, "client", "python", "src"), "--value-format", format)
	}
	var out hostOut
	err := py.Run(ctx, r.cfg.Python, &out, args...)
	return out, err
}

// hostClient measures the client reading one turn of the thread with
// values in format, in a fresh process, against a fresh historyd (warmed on
// the small warm-up thread, so the first call of the thread is its cold
// read). Memory is measured over the first calls, as many as the reference
// makes, and over all of them.
func (r *runner) hostClient(ctx context.Context, c hostCase, format string, turn int) (hostOut, error) {
	s, _, err := r.start(ctx, fmt.Sprintf("p6-%s-%s-turn%d", c.role, format, turn), true)
	if err != nil {
		return hostOut{}, err
	}
	defer s.Stop()
	return r.runHost(ctx, "client", s.Addr, format, r.name(c.role), []int{turn}, c.client, c.refCalls)
}

// merge adds another turn's output of the same side to o.
func (o *hostOut) merge(other hostOut) {
	if o.Turns == nil {
		*o = other
		return
	}
	o.Calls = append(o.Calls, other.Calls...)
	for k, v := range other.Turns {
		o.Turns[k] = v
	}
}

// host is step P6: what a Python host sees when it asks what a turn held,
// through historyd's Python client (HistorydThreadHistory.snapshot, JSON
// values, and for comparison protobuf Values and raw text) and through the
// reference (mcp_agent.history.CheckpointHistory.snapshot over an
// AsyncPostgresSaver), each side and turn in a process of its own: wall and
// CPU time of the call, and the host process's peak RSS growth. Both must
// return the same state.
func (r *runner) host(ctx context.Context) error {
	detail := map[string]any{}
	for _, c := range r.hostCases() {
		thread := r.name(c.role)
		// Each turn in processes of its own, so that every turn's memory
		// is measured from a process that has not held a large state yet.
		var asJSON, asProto, asRaw, ref hostOut
		for _, turn := range c.turns {
			for _, f := range []struct {
				format string
				out    *hostOut
			}{{"json", &asJSON}, {"proto", &asProto}, {"raw", &asRaw}} {
				got, err := r.hostClient(ctx, c, f.format, turn)
				if err != nil {
					return fmt.Errorf("client, %s values, on turn %d of %s: %w", f.format, turn, thread, err)
				}
				f.out.merge(got)
			}
			r.logf("P6 reference: CheckpointHistory.snapshot(%s, %d) × %d", thread, turn, c.refCalls)
			got, err := r.runHost(ctx, "reference", "", "", thread, []int{turn}, c.refCalls, c.refCalls)
			if err != nil {
				return fmt.Errorf("reference on turn %d of %s: %w", turn, thread, err)
			}
			ref.merge(got)
		}
		detail[c.role] = map[string]any{"client_json": asJSON, "client_proto": asProto, "client_raw": asRaw, "reference": ref}
		for _, turn := range c.turns {
			key := strconv.Itoa(turn)
			want := ref.Turns[key].Digest
			for _, got := range []hostOut{asJSON, asProto, asRaw} {
				d := got.Turns[key].Digest
				if want == nil || d == nil || *d != *want {
					return fmt.Errorf("turn %d of %s: the client (%s values) and the reference return different states (digests %v, %v)", turn, thread, got.ValueFormat, deref(d), deref(want))
				}
			}
		}
		r.hostRows(c, asJSON, asProto, asRaw, ref)
	}
	r.detail("p6", detail)
	return nil
}

// signedMB is a growth in MB with its sign: "+12.5 MB", "-0.3 MB".
func signedMB(b int64) string {
	if b < 0 {
		return mbText(b)
	}
	return "+" + mbText(b)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

// hostRows adds a case's rows: latency and memory, with P6's floors on the
// 1 MB thread.
func (r *runner) hostRows(c hostCase, asJSON, asProto, asRaw, ref hostOut) {
	desc := fmt.Sprintf("%d turns, tool_state %s", c.params.Turns, sizeText(c.params.StateBytes))
	var hdText, refText, ratioText, memHD, memRef, memRatio []string
	minWarm, maxShare := 0.0, 0.0
	for i, turn := range c.turns {
		j, p, w, rf := sideOf(asJSON, turn, true), sideOf(asProto, turn, true), sideOf(asRaw, turn, true), sideOf(ref, turn, false)
		warm := float64(rf.warm) / float64(j.warm)
		cold := float64(rf.warm) / float64(j.cold)
		share := float64(j.growth) / float64(rf.growth)
		if i == 0 || warm < minWarm {
			minWarm = warm
		}
		if i == 0 || share > maxShare {
			maxShare = share
		}
		hdText = append(hdText, fmt.Sprintf("turn %d: warm p50 %s (host CPU %s), cold %s (host CPU %s); protobuf values: warm p50 %s (host CPU %s), cold %s; raw values: warm p50 %s (host CPU %s)",
			turn, msText(j.warm), msText(j.cpuWarm), msText(j.cold), msText(j.cpuCold), msText(p.warm), msText(p.cpuWarm), msText(p.cold), msText(w.warm), msText(w.cpuWarm)))
		refText = append(refText, fmt.Sprintf("turn %d: %s (%s CPU), median of %d", turn, msText(rf.warm), msText(rf.cpuWarm), rf.calls))
		ratioText = append(ratioText, fmt.Sprintf("%.0f× warm, %.0f× cold; host CPU %.0f×", warm, cold, float64(rf.cpuWarm)/float64(j.cpuWarm)))
		first := "the first call"
		if rf.calls != 1 {
			first = fmt.Sprintf("the first %d calls", rf.calls)
		}
		memHD = append(memHD, fmt.Sprintf("turn %d: %s over %s, %s over all %d; protobuf values %s, %s; raw values %s, %s",
			turn, signedMB(j.growth), first, signedMB(j.allGrowth), j.calls, signedMB(p.growth), signedMB(p.allGrowth), signedMB(w.growth), signedMB(w.allGrowth)))
		memRef = append(memRef, fmt.Sprintf("turn %d: %s over %s", turn, signedMB(rf.growth), plural(rf.calls, "call")))
		memRatio = append(memRatio, fmt.Sprintf("%.2f ×", share))
	}
	what := "Python host: `HistorydThreadHistory.snapshot(thread, turn)` (historyd_client over gRPC, JSON values) vs `CheckpointHistory(saver).snapshot(thread, turn)` (mcp-toolsets-runtime over AsyncPostgresSaver), " + desc
	calls := fmt.Sprintf("1 cold + %d warm calls per turn, a fresh historyd for each value format", c.client-1)
	if !c.floor {
		r.add(Row{ID: "P6′", What: what + "; and peak RSS growth of the host process",
			Historyd: strings.Join(hdText, "; ") + "; peak RSS " + strings.Join(memHD, ", ") + " (" + calls + ")",
			Other:    strings.Join(refText, "; ") + "; peak RSS " + strings.Join(memRef, ", "),
			Ratio:    strings.Join(ratioText, "; ") + "; memory " + strings.Join(memRatio, ", "), Floor: "–", Verdict: "–"})
		return
	}
	okTime := minWarm >= p6MinSpeedup
	r.add(Row{ID: "P6", What: what, Historyd: strings.Join(hdText, "; ") + " (" + calls + ")", Other: strings.Join(refText, "; "),
		Ratio: strings.Join(ratioText, "; "), Floor: fmt.Sprintf("≥ %.0f× faster", p6MinSpeedup), Verdict: verdict(okTime) + " (on warm p50)"})
	okMem := maxShare <= p6MaxMemoryShare
	r.add(Row{ID: "P6", What: "peak RSS growth of the Python host process answering the same question (VmHWM − VmRSS before the turn's calls, over as many calls as the reference makes), " + desc,
		Historyd: strings.Join(memHD, "; "), Other: strings.Join(memRef, "; "), Ratio: "client = " + strings.Join(memRatio, ", ") + " reference",
		Floor: fmt.Sprintf("≤ 1/%.0f of the reference's", 1/p6MaxMemoryShare), Verdict: verdict(okMem)})
	if !okTime {
		r.misses["P6 latency"] = true
	}
	if !okMem {
		r.misses["P6 memory"] = true
	}
}

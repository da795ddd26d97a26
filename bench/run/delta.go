package run

// The deepagents rows: a thread shaped like a deepagents agent's (messages
// and files as DeltaChannels, snapshot_frequency 50, a few hundred files),
// historyd's Snapshot of the files and tool_state channels and its Turns
// against LangGraph's own reading of the same thread through
// create_deep_agent's graph: get_state at the turn's checkpoint (the one
// read a host needs once it knows the checkpoint) and a whole
// get_state_history walk (what it takes to find a turn without historyd).

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"

	"github.com/historyd/historyd/bench/gen"
	"github.com/historyd/historyd/bench/load"
	"github.com/historyd/historyd/bench/py"
	"github.com/historyd/historyd/internal/stateentry"
)

// deepPlan is what the deepagents rows measure.
type deepPlan struct {
	thread, warm gen.DeepParams
	// turns are the turns asked: early, middle and last.
	turns []int
	// warmRequests is how many sequential requests follow the cold one.
	warmRequests int
	// stateRepeat is how many get_state calls LangGraph makes per turn.
	stateRepeat int
	// walks is how many whole get_state_history walks are timed.
	walks int
}

func newDeepPlan(full bool) deepPlan {
	p := deepPlan{
		thread:       gen.DeepParams{Turns: 200, Files: 300, FileBytes: 3000, SnapshotFrequency: 50, StateKeys: 8, Seed: 29},
		warm:         gen.DeepParams{Turns: 3, Files: 5, FileBytes: 500, SnapshotFrequency: 50, StateKeys: 2, Seed: 31},
		turns:        []int{10, 100, 200},
		warmRequests: 200,
		stateRepeat:  10,
		walks:        1,
	}
	if full {
		p.warmRequests, p.stateRepeat, p.walks = 500, 20, 3
	}
	return p
}

// deepServeEnv makes historyd serve the files channel beside tool_state,
// as a deepagents deployment configures it (reducers: the defaults, merge
// for files).
var deepServeEnv = []string{"HISTORYD_STATE_CHANNELS=tool_state,files"}

// deepCall is one historyd measurement in a fresh process: a cold request,
// then warm ones in a row.
type deepCall struct {
	Op           string        `json:"op"`
	Turn         int           `json:"turn,omitempty"`
	Channel      string        `json:"channel,omitempty"`
	Cold         time.Duration `json:"cold_ns"`
	Warm         load.Result   `json:"warm"`
	WarmCPU      CPUShare      `json:"warm_cpu"`
	Growth       int64         `json:"rss_growth_bytes"`
	IdleRSS      int64         `json:"idle_rss_bytes"`
	CheckpointID string        `json:"checkpoint_id,omitempty"`
	Total        int           `json:"total"`
	Entries      int           `json:"entries"`
	// state is the answer's state as plain data, for the comparison.
	state map[string]any
}

// measured is what lgbench.py's Meter reports.
type measured struct {
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	PGSeconds  float64 `json:"postgres_cpu_seconds"`
	Growth     int64   `json:"rss_growth_bytes"`
	HWMReset   bool    `json:"hwm_reset"`
}

type deepWalk struct {
	measured
	Checkpoints int               `json:"checkpoints"`
	Turns       int               `json:"turns"`
	TurnEnds    map[string]string `json:"turn_ends"`
}

type deepState struct {
	Calls []struct {
		CheckpointID string          `json:"checkpoint_id"`
		Runs         []measured      `json:"runs"`
		Messages     int             `json:"messages"`
		Files        json.RawMessage `json:"files"`
		ToolState    json.RawMessage `json:"tool_state"`
	} `json:"calls"`
}

// deepagents generates the deepagents threads when missing and measures
// historyd and LangGraph on them.
//
// It is one function because it is the benchmark row's script, read top to
// bottom: generate, load, measure historyd, measure LangGraph, record; each
// step's results feed the next.
func (r *runner) deepagents(ctx context.Context) error {
	dp := newDeepPlan(r.cfg.Full)
	sum, err := r.deepGenerate(ctx, dp)
	if err != nil {
		return err
	}
	thread := r.name("deep")

	// historyd: each (turn, channel) in a fresh process, then Turns.
	var calls []deepCall
	for _, turn := range dp.turns {
		for _, ch := range []string{"files", "tool_state"} {
			c, err := r.deepServe(ctx, dp, load.Snapshot, load.Target{Thread: thread, Turn: turn, Channel: ch})
			if err != nil {
				return fmt.Errorf("Snapshot(%s, turn %d, channel %s): %w", thread, turn, ch, err)
			}
			r.logf("deepagents historyd Snapshot turn %d %s: cold %s, warm %s, peak RSS +%s", turn, ch, msText(c.Cold), c.Warm, mbText(c.Growth))
			calls = append(calls, c)
		}
	}
	turnsCall, err := r.deepServe(ctx, dp, load.Turns, load.Target{Thread: thread})
	if err != nil {
		return fmt.Errorf("Turns(%s): %w", thread, err)
	}
	loadHD := load.LoadAvg()[0]

	// LangGraph: the walks, then get_state at each turn's checkpoint.
	var walks []deepWalk
	for range dp.walks {
		var w deepWalk
		r.logf("deepagents LangGraph: get_state_history walk of %s", thread)
		if err := py.Run(ctx, r.cfg.Python, &w, "deepwalk", "--dsn", r.cfg.DSN, "--thread", thread, "--warm", r.name("deepwarm")); err != nil {
			return err
		}
		r.logf("deepagents LangGraph walk: %.1f s (%.1f s CPU, PostgreSQL %.1f s), +%s, %d checkpoints", w.Seconds, w.CPUSeconds, w.PGSeconds, mbText(w.Growth), w.Checkpoints)
		walks = append(walks, w)
	}
	walk := walks[0]
	var ids []string
	for _, turn := range dp.turns {
		ids = append(ids, walk.TurnEnds[strconv.Itoa(turn)])
	}
	var st deepState
	if err := py.Run(ctx, r.cfg.Python, &st, "deepstate", "--dsn", r.cfg.DSN, "--thread", thread,
		"--checkpoints", strings.Join(ids, ","), "--repeat", strconv.Itoa(dp.stateRepeat), "--warm", r.name("deepwarm")); err != nil {
		return err
	}
	loadLG := load.LoadAvg()[0]
	r.detail("deepagents", map[string]any{"thread": sum, "historyd": calls, "turns": turnsCall, "walks": walks, "get_state": st})

	// Same question, same answer: where each turn ends, how many turns
	// there are, and the state there, as JSON.
	if walk.Turns != turnsCall.Total {
		return fmt.Errorf("historyd counts %d turns, LangGraph's walk %d", turnsCall.Total, walk.Turns)
	}
	if len(st.Calls) != len(dp.turns) {
		return fmt.Errorf("get_state answered %d of %d checkpoints", len(st.Calls), len(dp.turns))
	}
	for _, c := range calls {
		i := slices.Index(dp.turns, c.Turn)
		lg := st.Calls[i]
		if c.CheckpointID != ids[i] || lg.CheckpointID != ids[i] || c.Total != walk.Turns {
			return fmt.Errorf("turn %d: historyd ends it at %s (total %d), LangGraph's walk at %s (total %d), get_state read %s",
				c.Turn, c.CheckpointID, c.Total, ids[i], walk.Turns, lg.CheckpointID)
		}
		want := lg.Files
		if c.Channel == "tool_state" {
			want = lg.ToolState
		}
		if err := sameState(c.state, want); err != nil {
			return fmt.Errorf("turn %d, channel %s: historyd and LangGraph disagree: %w", c.Turn, c.Channel, err)
		}
	}

	// The rows.
	desc := fmt.Sprintf("deepagents-shaped thread (create_deep_agent's graph, deepagents %s): %d turns, %d checkpoints, messages and files as DeltaChannels (snapshot_frequency %d; %d and %d snapshots), %d files (%s) at the end, largest files snapshot %s",
		r.rep.Versions["deepagents"], dp.thread.Turns, walk.Checkpoints, dp.thread.SnapshotFrequency, sum.Snapshots["messages"], sum.Snapshots["files"],
		sum.LiveFiles, sizeText(sum.FileBytes), sizeText(sum.FilesBlobBytes))
	walkText := fmt.Sprintf("get_state_history walk: %s (%s CPU, PostgreSQL %s), +%s, median of %d",
		msText(medianOf(walks, func(w deepWalk) float64 { return w.Seconds })), msText(medianOf(walks, func(w deepWalk) float64 { return w.CPUSeconds })),
		msText(medianOf(walks, func(w deepWalk) float64 { return w.PGSeconds })), mbText(maxOf(walks, func(w deepWalk) int64 { return w.Growth })), len(walks))
	walkMed := medianOf(walks, func(w deepWalk) float64 { return w.Seconds })
	for _, ch := range []string{"files", "tool_state"} {
		var hdText, lgText, ratioText []string
		for _, c := range calls {
			if c.Channel != ch {
				continue
			}
			i := slices.Index(dp.turns, c.Turn)
			runs := st.Calls[i].Runs
			get := medianOf(runs, func(m measured) float64 { return m.Seconds })
			hdText = append(hdText, fmt.Sprintf("turn %d (%d entries): cold %s, warm p50 %s (p99 %s; CPU historyd %s + PostgreSQL %s), +%s",
				c.Turn, c.Entries, msText(c.Cold), msText(c.Warm.P50), msText(c.Warm.P99), msText(c.WarmCPU.Historyd), msText(c.WarmCPU.Postgres), mbText(c.Growth)))
			lgText = append(lgText, fmt.Sprintf("turn %d: get_state %s (CPU %s + PostgreSQL %s), +%s",
				c.Turn, msText(get), msText(medianOf(runs, func(m measured) float64 { return m.CPUSeconds })),
				msText(medianOf(runs, func(m measured) float64 { return m.PGSeconds })), mbText(maxOf(runs, func(m measured) int64 { return m.Growth }))))
			ratioText = append(ratioText, fmt.Sprintf("turn %d: vs get_state %s warm, %s cold; vs the walk %s cold",
				c.Turn, speedup(get, c.Warm.P50), speedup(get, c.Cold), speedup(walkMed, c.Cold)))
		}
		what := fmt.Sprintf("`Snapshot(turn, channel: \"%s\")` vs LangGraph `get_state(turn's checkpoint)`, %s", ch, desc)
		if ch == "tool_state" {
			what = fmt.Sprintf("`Snapshot(turn)` of tool_state (a plain channel, up to %d keys) on the same thread vs the same `get_state` (which rebuilds every channel)", dp.thread.StateKeys)
		}
		r.add(Row{ID: "D1", What: what, Historyd: strings.Join(hdText, "; "), Other: strings.Join(lgText, "; ") + "; " + walkText,
			Ratio: strings.Join(ratioText, "; "), Floor: "–", Verdict: "answers equal (JSON)", Load1: max(loadHD, loadLG)})
	}
	r.add(Row{ID: "D1", What: "`Turns` on the same thread (the turn index: messages rebuilt from the DeltaChannel's snapshots and writes) vs LangGraph's get_state_history walk, the only way it can list the turns",
		Historyd: fmt.Sprintf("%d turns: cold %s, warm p50 %s (CPU historyd %s + PostgreSQL %s), +%s",
			turnsCall.Total, msText(turnsCall.Cold), msText(turnsCall.Warm.P50), msText(turnsCall.WarmCPU.Historyd), msText(turnsCall.WarmCPU.Postgres), mbText(turnsCall.Growth)),
		Other: walkText, Ratio: fmt.Sprintf("%s cold, %s warm", speedup(walkMed, turnsCall.Cold), speedup(walkMed, turnsCall.Warm.P50)),
		Floor: "–", Verdict: "same turn count", Load1: max(loadHD, loadLG)})
	return nil
}

// deepGenerate writes the deepagents threads that are missing, and
// returns a summary of the measured one (written now, or planned again
// when it exists).
func (r *runner) deepGenerate(ctx context.Context, dp deepPlan) (*gen.DeepSummary, error) {
	conn, err := pgx.Connect(ctx, r.cfg.DSN)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	var sum *gen.DeepSummary
	wrote := false
	for _, t := range []struct {
		role string
		p    gen.DeepParams
	}{{"deepwarm", dp.warm}, {"deep", dp.thread}} {
		id := t.p.Name("bench-" + t.role)
		r.names[t.role], r.rep.Threads[t.role] = id, id
		if !r.cfg.Regenerate {
			if ok, err := gen.DeepExists(ctx, conn, id, t.p); err != nil {
				return nil, err
			} else if ok && t.role == "deep" {
				// The summary's counts come from the plan, which the
				// thread was written from.
				if sum, err = gen.PlanDeep(id, t.p); err != nil {
					return nil, err
				}
				continue
			} else if ok {
				continue
			}
		}
		t0 := time.Now()
		s, err := gen.WriteDeep(ctx, conn, id, t.p, gen.Options{})
		if err != nil {
			return nil, fmt.Errorf("generate %s: %w", id, err)
		}
		r.logf("generated %s: %d checkpoints, snapshots %v, %d files (%s), largest files snapshot %s, %.1f MB of blobs and writes, in %.1fs",
			id, len(s.Checkpoints), s.Snapshots, s.LiveFiles, sizeText(s.FileBytes), sizeText(s.FilesBlobBytes), float64(s.TotalBlobBytes)/1e6, time.Since(t0).Seconds())
		wrote = true
		if t.role == "deep" {
			sum = s
		}
	}
	if wrote {
		for _, t := range []string{"checkpoints", "checkpoint_blobs", "checkpoint_writes"} {
			if _, err := conn.Exec(ctx, `VACUUM ANALYZE `+t); err != nil {
				return nil, err
			}
		}
	}
	sum.Checkpoints = nil // the detail is in the database
	return sum, nil
}

// deepServe starts a fresh historyd serving the files channel (warmed on
// the small warm-up thread), sends the request once cold and then warm
// times in a row, and keeps the cold answer's state for the comparison.
func (r *runner) deepServe(ctx context.Context, dp deepPlan, op load.Op, t load.Target) (deepCall, error) {
	label := fmt.Sprintf("deep-%s-%d-%s", op, t.Turn, t.Channel)
	s, base, err := r.start(ctx, label, true, deepServeEnv...)
	if err != nil {
		return deepCall{}, err
	}
	defer s.Stop()
	res := deepCall{Op: string(op), Turn: t.Turn, Channel: t.Channel, IdleRSS: base.RSS}
	t0 := time.Now()
	if op == load.Snapshot {
		ans, err := s.TH.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: t.Thread, Turn: int32(t.Turn), Channel: t.Channel})
		res.Cold = time.Since(t0)
		if err != nil {
			return res, err
		}
		st := ans.GetState()
		if st == nil {
			return res, fmt.Errorf("no state (total %d, result %T)", ans.GetTotal(), ans.GetResult())
		}
		res.CheckpointID, res.Total, res.Entries = st.GetCheckpointId(), int(ans.GetTotal()), len(st.GetEntries())
		if res.state, err = plainEntries(st.GetEntries()); err != nil {
			return res, err
		}
	} else {
		rep, err := s.Do(ctx, op, t)
		res.Cold = time.Since(t0)
		if err != nil {
			return res, err
		}
		res.Total = rep.Total
	}
	c0, err := r.cpuNow(ctx, s)
	if err != nil {
		return res, err
	}
	res.Warm = load.Drive(ctx, 1, dp.warmRequests, 0, func(ctx context.Context, _, _ int) error {
		_, err := s.Do(ctx, op, t)
		return err
	})
	if res.Warm.Errors > 0 {
		return res, fmt.Errorf("warm %s: %s", op, res.Warm.FirstError)
	}
	c1, err := r.cpuNow(ctx, s)
	if err != nil {
		return res, err
	}
	res.WarmCPU = share(c0, c1, res.Warm.Requests)
	res.Growth, err = growth(s, base)
	return res, err
}

// plainEntries is a Snapshot's state as the channel's value in plain data:
// each key's entry as the tool_state convention's dict (stateentry.Map)
// when it had the convention's fields, the whole stored value (deepagents'
// FileData) when not.
func plainEntries(entries map[string]*historydv1.StateEntry) (map[string]any, error) {
	out := make(map[string]any, len(entries))
	for k, e := range entries {
		m, err := stateentry.Map(e)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", k, err)
		}
		conv := e.Tool != nil || e.Seq != nil || e.Turn != nil || e.TurnsWritten != nil || len(e.GetInputs()) > 0 || len(e.GetExtra().GetFields()) > 0
		if !conv {
			out[k] = m["value"]
			continue
		}
		out[k] = m
	}
	return out, nil
}

// sameState compares historyd's state with LangGraph's JSON of the
// channel's value.
func sameState(got map[string]any, want json.RawMessage) error {
	norm := func(v any) (any, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		var out any
		return out, json.Unmarshal(b, &out)
	}
	g, err := norm(got)
	if err != nil {
		return err
	}
	var w any
	if err := json.Unmarshal(want, &w); err != nil {
		return err
	}
	if w == nil {
		w = map[string]any{}
	}
	if reflect.DeepEqual(g, w) {
		return nil
	}
	gm, _ := g.(map[string]any)
	wm, _ := w.(map[string]any)
	for k, v := range wm {
		if !reflect.DeepEqual(gm[k], v) {
			gs, _ := json.Marshal(gm[k])
			ws, _ := json.Marshal(v)
			return fmt.Errorf("%d keys vs %d; %q: historyd %.200s, LangGraph %.200s", len(gm), len(wm), k, gs, ws)
		}
	}
	return fmt.Errorf("historyd has %d keys, LangGraph %d", len(gm), len(wm))
}

// speedup says how many times faster historyd (hd) is than LangGraph
// (lg), or how many times slower.
func speedup(lg, hd time.Duration) string {
	if hd <= 0 || lg <= 0 {
		return "–"
	}
	r := float64(lg) / float64(hd)
	switch {
	case r >= 10:
		return fmt.Sprintf("%.0f× faster", r)
	case r >= 1:
		return fmt.Sprintf("%.1f× faster", r)
	case r >= 0.1:
		return fmt.Sprintf("%.1f× slower", 1/r)
	}
	return fmt.Sprintf("%.0f× slower", 1/r)
}

func medianOf[T any](xs []T, f func(T) float64) time.Duration {
	s := make([]float64, len(xs))
	for i, x := range xs {
		s[i] = f(x)
	}
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	return time.Duration(s[len(s)/2] * float64(time.Second))
}

func maxOf[T any](xs []T, f func(T) int64) int64 {
	var m int64
	for i, x := range xs {
		if v := f(x); i == 0 || v > m {
			m = v
		}
	}
	return m
}

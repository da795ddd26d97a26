package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// The calls the soak makes, and how often, in parts of 100.
var mix = []struct {
	op     string
	weight int
}{
	{"Snapshot", 34}, {"Turns", 18}, {"Diff", 14}, {"Snapshots", 8}, {"StreamSnapshots", 7},
	{"WatchTurns", 8}, {"Threads", 5}, {"Snapshot, another tenant's thread", 6},
}

func pickOp(rng *rand.Rand) string {
	n := rng.IntN(100)
	for _, m := range mix {
		if n < m.weight {
			return m.op
		}
		n -= m.weight
	}
	return mix[0].op
}

// tally counts calls by operation and status code, and OK answers by what
// they said (found, no longer retained, …).
type tally struct {
	mu       sync.Mutex
	codes    map[string]map[codes.Code]int
	outcomes map[string]int
	// took and slowest sum and bound each operation's call durations.
	took, slowest map[string]time.Duration
	// unavailable are the times UNAVAILABLE calls were made and answered,
	// to check that each overlaps a restart.
	unavailable [][2]time.Time
	examples    map[codes.Code]string
}

func newTally() *tally {
	return &tally{codes: map[string]map[codes.Code]int{}, outcomes: map[string]int{}, examples: map[codes.Code]string{},
		took: map[string]time.Duration{}, slowest: map[string]time.Duration{}}
}

func (t *tally) add(op string, err error, outcome string, start, end time.Time) {
	c := status.Code(err)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.codes[op] == nil {
		t.codes[op] = map[codes.Code]int{}
	}
	t.codes[op][c]++
	t.took[op] += end.Sub(start)
	t.slowest[op] = max(t.slowest[op], end.Sub(start))
	if c == codes.OK {
		t.outcomes[op+": "+outcome]++
	} else if _, ok := t.examples[c]; !ok {
		t.examples[c] = fmt.Sprintf("%s: %v", op, err)
	}
	if c == codes.Unavailable {
		t.unavailable = append(t.unavailable, [2]time.Time{start, end})
	}
}

// caller makes the soak's calls and checks what it can at once: totals
// within what the writer had written before and after the call, turns
// where they were asked for, no thread of another tenant; the rest it
// records for the check after the run.
type caller struct {
	clients []historydv1.ThreadHistoryClient
	reg     *registry
	rec     *recorder
	tally   *tally
	rngs    []*rand.Rand
}

func (c *caller) call(ctx context.Context, w, _ int) error {
	rng := c.rngs[w]
	t := w % len(tenants)
	op := pickOp(rng)
	th := c.reg.pick(t, rng)
	if th == nil {
		// Nothing to read yet: a Threads listing needs no thread.
		op = "Threads"
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tenants[t].token)
	cl := c.clients[w%len(c.clients)]
	start := time.Now()
	outcome, err := c.do(ctx, cl, op, t, th, rng)
	c.tally.add(op, err, outcome, start, time.Now())
	return err
}

// span is what the writer had done to a thread around a call: done turns
// before it, begun turns after it.
type span struct{ done, begun int32 }

func (s span) check(rec *recorder, what, thread string, total int32) {
	if total < s.done || total > s.begun {
		rec.wrongf("%s of %s: total %d, but %d turns were written before the call and %d begun by its end", what, thread, total, s.done, s.begun)
	}
}

// do makes one call of operation op on thread th and checks its answer
// against what the writer had recorded around it, returning the outcome
// tallied ("found", "wrong", ...).
//
// It is one function because it is one switch over the soak's operations,
// each case a few lines checking one RPC's answer; split, the cases would
// only move apart from the switch.
func (c *caller) do(ctx context.Context, cl historydv1.ThreadHistoryClient, op string, t int, th *thread, rng *rand.Rand) (string, error) {
	var sp span
	if th != nil {
		sp.done = th.done.Load()
	}
	after := func() {
		if th != nil {
			sp.begun = th.begun.Load()
		}
	}
	switch op {
	case "Snapshot":
		n := 1 + rng.Int32N(sp.done)
		resp, err := cl.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: n})
		after()
		if err != nil {
			return "", err
		}
		sp.check(c.rec, op, th.id, resp.GetTotal())
		switch r := resp.GetResult().(type) {
		case *historydv1.SnapshotResponse_State:
			if r.State.GetTurn() != n {
				c.rec.wrongf("Snapshot of %s turn %d: answered turn %d", th.id, n, r.State.GetTurn())
			}
			c.state(th.id, r.State, r.State.GetTurn() < resp.GetTotal())
			return "found", nil
		case *historydv1.SnapshotResponse_NoLongerRetained:
			c.rec.prune(th.id, n, r.NoLongerRetained.GetQuestion())
			return "no longer retained (pruned)", nil
		default:
			c.rec.wrongf("Snapshot of %s turn %d (written before the call): %v", th.id, n, resp)
			return "wrong", nil
		}
	case "Snapshot, another tenant's thread":
		other := c.reg.pick((t+1+rng.IntN(len(tenants)-1))%len(tenants), rng)
		if other == nil {
			other = th
		}
		resp, err := cl.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: other.id, Turn: 1})
		if err != nil {
			return "", err
		}
		if other.tenant != t && (resp.GetTotal() != 0 || len(resp.GetRetainedTurns()) != 0 || resp.GetState() != nil) {
			c.rec.wrongf("tenant %s read %s of tenant %s: %v", tenants[t].name, other.id, tenants[other.tenant].name, resp)
			return "wrong", nil
		}
		return "reads as an unknown thread", nil
	case "Turns":
		resp, err := cl.Turns(ctx, &historydv1.TurnsRequest{ThreadId: th.id})
		after()
		if err != nil {
			return "", err
		}
		sp.check(c.rec, op, th.id, resp.GetTotal())
		if len(resp.GetTurns()) != int(resp.GetTotal()) {
			c.rec.wrongf("Turns of %s: %d turns listed of %d", th.id, len(resp.GetTurns()), resp.GetTotal())
		}
		for i, ti := range resp.GetTurns() {
			if ti.GetNumber() != int32(i+1) {
				c.rec.wrongf("Turns of %s: turn %d listed as %d", th.id, i+1, ti.GetNumber())
			}
			if ti.GetRetained() {
				c.rec.turn(th.id, ti.GetNumber(), ti.GetCheckpointId(), ti.GetQuestion(), nil, ti.GetNumber() < resp.GetTotal())
			} else {
				c.rec.prune(th.id, ti.GetNumber(), ti.GetQuestion())
			}
		}
		return "listed", nil
	case "Diff":
		resp, err := cl.Diff(ctx, &historydv1.DiffRequest{ThreadId: th.id})
		after()
		if err != nil {
			return "", err
		}
		sp.check(c.rec, op, th.id, resp.GetTotal())
		from, to := resp.GetFromTurn().GetFound(), resp.GetToTurn().GetFound()
		for _, f := range []*historydv1.TurnInfo{from, to} {
			if f != nil {
				c.rec.turn(th.id, f.GetNumber(), f.GetCheckpointId(), f.GetQuestion(), nil, f.GetNumber() < resp.GetTotal())
			}
		}
		if from == nil || to == nil || to.GetNumber() != resp.GetTotal() || from.GetNumber() != to.GetNumber()-1 {
			c.rec.wrongf("Diff of %s (total %d): from %v to %v; want the last two turns, both retained", th.id, resp.GetTotal(), resp.GetFromTurn(), resp.GetToTurn())
			return "wrong", nil
		}
		var b strings.Builder
		for _, ch := range resp.GetChanges() {
			switch ch.GetKind() {
			case historydv1.KeyChangeKind_KEY_CHANGE_KIND_CHANGED:
				fmt.Fprintf(&b, "%q CHANGED %s → %s;", ch.GetKey(), entryText(ch.GetFromEntry()), entryText(ch.GetToEntry()))
			case historydv1.KeyChangeKind_KEY_CHANGE_KIND_ADDED:
				fmt.Fprintf(&b, "%q ADDED → %s;", ch.GetKey(), entryText(ch.GetToEntry()))
			case historydv1.KeyChangeKind_KEY_CHANGE_KIND_REMOVED:
				fmt.Fprintf(&b, "%q REMOVED %s;", ch.GetKey(), entryText(ch.GetFromEntry()))
			default:
				fmt.Fprintf(&b, "%q %v;", ch.GetKey(), ch.GetKind())
			}
		}
		c.rec.diff(th.id, from.GetCheckpointId(), to.GetCheckpointId(), b.String())
		return "found both turns", nil
	case "Snapshots":
		resp, err := cl.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: th.id})
		after()
		if err != nil {
			return "", err
		}
		sp.check(c.rec, op, th.id, resp.GetTotal())
		for n := int32(1); n <= resp.GetTotal(); n++ {
			if ts, ok := resp.GetTurns()[n]; ok {
				if ts.GetTurn() != n {
					c.rec.wrongf("Snapshots of %s: turn %d's state says turn %d", th.id, n, ts.GetTurn())
				}
				c.state(th.id, ts, n < resp.GetTotal())
			} else {
				c.rec.prune(th.id, n, "")
			}
		}
		if len(resp.GetTurns()) == 0 || len(resp.GetTurns()) > int(resp.GetTotal()) {
			c.rec.wrongf("Snapshots of %s: %d turns of %d", th.id, len(resp.GetTurns()), resp.GetTotal())
		}
		return "found", nil
	case "StreamSnapshots":
		st, err := cl.StreamSnapshots(ctx, &historydv1.StreamSnapshotsRequest{ThreadId: th.id})
		if err != nil {
			return "", err
		}
		var got []*historydv1.StreamSnapshotsResponse
		for {
			m, err := st.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return "", err
			}
			got = append(got, m)
		}
		after()
		if len(got) == 0 {
			c.rec.wrongf("StreamSnapshots of %s: no message", th.id)
			return "wrong", nil
		}
		total := got[len(got)-1].GetTotal()
		sp.check(c.rec, op, th.id, total)
		seen := map[int32]bool{}
		prev := int32(0)
		for _, m := range got {
			ts := m.GetTurn()
			if ts == nil {
				continue
			}
			if ts.GetTurn() <= prev {
				c.rec.wrongf("StreamSnapshots of %s: turn %d after turn %d", th.id, ts.GetTurn(), prev)
			}
			prev = ts.GetTurn()
			seen[ts.GetTurn()] = true
			c.state(th.id, ts, ts.GetTurn() < m.GetTotal())
		}
		for n := int32(1); n <= total; n++ {
			if !seen[n] {
				c.rec.prune(th.id, n, "")
			}
		}
		return "streamed", nil
	case "WatchTurns":
		from := sp.done - 2
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := cl.WatchTurns(wctx, &historydv1.WatchTurnsRequest{ThreadId: th.id, AfterTurn: from})
		if err != nil {
			return "", err
		}
		m, err := st.Recv()
		after()
		if err != nil {
			return "", err
		}
		ts := m.GetTurnEnded()
		if ts == nil || ts.GetTurn() != from+1 {
			c.rec.wrongf("WatchTurns of %s after turn %d: first event %v, want turn %d ended", th.id, from, m, from+1)
			return "wrong", nil
		}
		sp.check(c.rec, op, th.id, m.GetTotal())
		// A turn is sent once it has ended: its checkpoint is its last.
		c.state(th.id, ts, true)
		return "turn ended", nil
	case "Threads":
		before := c.reg.tenantThreads(t)
		listed := map[string]bool{}
		token := ""
		for range 100 {
			resp, err := cl.Threads(ctx, &historydv1.ThreadsRequest{PageSize: 1000, PageToken: token})
			if err != nil {
				return "", err
			}
			for _, ti := range resp.GetThreads() {
				if !strings.HasPrefix(ti.GetThreadId(), tenants[t].prefix) {
					c.rec.wrongf("tenant %s listed %s, not its own", tenants[t].name, ti.GetThreadId())
					continue
				}
				if listed[ti.GetThreadId()] {
					c.rec.wrongf("tenant %s: %s listed twice", tenants[t].name, ti.GetThreadId())
				}
				listed[ti.GetThreadId()] = true
				c.rec.head(ti.GetThreadId(), ti.GetLastCheckpointId())
			}
			if token = resp.GetNextPageToken(); token == "" {
				break
			}
		}
		for _, id := range before {
			if !listed[id] {
				c.rec.wrongf("tenant %s: Threads left out %s, written before the call", tenants[t].name, id)
			}
		}
		all := c.reg.tenantThreads(t)
		for id := range listed {
			if !slices.Contains(all, id) {
				c.rec.wrongf("tenant %s: Threads listed %s, which was never written", tenants[t].name, id)
			}
		}
		return "listed", nil
	}
	return "", fmt.Errorf("unknown op %q", op)
}

// state records a turn's state as served.
func (c *caller) state(thread string, ts *historydv1.TurnState, ended bool) {
	entries := make(map[string]string, len(ts.GetEntries()))
	for k, e := range ts.GetEntries() {
		entries[k] = entryText(e)
	}
	d := stateDigest(entries)
	c.rec.turn(thread, ts.GetTurn(), ts.GetCheckpointId(), ts.GetQuestion(), &d, ended)
}

func entryText(e *historydv1.StateEntry) string {
	if e == nil {
		return "<none>"
	}
	return canonicalEntry(e.GetValue().AsInterface(), e.GetTool(), e.GetSeq(), int64(e.GetTurn()), int64(e.GetTurnsWritten()))
}

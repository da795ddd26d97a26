package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// numbering is the TurnNumbering historyd must answer for the whole thread.
func (tr *truth) numbering() historydv1.TurnNumbering {
	if tr.Numbering == "runs" {
		return historydv1.TurnNumbering_TURN_NUMBERING_RUNS
	}
	return historydv1.TurnNumbering_TURN_NUMBERING_COMPLETE
}

// questionKey is a question as turns are matched by: a runs-numbered
// turn's question is its input as JSON text, compared as JSON (the writers
// and historyd need not space it alike); any other as it is.
func (tr *truth) questionKey(q string) string {
	if tr.Numbering != "runs" {
		return q
	}
	var v any
	if err := json.Unmarshal([]byte(q), &v); err != nil {
		return q
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return q
	}
	return string(raw)
}

func (tr *truth) sameQuestion(got, want string) bool {
	return tr.questionKey(got) == tr.questionKey(want)
}

// checkHead checks that every reading RPC names the checkpoint whose
// lineage it numbered: the host's head.
func checkHead(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread string, want *truth) {
	if want.Head == "" {
		t.Skip("the truth records no head (written before heads were recorded)")
	}
	turns, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread})
	if err != nil {
		t.Fatal(err)
	}
	all, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread, Channel: want.Served[0]})
	if err != nil {
		t.Fatal(err)
	}
	one, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: 1, Channel: want.Served[0]})
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]string{"Turns": turns.GetHeadCheckpointId(), "Snapshots": all.GetHeadCheckpointId(), "Snapshot": one.GetHeadCheckpointId()} {
		if got != want.Head {
			t.Errorf("%s: head_checkpoint_id %q; the host's head is %s", what, got, want.Head)
		}
	}
}

// checkForks compares TurnsResponse.forks with the branches the host's runs
// abandoned: the fork point on the lineage, the turn it ended, how many
// questions the abandoned branch held and its newest checkpoint.
func checkForks(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread string, want *truth) {
	r, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread})
	if err != nil {
		t.Fatal(err)
	}
	got := r.GetForks()
	if len(got) != len(want.Forks) {
		t.Fatalf("Turns: %d forks %v; the host abandoned %d branches", len(got), got, len(want.Forks))
	}
	for i, w := range want.Forks {
		g := got[i]
		if g.GetFromCheckpointId() != w.From || g.GetTurn() != int32(w.Turn) || g.GetQuestions() != int32(w.Questions) || g.GetNewestCheckpointId() != w.Newest {
			t.Errorf("fork %d: from %s at turn %d, %d questions, newest %s; the host: from %s at turn %d, %d questions, newest %s",
				i, g.GetFromCheckpointId(), g.GetTurn(), g.GetQuestions(), g.GetNewestCheckpointId(), w.From, w.Turn, w.Questions, w.Newest)
		}
	}
}

// checkBranchReads reads each abandoned branch with head_checkpoint_id set
// to its newest checkpoint: its turns, numbered on its own parent chain,
// and every served channel's value at each, as the host saw them before
// the thread was rewound (and read back with get_state at that branch's
// checkpoints since).
func checkBranchReads(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread string, want *truth) {
	for i, f := range want.Forks {
		branch := *want
		branch.Turns, branch.Total, branch.Head, branch.Forks = f.Turns, f.Questions, f.Newest, nil
		t.Run(fmt.Sprintf("fork-%d", i), func(t *testing.T) {
			r, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread, HeadCheckpointId: f.Newest})
			if err != nil {
				t.Fatal(err)
			}
			if r.GetTotal() != int32(f.Questions) || r.GetHeadCheckpointId() != f.Newest {
				t.Fatalf("Turns at head %s: total %d, head %q; the branch held %d questions", f.Newest, r.GetTotal(), r.GetHeadCheckpointId(), f.Questions)
			}
			for j, w := range f.Turns {
				if j >= len(r.GetTurns()) {
					break
				}
				g := r.GetTurns()[j]
				if g.GetNumber() != int32(w.Turn) || !want.sameQuestion(g.GetQuestion(), w.Question) || !endsAt(want, g.GetCheckpointId(), w.CheckpointID) {
					t.Errorf("branch turn %d: %d %q at %s; the host: %q at %s", w.Turn, g.GetNumber(), g.GetQuestion(), g.GetCheckpointId(), w.Question, w.CheckpointID)
				}
			}
			for _, ch := range want.Served {
				all, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread, Channel: ch, HeadCheckpointId: f.Newest})
				if err != nil {
					t.Fatal(err)
				}
				if all.GetTotal() != int32(f.Questions) || all.GetHeadCheckpointId() != f.Newest {
					t.Errorf("Snapshots at head %s: total %d, head %q; the branch held %d", f.Newest, all.GetTotal(), all.GetHeadCheckpointId(), f.Questions)
				}
				for _, w := range f.Turns {
					got := all.GetTurns()[int32(w.Turn)]
					sameChannel(t, fmt.Sprintf("branch Snapshots turn %d", w.Turn), ch, got.GetEntries(), w.State[ch])
					one, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: int32(w.Turn), Channel: ch, HeadCheckpointId: f.Newest})
					if err != nil {
						t.Fatal(err)
					}
					if one.GetState() == nil {
						t.Errorf("branch Snapshot(%d): %T, want its state", w.Turn, one.GetResult())
						continue
					}
					if !endsAt(want, one.GetState().GetCheckpointId(), w.CheckpointID) {
						t.Errorf("branch Snapshot(%d) at %s; the host's turn ended at %s", w.Turn, one.GetState().GetCheckpointId(), w.CheckpointID)
					}
					sameChannel(t, fmt.Sprintf("branch Snapshot(%d)", w.Turn), ch, one.GetState().GetEntries(), w.State[ch])
				}
			}
			// The head's own turns, for contrast: a branch read must not
			// move the thread's own numbering.
			head, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread})
			if err != nil {
				t.Fatal(err)
			}
			if head.GetTotal() != int32(want.Total) {
				t.Errorf("Turns without a head after a branch read: total %d, want %d", head.GetTotal(), want.Total)
			}
		})
	}
	// An id the thread does not hold is refused, naming the field.
	_, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread, HeadCheckpointId: "1f000000-0000-6000-8000-000000000000"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "head_checkpoint_id") {
		t.Errorf("Turns with an unknown head_checkpoint_id: %v; want INVALID_ARGUMENT naming head_checkpoint_id", err)
	}
}

// referenceForkDifferences are the fork scenarios on which
// mcp-toolsets-runtime's turns_from is known to part from the host, and
// why: compared and logged, not failed.
var referenceForkDifferences = map[string]string{
	"fork-of-fork": "both branches end with four human messages; turns_from ends turn 4 at the abandoned branch's newest step and serves its value (Clyde) under the lineage's question",
}

// checkReferenceLineage compares mcp-toolsets-runtime's turns_from with
// the host on a forked thread: the same total, and each turn's question
// and state. Where the difference is documented it is logged instead.
func checkReferenceLineage(t *testing.T, want *truth) {
	ref := want.Reference
	var diffs []string
	if ref.Total != want.Total {
		diffs = append(diffs, fmt.Sprintf("the reference says %d turns (retained %v); the host's lineage holds %d", ref.Total, ref.Retained, want.Total))
	}
	for _, w := range want.Turns {
		r, ok := ref.Turns[fmt.Sprint(w.Turn)]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("the reference has no turn %d", w.Turn))
			continue
		}
		if r.Question != w.Question {
			diffs = append(diffs, fmt.Sprintf("turn %d: the reference's question %q, the host's %q", w.Turn, r.Question, w.Question))
		}
		for _, d := range diffJSON("tool_state", w.State["tool_state"], r.State) {
			diffs = append(diffs, fmt.Sprintf("turn %d: the reference's state: %s", w.Turn, d))
		}
	}
	why, documented := referenceForkDifferences[want.Scenario]
	switch {
	case documented && len(diffs) > 0:
		t.Logf("documented difference (%s): %s", why, strings.Join(diffs, "; "))
	case documented:
		t.Logf("the reference agrees with the host here, though a difference is documented (%s)", why)
	default:
		for _, d := range diffs {
			t.Error(d)
		}
	}
}

// checkPrunedFork checks a forked thread after retention deleted its
// oldest checkpoints, the fork point among them: what is left of the
// abandoned branch has lost its parent and must not be taken for the
// lineage, so no question only the abandoned branch asked is served, and
// the total stays the lineage's (an estimate never higher).
func checkPrunedFork(t *testing.T, turns *historydv1.TurnsResponse, want *truth) {
	lineage := map[string]bool{}
	for _, w := range want.Turns {
		lineage[want.questionKey(w.Question)] = true
	}
	for _, info := range turns.GetTurns() {
		if info.GetRetained() && !lineage[want.questionKey(info.GetQuestion())] {
			t.Errorf("after pruning, turn %d %q is served: only an abandoned branch asked it", info.GetNumber(), info.GetQuestion())
		}
	}
	switch total := int(turns.GetTotal()); turns.GetNumbering() {
	case historydv1.TurnNumbering_TURN_NUMBERING_COUNTED, historydv1.TurnNumbering_TURN_NUMBERING_COMPLETE:
		if total != want.Total {
			t.Errorf("after pruning: total %d (%v); the lineage holds %d", total, turns.GetNumbering(), want.Total)
		}
	default:
		if total > want.Total {
			t.Errorf("after pruning: total %d (%v), more than the lineage's %d", total, turns.GetNumbering(), want.Total)
		}
	}
}

// checkLostFork checks a thread whose saver lost a fork's values (LangGraph.js's
// PostgresSaver: integer channel versions and blobs inserted with ON
// CONFLICT DO NOTHING, so the fork's blob of a version the abandoned branch
// already wrote is dropped and reads back as that branch's). host is the
// same scenario written to SQLite, whose saver keeps them; stored is what
// the PostgreSQL thread's own getState said. historyd must either number
// the turns as the host did, or flag its numbering (never COMPLETE) and
// serve no more turns than the host asked; either way every turn it serves
// is one the host asked on that lineage, and its value the host's or
// refused with DATA_LOSS naming a checkpoint of the thread: never the
// other branch's.
func checkLostFork(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread string, host, stored *truth) {
	ids := map[string]bool{}
	for _, cp := range stored.Checkpoints {
		ids[cp.ID] = true
	}
	var tally lostTally
	lostLineage(t, ctx, c, &tally, "the lineage", &historydv1.TurnsRequest{ThreadId: thread}, host, host.Turns, stored.Turns, host.Total, ids)
	r, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetForks()) > len(host.Forks) {
		t.Errorf("Turns: %d forks; the host abandoned %d branches", len(r.GetForks()), len(host.Forks))
	}
	for i, g := range r.GetForks() {
		if i < len(stored.Forks) && g.GetNewestCheckpointId() != stored.Forks[i].Newest {
			t.Errorf("fork %d: newest %s; the host's branch ended at %s", i, g.GetNewestCheckpointId(), stored.Forks[i].Newest)
		}
	}
	// The abandoned branches, read at their newest checkpoints, by the
	// same rule.
	for i, f := range host.Forks {
		if i >= len(stored.Forks) {
			break
		}
		head := stored.Forks[i].Newest
		lostLineage(t, ctx, c, &tally, "the abandoned branch at "+head, &historydv1.TurnsRequest{ThreadId: thread, HeadCheckpointId: head},
			host, f.Turns, stored.Forks[i].Turns, f.Questions, ids)
	}
	t.Logf("lost fork: %d turn values differ in the saver's own getState; historyd served %d exactly, refused %d with DATA_LOSS", tally.lost, tally.served, tally.refused)
}

// lostLineage checks one lineage of a lost-fork thread (see checkLostFork):
// want are the host's turns on it, wrong the saver's own getState there,
// total the questions the host asked on it.
func lostLineage(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, tally *lostTally, what string,
	req *historydv1.TurnsRequest, host *truth, want, wrong []truthTurn, total int, ids map[string]bool) {
	t.Helper()
	r, err := c.Turns(ctx, req)
	if err != nil {
		t.Errorf("Turns on %s: %v", what, err)
		return
	}
	exact := r.GetTotal() == int32(total) && r.GetNumbering() == host.numbering() && len(r.GetTurns()) == total
	if !exact {
		switch {
		case r.GetNumbering() == host.numbering():
			t.Errorf("Turns on %s: total %d, numbering %v unflagged; the host asked %d questions", what, r.GetTotal(), r.GetNumbering(), total)
		case r.GetTotal() > int32(total):
			t.Errorf("Turns on %s: total %d (%v); the host asked only %d questions", what, r.GetTotal(), r.GetNumbering(), total)
		default:
			t.Logf("Turns on %s: %d turns, numbering %v; the host asked %d questions, the saver lost some", what, r.GetTotal(), r.GetNumbering(), total)
		}
	}
	byQuestion := map[string]int{}
	for i, w := range want {
		byQuestion[host.questionKey(w.Question)] = i
	}
	for k, g := range r.GetTurns() {
		i, asked := byQuestion[host.questionKey(g.GetQuestion())]
		switch {
		case exact && (g.GetNumber() != int32(want[k].Turn) || !host.sameQuestion(g.GetQuestion(), want[k].Question)):
			t.Errorf("%s turn %d: %d %q; the host: %q", what, want[k].Turn, g.GetNumber(), g.GetQuestion(), want[k].Question)
			continue
		case !exact && !g.GetRetained() && g.GetQuestion() == "":
			// Known to exist, its question withheld: the saver's list there
			// is another branch's.
			continue
		case !asked:
			t.Errorf("%s: turn %d asks %q, which the host never asked there", what, g.GetNumber(), g.GetQuestion())
			continue
		case !g.GetRetained():
			continue
		}
		for _, ch := range host.Served {
			var bad any
			if i < len(wrong) {
				bad = wrong[i].State[ch]
			}
			tally.check(t, ctx, c, &historydv1.SnapshotRequest{ThreadId: req.GetThreadId(), Turn: g.GetNumber(), Channel: ch, HeadCheckpointId: req.GetHeadCheckpointId()},
				want[i].State[ch], bad, ids)
		}
	}
}

// lostTally counts what checkLostFork saw.
type lostTally struct{ lost, served, refused int }

// check reads one turn and demands the host's value or DATA_LOSS naming
// one of the thread's checkpoints; wrong is what the saver's own getState
// said there.
func (n *lostTally) check(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, req *historydv1.SnapshotRequest, want, wrong any, ids map[string]bool) {
	t.Helper()
	if !reflect.DeepEqual(wrong, want) {
		n.lost++
	}
	what := fmt.Sprintf("Snapshot(%d) %s", req.GetTurn(), req.GetChannel())
	if req.GetHeadCheckpointId() != "" {
		what += " at head " + req.GetHeadCheckpointId()
	}
	one, err := c.Snapshot(ctx, req)
	if err != nil {
		if status.Code(err) != codes.DataLoss || !namesOne(err.Error(), ids) {
			t.Errorf("%s: %v; want the host's value or DATA_LOSS naming the checkpoint", what, err)
		}
		n.refused++
		return
	}
	if one.GetState() == nil {
		t.Errorf("%s: %T, want its state or DATA_LOSS", what, one.GetResult())
		return
	}
	got := channelJSON(t, req.GetChannel(), one.GetState().GetEntries())
	if d := diffJSON(req.GetChannel(), want, got); len(d) > 0 {
		other := len(diffJSON(req.GetChannel(), wrong, got)) == 0
		t.Errorf("%s: not the host's value (the other branch's: %v): %s", what, other, strings.Join(d, "; "))
		return
	}
	n.served++
}

// namesOne reports whether msg names one of the checkpoint ids.
func namesOne(msg string, ids map[string]bool) bool {
	for id := range ids {
		if strings.Contains(msg, id) {
			return true
		}
	}
	return false
}

package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// forkCases hold time travel: a run started from an older checkpoint, or
// an update_state on one, leaves the checkpoints written after it on
// another branch. Turns are numbered on the lineage of the head; the other
// branches are listed as forks and read with their own head.
var forkCases = []Case{
	{"A question from an older turn's end: the lineage's turns, the abandoned branch a fork", forkQuestion},
	{"An update_state on an older turn's end forks", forkUpdate},
	{"A fork of a fork is listed by the branch it leaves", forkOfAFork},
	{"A fork whose fork point retention deleted", forkRetained},
	{"A head read of the abandoned branch serves its turns", forkHeadRead},
	{"An unknown head is refused", forkUnknownHead},
	{"A fork arriving between two reads is followed", forkBetweenReads},
}

// The conversation the fork cases write from turn 2's end instead of Demo's
// turns 3 and 4: the host's thread is Demo[0], Demo[1], then these.
var forkTurns = []Turn{
	{Question: "now one around the Tay, call it Tay",
		Writes: map[string]any{"sketch-ops/sketch_area/area_km2": 4970.0, "sketch-ops/sketch_area/name": "Tay"}},
	{Question: "which of the two is larger?"},
}

// reusesVersions says the backend shares stored values by version and the
// writer numbers versions per lineage, as LangGraph.js PostgresSaver does: a
// branch's values that re-produce the abandoned branch's versions were never
// stored (store.ErrForeignValue).
func reusesVersions(b backend.Backend, w Writer) bool {
	sw, ok := w.(*SaverWriter)
	return backend.SharesBlobs(b) && ok && !sw.Saver().Python()
}

// checkLineage checks h's turns against the questions and turn ends the
// host's lineage has: every turn's question, and its state.
//
// Where the storage kept another branch's values under the versions the
// lineage produced again (reused), the lineage's own are lost: its turns
// may be fewer, and then the numbering must not say complete; a turn's
// question is still never another branch's, and its state is the one
// written or refused with ErrForeignValue, never the other branch's.
func checkLineage(t *testing.T, st *store.Store, ref backend.Ref, h *store.History, questions []string, ends []Written, reused bool) {
	t.Helper()
	if h.Total != len(questions) && !reused || h.Total > len(questions) {
		t.Fatalf("%+v: total %d, want %d (%+v)", ref, h.Total, len(questions), h.Turns)
	}
	if h.Total < len(questions) && h.Numbering == store.Complete {
		t.Errorf("%+v: %d of the lineage's %d questions, numbering complete", ref, h.Total, len(questions))
	}
	for i, turn := range h.Turns {
		if turn.Question != questions[i] && !reused || !slices.Contains(questions, turn.Question) {
			t.Errorf("%+v: turn %d asks %q, want %q", ref, turn.N, turn.Question, questions[i])
		}
		if turn.Question != questions[i] {
			continue
		}
		if !turn.Retained {
			if !reused {
				t.Errorf("%+v: turn %d not retained", ref, turn.N)
			}
			continue
		}
		if turn.End.ID != ends[i].End && !reused {
			t.Errorf("%+v: turn %d ends at %s, want %s", ref, turn.N, turn.End.ID, ends[i].End)
		}
		_, _, enc, err := st.ReadEncoded(context.Background(), ref, "", Only(turn.N), nil, EntryEncoder{})
		if reused && errors.Is(err, store.ErrForeignValue) {
			continue
		}
		if err != nil {
			t.Errorf("%+v: turn %d: %v", ref, turn.N, err)
			continue
		}
		_, _, states := Read(t, st, ref, Only(turn.N), nil)
		if len(enc) != 1 {
			t.Fatalf("%+v: turn %d: %d states", ref, turn.N, len(enc))
		}
		CheckState(t, turn.N, states[0], ends[i].State)
	}
}

// checkForks compares forks with want; where values were reused (see
// checkLineage), a branch may count fewer questions than it asked.
func checkForks(t *testing.T, what string, got, want []store.Fork, reused bool) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		g, w := got[i], want[i]
		ok = g.From == w.From && g.Turn == w.Turn && g.Newest == w.Newest && (g.Questions == w.Questions || reused && g.Questions < w.Questions)
	}
	if !ok {
		t.Errorf("%s: forks = %+v, want %+v", what, got, want)
	}
}

func questionsOf(turns ...[]Turn) []string {
	var out []string
	for _, ts := range turns {
		for _, t := range ts {
			out = append(out, t.Question)
		}
	}
	return out
}

// writeForked writes Demo, then forkTurns from turn 2's end: it returns
// Demo's turns and the branch's.
func writeForked(w Writer, ref backend.Ref) (demo, branch []Written, b *Builder) {
	b = NewBuilder(w, ref)
	for _, t := range Demo {
		demo = append(demo, b.Turn(t))
	}
	b.From(demo[1].End)
	for _, t := range forkTurns {
		branch = append(branch, b.Turn(t))
	}
	return demo, branch, b
}

func forkQuestion(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "fork-question"}
	demo, branch, _ := writeForked(w, ref)
	st := store.New(store.Config{Backend: b})
	h, err := st.History(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if h.Head != branch[1].End {
		t.Errorf("head %s, want %s", h.Head, branch[1].End)
	}
	checkLineage(t, st, ref, h, questionsOf(Demo[:2], forkTurns), append(demo[:2:2], branch...), reusesVersions(b, w))
	checkForks(t, "thread", h.Forks, []store.Fork{{From: demo[1].End, Turn: 2, Questions: len(Demo), Newest: demo[3].End}}, reusesVersions(b, w))
	for _, s := range h.Steps {
		for _, abandoned := range demo[2:] {
			for _, id := range abandoned.IDs {
				if s.Checkpoint.ID == id {
					t.Errorf("abandoned checkpoint %s is on the lineage", id)
				}
			}
		}
	}
}

func forkUpdate(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "fork-update"}
	bl := NewBuilder(w, ref)
	var demo []Written
	for _, turn := range Demo[:2] {
		demo = append(demo, bl.Turn(turn))
	}
	bl.From(demo[0].End)
	up := bl.Update(map[string]any{"sketch-ops/sketch_area/name": "Tay"})
	next := []Written{bl.Turn(forkTurns[1]), bl.Turn(Demo[2])}
	st := store.New(store.Config{Backend: b})
	h, err := st.History(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	// The update follows turn 1's end: turn 1 ends on it, as on a thread
	// without a fork.
	checkLineage(t, st, ref, h, questionsOf(Demo[:1], forkTurns[1:], Demo[2:3]), []Written{up, next[0], next[1]}, reusesVersions(b, w))
	checkForks(t, "thread", h.Forks, []store.Fork{{From: demo[0].End, Turn: 1, Questions: 2, Newest: demo[1].End}}, reusesVersions(b, w))
}

func forkOfAFork(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "fork-of-fork"}
	demo, branch, bl := writeForked(w, ref)
	// From the abandoned branch's turn 3: the newest branch, the head.
	bl.From(demo[2].End)
	last := bl.Turn(forkTurns[1])
	st := store.New(store.Config{Backend: b})
	h, err := st.History(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	reused := reusesVersions(b, w)
	checkLineage(t, st, ref, h, questionsOf(Demo[:3], forkTurns[1:]), []Written{demo[0], demo[1], demo[2], last}, reused)
	checkForks(t, "thread", h.Forks, []store.Fork{
		{From: demo[1].End, Turn: 2, Questions: 4, Newest: branch[1].End},
		{From: demo[2].End, Turn: 3, Questions: 4, Newest: demo[3].End},
	}, reused)
	// Read from the first branch, the rest of the tree is one branch,
	// leaving at turn 2: its newest is the head's.
	hb, err := st.History(context.Background(), backend.Ref{ThreadID: ref.ThreadID, Head: branch[1].End})
	if err != nil {
		t.Fatal(err)
	}
	checkForks(t, "the first branch", hb.Forks, []store.Fork{{From: demo[1].End, Turn: 2, Questions: 4, Newest: last.End}}, reused)
}

func forkRetained(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "fork-retained"}
	demo, branch, _ := writeForked(w, ref)
	w.Delete(ref, []string{demo[1].End})
	st := store.New(store.Config{Backend: b})
	h, err := st.History(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	// Turn 2 ends where its last checkpoint left is; the abandoned turns
	// hold questions the lineage never asked, and are not its.
	turn2 := demo[1]
	turn2.End = turn2.IDs[len(turn2.IDs)-2]
	reused := reusesVersions(b, w)
	checkLineage(t, st, ref, h, questionsOf(Demo[:2], forkTurns), []Written{demo[0], turn2, branch[0], branch[1]}, reused)
	if len(h.Forks) != 0 {
		t.Errorf("forks = %+v; the fork point is gone", h.Forks)
	}
	if !reused && h.Numbering != store.Complete {
		t.Errorf("numbering %v; the first checkpoint is retained", h.Numbering)
	}
}

func forkHeadRead(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "fork-head-read"}
	demo, branch, _ := writeForked(w, ref)
	st := store.New(store.Config{Backend: b})
	// The thread's head first, so that the branch is read from the index
	// the thread's read cached.
	if _, err := st.History(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	head := backend.Ref{ThreadID: ref.ThreadID, Head: demo[3].End}
	h, err := st.History(context.Background(), head)
	if err != nil {
		t.Fatal(err)
	}
	// The abandoned branch was written first: its values are its own on
	// every storage.
	checkLineage(t, st, head, h, questionsOf(Demo), demo, false)
	if h.Head != demo[3].End {
		t.Errorf("head %s, want %s", h.Head, demo[3].End)
	}
	checkForks(t, "the abandoned branch", h.Forks, []store.Fork{{From: demo[1].End, Turn: 2, Questions: 4, Newest: branch[1].End}}, reusesVersions(b, w))
	// Any checkpoint is a head: the lineage ending mid-turn 3.
	mid := backend.Ref{ThreadID: ref.ThreadID, Head: demo[2].IDs[0]}
	hm, err := st.History(context.Background(), mid)
	if err != nil || hm.Total != 3 || hm.Head != demo[2].IDs[0] {
		t.Errorf("head %s: %+v, %v", mid.Head, hm, err)
	}
	if st.CacheStats().Index.Entries != 1 {
		t.Errorf("%d indexes cached for one thread read at three heads", st.CacheStats().Index.Entries)
	}
}

func forkUnknownHead(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "fork-unknown-head"}
	Build(w, ref, Demo[:1])
	Build(w, backend.Ref{ThreadID: "fork-unknown-head-other"}, Demo[:1])
	st := store.New(store.Config{Backend: b})
	for _, head := range []string{"1f0c-999999", ""} {
		r := backend.Ref{ThreadID: ref.ThreadID, Head: head}
		if head == "" {
			// A checkpoint of another namespace is not this one's.
			r = backend.Ref{ThreadID: ref.ThreadID, Namespace: "sub", Head: "1f0c-000001"}
		}
		if _, err := st.History(context.Background(), r); !errors.Is(err, store.ErrUnknownHead) {
			t.Errorf("%+v: History: %v, want ErrUnknownHead", r, err)
		}
		if _, _, _, err := st.ReadEncoded(context.Background(), r, "", Retained, nil, EntryEncoder{}); !errors.Is(err, store.ErrUnknownHead) {
			t.Errorf("%+v: ReadEncoded: %v, want ErrUnknownHead", r, err)
		}
	}
}

func forkBetweenReads(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "fork-between-reads"}
	bl := NewBuilder(w, ref)
	var demo []Written
	for _, turn := range Demo {
		demo = append(demo, bl.Turn(turn))
	}
	st := store.New(store.Config{Backend: b, RecountEvery: -1})
	h, turns, _ := Read(t, st, ref, Retained, nil)
	if h.Total != 4 || len(turns) != 4 || len(h.Forks) != 0 {
		t.Fatalf("before the fork: %+v", h)
	}
	misses := st.CacheStats().Index.Misses
	bl.From(demo[1].End)
	var branch []Written
	for _, turn := range forkTurns {
		branch = append(branch, bl.Turn(turn))
	}
	h, err := st.History(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CacheStats().Index.Misses; got != misses {
		t.Errorf("the fork was read afresh (%d index misses, %d before); its fork point is indexed", got, misses)
	}
	checkLineage(t, st, ref, h, questionsOf(Demo[:2], forkTurns), append(demo[:2:2], branch...), reusesVersions(b, w))
	checkForks(t, "thread", h.Forks, []store.Fork{{From: demo[1].End, Turn: 2, Questions: 4, Newest: demo[3].End}}, reusesVersions(b, w))
}

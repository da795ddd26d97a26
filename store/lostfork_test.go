package store

import "testing"

import "github.com/historyd/historyd/store/backend"

// lostFork is a thread as LangGraph.js's PostgresSaver leaves it after a
// fork: q1 answered on 0a-0c, q2 on 0d-0e; then q2 replayed from 0d (a
// fork checkpoint, its run's steps 0f-0g) on a branch whose messages
// versions the abandoned branch had already written, so their lists read
// back as the abandoned branch's and are marked foreign; then a next run
// (input 0h, unread, carrying the foreign list on) whose first readable
// list (0i) holds the abandoned branch's question qX after q2, carried in
// from the list the saver handed the run.
func lostFork(tb *table) []Checkpoint {
	cps := tb.chain("1f", []step{
		{},
		{msgs: 1, humans: []string{"q1"}},
		{msgs: 2, humans: []string{"q1"}},
		{msgs: 3, humans: []string{"q1", "q2"}},
		{msgs: 4, humans: []string{"q1", "q2"}},
	})
	// The abandoned branch, off 1f-04: qX asked.
	off := Checkpoint{ID: "1f-05", Parent: "1f-04", Messages: 5, Asks: tb.asks("q1", "q2", "qX"), Version: "9"}
	fork := Checkpoint{ID: "1f-06", Parent: "1f-03", Messages: 3, Asks: tb.asks("q1", "q2"), Version: "7", Between: true}
	step1 := Checkpoint{ID: "1f-07", Parent: "1f-06", Unplaced: true, Version: "8" + versionSep + foreignMark + "1f-07"}
	step2 := Checkpoint{ID: "1f-08", Parent: "1f-07", Unplaced: true, Version: "9" + versionSep + foreignMark + "1f-08"}
	input := Checkpoint{ID: "1f-09", Parent: "1f-08", Unplaced: true, Input: true, Between: true, Version: step2.Version}
	next := Checkpoint{ID: "1f-10", Parent: "1f-09", Messages: 7, Asks: tb.asks("q1", "q2", "qX", "q3"), Version: "11"}
	return append(cps, off, fork, step1, step2, input, next)
}

// A turn whose run's last steps are unread (another branch's list stored
// under their version) ends on the last of those steps, not on the last
// step read; and a question the lineage only holds in a list carried on
// from another branch's is known to exist but its text is withheld.
func TestDeriveLostFork(t *testing.T) {
	tb := newTable()
	h := Derive(backend.Ref{ThreadID: "t"}, lostFork(tb), tb.qs)
	if h.Numbering == Complete {
		t.Errorf("numbering %v; questions may be missing", h.Numbering)
	}
	if h.Total != 4 {
		t.Fatalf("total %d, want 4 (q1, q2, a withheld one, q3)", h.Total)
	}
	if got := h.Turns[1]; !got.Retained || got.End.ID != "1f-08" || got.Question != "q2" {
		t.Errorf("turn 2: retained %v, end %q, question %q; want it to end on its run's last step 1f-08", got.Retained, got.End.ID, got.Question)
	}
	if got := h.Turns[2]; got.Retained || got.Question != "" {
		t.Errorf("turn 3: retained %v, question %q; its question came in another branch's list", got.Retained, got.Question)
	}
	if got := h.Turns[3]; !got.Retained || got.Question != "q3" || got.End.ID != "1f-10" {
		t.Errorf("turn 4: retained %v, question %q, end %q", got.Retained, got.Question, got.End.ID)
	}

	// Without the foreign marks (a saver that kept the fork's lists), the
	// same shape is an ordinary fork: the turn ends where it was read.
	tb = newTable()
	cps := lostFork(tb)
	for i := range cps {
		if foreignVersion(cps[i].Version) {
			cps[i].Version = storedVersion(cps[i].Version)
		}
	}
	h = Derive(backend.Ref{ThreadID: "t"}, cps, tb.qs)
	if got := h.Turns[1]; got.End.ID != "1f-06" {
		t.Errorf("unmarked: turn 2 ends at %q, want the last step read, 1f-06", got.End.ID)
	}
}

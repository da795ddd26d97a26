package gen

import (
	"slices"
	"testing"
)

// TestDeepThreadPlan checks a deepagents thread without a database: the
// plan's checkpoint count is the one written, every turn ends where the
// next question arrives, the DeltaChannels snapshot at the frequency and
// their counters never reach it elsewhere, and the workspace grows to the
// asked number of files and stays near it.
func TestDeepThreadPlan(t *testing.T) {
	p := DeepParams{Turns: 120, Files: 40, FileBytes: 200, SnapshotFrequency: 7, StateKeys: 2, Seed: 9}
	sum, err := PlanDeep("plan", p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(sum.Checkpoints), p.Checkpoints(); got != want {
		t.Fatalf("%d checkpoints written, the plan says %d", got, want)
	}
	if len(sum.TurnEnds) != p.Turns {
		t.Fatalf("%d turn ends, want %d", len(sum.TurnEnds), p.Turns)
	}
	byID := map[string]DeepCheckpoint{}
	for i, c := range sum.Checkpoints {
		byID[c.ID] = c
		if c.Step != i-1 {
			t.Fatalf("checkpoint %d has step %d", i, c.Step)
		}
		for ch, n := range c.Counters {
			if n[0] >= p.SnapshotFrequency || n[0] > n[1] {
				t.Errorf("checkpoint %d: %s counters %v with frequency %d", i, ch, n, p.SnapshotFrequency)
			}
			if slices.Contains(c.Snapshots, ch) {
				t.Errorf("checkpoint %d: %s snapshot kept its counters %v", i, ch, n)
			}
		}
	}
	for n, id := range sum.TurnEnds {
		c := byID[id]
		if c.Humans != n {
			t.Errorf("turn %d ends at step %d holding %d questions", n, c.Step, c.Humans)
		}
		if n < p.Turns && c.Source != "input" {
			t.Errorf("turn %d ends at a %q checkpoint, want the next input", n, c.Source)
		}
	}
	if sum.Snapshots["messages"] < 10 || sum.Snapshots["files"] < 3 {
		t.Errorf("snapshots %v: too few for %d turns at frequency %d", sum.Snapshots, p.Turns, p.SnapshotFrequency)
	}
	if sum.LiveFiles < p.Files*9/10 || sum.LiveFiles > p.Files*11/10 {
		t.Errorf("%d files at the end, want about %d", sum.LiveFiles, p.Files)
	}
	if sum.FilesWritten <= sum.LiveFiles || sum.Calls["delete"] == 0 || sum.Calls["edit_file"] == 0 {
		t.Errorf("%d files written, %d live, calls %v: the workspace should churn", sum.FilesWritten, sum.LiveFiles, sum.Calls)
	}
}

func TestDeepParamsValidate(t *testing.T) {
	ok := DeepParams{Turns: 1, Files: 1, FileBytes: 64, SnapshotFrequency: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	for _, p := range []DeepParams{
		{Turns: 0, Files: 1, FileBytes: 64, SnapshotFrequency: 1},
		{Turns: 1, Files: 0, FileBytes: 64, SnapshotFrequency: 1},
		{Turns: 1, Files: 1, FileBytes: 63, SnapshotFrequency: 1},
		{Turns: 1, Files: 1, FileBytes: 64, SnapshotFrequency: 0},
		{Turns: 1, Files: 1, FileBytes: 64, SnapshotFrequency: 1, StateKeys: -1},
	} {
		if p.Validate() == nil {
			t.Errorf("%+v: accepted", p)
		}
		if _, err := PlanDeep("x", p); err == nil {
			t.Errorf("PlanDeep(%+v): accepted", p)
		}
	}
}

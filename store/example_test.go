package store_test

import (
	"fmt"

	"github.com/historyd/historyd/store"
)

// Derive numbers a thread's turns from its checkpoints. Here a retention
// job has deleted the checkpoints of the first of three questions: the
// oldest checkpoint left already holds two human messages, so turn 1
// existed and is no longer retained, turn 2 ends at its last checkpoint,
// and the thread never had a turn 4.
func ExampleDerive() {
	h := store.Derive(store.Ref{ThreadID: "demo"}, []store.Checkpoint{
		// Given in any order: derivation does not depend on it.
		{ID: "1f0c-05", Messages: 5, Humans: 3}, // question 3 asked
		{ID: "1f0c-03", Messages: 3, Humans: 2}, // question 2 asked
		{ID: "1f0c-04", Messages: 4, Humans: 2}, // and answered
		{ID: "1f0c-06", Messages: 6, Humans: 3}, // and answered
	})
	// The questions come from the richest checkpoint's messages.
	h.SetQuestions([]string{"sketch the Severn", "now the Thames", "compare them"})
	fmt.Println("total", h.Total, "retained", h.Retained())
	for n := 1; n <= 4; n++ {
		t, outcome := h.Turn(n)
		switch outcome {
		case store.Found:
			fmt.Printf("turn %d: %s, ends at %s: %q\n", n, outcome, t.End.ID, t.Question)
		case store.NoLongerRetained:
			fmt.Printf("turn %d: %s: %q\n", n, outcome, t.Question)
		default:
			fmt.Printf("turn %d: %s\n", n, outcome)
		}
	}
	// Output:
	// total 3 retained [2 3]
	// turn 1: no_longer_retained: "sketch the Severn"
	// turn 2: found, ends at 1f0c-04: "now the Thames"
	// turn 3: found, ends at 1f0c-06: "compare them"
	// turn 4: no_such_turn
}

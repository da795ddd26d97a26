package store_test

import (
	"fmt"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// Derive numbers a thread's turns from its checkpoints: a question is asked
// the first time a checkpoint holds it. Here a retention job has deleted
// the checkpoints of the first of three questions, so the oldest checkpoint
// left already holds two: turn 1 existed and is no longer retained. A
// summary then replaced the first two questions, and turn 3 is still turn
// 3. The thread never had a turn 4.
func ExampleDerive() {
	questions := []store.Question{
		{ID: "h1", Text: "sketch the Severn"},
		{ID: "h2", Text: "now the Thames"},
		{ID: "h3", Text: "compare them"},
	}
	h := store.Derive(backend.Ref{ThreadID: "demo"}, []store.Checkpoint{
		// Given in any order: derivation does not depend on it. Asks are
		// the questions each one's messages hold, by index in questions.
		{ID: "1f0c-05", Parent: "1f0c-04", Messages: 5, Asks: []int32{0, 1, 2}},            // question 3 asked
		{ID: "1f0c-03", Parent: "1f0c-02", Messages: 3, Asks: []int32{0, 1}},               // question 2 asked
		{ID: "1f0c-04", Parent: "1f0c-03", Messages: 4, Asks: []int32{0, 1}},               // and answered
		{ID: "1f0c-06", Parent: "1f0c-05", Messages: 2, Asks: []int32{2}, Synthetic: true}, // summarized
	}, questions)
	fmt.Println("total", h.Total, "retained", h.Retained(), "numbering", h.Numbering)
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
	// total 3 retained [2 3] numbering counted
	// turn 1: no_longer_retained: "sketch the Severn"
	// turn 2: found, ends at 1f0c-04: "now the Thames"
	// turn 3: found, ends at 1f0c-06: "compare them"
	// turn 4: no_such_turn
}

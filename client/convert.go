package client

import (
	"fmt"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// fromTurnState converts a wire turn, read from a response whose numbering
// was n, its values read as o asks.
func fromTurnState(ts *historydv1.TurnState, n historydv1.TurnNumbering, o ReadConfig) (TurnState, error) {
	t := TurnState{
		Turn:         int(ts.GetTurn()),
		CheckpointID: ts.GetCheckpointId(),
		Question:     ts.GetQuestion(),
		State:        make(map[string]Entry, len(ts.GetEntries())),
		AnsweredWith: ints(ts.GetAnsweredWith()),
		Numbering:    fromNumbering(n),
	}
	if ts.GetEndedAt() != nil {
		t.EndedAt = ts.GetEndedAt().AsTime()
	}
	for k, e := range ts.GetEntries() {
		entry, err := fromEntry(e, o)
		if err != nil {
			return TurnState{}, fmt.Errorf("turn %d key %q: %w", t.Turn, k, err)
		}
		t.State[k] = entry
	}
	return t, nil
}

// fromEntry converts a wire entry (see entryValue for its value).
func fromEntry(e *historydv1.StateEntry, o ReadConfig) (Entry, error) {
	out := Entry{
		Tool:         e.GetTool(),
		Seq:          e.GetSeq(),
		Turn:         int(e.GetTurn()),
		TurnsWritten: int(e.GetTurnsWritten()),
		Inputs:       e.GetInputs(),
	}
	if err := entryValue(e, o, &out); err != nil {
		return Entry{}, err
	}
	if x := e.GetExtra(); x != nil && len(x.GetFields()) > 0 {
		out.Extra = x.AsMap()
	}
	return out, nil
}

// fromNumbering converts the wire's numbering. A value this client does not
// know (a newer server's) reads as unspecified rather than as a certainty
// it was not given.
func fromNumbering(n historydv1.TurnNumbering) Numbering {
	switch n {
	case historydv1.TurnNumbering_TURN_NUMBERING_COMPLETE:
		return NumberingComplete
	case historydv1.TurnNumbering_TURN_NUMBERING_COUNTED:
		return NumberingCounted
	case historydv1.TurnNumbering_TURN_NUMBERING_ESTIMATED:
		return NumberingEstimated
	case historydv1.TurnNumbering_TURN_NUMBERING_RUNS:
		return NumberingRuns
	}
	return 0
}

// ints converts turn numbers; nil for none, so a turn asked on its own
// compares equal to a zero TurnState's.
func ints(ns []int32) []int {
	if len(ns) == 0 {
		return nil
	}
	out := make([]int, len(ns))
	for i, n := range ns {
		out[i] = int(n)
	}
	return out
}

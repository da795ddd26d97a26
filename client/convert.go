package client

import (
	"fmt"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// fromTurnState converts a wire turn, its values read as o asks.
func fromTurnState(ts *historydv1.TurnState, o ReadConfig) (TurnState, error) {
	t := TurnState{
		Turn:         int(ts.GetTurn()),
		CheckpointID: ts.GetCheckpointId(),
		Question:     ts.GetQuestion(),
		State:        make(map[string]Entry, len(ts.GetEntries())),
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

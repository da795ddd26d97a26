package client

import (
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

func fromTurnState(ts *historydv1.TurnState) TurnState {
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
		t.State[k] = fromEntry(e)
	}
	return t
}

// fromEntry converts a wire entry. A missing value (a server that sent the
// entry without one) reads as null, as protobuf's own JSON mapping does.
func fromEntry(e *historydv1.StateEntry) Entry {
	out := Entry{
		Tool:         e.GetTool(),
		Seq:          e.GetSeq(),
		Turn:         int(e.GetTurn()),
		TurnsWritten: int(e.GetTurnsWritten()),
		Inputs:       e.GetInputs(),
	}
	if v := e.GetValue(); v != nil {
		out.Value = v.AsInterface()
	}
	if x := e.GetExtra(); x != nil && len(x.GetFields()) > 0 {
		out.Extra = x.AsMap()
	}
	return out
}

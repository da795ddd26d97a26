package service

import (
	"math"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// toEntry converts a store entry. Bookkeeping integers that do not fit the
// wire's int32 are kept in extra rather than truncated.
func toEntry(e store.Entry) *historydv1.StateEntry {
	out := &historydv1.StateEntry{Tool: e.Tool, Seq: e.Seq, Inputs: e.Inputs}
	// The value and extra travel as their encoded fields (see wire.go); to a
	// reader of the message they are ordinary fields.
	raw := appendStateValue(nil, e.Value)
	extra := e.Extra
	keep := func(k string, v int64) {
		if extra == nil {
			extra = map[string]any{}
		}
		extra[k] = v
	}
	if e.Turn != nil {
		if n, ok := int32Of(*e.Turn); ok {
			out.Turn = &n
		} else {
			keep("turn", *e.Turn)
		}
	}
	if e.TurnsWritten != nil {
		if n, ok := int32Of(*e.TurnsWritten); ok {
			out.TurnsWritten = &n
		} else {
			keep("turns_written", *e.TurnsWritten)
		}
	}
	if len(extra) > 0 {
		raw = appendStruct(raw, stateEntryExtra, extra)
	}
	out.ProtoReflect().SetUnknown(raw)
	return out
}

func int32Of(v int64) (int32, bool) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

// entryEncoder is the store.Encoder of StateEntry messages: the store
// caches each state version's entries in their wire encoding, and
// responses carry those bytes as they are.
type entryEncoder struct{}

// Encode returns e as an encoded StateEntry. Deterministic, so that equal
// entries give equal bytes whatever order inputs' map iterates in.
func (entryEncoder) Encode(e store.Entry) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(toEntry(e))
}

func toTurnState(t store.Turn, st store.EncodedState) *historydv1.TurnState {
	ts := &historydv1.TurnState{
		Turn:         int32(t.N),
		CheckpointId: t.End.ID,
		Question:     t.Question,
		Entries:      make(map[string]*historydv1.StateEntry, len(st.Entries)),
	}
	if !t.End.TS.IsZero() {
		ts.EndedAt = timestamppb.New(t.End.TS)
	}
	for _, e := range st.Entries {
		// The entry's fields travel as the cached bytes: marshaling copies
		// them once into the response, and nothing is decoded again.
		se := &historydv1.StateEntry{}
		se.ProtoReflect().SetUnknown(e.Data)
		ts.Entries[e.Key] = se
	}
	return ts
}

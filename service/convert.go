package service

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// entryEncoder is the store.Encoder of StateEntry messages: the store
// caches each state version's entries in their wire encoding, and
// responses carry those bytes as they are.
type entryEncoder struct{}

// Encode returns e as an encoded StateEntry.
func (entryEncoder) Encode(e store.Entry) ([]byte, error) {
	return encodeEntry(e)
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

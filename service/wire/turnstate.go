package wire

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// Encoder is the store.Encoder of StateEntry messages: the store caches
// each state version's entries in their wire encoding, and responses carry
// those bytes as they are. Each value format is an encoder of its own, so
// the cache keeps each format's encoding apart.
type Encoder struct {
	// JSON writes values as value_json text instead of a Value.
	JSON bool
}

// Encode returns e as an encoded StateEntry.
func (enc Encoder) Encode(e store.Entry) ([]byte, error) {
	return encodeEntry(e, enc.JSON)
}

// TurnState builds turn t's TurnState from its encoded state. Each
// StateEntry is empty but for its unknown fields, which hold the entry's
// cached encoding: marshaling (proto.Marshal, or Codec, which sends large
// entries without a copy) writes those bytes as they are, so nothing is
// decoded again and the client receives complete entries. On the server
// side, though, an entry's fields read as unset (GetValue() is nil,
// GetTool() is ""), and proto.Equal tells it from the decoded entry.
// Whatever reads entries before they are sent must decode them first
// (service.Decoded does).
func TurnState(t store.Turn, st store.EncodedState) *historydv1.TurnState {
	ts := &historydv1.TurnState{
		Turn:         int32(t.N),
		CheckpointId: t.End.ID,
		Question:     t.Question,
		Entries:      make(map[string]*historydv1.StateEntry, len(st.Entries)),
		AnsweredWith: int32s(t.AnsweredWith),
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

// int32s converts turn numbers to the wire's width.
func int32s(ns []int) []int32 {
	var out []int32
	for _, n := range ns {
		out = append(out, int32(n))
	}
	return out
}

package service

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// entryEncoder is the store.Encoder of StateEntry messages: the store
// caches each state version's entries in their wire encoding, and
// responses carry those bytes as they are. Each value format is an
// encoder of its own, so the cache keeps each format's encoding apart.
type entryEncoder struct {
	// json writes values as value_json text instead of a Value.
	json bool
}

// Encode returns e as an encoded StateEntry.
func (enc entryEncoder) Encode(e store.Entry) ([]byte, error) {
	return encodeEntry(e, enc.json)
}

// encoderFor returns the encoder of a request's value_format, which
// checkValueFormat has accepted.
func encoderFor(f historydv1.ValueFormat) entryEncoder {
	return entryEncoder{json: f == historydv1.ValueFormat_VALUE_FORMAT_JSON}
}

// toTurnState builds turn t's TurnState from its encoded state. Each
// StateEntry is empty but for its unknown fields, which hold the entry's
// cached encoding: marshaling (proto.Marshal, or the splicing codec, which
// sends large entries without a copy) writes those bytes as they are, so
// nothing is decoded again and the client receives complete entries. On
// the server side, though, an entry's fields read as unset (GetValue() is
// nil, GetTool() is ""), and proto.Equal tells it from the decoded entry.
// Whatever reads entries before they are sent must decode them first, with
// Decoded.
func toTurnState(t store.Turn, st store.EncodedState) *historydv1.TurnState {
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

// Decoded returns a copy of a ThreadHistory response in which every state
// entry's fields are decoded. The handlers' responses carry entries as
// their encodings (see toTurnState), so that on the server side, in an
// interceptor say, an entry's getters read as unset; read them from
// Decoded's copy instead, and send the original. The copy costs encoding
// and decoding the whole response.
func Decoded[M proto.Message](m M) (M, error) {
	out := m.ProtoReflect().New().Interface().(M)
	b, err := proto.Marshal(m)
	if err == nil {
		err = proto.Unmarshal(b, out)
	}
	if err != nil {
		var zero M
		return zero, fmt.Errorf("decode %T: %w", m, err)
	}
	return out, nil
}

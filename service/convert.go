package service

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// maxExactInt is the largest integer a JSON number (an IEEE double) holds
// exactly; larger integers are sent as decimal strings.
const maxExactInt = 1 << 53

// toValue converts decoded plain data to a protobuf Value following the
// mapping documented on StateEntry.
func toValue(v any) *structpb.Value {
	switch x := v.(type) {
	case nil:
		return structpb.NewNullValue()
	case bool:
		return structpb.NewBoolValue(x)
	case string:
		return structpb.NewStringValue(x)
	case int64:
		if x >= -maxExactInt && x <= maxExactInt {
			return structpb.NewNumberValue(float64(x))
		}
		return structpb.NewStringValue(strconv.FormatInt(x, 10))
	case uint64:
		if x <= maxExactInt {
			return structpb.NewNumberValue(float64(x))
		}
		return structpb.NewStringValue(strconv.FormatUint(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			return structpb.NewStringValue("NaN")
		case math.IsInf(x, 1):
			return structpb.NewStringValue("Infinity")
		case math.IsInf(x, -1):
			return structpb.NewStringValue("-Infinity")
		}
		return structpb.NewNumberValue(x)
	case []byte:
		return structpb.NewStringValue(base64.StdEncoding.EncodeToString(x))
	case []any:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(x))}
		for i, e := range x {
			l.Values[i] = toValue(e)
		}
		return structpb.NewListValue(l)
	case map[string]any:
		return structpb.NewStructValue(toStruct(x))
	default:
		// The decoder yields only the types above; anything else is a bug,
		// shown rather than dropped.
		return structpb.NewStringValue(fmt.Sprint(x))
	}
}

func toStruct(m map[string]any) *structpb.Struct {
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(m))}
	for k, v := range m {
		s.Fields[k] = toValue(v)
	}
	return s
}

// toEntry converts a store entry. Bookkeeping integers that do not fit the
// wire's int32 are kept in extra rather than truncated.
func toEntry(e store.Entry) *historydv1.StateEntry {
	out := &historydv1.StateEntry{Tool: e.Tool, Seq: e.Seq, Inputs: e.Inputs}
	// The value travels as the encoded field itself (see appendStateValue);
	// to a reader of the message it is an ordinary value field.
	out.ProtoReflect().SetUnknown(appendStateValue(nil, e.Value))
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
		out.Extra = toStruct(extra)
	}
	return out
}

func int32Of(v int64) (int32, bool) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

func toTurnState(t store.Turn, entries map[string]store.Entry) *historydv1.TurnState {
	ts := &historydv1.TurnState{
		Turn:         int32(t.N),
		CheckpointId: t.End.ID,
		Question:     t.Question,
		Entries:      make(map[string]*historydv1.StateEntry, len(entries)),
	}
	if !t.End.TS.IsZero() {
		ts.EndedAt = timestamppb.New(t.End.TS)
	}
	for k, e := range entries {
		ts.Entries[k] = toEntry(e)
	}
	return ts
}

package service

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// TestAppendValueMatchesStructpb holds the direct encoding to what building
// the google.protobuf.Value tree and marshaling it gives.
func TestAppendValueMatchesStructpb(t *testing.T) {
	long := strings.Repeat("x", 300)
	values := []any{
		nil, true, false, "", "Severn", "ümlaut 🌊", "bad\xffutf8", long,
		int64(0), int64(-7), int64(1 << 53), int64(1<<53 + 1), int64(math.MinInt64), uint64(math.MaxUint64), uint64(3),
		0.0, -1.5, 11420.0, math.NaN(), math.Inf(1), math.Inf(-1), []byte{0, 1, 2},
		[]any{}, map[string]any{},
		[]any{1.0, "a", nil, []any{[]any{-3.1, 52.4}, []any{-2.9, 52.5}}},
		map[string]any{"type": "Feature", "geometry": map[string]any{"type": "Polygon", "coordinates": []any{[]any{[]any{-3.1, 52.4}}}}, "b": long, "a": int64(1)},
	}
	for _, v := range values {
		got := &historydv1.StateEntry{}
		raw := appendStateValue(nil, v)
		if err := proto.Unmarshal(raw, got); err != nil {
			t.Fatalf("%#v: the encoding does not parse: %v", v, err)
		}
		want := toValue(v)
		if s, ok := v.(string); ok && s == "bad\xffutf8" {
			want = structpb.NewStringValue("bad\uFFFDutf8")
		}
		if !proto.Equal(got.GetValue(), want) {
			t.Errorf("%#v: decoded %v, want %v", v, got.GetValue(), want)
		}
	}
	// A value large enough for multi-byte lengths at every level.
	var coords []any
	for i := range 20000 {
		coords = append(coords, []any{float64(i) / 7, -float64(i) / 3})
	}
	big := map[string]any{"coordinates": coords}
	got := &historydv1.StateEntry{}
	if err := proto.Unmarshal(appendStateValue(nil, big), got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.GetValue(), toValue(big)) {
		t.Error("a large nested value did not survive the encoding")
	}
}

// toValue builds the google.protobuf.Value the wire encoding must equal,
// independently of it.
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

func TestToEntryExtra(t *testing.T) {
	turn := int64(1) << 40
	e := store.Entry{Value: "v", Turn: &turn, Extra: map[string]any{"source": "cache", "n": int64(3)}}
	b, err := proto.Marshal(toEntry(e))
	if err != nil {
		t.Fatal(err)
	}
	var got historydv1.StateEntry
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := toStruct(map[string]any{"source": "cache", "n": int64(3), "turn": turn})
	if got.GetValue().GetStringValue() != "v" || got.Turn != nil || !proto.Equal(got.GetExtra(), want) {
		t.Errorf("entry = %v; want value v, no turn, extra %v", &got, want)
	}
}

package service

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/write"
)

// jsonOf writes v with appendJSONValue and parses the text into the
// google.protobuf.Value a client would build from it (a JSON parser taking
// the last of repeated keys, as a protobuf map does).
func jsonOf(t testing.TB, v any) *structpb.Value {
	t.Helper()
	b, err := appendJSONValue(nil, v)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if !json.Valid(b) {
		t.Fatalf("not JSON: %q", b)
	}
	var parsed any
	if err := json.Unmarshal(b, &parsed); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	out, err := structpb.NewValue(parsed)
	if err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return out
}

// TestJSONValueMatchesProtoValue holds value_json to value: the same value,
// decoded or left encoded, parses to the same google.protobuf.Value.
func TestJSONValueMatchesProtoValue(t *testing.T) {
	long := strings.Repeat("x", 300)
	values := []any{
		nil, true, false, "", "Severn", "ümlaut 🌊", "bad\xffutf8", "quote \" back\\slash \n\t\x01 </script>", long,
		int64(0), int64(-7), int64(1 << 53), int64(-1 << 53), int64(1<<53 + 1), int64(math.MinInt64), uint64(math.MaxUint64), uint64(3),
		0.0, math.Copysign(0, -1), -1.5, 11420.0, 1e21, 1e-7, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.NaN(), math.Inf(1), math.Inf(-1), []byte{0, 1, 2}, []byte{},
		[]any{}, map[string]any{},
		[]any{1.0, "a", nil, []any{[]any{-3.1, 52.4}, []any{-2.9, 52.5}}},
		map[string]any{"type": "Feature", "geometry": map[string]any{"type": "Polygon", "coordinates": []any{[]any{[]any{-3.1, 52.4}}}}, "b": long, "a": int64(1), "": "empty key", "k\"ey": []any{}},
	}
	for _, v := range values {
		if got, want := jsonOf(t, v), protoOf(t, v); !proto.Equal(got, want) {
			t.Errorf("%#v: value_json parses to %v, value is %v", v, got, want)
		}
		// The same value stored as msgpack and left encoded.
		b, err := write.EncodeMsgpack(v)
		if err != nil {
			continue // not storable: invalid UTF-8 in a str
		}
		raw := codec.MsgpackRaw(b, codec.Limits{})
		if got, want := jsonOf(t, raw), protoOf(t, raw); !proto.Equal(got, want) {
			t.Errorf("%#v stored: value_json parses to %v, value is %v", v, got, want)
		}
	}
	// Numbers parse back to the very same double.
	for _, f := range []float64{0.1, 1.0 / 3, 5e-324, 1.7976931348623157e308, 9007199254740993, 4.35e-7, 1e20, 123e-20} {
		b, _ := appendJSONValue(nil, f)
		var back float64
		if err := json.Unmarshal(b, &back); err != nil || back != f {
			t.Errorf("%v written as %s reads back as %v (%v)", f, b, back, err)
		}
	}
}

// TestJSONValueText pins the text itself for a few values: compact, map keys
// in stored order for a stored map, sorted for a decoded one.
func TestJSONValueText(t *testing.T) {
	stored, err := write.EncodeMsgpack(write.Map{{Key: "z", Value: 1.5}, {Key: "a", Value: []any{true, nil}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{codec.MsgpackRaw(stored, codec.Limits{}), `{"z":1.5,"a":[true,null]}`},
		{map[string]any{"z": 1.5, "a": []any{true, nil}}, `{"a":[true,null],"z":1.5}`},
		{int64(1<<53 + 1), `"9007199254740993"`},
		{math.NaN(), `"NaN"`},
		{[]byte("hi"), `"aGk="`},
		{"bad\xff", `"bad` + "\uFFFD" + `"`},
		{write.Datetime(time.Date(2026, 3, 14, 9, 28, 27, 0, time.UTC)), ``},
	} {
		var v any = c.v
		if ext, ok := v.(write.Ext); ok {
			b, err := write.EncodeMsgpack(ext)
			if err != nil {
				t.Fatal(err)
			}
			v = codec.MsgpackRaw(b, codec.Limits{})
		}
		got, err := appendJSONValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if c.want == "" {
			// An extension value is walked as its data, as value is.
			if want := protoOf(t, v); !proto.Equal(jsonOf(t, v), want) {
				t.Errorf("%s does not parse to %v", got, want)
			}
			continue
		}
		if string(got) != c.want {
			t.Errorf("%#v: %s, want %s", c.v, got, c.want)
		}
	}
}

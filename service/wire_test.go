package service

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
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

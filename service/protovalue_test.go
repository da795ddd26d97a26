package service

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/write"
)

// protoOf encodes v with appendProtoValue into a buffer sized by
// protoValueSize, checks the size was exact, and parses the result.
func protoOf(t testing.TB, v any) *structpb.Value {
	t.Helper()
	size, err := protoValueSize(v)
	if err != nil {
		t.Fatalf("size: %v", err)
	}
	b, err := appendProtoValue(make([]byte, 0, size), v)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if len(b) != size || cap(b) != size {
		t.Fatalf("appended %d bytes (capacity %d), sized %d", len(b), cap(b), size)
	}
	out := &structpb.Value{}
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatalf("the encoding does not parse: %v", err)
	}
	return out
}

// TestRawMatchesDecoded holds the transcoding of stored msgpack to the
// encoding of what Decode makes of the same bytes.
func TestRawMatchesDecoded(t *testing.T) {
	var ring []any
	for i := range 3000 {
		ring = append(ring, []any{float64(i) / 7, -float64(i) / 3})
	}
	values := []any{
		nil, true, "Severn", "ümlaut 🌊", strings.Repeat("x", 300), int64(-7), int64(1<<53 + 1), uint64(math.MaxUint64),
		1.5, math.NaN(), math.Inf(-1), []byte{0, 1, 2}, []any{}, map[string]any{},
		write.Map{{Key: "type", Value: "Feature"}, {Key: "geometry", Value: write.Map{{Key: "type", Value: "Polygon"}, {Key: "coordinates", Value: []any{ring}}}}, {Key: "a", Value: int64(1)}},
		write.Datetime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)),
		[]any{write.HumanMessage("m1", "hello"), map[string]any{"k": write.AIMessage("m2", "hi")}},
	}
	for _, v := range values {
		data, err := write.EncodeMsgpack(v)
		if err != nil {
			t.Fatal(err)
		}
		decoded, _, err := codec.Decode("msgpack", data, codec.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		want := protoOf(t, decoded)
		got := protoOf(t, codec.MsgpackRaw(data, codec.Limits{}))
		if !proto.Equal(got, want) {
			t.Errorf("%T: transcoded %v\nwant %v", v, got, want)
		}
	}
}

// TestEachEntryLeavesValuesEncoded checks what EachEntry decodes and what
// it leaves to the transcoder.
func TestEachEntryLeavesValuesEncoded(t *testing.T) {
	data, err := write.EncodeMsgpack(write.Map{
		{Key: "entry", Value: write.Map{{Key: "value", Value: []any{1.0, 2.0}}, {Key: "tool", Value: "t"}, {Key: "turn", Value: int64(2)}}},
		{Key: "bare", Value: []any{"x"}},
		{Key: "skipped", Value: "never read"},
		{Key: "nofield", Value: write.Map{{Key: "v", Value: 1.0}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	_, ok, err := codec.EachEntry("msgpack", data, map[string]bool{"entry": true, "bare": true, "nofield": true}, "value", codec.Limits{}, func(k string, v any) error {
		got[k] = v
		return nil
	})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	entry, _ := got["entry"].(map[string]any)
	if _, isRaw := entry["value"].(codec.Raw); !isRaw || entry["tool"] != "t" || entry["turn"] != int64(2) {
		t.Errorf("entry = %#v; want value left encoded, tool and turn decoded", got["entry"])
	}
	if _, isRaw := got["bare"].(codec.Raw); !isRaw {
		t.Errorf("bare = %#v; want it left encoded", got["bare"])
	}
	if _, skipped := got["skipped"]; skipped || len(got) != 3 {
		t.Errorf("got %v; want only the kept keys", got)
	}
	if v := protoOf(t, entry["value"]); !proto.Equal(v, structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(1), structpb.NewNumberValue(2)}})) {
		t.Errorf("entry value = %v", v)
	}
}

// FuzzTranscode holds the transcoder to the decoder on any input: where
// Decode accepts a blob, the transcoding succeeds, fills exactly its
// computed size and parses to the same google.protobuf.Value as the
// decoded value's encoding.
func FuzzTranscode(f *testing.F) {
	for _, v := range []any{
		write.Map{{Key: "value", Value: []any{1.5, "x", nil, []byte{9}}}, {Key: "tool", Value: "t"}},
		[]any{int64(1) << 60, math.Inf(1), write.Map{{Key: "a", Value: write.Map{}}, {Key: "a", Value: 2.0}}},
		write.Datetime(time.Unix(0, 0).UTC()),
	} {
		b, err := write.EncodeMsgpack(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x81, 0x91, 0xc0, 0xa1, 'x'}) // a list as a map key
	lim := codec.Limits{MaxBytes: 1 << 16, MaxDepth: 32}
	f.Fuzz(func(t *testing.T, data []byte) {
		decoded, _, err := codec.Decode("msgpack", data, lim)
		if err != nil {
			return
		}
		want := protoOf(t, decoded)
		got := protoOf(t, codec.MsgpackRaw(data, lim))
		if !proto.Equal(got, want) {
			t.Fatalf("transcoded %v\nwant %v", got, want)
		}
		if asJSON := jsonOf(t, codec.MsgpackRaw(data, lim)); !proto.Equal(asJSON, want) {
			t.Fatalf("transcoded to JSON %v\nwant %v", asJSON, want)
		}
	})
}

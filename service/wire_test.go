package service

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/write"
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
		raw, err := appendStateValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
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
	raw, err := appendStateValue(nil, big)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(raw, got); err != nil {
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
		if x >= -(1<<53) && x <= 1<<53 {
			return structpb.NewNumberValue(float64(x))
		}
		return structpb.NewStringValue(strconv.FormatInt(x, 10))
	case uint64:
		if x <= 1<<53 {
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

func TestEncodeEntryExtra(t *testing.T) {
	turn := int64(1) << 40
	extra := map[string]any{"source": "cache", "n": int64(3)}
	e := store.Entry{Value: "v", Turn: &turn, Extra: extra}
	b, err := encodeEntry(e, false)
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
	if len(extra) != 2 {
		t.Errorf("the caller's extra map was changed: %v", extra)
	}
}

// TestEncodeEntry holds every field of the direct encoding to the message
// built field by field, and the computed size to the bytes written.
func TestEncodeEntry(t *testing.T) {
	str := func(s string) *string { return &s }
	num := func(n int64) *int64 { return &n }
	var coords []any
	for i := range 5000 {
		coords = append(coords, []any{float64(i) / 7, -float64(i) / 3})
	}
	for _, e := range []store.Entry{
		{},
		{Value: "bare"},
		{Value: map[string]any{"type": "Polygon", "coordinates": []any{coords}}, Tool: str("sketch_area"), Seq: num(-1),
			Turn: num(3), TurnsWritten: num(1 << 31), Inputs: map[string]string{"b": "model", "a": "x/y", "bad\xff": "ok"},
			Extra: map[string]any{"note": []any{nil, true, 1.5}}},
		{Value: int64(1) << 60, Tool: str("bad\xffutf8"), Seq: num(1 << 62), Turn: num(-5), TurnsWritten: num(0), Inputs: map[string]string{}},
	} {
		b, err := encodeEntry(e, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != cap(b) {
			t.Errorf("%v: wrote %d bytes into a buffer sized %d", e.Tool, len(b), cap(b))
		}
		var got historydv1.StateEntry
		if err := proto.Unmarshal(b, &got); err != nil {
			t.Fatalf("%v: the encoding does not parse: %v", e.Tool, err)
		}
		want := &historydv1.StateEntry{Value: toValue(e.Value), Tool: e.Tool, Seq: e.Seq}
		if e.Tool != nil {
			want.Tool = str(strings.ToValidUTF8(*e.Tool, "\uFFFD"))
		}
		ex := map[string]any{}
		for k, v := range e.Extra {
			ex[k] = v
		}
		if e.Turn != nil {
			if n, ok := int32Of(*e.Turn); ok {
				want.Turn = &n
			} else {
				ex["turn"] = *e.Turn
			}
		}
		if e.TurnsWritten != nil {
			if n, ok := int32Of(*e.TurnsWritten); ok {
				want.TurnsWritten = &n
			} else {
				ex["turns_written"] = *e.TurnsWritten
			}
		}
		if len(ex) > 0 {
			want.Extra = toStruct(ex)
		}
		if len(e.Inputs) > 0 {
			want.Inputs = map[string]string{}
			for k, v := range e.Inputs {
				want.Inputs[strings.ToValidUTF8(k, "\uFFFD")] = v
			}
		}
		if !proto.Equal(&got, want) {
			t.Errorf("decoded %v\nwant %v", &got, want)
		}
	}
}

// FuzzEncodeEntry feeds whatever the msgpack decoder accepts through the
// entry convention and the direct encoding: the bytes must parse, fill
// exactly the computed size, and hold the value structpb would build.
func FuzzEncodeEntry(f *testing.F) {
	for _, v := range []any{
		map[string]any{"value": []any{1.5, "x", nil}, "tool": "t", "seq": int64(2), "turn": int64(1), "inputs": map[string]any{"a": "model"}, "extra": true},
		map[string]any{"value": map[string]any{"k": []byte{1, 2}}, "turn": 1.0, "turns_written": "no"},
		[]any{int64(1) << 60, math.Inf(1)},
	} {
		b, err := write.EncodeMsgpack(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, ok, err := codec.Decode("msgpack", data, codec.Limits{MaxBytes: 1 << 16, MaxDepth: 32})
		if err != nil || !ok {
			return
		}
		e := store.ParseEntry(v)
		b, err := encodeEntry(e, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != cap(b) {
			t.Fatalf("wrote %d bytes into a buffer sized %d", len(b), cap(b))
		}
		var got historydv1.StateEntry
		if err := proto.Unmarshal(b, &got); err != nil {
			t.Fatalf("the encoding does not parse: %v", err)
		}
		if !proto.Equal(got.GetValue(), toValue(e.Value)) && !hasInvalidUTF8(e.Value) {
			t.Fatalf("value %v, want %v", got.GetValue(), toValue(e.Value))
		}
		// The JSON form: the same entry but for the value's form.
		j, err := encodeEntry(e, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(j) != cap(j) {
			t.Fatalf("wrote %d bytes into a buffer sized %d", len(j), cap(j))
		}
		var gotJSON historydv1.StateEntry
		if err := proto.Unmarshal(j, &gotJSON); err != nil {
			t.Fatalf("the JSON encoding does not parse: %v", err)
		}
		if gotJSON.GetValue() != nil || !json.Valid(gotJSON.GetValueJson()) {
			t.Fatalf("value_json %q, value %v", gotJSON.GetValueJson(), gotJSON.GetValue())
		}
		want := proto.Clone(&got).(*historydv1.StateEntry)
		want.Value = nil
		gotJSON.ValueJson = nil
		if !proto.Equal(&gotJSON, want) {
			t.Fatalf("the JSON form's other fields %v, want %v", &gotJSON, want)
		}
	})
}

// hasInvalidUTF8 says whether v holds a string the encoding must repair,
// where structpb's tree and the wire legitimately differ.
func hasInvalidUTF8(v any) bool {
	switch x := v.(type) {
	case string:
		return !utf8.ValidString(x)
	case []any:
		return slices.ContainsFunc(x, hasInvalidUTF8)
	case map[string]any:
		for k, e := range x {
			if !utf8.ValidString(k) || hasInvalidUTF8(e) {
				return true
			}
		}
	}
	return false
}

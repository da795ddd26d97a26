package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/vmihailenco/msgpack/v5"
)

// skipEnd steps over the value at the start of data as a checkpoint walk
// does, returning where it ends.
func skipEnd(data []byte) (int, error) {
	d := newMsgpackDecoder(data, checkpointLimits)
	if err := d.skipFree(1); err != nil {
		return 0, err
	}
	return d.Pos, nil
}

// TestSkipFree checks the header walk against the library's encoder for
// every msgpack family and length class.
func TestSkipFree(t *testing.T) {
	var values []any
	for _, n := range []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxInt32 + 1, math.MaxInt64, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt64} {
		values = append(values, n)
	}
	for _, n := range []int{0, 1, 31, 32, 255, 256, 65535, 65536} {
		values = append(values, strings.Repeat("é", n/2)+strings.Repeat("x", n%2), bytes.Repeat([]byte{7}, n))
	}
	for _, n := range []int{0, 15, 16, 65535, 65536} {
		values = append(values, make([]any, n), func() map[string]any {
			m := make(map[string]any, n)
			for i := range n {
				m[fmt.Sprint("k", i)] = []any{i, nil, true}
			}
			return m
		}())
	}
	values = append(values, nil, true, false, float32(1.5), 2.5, math.Inf(-1), uint64(math.MaxUint64),
		map[string]any{"nested": []any{map[string]any{"x": []any{1, "two", 3.0}}}})
	var exts [][]byte
	for _, n := range []int{1, 2, 4, 8, 16, 0, 3, 255, 256, 65535, 65536} {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		if err := enc.EncodeExtHeader(5, n); err != nil {
			t.Fatal(err)
		}
		buf.Write(bytes.Repeat([]byte{0xc1}, n)) // ext payloads are opaque
		exts = append(exts, buf.Bytes())
	}
	check := func(what string, data []byte) {
		t.Helper()
		// Trailing bytes must not be consumed.
		end, err := skipEnd(append(data, 0xc0, 0xc0))
		if err != nil || end != len(data) {
			t.Errorf("%s: skip = %d, %v; want %d", what, end, err, len(data))
		}
		for _, cut := range []int{len(data) - 1, len(data) / 2, 0} {
			if cut < 0 || cut >= len(data) {
				continue
			}
			var me *MalformedError
			if _, err := skipEnd(data[:cut]); !errors.As(err, &me) {
				t.Errorf("%s cut to %d: %v; want MalformedError", what, cut, err)
			}
		}
	}
	for i, v := range values {
		data, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("value %d (%T)", i, v), data)
	}
	for i, data := range exts {
		check(fmt.Sprintf("ext %d", i), data)
	}
}

// TestMsgpackDeepNesting checks that nesting costs no stack: a value nested
// far deeper than any recursive walk could afford is stepped over and cut
// out whole, and a truncated one fails cleanly.
func TestMsgpackDeepNesting(t *testing.T) {
	const depth = 20 << 20
	var buf bytes.Buffer
	buf.Write([]byte{0x82})
	buf.Write(mustMsgpack(t, "channel_values"))
	buf.Write([]byte{0x81})
	buf.Write(mustMsgpack(t, "deep"))
	deepAt := buf.Len()
	buf.Write(bytes.Repeat([]byte{0x91}, depth))
	buf.WriteByte(0xc0)
	buf.Write(mustMsgpack(t, "channel_versions"))
	buf.Write(mustMsgpack(t, map[string]string{"deep": "v1"}))
	data := buf.Bytes()

	h, err := ParseCheckpoint(format.TypeMsgpack, data, nil)
	if err != nil || h.Versions["deep"] != "v1" {
		t.Fatalf("ParseCheckpoint = %+v, %v", h, err)
	}
	val, ok, err := ChannelValue(format.TypeMsgpack, data, "deep")
	if err != nil || !ok || len(val) != depth+1 || &val[0] != &data[deepAt] {
		t.Fatalf("ChannelValue: %d bytes, %v, %v", len(val), ok, err)
	}
	var me *MalformedError
	if _, err := ParseCheckpoint(format.TypeMsgpack, data[:deepAt+depth], nil); !errors.As(err, &me) {
		t.Errorf("truncated: %v", err)
	}
}

func mustMsgpack(t *testing.T, v any) []byte {
	t.Helper()
	data, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// encodeMap writes a msgpack map from key, value pairs in order, so tests
// can repeat keys and use keys that are not strings.
func encodeMap(t *testing.T, kv ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeMapLen(len(kv) / 2); err != nil {
		t.Fatal(err)
	}
	for _, v := range kv {
		if raw, ok := v.(msgpack.RawMessage); ok {
			buf.Write(raw)
			continue
		}
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestMsgpackKeysAndVersions(t *testing.T) {
	values := msgpack.RawMessage(encodeMap(t,
		1, "an int key",
		[]byte("messages"), "a bin key is not a channel name",
		"messages", "first",
		"tool_state", map[string]any{"k": 1},
		"messages", "second",
	))
	versions := msgpack.RawMessage(encodeMap(t,
		"s", "00000000000000000000000000000002.0.123",
		"i", 7,
		"u", uint64(math.MaxUint64),
		"f", 2.5,
		"nil", nil,
		3, "not a channel",
	))
	data := encodeMap(t,
		"v", 4,
		true, map[string]any{"ignored": []any{1, 2}},
		"ts", "2026-11-30T07:30:08.817845+00:00",
		"channel_values", msgpack.RawMessage(encodeMap(t, "messages", "replaced")),
		"channel_values", values,
		"channel_versions", versions,
	)
	h, err := ParseCheckpoint(format.TypeMsgpack, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"s": "00000000000000000000000000000002.0.123", "i": "7", "u": "18446744073709551615", "f": "2.5"}
	if !reflect.DeepEqual(h.Versions, want) {
		t.Errorf("versions = %v, want %v", h.Versions, want)
	}
	if h.TS.IsZero() || h.TS.Nanosecond() != 817845000 {
		t.Errorf("ts = %v", h.TS)
	}
	val, ok, err := ChannelValue(format.TypeMsgpack, data, "messages")
	if err != nil || !ok || !bytes.Equal(val, mustMsgpack(t, "second")) {
		t.Errorf("messages = %q, %v, %v; want the last of the repeated keys", val, ok, err)
	}
	val, ok, err = ChannelValue(format.TypeMsgpack, data, "tool_state")
	if err != nil || !ok || !bytes.Equal(val, mustMsgpack(t, map[string]any{"k": 1})) {
		t.Errorf("tool_state = %x, %v, %v", val, ok, err)
	}
	if _, ok, err := ChannelValue(format.TypeMsgpack, data, "1"); ok || err != nil {
		t.Errorf("an int key was taken for a channel: %v, %v", ok, err)
	}

	// A checkpoint without channel values or versions has none, and a nil
	// in their place means the same.
	for _, data := range [][]byte{encodeMap(t, "v", 1), encodeMap(t, "channel_values", nil, "channel_versions", nil)} {
		h, err := ParseCheckpoint(format.TypeMsgpack, data, nil)
		if err != nil || len(h.Versions) != 0 || h.Versions == nil {
			t.Errorf("ParseCheckpoint(%x) = %+v, %v", data, h, err)
		}
		if _, ok, err := ChannelValue(format.TypeMsgpack, data, "messages"); ok || err != nil {
			t.Errorf("ChannelValue(%x) = %v, %v", data, ok, err)
		}
	}

	var me *MalformedError
	for _, bad := range []any{true, []any{"1"}, map[string]any{}, []byte("1")} {
		data := encodeMap(t, "channel_versions", map[string]any{"messages": bad})
		if _, err := ParseCheckpoint(format.TypeMsgpack, data, nil); !errors.As(err, &me) || !strings.Contains(err.Error(), `"messages"`) {
			t.Errorf("version %#v: %v; want a MalformedError naming the channel", bad, err)
		}
	}
}

func TestJSONVersionsAndValues(t *testing.T) {
	data := []byte(`{"v":4,"id":"x","ts":"2026-11-30T07:33:54.173Z",
		"channel_values":{"messages":[{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"hé"}}], "n": 1.50, "none": null},
		"channel_versions":{"messages":3,"tool_state":"00000000000000000000000000000002.0.5","big":12345678901234567890,"f":1.5e3,"gone":null}}`)
	h, err := ParseCheckpoint(format.TypeJSON, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"messages": "3", "tool_state": "00000000000000000000000000000002.0.5", "big": "12345678901234567890", "f": "1500"}
	if !reflect.DeepEqual(h.Versions, want) {
		t.Errorf("versions = %v, want %v", h.Versions, want)
	}
	if h.TS.Nanosecond() != 173000000 {
		t.Errorf("ts = %v", h.TS)
	}
	for ch, want := range map[string]string{
		"messages": `[{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"hé"}}]`,
		"n":        `1.50`,
		"none":     `null`,
	} {
		val, ok, err := ChannelValue(format.TypeJSON, data, ch)
		if err != nil || !ok || string(val) != want {
			t.Errorf("%s = %s, %v, %v; want the stored text %s", ch, val, ok, err, want)
		}
	}
	if _, ok, err := ChannelValue(format.TypeJSON, data, "tool_state"); ok || err != nil {
		t.Errorf("absent channel: %v, %v", ok, err)
	}
	// A timestamp that is not one is left out, not an error.
	if h, err := ParseCheckpoint(format.TypeJSON, []byte(`{"ts":17}`), nil); err != nil || !h.TS.IsZero() {
		t.Errorf("numeric ts: %+v, %v", h, err)
	}
}

func TestUnsupportedCheckpoints(t *testing.T) {
	var ue *UnsupportedError
	for _, typ := range []string{"pickle", "msgpack+aes", "bytes", "yaml"} {
		if _, err := ParseCheckpoint(typ, []byte("x"), nil); !errors.As(err, &ue) || ue.Format != typ {
			t.Errorf("ParseCheckpoint(%q) = %v; want UnsupportedError", typ, err)
		}
		if _, _, err := ChannelValue(typ, []byte("x"), "messages"); !errors.As(err, &ue) || ue.Format != typ {
			t.Errorf("ChannelValue(%q) = %v; want UnsupportedError", typ, err)
		}
	}
}

// TestNormalizeVersion is the one rule for versions, whichever serializer
// wrote them.
func TestNormalizeVersion(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
		ok   bool
	}{
		{nil, "", false},
		{"00000000000000000000000000000004.0.51847", "00000000000000000000000000000004.0.51847", true},
		{int64(3), "3", true},
		{float64(3), "3", true},
		{2.5, "2.5", true},
		{uint64(math.MaxUint64), "18446744073709551615", true},
	} {
		got, ok, err := NormalizeVersion(c.in)
		if err != nil || ok != c.ok || got != c.want {
			t.Errorf("NormalizeVersion(%#v) = %q, %v, %v; want %q, %v", c.in, got, ok, err, c.want, c.ok)
		}
	}
	for _, bad := range []any{true, []any{}, map[string]any{}, []byte("1")} {
		if _, _, err := NormalizeVersion(bad); err == nil {
			t.Errorf("NormalizeVersion(%#v): no error", bad)
		}
	}
	// The JSON and msgpack forms of one version agree.
	for _, v := range []any{"v1", 3, 2.5, nil} {
		js, _ := json.Marshal(map[string]any{"channel_versions": map[string]any{"c": v}})
		mp := mustMsgpack(t, map[string]any{"channel_versions": map[string]any{"c": v}})
		a, err1 := ParseCheckpoint(format.TypeJSON, js, nil)
		b, err2 := ParseCheckpoint(format.TypeMsgpack, mp, nil)
		pv, err3 := parseVersions(mustJSON(t, map[string]any{"c": v}), nil)
		if err1 != nil || err2 != nil || err3 != nil || !reflect.DeepEqual(a.Versions, b.Versions) || !reflect.DeepEqual(a.Versions, pv) {
			t.Errorf("version %#v: json %v (%v), msgpack %v (%v), versions %v (%v)", v, a.Versions, err1, b.Versions, err2, pv, err3)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseMetadata(t *testing.T) {
	for _, c := range []struct {
		typ  string
		data []byte
		want Metadata
	}{
		{format.TypeJSON, []byte(`{"source":"loop","step":3,"parents":{}}`), Metadata{Step: 3, HasStep: true, Source: "loop"}},
		{format.TypeJSON, []byte(`{"source":"input","step":-1,"counters_since_delta_snapshot":{"messages":[1,2]}}`), Metadata{Step: -1, HasStep: true, Source: "input", Delta: true}},
		{format.TypeJSON, []byte(`{"delta_writes_versioned":true}`), Metadata{Delta: true}},
		{format.TypeJSON, nil, Metadata{}},
		{format.TypeMsgpack, mustMsgpack(t, map[string]any{"step": -2, "source": "loop", "counters_since_delta_snapshot": map[string]any{}}), Metadata{Step: -2, HasStep: true, Source: "loop", Delta: true}},
		{"", []byte(` {"step":1}`), Metadata{Step: 1, HasStep: true}},
		{"", mustMsgpack(t, map[string]any{"step": 2}), Metadata{Step: 2, HasStep: true}},
	} {
		got, err := ParseMetadata(c.typ, c.data)
		if err != nil || got != c.want {
			t.Errorf("ParseMetadata(%q, %q) = %+v, %v; want %+v", c.typ, c.data, got, err, c.want)
		}
	}
	var me *MalformedError
	if _, err := ParseMetadata(format.TypeJSON, []byte(`{"step":`)); !errors.As(err, &me) {
		t.Errorf("truncated metadata: %v", err)
	}
}

package codec

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/vmihailenco/msgpack/v5"
)

// Building blocks for hand-made msgpack. enc writes its parts one after the
// other, so headers, extensions and plain values can be mixed to build any
// nesting, including extensions inside extension payloads.
type (
	ext struct {
		code    int8
		payload []byte
	}
	rawBytes    []byte
	arrayHeader int
	mapHeader   int
)

func enc(t testing.TB, parts ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	for _, p := range parts {
		var err error
		switch p := p.(type) {
		case ext:
			err = e.EncodeExtHeader(p.code, len(p.payload))
			buf.Write(p.payload)
		case rawBytes:
			buf.Write(p)
		case arrayHeader:
			err = e.EncodeArrayLen(int(p))
		case mapHeader:
			err = e.EncodeMapLen(int(p))
		default:
			err = e.Encode(p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// pyExt is a Python extension value: code with a (module, class, data)
// payload, where the enc parts in data make up one value.
func pyExt(t testing.TB, code int8, module, class string, data ...any) ext {
	t.Helper()
	parts := append([]any{arrayHeader(3), module, class}, data...)
	return ext{code, enc(t, parts...)}
}

// pyExtMethod is pyExt for codes 3 and 5, whose payload ends with a method
// name.
func pyExtMethod(t testing.TB, code int8, module, class, method string, data ...any) ext {
	t.Helper()
	parts := append([]any{arrayHeader(4), module, class}, data...)
	return ext{code, enc(t, append(parts, method)...)}
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type errKind int

const (
	noErr errKind = iota
	unsupported
	malformed
	limit
)

func (k errKind) check(t *testing.T, err error) {
	t.Helper()
	var ue *UnsupportedError
	var me *MalformedError
	var le *LimitError
	ok := false
	switch k {
	case noErr:
		ok = err == nil
	case unsupported:
		ok = errors.As(err, &ue)
	case malformed:
		ok = errors.As(err, &me)
	case limit:
		ok = errors.As(err, &le)
	}
	if !ok {
		t.Fatalf("err = %v (%T), want kind %d", err, err, k)
	}
}

// TestDecodeMsgpack covers every msgpack format family, each extension code
// and the ways a blob can be corrupt.
func TestDecodeMsgpack(t *testing.T) {
	uuidHex := "12345678123456781234567812345678"
	uuidDashed := "12345678-1234-5678-1234-567812345678"
	tests := []struct {
		name string
		data []byte
		want any
		err  errKind
	}{
		{name: "nil", data: enc(t, nil), want: nil},
		{name: "bools", data: enc(t, arrayHeader(2), true, false), want: []any{true, false}},
		{name: "str", data: enc(t, "héllo"), want: "héllo"},
		{name: "bin", data: enc(t, []byte{0, 1, 2}), want: []byte{0, 1, 2}},
		{name: "str8", data: unhex(t, "d9 03 61 62 63"), want: "abc"},
		{name: "bin8 empty", data: unhex(t, "c4 00"), want: []byte{}},
		{name: "invalid utf8 str replaced", data: unhex(t, "a4 61 ff fe 62"), want: "a\ufffdb"},
		{name: "positive fixint", data: unhex(t, "7f"), want: int64(127)},
		{name: "negative fixint", data: unhex(t, "e0"), want: int64(-32)},
		{name: "uint8", data: unhex(t, "cc ff"), want: int64(255)},
		{name: "int8", data: unhex(t, "d0 80"), want: int64(-128)},
		{name: "int16", data: unhex(t, "d1 80 00"), want: int64(-32768)},
		{name: "int32", data: unhex(t, "d2 80 00 00 00"), want: int64(math.MinInt32)},
		{name: "uint32", data: unhex(t, "ce ff ff ff ff"), want: int64(math.MaxUint32)},
		{name: "min int64", data: unhex(t, "d3 80 00 00 00 00 00 00 00"), want: int64(math.MinInt64)},
		{name: "max int64 as int64", data: unhex(t, "d3 7f ff ff ff ff ff ff ff"), want: int64(math.MaxInt64)},
		{name: "max int64 as uint64 stays int64", data: unhex(t, "cf 7f ff ff ff ff ff ff ff"), want: int64(math.MaxInt64)},
		{name: "max int64 + 1 is uint64", data: unhex(t, "cf 80 00 00 00 00 00 00 00"), want: uint64(math.MaxInt64 + 1)},
		{name: "max uint64", data: enc(t, uint64(math.MaxUint64)), want: uint64(math.MaxUint64)},
		{name: "float32", data: enc(t, float32(1.5)), want: 1.5},
		{name: "float64", data: enc(t, 0.1), want: 0.1},
		{name: "array16", data: unhex(t, "dc 00 02 01 02"), want: []any{int64(1), int64(2)}},
		{name: "map16", data: unhex(t, "de 00 01 a1 6b c0"), want: map[string]any{"k": nil}},
		{
			name: "non-string keys",
			data: enc(t, mapHeader(9),
				1, "int", -5, "neg", nil, "nil", true, "bool", 1.5, "float", 1e21, "big float",
				[]byte{0xb7, 0x2a, 0x5e}, "bin",
				arrayHeader(2), 1, "a", "tuple",
				pyExt(t, 0, "uuid", "UUID", uuidHex), "uuid key"),
			want: map[string]any{
				"1": "int", "-5": "neg", "null": "nil", "true": "bool", "1.5": "float", "1e+21": "big float",
				"type": "bin", `[1,"a"]`: "tuple", uuidDashed: "uuid key",
			},
		},
		{
			name: "keys equal after conversion: last wins",
			data: enc(t, mapHeader(2), 1, "int", "1", "str"),
			want: map[string]any{"1": "str"},
		},
		{name: "ext 0 uuid", data: enc(t, pyExt(t, 0, "uuid", "UUID", uuidHex)), want: uuidDashed},
		{
			name: "ext 0 set",
			data: enc(t, pyExt(t, 0, "builtins", "set", arrayHeader(2), 1, 2)),
			want: []any{int64(1), int64(2)},
		},
		{name: "ext 0 decimal", data: enc(t, pyExt(t, 0, "decimal", "Decimal", "1.10")), want: "1.10"},
		{name: "ext 0 pydantic secret", data: enc(t, pyExt(t, 0, "pydantic.types", "SecretStr", "hunter2")), want: "**********"},
		{name: "ext 0 empty pydantic secret", data: enc(t, pyExt(t, 0, "pydantic.types", "SecretBytes", []byte{})), want: ""},
		{name: "ext 0 enum", data: enc(t, pyExt(t, 0, "app.models", "Color", "red")), want: "red"},
		{
			name: "ext 1 args",
			data: enc(t, pyExt(t, 1, "app", "Span", arrayHeader(3), 2024, 2, 29)),
			want: []any{int64(2024), int64(2), int64(29)},
		},
		{
			name: "ext 1 date",
			data: enc(t, pyExt(t, 1, "datetime", "date", arrayHeader(3), 2024, 2, 29)),
			want: "2024-02-29",
		},
		{
			name: "ext 1 date of the wrong shape is its data",
			data: enc(t, pyExt(t, 1, "datetime", "date", arrayHeader(2), 2024, 2)),
			want: []any{int64(2024), int64(2)},
		},
		{
			name: "ext 1 windows path",
			data: enc(t, pyExt(t, 1, "pathlib", "WindowsPath", arrayHeader(3), `C:\`, "Users", "x")),
			want: `C:\Users\x`,
		},
		{
			name: "ext 1 windows path, drive-relative",
			data: enc(t, pyExt(t, 1, "pathlib._local", "WindowsPath", arrayHeader(2), "C:", "foo")),
			want: `C:foo`,
		},
		{
			name: "ext 1 windows path, relative",
			data: enc(t, pyExt(t, 1, "pathlib", "WindowsPath", arrayHeader(2), "a", "b")),
			want: `a\b`,
		},
		{
			name: "ext 2 kwargs with nested ext",
			data: enc(t, pyExt(t, 2, "datetime", "time", mapHeader(2),
				"hour", 12,
				"tzinfo", pyExt(t, 1, "datetime", "timezone", arrayHeader(1),
					pyExt(t, 1, "datetime", "timedelta", arrayHeader(3), 0, 0, 0)))),
			// Too few fields to be a time: its fields, tzinfo rendered.
			want: map[string]any{"hour": int64(12), "tzinfo": "+00:00"},
		},
		{
			name: "ext 2 time with a fixed offset",
			data: enc(t, pyExt(t, 2, "datetime", "time", mapHeader(6),
				"hour", 9, "minute", 28, "second", 27, "microsecond", 577701, "fold", 0,
				"tzinfo", pyExt(t, 1, "datetime", "timezone", arrayHeader(2),
					pyExt(t, 1, "datetime", "timedelta", arrayHeader(3), -1, 84600, 0), "EST-ish"))),
			want: "09:28:27.577701-00:30",
		},
		{
			name: "ext 3 datetime",
			data: enc(t, pyExtMethod(t, 3, "datetime", "datetime", "fromisoformat", "2024-05-06T07:08:09+00:00")),
			want: "2024-05-06T07:08:09Z",
		},
		{
			name: "ext 4 pydantic v1",
			data: enc(t, pyExt(t, 4, "app", "M", mapHeader(1), "a", 1)),
			want: map[string]any{"a": int64(1)},
		},
		{
			name: "ext 5 message with nested datetime and set",
			data: enc(t, pyExtMethod(t, 5, "langchain_core.messages.human", "HumanMessage", "model_validate_json", mapHeader(3),
				"content", "hi", "type", "human",
				"when", pyExtMethod(t, 3, "datetime", "datetime", "fromisoformat", "2024-01-01T00:00:00"))),
			want: map[string]any{"content": "hi", "type": "human", "when": "2024-01-01T00:00:00"},
		},
		{
			name: "ext 0 wrapping ext 5",
			data: enc(t, pyExt(t, 0, "collections", "deque", arrayHeader(1),
				pyExtMethod(t, 5, "m", "AIMessage", "model_validate_json", mapHeader(1), "type", "ai"))),
			want: []any{map[string]any{"type": "ai"}},
		},
		{name: "ext 7 delta snapshot is its value", data: enc(t, ext{7, enc(t, arrayHeader(0))}), want: []any{}},
		{name: "ext 7 delta snapshot inside a value", data: enc(t, arrayHeader(1), ext{7, enc(t, arrayHeader(0))}), err: unsupported},
		{name: "ext 7 nested", data: enc(t, mapHeader(1), "messages", ext{7, enc(t, arrayHeader(0))}), err: unsupported},
		{name: "ext 8 unknown", data: enc(t, ext{8, enc(t, 1)}), err: unsupported},
		{name: "ext -1 timestamp", data: unhex(t, "d6 ff 00 00 00 01"), err: unsupported},
		{name: "ext payload not a tuple", data: enc(t, ext{0, enc(t, "x")}), err: malformed},
		{name: "ext payload too short", data: enc(t, ext{0, enc(t, arrayHeader(2), "m", "c")}), err: malformed},
		{name: "ext payload trailing bytes", data: enc(t, ext{0, enc(t, arrayHeader(3), "m", "c", 1, 2)}), err: malformed},
		{name: "ext payload truncated inside", data: enc(t, ext{0, enc(t, arrayHeader(4), "m", "c", 1)}), err: malformed},
		{name: "ext longer than data", data: unhex(t, "c7 10 00 93"), err: malformed},
		{name: "empty", data: nil, err: malformed},
		{name: "reserved byte c1", data: unhex(t, "c1"), err: malformed},
		{name: "truncated str", data: unhex(t, "a5 61 62"), err: malformed},
		{name: "truncated int", data: unhex(t, "cd 01"), err: malformed},
		{name: "trailing bytes", data: unhex(t, "01 02"), err: malformed},
		{name: "array announces 2^32-1 elements", data: unhex(t, "dd ff ff ff ff 00 00 00 00 00"), err: malformed},
		{name: "map announces 2^32-1 pairs", data: unhex(t, "df ff ff ff ff 00 00 00 00 00"), err: malformed},
		{name: "nested announcements overcommit", data: unhex(t, "94 94 94 94 00 00 00 00 00 00 00 00"), err: malformed},
		{name: "outer values cannot fit after ext", data: enc(t, arrayHeader(3), ext{0, enc(t, arrayHeader(3), "m", "c", 1)}), err: malformed},
		{name: "str32 longer than data", data: unhex(t, "db ff ff ff ff 61"), err: malformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := Decode("msgpack", tc.data, Limits{})
			tc.err.check(t, err)
			if tc.err != noErr {
				return
			}
			if !ok {
				t.Fatal("ok = false")
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

// TestDecodeErrorsCarryOffsets checks that errors point at the offending
// byte and survive wrapping.
func TestDecodeErrorsCarryOffsets(t *testing.T) {
	data := enc(t, arrayHeader(2), "ok", ext{7, enc(t, arrayHeader(0))})
	_, _, err := Decode("msgpack", data, Limits{})
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.Offset != 4 || !strings.Contains(ue.Feature, "ext 7") {
		t.Fatalf("err = %#v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "offset 4") || !strings.Contains(msg, "delta snapshot") {
		t.Errorf("Error() = %q", msg)
	}

	_, _, err = Decode("msgpack", unhex(t, "92 01 c1"), Limits{})
	var me *MalformedError
	if !errors.As(err, &me) || me.Offset != 2 || me.Format != "msgpack" {
		t.Fatalf("err = %#v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "offset 2") || !strings.Contains(msg, "0xc1") {
		t.Errorf("Error() = %q", msg)
	}

	// Offsets inside an extension payload are offsets in the whole blob.
	data = enc(t, ext{0, enc(t, arrayHeader(3), "m", "c", rawBytes{0xc1})})
	_, _, err = Decode("msgpack", data, Limits{})
	if !errors.As(err, &me) || me.Offset != len(data)-1 {
		t.Fatalf("err = %#v, want offset %d", err, len(data)-1)
	}

	// Callers add context with %w and still find the type.
	wrapped := fmt.Errorf("thread t1 checkpoint c1 channel messages: %w", err)
	if !errors.As(wrapped, &me) {
		t.Fatal("errors.As through a wrap failed")
	}
}

// TestDecodeHugeHeaderFailsFast checks that a length header cannot make the
// decoder allocate beyond what the blob could hold.
func TestDecodeHugeHeaderFailsFast(t *testing.T) {
	// A 10-byte blob claiming 2^32-1 elements must fail without allocating
	// for them.
	data := unhex(t, "dd ff ff ff ff c0 c0 c0 c0 c0")
	allocs := testing.AllocsPerRun(10, func() {
		if _, _, err := Decode("msgpack", data, Limits{}); err == nil {
			t.Fatal("no error")
		}
	})
	if allocs > 10 {
		t.Errorf("%v allocations", allocs)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		_, _ = ScanMessages("msgpack", data, Limits{})
		_, _, _ = Decode("msgpack", data, Limits{})
	}
	runtime.ReadMemStats(&after)
	if perOp := (after.TotalAlloc - before.TotalAlloc) / 200; perOp > 1024 {
		t.Errorf("%d bytes allocated per call", perOp)
	}
}

// TestNumpy covers the numpy extension: layouts, dtypes and bad shapes.
func TestNumpy(t *testing.T) {
	np := func(dtype string, shape []int, order string, buf []byte) []byte {
		parts := []any{arrayHeader(4), dtype, arrayHeader(len(shape))}
		for _, n := range shape {
			parts = append(parts, n)
		}
		parts = append(parts, order, buf)
		return enc(t, ext{6, enc(t, parts...)})
	}
	le32 := func(vs ...int32) []byte {
		var b []byte
		for _, v := range vs {
			b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
		}
		return b
	}
	i := func(v int64) any { return int64(v) }
	tests := []struct {
		name string
		data []byte
		lim  Limits
		want any
		err  errKind
	}{
		{name: "C order", data: np("<i4", []int{2, 3}, "C", le32(0, 1, 2, 3, 4, 5)),
			want: []any{[]any{i(0), i(1), i(2)}, []any{i(3), i(4), i(5)}}},
		{name: "F order", data: np("<i4", []int{2, 3}, "F", le32(0, 3, 1, 4, 2, 5)),
			want: []any{[]any{i(0), i(1), i(2)}, []any{i(3), i(4), i(5)}}},
		{name: "big endian int16", data: np(">i2", []int{2}, "C", []byte{0xff, 0xfe, 0x00, 0x01}), want: []any{i(-2), i(1)}},
		{name: "bool", data: np("|b1", []int{2}, "C", []byte{1, 0}), want: []any{true, false}},
		{name: "uint64 above int64", data: np("<u8", []int{1}, "C", bytes.Repeat([]byte{0xff}, 8)), want: []any{uint64(math.MaxUint64)}},
		{name: "float16", data: np("<f2", []int{3}, "C", []byte{0x00, 0x3e, 0x00, 0xc0, 0x00, 0x7c}), want: []any{1.5, -2.0, math.Inf(1)}},
		{name: "zero-dimensional", data: np("<f8", nil, "C", []byte{0, 0, 0, 0, 0, 0, 0x0c, 0x40}), want: 3.5},
		{name: "empty", data: np("<f8", []int{0, 3}, "C", []byte{}), want: []any{}},
		{name: "empty rows", data: np("<f8", []int{2, 0}, "C", []byte{}), want: []any{[]any{}, []any{}}},
		{name: "empty with huge leading dims stays raw", data: np("<f8", []int{1 << 30, 1 << 30, 0}, "C", []byte{}),
			want: map[string]any{"dtype": "<f8", "shape": []any{i(1 << 30), i(1 << 30), i(0)}, "order": "C", "data": []byte{}}},
		{name: "strings stay raw", data: np("<U1", []int{1}, "C", []byte{'a', 0, 0, 0}),
			want: map[string]any{"dtype": "<U1", "shape": []any{i(1)}, "order": "C", "data": []byte{'a', 0, 0, 0}}},
		{name: "complex stays raw", data: np("<c8", []int{1}, "C", make([]byte, 8)),
			want: map[string]any{"dtype": "<c8", "shape": []any{i(1)}, "order": "C", "data": make([]byte, 8)}},
		{name: "buffer too short", data: np("<i4", []int{2, 3}, "C", le32(0, 1)), err: malformed},
		{name: "buffer too long", data: np("<i4", []int{1}, "C", le32(0, 1)), err: malformed},
		{name: "huge shape", data: np("<i1", []int{1 << 30, 1 << 30, 1 << 30}, "C", []byte{1}), err: malformed},
		{name: "negative dim", data: enc(t, ext{6, enc(t, arrayHeader(4), "<i1", arrayHeader(1), -1, "C", []byte{})}), err: malformed},
		{name: "wrong payload types", data: enc(t, ext{6, enc(t, arrayHeader(4), 1, 2, 3, 4)}), err: malformed},
		{name: "three-item payload", data: enc(t, ext{6, enc(t, arrayHeader(3), "<i1", arrayHeader(0), "C")}), err: malformed},
		{name: "dimensions count toward MaxDepth", data: np("<i1", []int{1, 1, 1, 1}, "C", []byte{7}), lim: Limits{MaxDepth: 3}, err: limit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := Decode("msgpack", tc.data, tc.lim)
			tc.err.check(t, err)
			if tc.err == noErr && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

// TestBlobTypes covers every blob type a saver writes, and refused ones.
func TestBlobTypes(t *testing.T) {
	raw := []byte("raw")
	tests := []struct {
		typ    string
		data   []byte
		want   any
		wantOK bool
		err    errKind
	}{
		{typ: "bytes", data: raw, want: []byte("raw"), wantOK: true},
		{typ: "bytearray", data: raw, want: []byte("raw"), wantOK: true},
		{typ: "null", data: nil, want: nil, wantOK: true},
		{typ: "empty", data: nil, want: nil, wantOK: false},
		{typ: "json", data: []byte(`{"a":[1,2.5,"x",null,true]}`), wantOK: true,
			want: map[string]any{"a": []any{int64(1), 2.5, "x", nil, true}}},
		{typ: "msgpack", data: enc(t, "x"), want: "x", wantOK: true},
		{typ: "pickle", data: []byte{0x80, 0x04}, err: unsupported},
		{typ: "msgpack+aes", data: []byte{1, 2, 3}, err: unsupported},
		{typ: "json+chacha", data: []byte{1, 2, 3}, err: unsupported},
		{typ: "yaml", data: []byte("a: 1"), err: unsupported},
		{typ: "", data: nil, err: unsupported},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			got, ok, err := Decode(tc.typ, tc.data, Limits{})
			tc.err.check(t, err)
			if tc.err != noErr {
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.typ)) {
					t.Errorf("Error() = %q does not name the type", err)
				}
				return
			}
			if ok != tc.wantOK || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, %v; want %#v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	// Results never alias the caller's buffer, which drivers reuse.
	buf := []byte("abc")
	v, _, _ := Decode("bytes", buf, Limits{})
	buf[0] = 'X'
	if string(v.([]byte)) != "abc" {
		t.Error("bytes result aliases the input")
	}
	buf = enc(t, []byte("abc"))
	v, _, _ = Decode("msgpack", buf, Limits{})
	buf[len(buf)-1] = 'X'
	if string(v.([]byte)) != "abc" {
		t.Error("bin result aliases the input")
	}
}

// TestLimits covers MaxBytes and MaxDepth in both formats.
func TestLimits(t *testing.T) {
	nestedMsgpack := func(n int) []byte {
		return append(bytes.Repeat([]byte{0x91}, n), 0xc0)
	}
	nestedJSON := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	tests := []struct {
		name string
		typ  string
		data []byte
		lim  Limits
		err  errKind
	}{
		{name: "size at limit", typ: "bytes", data: make([]byte, 10), lim: Limits{MaxBytes: 10}},
		{name: "size over limit", typ: "bytes", data: make([]byte, 11), lim: Limits{MaxBytes: 10}, err: limit},
		{name: "msgpack over size", typ: "msgpack", data: nestedMsgpack(20), lim: Limits{MaxBytes: 10}, err: limit},
		{name: "msgpack depth at limit", typ: "msgpack", data: nestedMsgpack(5), lim: Limits{MaxDepth: 5}},
		{name: "msgpack depth over limit", typ: "msgpack", data: nestedMsgpack(6), lim: Limits{MaxDepth: 5}, err: limit},
		{name: "msgpack default depth", typ: "msgpack", data: nestedMsgpack(format.DefaultMaxDepth + 1), err: limit},
		{name: "msgpack map depth", typ: "msgpack", data: enc(t, mapHeader(1), "a", mapHeader(1), "b", 1), lim: Limits{MaxDepth: 1}, err: limit},
		{name: "ext payload counts", typ: "msgpack", data: enc(t, arrayHeader(1), pyExt(t, 0, "m", "c", 1)), lim: Limits{MaxDepth: 1}, err: limit},
		{name: "ext payload within limit", typ: "msgpack", data: enc(t, arrayHeader(1), pyExt(t, 0, "m", "c", 1)), lim: Limits{MaxDepth: 2}},
		{name: "json depth at limit", typ: "json", data: nestedJSON(5), lim: Limits{MaxDepth: 5}},
		{name: "json depth over limit", typ: "json", data: nestedJSON(6), lim: Limits{MaxDepth: 5}, err: limit},
		{name: "json very deep", typ: "json", data: nestedJSON(1 << 20), err: limit},
		{name: "msgpack very deep", typ: "msgpack", data: nestedMsgpack(1 << 20), err: limit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode(tc.typ, tc.data, tc.lim)
			tc.err.check(t, err)
			if (tc.typ == "msgpack" || tc.typ == "json") && len(tc.data) > 0 && (tc.data[0] == 0x91 || tc.data[0] == '[') {
				// ScanMessages enforces the same limits on what it reads.
				_, err := ScanMessages(tc.typ, tc.data, tc.lim)
				if tc.err == limit {
					tc.err.check(t, err)
				}
			}
		})
	}
	_, _, err := Decode("msgpack", nestedMsgpack(9), Limits{MaxDepth: 8})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "MaxDepth" || le.Max != 8 || le.Got != 9 || le.Offset != 8 {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(err.Error(), "MaxDepth (8)") {
		t.Errorf("Error() = %q", err)
	}
	_, _, err = Decode("json", []byte("[1]"), Limits{MaxBytes: 2})
	if !errors.As(err, &le) || le.Limit != "MaxBytes" || le.Max != 2 || le.Got != 3 {
		t.Fatalf("err = %#v", err)
	}
}

// TestDecodeJSON covers the JSON reader itself: numbers, strings, errors.
func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want any
		err  errKind
	}{
		{name: "max int64", in: `9223372036854775807`, want: int64(math.MaxInt64)},
		{name: "min int64", in: `-9223372036854775808`, want: int64(math.MinInt64)},
		{name: "uint64", in: `18446744073709551615`, want: uint64(math.MaxUint64)},
		{name: "beyond uint64 is float", in: `18446744073709551616`, want: 18446744073709551616.0},
		{name: "below int64 is float", in: `-9223372036854775809`, want: -9223372036854775809.0},
		{name: "integral float stays float", in: `1.0`, want: 1.0},
		{name: "exponent is float", in: `1e2`, want: 100.0},
		{name: "negative zero int", in: `-0`, want: int64(0)},
		{name: "huge exponent", in: `1e400`, want: math.Inf(1)},
		{name: "python NaN literals", in: `[NaN, Infinity, -Infinity]`},
		{name: "escapes", in: `"a\"\\\/\b\f\n\r\t\u00e9\ud83c\udf0d"`, want: "a\"\\/\b\f\n\r\té🌍"},
		{name: "lone surrogate", in: `"\ud800x"`, want: "\ufffdx"},
		{name: "two high surrogates", in: `"\ud800\ud800"`, want: "\ufffd\ufffd"},
		{name: "invalid utf8", in: "\"a\xffb\"", want: "a\ufffdb"},
		{name: "bom", in: "\xef\xbb\xbf[1]", want: []any{int64(1)}},
		{name: "whitespace", in: " \t\n{ \"a\" : [ ] }\r\n", want: map[string]any{"a": []any{}}},
		{name: "duplicate keys last wins", in: `{"a":1,"a":2}`, want: map[string]any{"a": int64(2)}},
		{name: "empty", in: ``, err: malformed},
		{name: "trailing comma", in: `[1,]`, err: malformed},
		{name: "trailing data", in: `{} x`, err: malformed},
		{name: "unterminated string", in: `"abc`, err: malformed},
		{name: "control char", in: "\"a\nb\"", err: malformed},
		{name: "leading zero", in: `01`, err: malformed},
		{name: "bad escape", in: `"\x"`, err: malformed},
		{name: "bad unicode escape", in: `"\u12g4"`, err: malformed},
		{name: "missing colon", in: `{"a" 1}`, err: malformed},
		{name: "non-string key", in: `{1:2}`, err: malformed},
		{name: "bare word", in: `nul`, err: malformed},
		{name: "lone minus", in: `-`, err: malformed},
		{name: "dot without digits", in: `1.`, err: malformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := Decode("json", []byte(tc.in), Limits{})
			tc.err.check(t, err)
			if tc.err != noErr {
				return
			}
			if tc.name == "python NaN literals" {
				l := got.([]any)
				if !math.IsNaN(l[0].(float64)) || !math.IsInf(l[1].(float64), 1) || !math.IsInf(l[2].(float64), -1) {
					t.Fatalf("got %#v", got)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
	_, _, err := Decode("json", []byte(`{"a": [1, 2 3]}`), Limits{})
	var me *MalformedError
	if !errors.As(err, &me) || me.Offset != 12 || me.Format != "json" {
		t.Fatalf("err = %#v", err)
	}
}

// TestDecodeLangChainJSON covers the LangChain records in JSON blobs, from
// LangChain.js and from old Python checkpoints.
func TestDecodeLangChainJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want any
		err  errKind
	}{
		{
			name: "js human message gets its type",
			in:   `{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"hi","additional_kwargs":{}}}`,
			want: map[string]any{"content": "hi", "additional_kwargs": map[string]any{}, "type": "human"},
		},
		{
			name: "stored type is kept",
			in:   `{"lc":1,"type":"constructor","id":["langchain","schema","messages","AIMessage"],"kwargs":{"content":"x","type":"ai"}}`,
			want: map[string]any{"content": "x", "type": "ai"},
		},
		{
			name: "chat and chunk names",
			in: `[{"lc":1,"type":"constructor","id":["x","ChatMessage"],"kwargs":{}},
			      {"lc":1,"type":"constructor","id":["x","AIMessageChunk"],"kwargs":{}},
			      {"lc":1,"type":"constructor","id":["x","RemoveMessage"]}]`,
			want: []any{map[string]any{"type": "chat"}, map[string]any{"type": "AIMessageChunk"}, map[string]any{"type": "remove"}},
		},
		{
			name: "other classes give their kwargs as stored",
			in:   `{"lc":1,"type":"constructor","id":["langchain_core","documents","Document"],"kwargs":{"page_content":"p","metadata":{}}}`,
			want: map[string]any{"page_content": "p", "metadata": map[string]any{}},
		},
		{
			name: "nested constructor in kwargs",
			in:   `{"lc":1,"type":"constructor","id":["a","Outer"],"kwargs":{"inner":{"lc":1,"type":"constructor","id":["a","HumanMessage"],"kwargs":{"content":"c"}}}}`,
			want: map[string]any{"inner": map[string]any{"content": "c", "type": "human"}},
		},
		{
			name: "secret is never revealed",
			in:   `{"lc":1,"type":"constructor","id":["a","Client"],"kwargs":{"api_key":{"lc":1,"type":"secret","id":["OPENAI_API_KEY"]}}}`,
			want: map[string]any{"api_key": nil},
		},
		{
			name: "not_implemented gives its repr",
			in:   `[{"lc":1,"type":"not_implemented","id":["a","B"],"repr":"<B object>"},{"lc":1,"type":"not_implemented","id":["a","B"]}]`,
			want: []any{"<B object>", nil},
		},
		{
			name: "escaped user data in kwargs is unwrapped and kept",
			in:   `{"lc":1,"type":"constructor","id":["a","HumanMessage"],"kwargs":{"additional_kwargs":{"x":{"__lc_escaped__":{"lc":1,"type":"secret","id":["K"]}}}}}`,
			want: map[string]any{"additional_kwargs": map[string]any{"x": map[string]any{"lc": int64(1), "type": "secret", "id": []any{"K"}}}, "type": "human"},
		},
		{
			name: "escape marker outside kwargs is plain data",
			in:   `{"__lc_escaped__":{"a":1}}`,
			want: map[string]any{"__lc_escaped__": map[string]any{"a": int64(1)}},
		},
		{
			name: "constructor with bad id is kept",
			in:   `{"lc":1,"type":"constructor","id":[1],"kwargs":{}}`,
			want: map[string]any{"lc": int64(1), "type": "constructor", "id": []any{int64(1)}, "kwargs": map[string]any{}},
		},
		{
			name: "js records",
			in: `{"u":{"lc":2,"type":"undefined"},
			      "set":{"lc":2,"type":"constructor","id":["Set"],"method":null,"args":[[1,"a"]],"kwargs":{}},
			      "map":{"lc":2,"type":"constructor","id":["Map"],"method":null,"args":[[["k",1],[2,"v"],[{"b":1,"a":2},"o"],[null,0]]],"kwargs":{}},
			      "re":{"lc":2,"type":"constructor","id":["RegExp"],"method":null,"args":["a+","g"],"kwargs":{}},
			      "err":{"lc":2,"type":"constructor","id":["Error"],"method":null,"args":["boom"],"kwargs":{}},
			      "u8":{"lc":2,"type":"constructor","id":["Uint8Array"],"method":"from","args":[[0,255]],"kwargs":{}},
			      "date":"2024-01-01T00:00:00.000Z"}`,
			want: map[string]any{
				"u":    nil,
				"set":  []any{int64(1), "a"},
				"map":  map[string]any{"k": int64(1), "2": "v", `{"a":2,"b":1}`: "o", "null": int64(0)},
				"re":   []any{"a+", "g"},
				"err":  "boom",
				"u8":   []byte{0, 255},
				"date": "2024-01-01T00:00:00.000Z",
			},
		},
		{
			name: "js records with the wrong shape are kept",
			in: `[{"lc":2,"type":"constructor","id":["Map"],"method":null,"args":[[["k"]]],"kwargs":{}},
			      {"lc":2,"type":"constructor","id":["Uint8Array"],"method":"from","args":[[256]],"kwargs":{}},
			      {"lc":2,"type":"constructor","id":["TypeError"],"method":null,"args":["x"],"kwargs":{}},
			      {"lc":2,"type":"constructor","id":["Set"],"method":"evil","args":[[1]],"kwargs":{}}]`,
			want: []any{
				map[string]any{"lc": int64(2), "type": "constructor", "id": []any{"Map"}, "method": nil, "args": []any{[]any{[]any{"k"}}}, "kwargs": map[string]any{}},
				map[string]any{"lc": int64(2), "type": "constructor", "id": []any{"Uint8Array"}, "method": "from", "args": []any{[]any{int64(256)}}, "kwargs": map[string]any{}},
				map[string]any{"lc": int64(2), "type": "constructor", "id": []any{"TypeError"}, "method": nil, "args": []any{"x"}, "kwargs": map[string]any{}},
				map[string]any{"lc": int64(2), "type": "constructor", "id": []any{"Set"}, "method": "evil", "args": []any{[]any{int64(1)}}, "kwargs": map[string]any{}},
			},
		},
		{name: "js delta snapshot", in: `{"lc":2,"type":"delta_snapshot","value":[]}`, want: []any{}},
		{name: "js delta snapshot nested", in: `{"messages":{"lc":2,"type":"delta_snapshot","value":null}}`, err: unsupported},
		{
			name: "old python records",
			in: `{"dt":{"lc":2,"type":"constructor","id":["datetime","datetime"],"method":"fromisoformat","args":["2024-01-01T00:00:00"]},
			      "uuid":{"lc":2,"type":"constructor","id":["uuid","UUID"],"args":["0000000000000000000000000000000a"]},
			      "date":{"lc":2,"type":"constructor","id":["datetime","date"],"args":[2024,1,2]},
			      "tz":{"lc":2,"type":"constructor","id":["datetime","timezone"],"args":[{"lc":2,"type":"constructor","id":["datetime","timedelta"],"args":[0,3600,0]}]},
			      "time":{"lc":2,"type":"constructor","id":["datetime","time"],"args":[1,2,3,4,null],"kwargs":{"fold":0}},
			      "model":{"lc":2,"type":"constructor","id":["app","M"],"method":[null,"model_construct"],"kwargs":{"a":1}},
			      "both":{"lc":2,"type":"constructor","id":["app","F"],"args":[1],"kwargs":{"b":2}},
			      "none":{"lc":2,"type":"constructor","id":["app","Empty"]},
			      "bytes":{"lc":2,"type":"constructor","id":["builtins","bytes"],"method":"fromhex","args":["00ff"]},
			      "path":{"lc":2,"type":"constructor","id":["pathlib","Path"],"args":["/"]}}`,
			want: map[string]any{
				"dt":    "2024-01-01T00:00:00",
				"uuid":  "00000000-0000-0000-0000-00000000000a",
				"date":  "2024-01-02",
				"tz":    "+01:00",
				"time":  "01:02:03.000004",
				"model": map[string]any{"a": int64(1)},
				"both":  map[string]any{"args": []any{int64(1)}, "kwargs": map[string]any{"b": int64(2)}},
				"none":  nil,
				"bytes": []byte{0, 255},
				"path":  "/",
			},
		},
		{
			name: "plain lc key is data",
			in:   `{"lc":5,"x":1}`,
			want: map[string]any{"lc": int64(5), "x": int64(1)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := Decode("json", []byte(tc.in), Limits{})
			tc.err.check(t, err)
			if tc.err == noErr && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %s\nwant %s", AppendJSON(nil, got), AppendJSON(nil, tc.want))
			}
		})
	}
	_, _, err := Decode("json", []byte(`[1, {"lc":2,"type":"delta_snapshot","value":0}]`), Limits{})
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.Offset != 4 || ue.Format != "json" {
		t.Fatalf("err = %#v", err)
	}
}

// TestScanMessagesMsgpack covers ScanMessages over msgpack, where it skips
// rather than decodes.
func TestScanMessagesMsgpack(t *testing.T) {
	human := func(content ...any) ext {
		parts := append([]any{mapHeader(3), "content"}, content...)
		parts = append(parts, "type", "human", "id", "h")
		return pyExtMethod(t, 5, "langchain_core.messages.human", "HumanMessage", "model_validate_json", rawBytes(enc(t, parts...)))
	}
	ai := func(content string) ext {
		return pyExtMethod(t, 5, "langchain_core.messages.ai", "AIMessage", "model_validate_json", mapHeader(3),
			"content", content, "tool_calls", arrayHeader(1), map[string]any{"name": "f", "args": map[string]any{"x": 1}},
			"type", "ai")
	}
	tests := []struct {
		name string
		data []byte
		lim  Limits
		want Messages
		err  errKind
	}{
		{name: "empty list", data: enc(t, arrayHeader(0)), want: Messages{}},
		{
			name: "humans and others",
			data: enc(t, arrayHeader(4), human("first"), ai("answer"),
				human(arrayHeader(4), map[string]any{"type": "text", "text": "a"}, "b",
					map[string]any{"type": "image_url", "image_url": "u"}, map[string]any{"type": "text", "text": 5}),
				ai("")),
			want: Messages{Count: 4, Humans: []string{"first", "ab"}},
		},
		{
			name: "plain maps, type before content",
			data: enc(t, arrayHeader(2), mapHeader(2), "type", "human", "content", "q", mapHeader(1), "type", "tool"),
			want: Messages{Count: 2, Humans: []string{"q"}},
		},
		{
			name: "human without content",
			data: enc(t, arrayHeader(1), mapHeader(1), "type", "human"),
			want: Messages{Count: 1, Humans: []string{""}},
		},
		{
			name: "non-human messages are skipped, not decoded",
			data: enc(t, arrayHeader(2),
				pyExtMethod(t, 5, "m", "AIMessage", "x", mapHeader(2), "type", "ai", "content", ext{99, []byte{1}}),
				human("ok")),
			want: Messages{Count: 2, Humans: []string{"ok"}},
		},
		{
			name: "non-message items count",
			data: enc(t, arrayHeader(4), 1, "s", arrayHeader(1), mapHeader(0), ext{6, []byte{0x90}}),
			want: Messages{Count: 4},
		},
		{
			name: "list wrapped in an extension",
			data: enc(t, pyExt(t, 0, "collections", "deque", arrayHeader(1), human("in deque"))),
			want: Messages{Count: 1, Humans: []string{"in deque"}},
		},
		{
			name: "type key as extension",
			data: enc(t, arrayHeader(1), mapHeader(2), pyExt(t, 0, "m", "K", "type"), "human", "content", "x"),
			want: Messages{Count: 1, Humans: []string{"x"}},
		},
		{
			name: "later type wins",
			data: enc(t, arrayHeader(1), mapHeader(2), "type", "human", "type", "ai"),
			want: Messages{Count: 1},
		},
		{name: "not a list", data: enc(t, map[string]any{"a": 1}), err: malformed},
		{name: "secret is not a list", data: enc(t, pyExt(t, 0, "pydantic", "SecretStr", "x")), err: malformed},
		{name: "delta snapshot", data: enc(t, ext{7, enc(t, arrayHeader(0))})},
		{name: "delta snapshot element", data: enc(t, arrayHeader(1), ext{7, enc(t, arrayHeader(0))}), err: unsupported},
		{name: "truncated", data: enc(t, arrayHeader(2), human("a")), err: malformed},
		{name: "truncated inside skipped message", data: enc(t, arrayHeader(1), rawBytes{0x82, 0xa4, 't', 'y', 'p', 'e', 0xa2, 'a', 'i', 0x92}), err: malformed},
		{name: "trailing bytes", data: append(enc(t, arrayHeader(0)), 0), err: malformed},
		{name: "depth inside skipped message", data: enc(t, arrayHeader(1), mapHeader(1), "x", rawBytes{0x91, 0x91, 0x91, 0xc0}), lim: Limits{MaxDepth: 4}, err: limit},
		{name: "huge list header", data: unhex(t, "dd ff ff ff ff c0 c0 c0 c0 c0"), err: malformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ScanMessages("msgpack", tc.data, tc.lim)
			tc.err.check(t, err)
			if tc.err != noErr {
				return
			}
			if got.Count != tc.want.Count || !reflect.DeepEqual(nonNil(got.Humans), nonNil(tc.want.Humans)) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			checkScanAgreesWithDecode(t, "msgpack", tc.data, tc.lim)
		})
	}
}

// TestScanMessagesOtherTypes covers ScanMessages over the other blob types.
func TestScanMessagesOtherTypes(t *testing.T) {
	m, err := ScanMessages("empty", nil, Limits{})
	if err != nil || m.Count != 0 {
		t.Fatalf("empty: %+v, %v", m, err)
	}
	for _, typ := range []string{"null", "bytes", "bytearray"} {
		_, err := ScanMessages(typ, []byte("x"), Limits{})
		malformed.check(t, err)
	}
	for _, typ := range []string{"pickle", "msgpack+aes", "toml"} {
		_, err := ScanMessages(typ, []byte("x"), Limits{})
		unsupported.check(t, err)
	}
	js := `[{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":[{"type":"text","text":"hi "},"there"]}},
	        {"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessageChunk"],"kwargs":{"content":"chunk"}},
	        {"type":"human","content":"plain"}, 3]`
	m, err = ScanMessages("json", []byte(js), Limits{})
	if err != nil || m.Count != 4 || !reflect.DeepEqual(m.Humans, []string{"hi there", "plain"}) {
		t.Fatalf("json: %+v, %v", m, err)
	}
	_, err = ScanMessages("json", []byte(`{"messages":[]}`), Limits{})
	malformed.check(t, err)
	// A snapshot reads as the list it holds.
	m, err = ScanMessages("json", []byte(`{"lc":2,"type":"delta_snapshot","value":[{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"q"}}]}`), Limits{})
	if err != nil || m.Count != 1 || !reflect.DeepEqual(m.Humans, []string{"q"}) {
		t.Fatalf("json snapshot: %+v, %v", m, err)
	}
	_, err = ScanMessages("json", []byte(`[{"lc":2,"type":"delta_snapshot","value":[]}]`), Limits{})
	unsupported.check(t, err)
}

// checkScanAgreesWithDecode holds ScanMessages to its promise: whenever
// Decode accepts a list, ScanMessages accepts it too and finds what the
// decoded list holds.
func checkScanAgreesWithDecode(t testing.TB, typ string, data []byte, lim Limits) {
	t.Helper()
	v, ok, err := Decode(typ, data, lim)
	if err != nil || !ok {
		return
	}
	want, werr := messagesFromValue(typ, v, Humans)
	got, gerr := ScanMessages(typ, data, lim)
	if werr != nil {
		return
	}
	if gerr != nil {
		t.Fatalf("Decode accepted a list that ScanMessages rejects: %v", gerr)
	}
	if got.Count != want.Count || !reflect.DeepEqual(nonNil(got.Humans), nonNil(want.Humans)) || got.HumanCount != len(got.Humans) {
		t.Fatalf("ScanMessages = %+v, decoded list gives %+v", got, want)
	}
	// Counting alone agrees, and builds no text.
	counted, cerr := CountMessages(typ, data, lim)
	if cerr != nil || counted.Count != got.Count || counted.HumanCount != got.HumanCount || counted.Humans != nil {
		t.Fatalf("CountMessages = %+v, %v; ScanMessages gives %+v", counted, cerr, got)
	}
	// What each mode keeps of every message agrees with the decoded list.
	for _, mode := range []ReadMode{Humans, All} {
		want, _ := messagesFromValue(typ, v, mode)
		got, err := ReadMessages(typ, data, lim, mode)
		if err != nil || !reflect.DeepEqual(got.List, want.List) {
			t.Fatalf("ReadMessages(mode %d) = %+v, %v; the decoded list gives %+v", mode, got.List, err, want.List)
		}
	}
}

// TestMessageText checks the BaseMessage.text rules.
func TestMessageText(t *testing.T) {
	tests := []struct {
		content any
		want    string
	}{
		{"plain", "plain"},
		{nil, ""},
		{int64(3), ""},
		{[]any{}, ""},
		{[]any{"a", map[string]any{"type": "text", "text": "b"}, map[string]any{"type": "image", "text": "no"},
			map[string]any{"type": "text"}, int64(1), map[string]any{"text": "no type"}}, "ab"},
	}
	for _, tc := range tests {
		if got := messageText(tc.content); got != tc.want {
			t.Errorf("messageText(%v) = %q, want %q", tc.content, got, tc.want)
		}
	}
}

// TestKeyText checks the text given to keys that are not strings.
func TestKeyText(t *testing.T) {
	tests := []struct {
		key  any
		want string
	}{
		{"s", "s"},
		{int64(-1), "-1"},
		{uint64(math.MaxUint64), "18446744073709551615"},
		{true, "true"},
		{nil, "null"},
		{1.5, "1.5"},
		{2.0, "2"},
		{1e21, "1e+21"},
		{1e-7, "1e-7"},
		{1e-6, "0.000001"},
		{math.NaN(), "NaN"},
		{math.Inf(-1), "-Infinity"},
		{[]byte{0xff}, "/w=="},
		{[]any{int64(1), "a\"<", []byte{1}}, `[1,"a\"<","AQ=="]`},
		{map[string]any{"b": int64(1), "a": nil}, `{"a":null,"b":1}`},
	}
	for _, tc := range tests {
		if got := keyText(tc.key); got != tc.want {
			t.Errorf("keyText(%#v) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

// TestGoldenScanAgreesWithDecode holds ScanMessages to Decode on every
// golden value.
func TestGoldenScanAgreesWithDecode(t *testing.T) {
	for _, file := range []string{"python_golden.json", "js_golden.json"} {
		for _, c := range loadGolden(t, file).Cases {
			checkScanAgreesWithDecode(t, c.Type, c.data(t), Limits{})
		}
	}
}

// TestNestedKeysDoNotExplode checks the bound on text made from nested
// map keys.
func TestNestedKeysDoNotExplode(t *testing.T) {
	// A map used as a key of a map used as a key ... doubles its escaped
	// text at each level.
	const levels = 80
	mp := append(bytes.Repeat([]byte{0x81}, levels), 0xa1, '"')
	mp = append(mp, bytes.Repeat([]byte{0xc0}, levels)...)
	_, _, err := Decode("msgpack", mp, Limits{})
	malformed.check(t, err)
	// ScanMessages decodes extension keys, so it meets the same bound.
	scan := enc(t, arrayHeader(1), mapHeader(1), ext{0, enc(t, arrayHeader(3), "m", "c", rawBytes(mp))}, nil)
	_, err = ScanMessages("msgpack", scan, Limits{})
	malformed.check(t, err)
	if !strings.Contains(err.Error(), "maps nested as keys") {
		t.Errorf("err = %v", err)
	}

	key := `"\""`
	for range levels {
		key = `{"lc":2,"type":"constructor","id":["Map"],"method":null,"args":[[[` + key + `,1]]],"kwargs":{}}`
	}
	_, _, err = Decode("json", []byte(key), Limits{MaxDepth: 1000})
	malformed.check(t, err)
	if !strings.Contains(err.Error(), "maps nested as keys") {
		t.Errorf("err = %v", err)
	}

	// A few levels, as a tuple of namedtuples could give, are fine.
	v, _, err := Decode("msgpack", unhex(t, "81 81 81 a1 61 01 c0 02"), Limits{})
	if err != nil || !reflect.DeepEqual(v, map[string]any{`{"{\"a\":1}":null}`: int64(2)}) {
		t.Fatalf("got %#v, %v", v, err)
	}
}

// TestScanSecretNamedByExtension checks ScanMessages sees a secret class the
// way Decode does.
func TestScanSecretNamedByExtension(t *testing.T) {
	// A class name that is itself an extension decoding to a secret class
	// name must be seen as one by ScanMessages too.
	module := pyExt(t, 0, "x", "y", "pydantic.types")
	secretHuman := ext{0, enc(t, arrayHeader(3), module, "SecretStr", mapHeader(2), "type", "human", "content", "hidden")}
	data := enc(t, arrayHeader(1), secretHuman)
	m, err := ScanMessages("msgpack", data, Limits{})
	if err != nil || m.Count != 1 || len(m.Humans) != 0 {
		t.Fatalf("got %+v, %v", m, err)
	}
	checkScanAgreesWithDecode(t, "msgpack", data, Limits{})
}

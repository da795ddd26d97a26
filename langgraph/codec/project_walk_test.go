package codec

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/vmihailenco/msgpack/v5"
)

// collector is a Visitor that builds the value it is walked through, as
// Decode would: a repeated map key keeps its last value.
type collector struct {
	stack []any // open lists ([]any) and maps (*mapBuild)
	out   any
}

type mapBuild struct {
	m   map[string]any
	key string
}

func (c *collector) put(v any) error {
	if len(c.stack) == 0 {
		c.out = v
		return nil
	}
	switch top := c.stack[len(c.stack)-1].(type) {
	case *[]any:
		*top = append(*top, v)
	case *mapBuild:
		top.m[top.key] = v
	}
	return nil
}

func (c *collector) Null() error           { return c.put(nil) }
func (c *collector) Bool(b bool) error     { return c.put(b) }
func (c *collector) Int(i int64) error     { return c.put(i) }
func (c *collector) Uint(u uint64) error   { return c.put(u) }
func (c *collector) Float(f float64) error { return c.put(f) }
func (c *collector) String(s []byte) error { return c.put(validString(s)) }
func (c *collector) Bytes(b []byte) error  { return c.put(bytes.Clone(b)) }
func (c *collector) BeginList(n int) error {
	l := make([]any, 0, n)
	c.stack = append(c.stack, &l)
	return nil
}
func (c *collector) EndList() error {
	l := c.stack[len(c.stack)-1].(*[]any)
	c.stack = c.stack[:len(c.stack)-1]
	return c.put(*l)
}
func (c *collector) BeginMap(n int) error {
	c.stack = append(c.stack, &mapBuild{m: make(map[string]any, n)})
	return nil
}
func (c *collector) Key(k string) error {
	c.stack[len(c.stack)-1].(*mapBuild).key = k
	return nil
}
func (c *collector) EndMap() error {
	m := c.stack[len(c.stack)-1].(*mapBuild)
	c.stack = c.stack[:len(c.stack)-1]
	return c.put(m.m)
}

// same compares decoded values, NaN equal to NaN.
func same(a, b any) bool {
	if fa, ok := a.(float64); ok {
		fb, ok := b.(float64)
		return ok && (fa == fb || math.IsNaN(fa) && math.IsNaN(fb))
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !same(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !same(v, w) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// walked builds v back through Walk.
func walked(t testing.TB, v any) any {
	t.Helper()
	var c collector
	if err := Walk(v, &c); err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return c.out
}

// TestWalkMatchesDecode holds walking a stored value, without building it,
// to what Decode builds of the same bytes, and walking a decoded value to
// the value itself.
func TestWalkMatchesDecode(t *testing.T) {
	var ring []any
	for i := range 3000 {
		ring = append(ring, []any{float64(i) / 7, -float64(i) / 3})
	}
	for _, v := range []any{
		nil, true, "Severn", "ümlaut 🌊", strings.Repeat("x", 300), int64(-7), int64(1<<53 + 1), uint64(math.MaxUint64),
		1.5, math.NaN(), math.Inf(-1), []byte{0, 1, 2}, []any{}, map[string]any{},
		map[string]any{"type": "Feature", "geometry": map[string]any{"type": "Polygon", "coordinates": []any{ring}}},
		map[any]any{1: "int key", true: "bool key"},
	} {
		data, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		decoded, _, err := Decode(format.TypeMsgpack, data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if got := walked(t, MsgpackRaw(data, Limits{})); !same(got, decoded) {
			t.Errorf("%T: walked %v\nwant %v", v, got, decoded)
		}
		if got := walked(t, decoded); !same(got, decoded) {
			t.Errorf("%T: decoded value walked to %v", v, got)
		}
	}
	// A map walked decoded comes in key order.
	var keys []string
	err := Walk(map[string]any{"b": 1.0, "a": 2.0, "c": 3.0}, &keyLog{keys: &keys})
	if err != nil || strings.Join(keys, "") != "abc" {
		t.Errorf("keys in order %v, %v", keys, err)
	}
}

type keyLog struct {
	collector
	keys *[]string
}

func (k *keyLog) Key(s string) error {
	*k.keys = append(*k.keys, s)
	return k.collector.Key(s)
}

// FuzzWalk holds walking to decoding on any input: where Decode accepts a
// blob, walking it as a Raw succeeds and builds the same value.
func FuzzWalk(f *testing.F) {
	for _, v := range []any{
		map[string]any{"value": []any{1.5, "x", nil, []byte{9}}, "tool": "t"},
		[]any{int64(1) << 60, math.Inf(1), map[string]any{"a": map[string]any{}}},
	} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x81, 0x91, 0xc0, 0xa1, 'x'})            // a list as a map key
	f.Add([]byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02}) // a repeated key
	lim := Limits{MaxBytes: 1 << 16, MaxDepth: 32}
	f.Fuzz(func(t *testing.T, data []byte) {
		decoded, _, err := Decode(format.TypeMsgpack, data, lim)
		if err != nil {
			return
		}
		var c collector
		if err := Walk(MsgpackRaw(data, lim), &c); err != nil {
			t.Fatalf("Decode accepted what Walk refused: %v", err)
		}
		if !same(c.out, decoded) {
			t.Fatalf("walked %v\nwant %v", c.out, decoded)
		}
	})
}

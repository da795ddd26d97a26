package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// stateThread writes one checkpoint per state, each opening a turn with
// its question and holding that tool_state (key → entry).
func stateThread(w storetest.Writer, ref backend.Ref, states ...map[string]any) {
	var msgs []any
	parent := ""
	for i, st := range states {
		msgs = append(msgs, write.Human(ref.ThreadID+"-q"+string(rune('a'+i)), "question "+string(rune('a'+i))))
		id := "1f0e-00000" + string(rune('0'+i))
		w.Put(ref, saver.Checkpoint{ID: id, Parent: parent, TS: storetest.Base.Add(time.Duration(i) * time.Second),
			Values: write.Map{{Key: "messages", Value: slices.Clone(msgs)}, {Key: "tool_state", Value: st}}})
		parent = id
	}
}

// patchJSON is a change's patch as RFC 6902 JSON text.
func patchJSON(t *testing.T, c *historydv1.KeyChange) string {
	t.Helper()
	var ops []any
	for _, op := range c.Patch {
		b, err := protojson.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		var m any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, m)
	}
	b, _ := json.Marshal(ops)
	return string(b)
}

// shape is a value large enough that patching it costs less than
// replacing it: a name and a ring of n points.
func shape(name string, n int) map[string]any {
	var ring []any
	for i := range n {
		ring = append(ring, float64(i))
	}
	return map[string]any{"name": name, "rings": ring}
}

func TestDiff(t *testing.T) {
	m := storetest.NewMemory()
	entry := func(v any, seq int) map[string]any { return map[string]any{"value": v, "seq": seq} }
	stateThread(m, backend.Ref{ThreadID: "d"},
		map[string]any{"area": entry(11420.0, 1), "shape": entry(shape("Severn", 20), 2), "gone": entry("x", 3), "same": entry(true, 4)},
		map[string]any{"area": entry(12935.0, 5), "shape": entry(shape("Thames", 21), 6), "new": entry(nil, 7), "same": entry(true, 4)},
		map[string]any{"area": entry(12935.0, 8), "shape": entry(shape("Thames", 21), 6), "new": entry(nil, 7), "same": entry(true, 4)},
	)
	c := startServer(t, m)
	ctx := context.Background()

	resp, err := c.Diff(ctx, &historydv1.DiffRequest{ThreadId: "d", ToTurn: 2})
	if err != nil {
		t.Fatal(err)
	}
	if resp.FromTurn.GetFound().GetNumber() != 1 || resp.ToTurn.GetFound().GetNumber() != 2 || resp.Total != 3 ||
		resp.ToTurn.GetFound().GetQuestion() != "question b" || resp.ToTurn.GetFound().GetCheckpointId() != "1f0e-000001" {
		t.Fatalf("turns: from %v, to %v, total %d", resp.FromTurn, resp.ToTurn, resp.Total)
	}
	got := map[string]string{}
	for _, ch := range resp.Changes {
		got[ch.Key] = ch.Kind.String() + " " + patchJSON(t, ch)
	}
	want := map[string]string{
		"area":  `KEY_CHANGE_KIND_CHANGED [{"op":"replace","path":"","value":12935}]`,
		"shape": `KEY_CHANGE_KIND_CHANGED [{"op":"replace","path":"/name","value":"Thames"},{"op":"add","path":"/rings/-","value":20}]`,
		"gone":  `KEY_CHANGE_KIND_REMOVED null`,
		"new":   `KEY_CHANGE_KIND_ADDED null`,
	}
	if !maps.Equal(got, want) {
		t.Errorf("changes:\n got %v\nwant %v", got, want)
	}
	if !slices.IsSortedFunc(resp.Changes, func(a, b *historydv1.KeyChange) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf("changes not sorted by key")
	}
	for _, ch := range resp.Changes {
		switch ch.Key {
		case "gone":
			if ch.FromEntry.GetValue().GetStringValue() != "x" || ch.ToEntry != nil {
				t.Errorf("removed key: from %v, to %v", ch.FromEntry, ch.ToEntry)
			}
		case "new":
			if ch.FromEntry != nil || ch.ToEntry == nil || ch.ToEntry.GetSeq() != 7 {
				t.Errorf("added key: from %v, to %v", ch.FromEntry, ch.ToEntry)
			}
		case "area":
			if ch.FromEntry.GetValue().GetNumberValue() != 11420 || ch.ToEntry.GetValue().GetNumberValue() != 12935 {
				t.Errorf("changed key: from %v, to %v", ch.FromEntry, ch.ToEntry)
			}
		}
	}

	// The default is the newest turn and the one before: area was written
	// again with the same value, so only its bookkeeping changed.
	resp, err = c.Diff(ctx, &historydv1.DiffRequest{ThreadId: "d", IncludeUnchanged: true, Keys: []string{"area", "same", "absent"}})
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]string{}
	for _, ch := range resp.Changes {
		got[ch.Key] = ch.Kind.String() + " " + patchJSON(t, ch)
	}
	want = map[string]string{"area": "KEY_CHANGE_KIND_CHANGED null", "same": "KEY_CHANGE_KIND_UNCHANGED null"}
	if resp.FromTurn.GetFound().GetNumber() != 2 || resp.ToTurn.GetFound().GetNumber() != 3 || !maps.Equal(got, want) {
		t.Errorf("default turns, keys: from %v to %v, changes %v; want 2 → 3, %v", resp.FromTurn, resp.ToTurn, got, want)
	}

	// Backwards, and a turn the thread never had.
	resp, err = c.Diff(ctx, &historydv1.DiffRequest{ThreadId: "d", FromTurn: 2, ToTurn: 1, Keys: []string{"new"}})
	if err != nil || len(resp.Changes) != 1 || resp.Changes[0].Kind != historydv1.KeyChangeKind_KEY_CHANGE_KIND_REMOVED {
		t.Errorf("2 → 1: %v, %v", resp, err)
	}
	resp, err = c.Diff(ctx, &historydv1.DiffRequest{ThreadId: "d", FromTurn: 3, ToTurn: 7})
	if err != nil || resp.FromTurn.GetFound() == nil || resp.ToTurn.GetNoSuchTurn().GetTurn() != 7 || resp.ToTurn.GetNoSuchTurn().GetTotal() != 3 || len(resp.Changes) != 0 {
		t.Errorf("3 → 7: %v, %v", resp, err)
	}
	resp, err = c.Diff(ctx, &historydv1.DiffRequest{ThreadId: "never"})
	if err != nil || resp.ToTurn.GetNoSuchTurn() == nil || resp.FromTurn.GetNoSuchTurn() == nil || resp.Total != 0 {
		t.Errorf("an unknown thread: %v, %v", resp, err)
	}
}

// asProtoValues rewrites a Diff answer's JSON text (entries' and patch
// operations' value_json) as the google.protobuf.Values it parses to,
// counting how many it rewrote.
func asProtoValues(t *testing.T, resp *historydv1.DiffResponse) (n int) {
	t.Helper()
	value := func(raw []byte) *structpb.Value {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("value_json %q: %v", raw, err)
		}
		pv, err := structpb.NewValue(v)
		if err != nil {
			t.Fatal(err)
		}
		n++
		return pv
	}
	for _, ch := range resp.Changes {
		for _, e := range []*historydv1.StateEntry{ch.FromEntry, ch.ToEntry} {
			if e == nil {
				continue
			}
			// Re-read from the wire: the server hands entries over encoded.
			b, err := proto.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			proto.Reset(e)
			if err := proto.Unmarshal(b, e); err != nil {
				t.Fatal(err)
			}
			if e.Value != nil {
				t.Errorf("key %q: a JSON answer's entry holds a Value", ch.Key)
			}
			e.Value, e.ValueJson = value(e.ValueJson), nil
		}
		for _, op := range ch.Patch {
			if op.Value != nil {
				t.Errorf("key %q: a JSON answer's patch holds a Value", ch.Key)
			}
			if op.ValueJson != nil {
				op.Value, op.ValueJson = value(op.ValueJson), nil
			}
		}
	}
	return n
}

// TestDiffValueFormats holds Diff's JSON text to its Values: the same
// answer once parsed, entries and patches alike.
func TestDiffValueFormats(t *testing.T) {
	m := storetest.NewMemory()
	entry := func(v any, seq int) map[string]any { return map[string]any{"value": v, "seq": seq} }
	stateThread(m, backend.Ref{ThreadID: "d"},
		map[string]any{"area": entry(11420.0, 1), "shape": entry(shape("Severn <&>", 20), 2), "gone": entry("x", 3), "odd": entry(map[string]any{"big": int64(1) << 60, "f": 0.1}, 4),
			"ordered": entry(write.Map{{Key: "a", Value: 1.0}, {Key: "b", Value: 2.0}}, 9)},
		map[string]any{"area": entry(12935.0, 5), "shape": entry(shape("Thames", 21), 6), "new": entry(nil, 7), "odd": entry(map[string]any{"big": int64(1)<<60 + 1, "f": 1e-9}, 8),
			// The same value stored with its keys in another order: its JSON
			// text differs, the value does not.
			"ordered": entry(write.Map{{Key: "b", Value: 2.0}, {Key: "a", Value: 1.0}}, 9)},
	)
	c := startServer(t, m)
	for _, req := range []*historydv1.DiffRequest{
		{ThreadId: "d", ToTurn: 2, IncludeUnchanged: true},
		{ThreadId: "d", FromTurn: 2, ToTurn: 1, IncludeUnchanged: true},
	} {
		asValue, err := c.Diff(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		req = proto.CloneOf(req)
		req.ValueFormat = historydv1.ValueFormat_VALUE_FORMAT_JSON
		asJSON, err := c.Diff(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if n := asProtoValues(t, asJSON); n < 8 {
			t.Errorf("%v: %d values as JSON text; want every entry's and patch's", req, n)
		}
		// The Value answer's entries, re-read from the wire too.
		b, _ := proto.Marshal(asValue)
		asValue = &historydv1.DiffResponse{}
		if err := proto.Unmarshal(b, asValue); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(asJSON, asValue) {
			t.Errorf("%v: JSON text parsed\n%v\nValues\n%v", req, asJSON, asValue)
		}
		for _, ch := range asJSON.Changes {
			if ch.Key == "ordered" && ch.Kind != historydv1.KeyChangeKind_KEY_CHANGE_KIND_UNCHANGED {
				t.Errorf("%v: a value stored in another key order is %v", req, ch.Kind)
			}
		}
	}
}

func TestDiffRetention(t *testing.T) {
	m := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "pruned"}
	written := storetest.Build(m, ref, demoTurns)
	m.Delete(ref, written[0].IDs)
	c := startServer(t, m)
	resp, err := c.Diff(context.Background(), &historydv1.DiffRequest{ThreadId: "pruned", ToTurn: 2})
	if err != nil {
		t.Fatal(err)
	}
	if nl := resp.FromTurn.GetNoLongerRetained(); nl == nil || nl.Turn != 1 || nl.Question != demoTurns[0].Question ||
		resp.ToTurn.GetFound().GetNumber() != 2 || len(resp.Changes) != 0 || !slices.Equal(resp.RetainedTurns, []int32{2, 3, 4}) {
		t.Errorf("1 → 2 with turn 1 pruned: %v", resp)
	}
}

func TestDiffValidation(t *testing.T) {
	c := startServer(t, storetest.NewMemory())
	for _, tt := range []struct {
		req  *historydv1.DiffRequest
		want string
	}{
		{&historydv1.DiffRequest{}, "thread_id: is required"},
		{&historydv1.DiffRequest{ThreadId: "t", ToTurn: -1}, "to_turn: is -1"},
		{&historydv1.DiffRequest{ThreadId: "t", FromTurn: -2}, "from_turn: is -2"},
		{&historydv1.DiffRequest{ThreadId: "t", Keys: []string{""}}, "keys[0]: is required"},
		{&historydv1.DiffRequest{ThreadId: "t", Channel: "files"}, `channel: "files" is not a channel this server serves`},
		{&historydv1.DiffRequest{ThreadId: "t", ValueFormat: 9}, "value_format: is 9"},
	} {
		_, err := c.Diff(context.Background(), tt.req)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), tt.want) {
			t.Errorf("%v: %v, want InvalidArgument %q", tt.req, err, tt.want)
		}
	}
}

// A tenant's diff of another tenant's thread is an unknown thread's, and
// the store is not asked about it.
func TestDiffIsolation(t *testing.T) {
	b, path := twoTenants(t)
	c := serveWith(t, b, service.Options{Auth: newAuth(t, path)}).client(t)
	a := withToken(context.Background(), "token-a")
	own, err := c.Diff(a, &historydv1.DiffRequest{ThreadId: "a/1", ToTurn: 2})
	if err != nil || own.ToTurn.GetFound() == nil || len(own.Changes) == 0 {
		t.Fatalf("tenant a's own thread: %v, %v", own, err)
	}
	asked := b.asked("b/1")
	for _, req := range []*historydv1.DiffRequest{{ToTurn: 2}, {}, {Keys: []string{""}}} {
		other, never := proto.Clone(req).(*historydv1.DiffRequest), proto.Clone(req).(*historydv1.DiffRequest)
		other.ThreadId, never.ThreadId = "b/1", "a/never"
		got, gotErr := c.Diff(a, other)
		want, wantErr := c.Diff(a, never)
		if status.Code(gotErr) != status.Code(wantErr) || status.Convert(gotErr).Message() != status.Convert(wantErr).Message() || !proto.Equal(got, want) {
			t.Errorf("%v: b/1 answered %v, %v; a/never %v, %v", req, got, gotErr, want, wantErr)
		}
	}
	if n := b.asked("b/1"); n != asked {
		t.Errorf("the store was asked about b/1 %d times", n-asked)
	}
}

// TestDiffKeyOrder: a value stored again with its keys in another order
// (msgpack keeps the order; the JSON text follows it) is unchanged in
// both value formats.
func TestDiffKeyOrder(t *testing.T) {
	m := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "o"}
	var msgs []any
	for i, v := range []write.Map{{{Key: "a", Value: 1.0}, {Key: "b", Value: 2.0}}, {{Key: "b", Value: 2.0}, {Key: "a", Value: 1.0}}} {
		msgs = append(msgs, write.HumanMessage(fmt.Sprintf("q%d", i), "question"))
		mb, err := write.EncodeMsgpack(slices.Clone(msgs))
		if err != nil {
			t.Fatal(err)
		}
		sb, err := write.EncodeMsgpack(write.Map{{Key: "k", Value: write.Map{{Key: "value", Value: v}, {Key: "seq", Value: 1}}}})
		if err != nil {
			t.Fatal(err)
		}
		m.PutBlobs(ref, fmt.Sprintf("1f0e-00000%d", i), storetest.Base.Add(time.Duration(i)*time.Second),
			map[string]backend.Blob{"messages": {Type: format.TypeMsgpack, Data: mb}, "tool_state": {Type: format.TypeMsgpack, Data: sb}})
	}
	c := startServer(t, m)
	for _, f := range []historydv1.ValueFormat{historydv1.ValueFormat_VALUE_FORMAT_PROTO, historydv1.ValueFormat_VALUE_FORMAT_JSON} {
		resp, err := c.Diff(context.Background(), &historydv1.DiffRequest{ThreadId: "o", ToTurn: 2, IncludeUnchanged: true, ValueFormat: f})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Changes) != 1 || resp.Changes[0].Kind != historydv1.KeyChangeKind_KEY_CHANGE_KIND_UNCHANGED {
			t.Errorf("%v: %v; want k unchanged", f, resp.Changes)
		}
		if f == historydv1.ValueFormat_VALUE_FORMAT_JSON && len(resp.Changes) == 1 {
			b, _ := proto.Marshal(resp.Changes[0])
			var ch historydv1.KeyChange
			if err := proto.Unmarshal(b, &ch); err != nil || string(ch.FromEntry.GetValueJson()) == string(ch.ToEntry.GetValueJson()) {
				t.Errorf("the two texts should differ in key order: %s, %s (%v)", ch.FromEntry.GetValueJson(), ch.ToEntry.GetValueJson(), err)
			}
		}
	}
}

package wire

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// TestSpliceCodec holds the spliced encoding of every state response to
// what proto.Marshal gives for the same message, and checks that a large
// entry goes out as the cached bytes themselves.
func TestSpliceCodec(t *testing.T) {
	big, err := encodeEntry(store.Entry{Value: strings.Repeat("geometry ", 2000)}, false)
	if err != nil {
		t.Fatal(err)
	}
	small, err := encodeEntry(store.Entry{Value: 11420.0}, false)
	if err != nil {
		t.Fatal(err)
	}
	ts := func(n int32, entries map[string][]byte) *historydv1.TurnState {
		st := store.EncodedState{}
		for k, b := range entries {
			st.Entries = append(st.Entries, store.EncodedEntry{Key: k, Data: b})
		}
		out := TurnState(store.Turn{N: int(n), Question: "q ü", End: store.Checkpoint{ID: "cp", TS: time.Unix(1e9, 0)}}, st)
		return out
	}
	built := &historydv1.StateEntry{Value: structpb.NewStringValue("built in memory")}
	withBuilt := ts(4, nil)
	withBuilt.Entries["built"] = built
	msgs := []proto.Message{
		&historydv1.SnapshotResponse{Total: 3, RetainedTurns: []int32{2, 3}, Result: &historydv1.SnapshotResponse_State{State: ts(2, map[string][]byte{"b": big, "a": small})}},
		&historydv1.SnapshotResponse{Total: 3, Result: &historydv1.SnapshotResponse_NoSuchTurn{NoSuchTurn: &historydv1.NoSuchTurn{Turn: 9, Total: 3}}},
		&historydv1.SnapshotResponse{Result: &historydv1.SnapshotResponse_State{State: ts(1, nil)}},
		&historydv1.SnapshotsResponse{Total: 7, Turns: map[int32]*historydv1.TurnState{5: ts(5, map[string][]byte{"x": big}), 6: ts(6, map[string][]byte{"y": small}), 7: withBuilt}},
		&historydv1.SnapshotsResponse{},
		&historydv1.SnapshotsResponse{Total: 3, Turns: map[int32]*historydv1.TurnState{3: nil}},
		&historydv1.StreamSnapshotsResponse{Total: 2, Turn: ts(2, map[string][]byte{"b": big})},
		&historydv1.StreamSnapshotsResponse{Total: 2},
		&historydv1.TurnsResponse{Total: 1, Turns: []*historydv1.TurnInfo{{Number: 1, EndedAt: timestamppb.New(time.Unix(5, 0))}}},
	}
	c := NewCodec()
	for _, m := range msgs {
		bufs, err := c.Marshal(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		got := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(bufs.Materialize(), got); err != nil {
			t.Fatalf("%T: the spliced bytes do not parse: %v", m, err)
		}
		// The reference: proto.Marshal, parsed the same way.
		raw, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		want := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(raw, want); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("%T: spliced %v\nwant %v", m, got, want)
		}
		if bufs.Len() != len(raw) {
			t.Errorf("%T: %d bytes spliced, %d marshaled", m, bufs.Len(), len(raw))
		}
		// As gRPC does once the message is sent: each buffer freed once,
		// the pooled one returned to the pool.
		bufs.Free()
	}
	bufs, err := c.Marshal(msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !holds(bufs, big) {
		t.Error("the large entry was copied instead of sent as the cached bytes")
	}
}

func holds(bufs mem.BufferSlice, b []byte) bool {
	for _, buf := range bufs {
		if data := buf.ReadOnlyData(); len(data) == len(b) && &data[0] == &b[0] {
			return true
		}
	}
	return false
}

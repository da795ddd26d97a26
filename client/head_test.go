package client_test

import (
	"context"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/historyd/historyd/client"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// fakeConn answers every call with canned replies and records the
// head_checkpoint_id of each request.
type fakeConn struct {
	heads   map[string]string // method → head asked
	replies map[string]proto.Message
	stream  []proto.Message // the messages of a streaming call
}

type headed interface{ GetHeadCheckpointId() string }

func (f *fakeConn) Invoke(ctx context.Context, method string, req, reply any, opts ...grpc.CallOption) error {
	f.heads[method] = req.(headed).GetHeadCheckpointId()
	if r, ok := f.replies[method]; ok {
		proto.Merge(reply.(proto.Message), r)
	}
	return nil
}

func (f *fakeConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return &fakeStream{conn: f, method: method, ctx: ctx, msgs: f.stream}, nil
}

type fakeStream struct {
	conn   *fakeConn
	method string
	ctx    context.Context
	msgs   []proto.Message
}

func (s *fakeStream) Header() (metadata.MD, error) { return nil, nil }
func (s *fakeStream) Trailer() metadata.MD         { return nil }
func (s *fakeStream) CloseSend() error             { return nil }
func (s *fakeStream) Context() context.Context     { return s.ctx }
func (s *fakeStream) SendMsg(m any) error {
	s.conn.heads[s.method] = m.(headed).GetHeadCheckpointId()
	return nil
}
func (s *fakeStream) RecvMsg(m any) error {
	if len(s.msgs) == 0 {
		if s.method == "/historyd.v1.ThreadHistory/WatchTurns" {
			<-s.ctx.Done() // a watch waits for more
		}
		return io.EOF
	}
	proto.Merge(m.(proto.Message), s.msgs[0])
	s.msgs = s.msgs[1:]
	return nil
}

// WithHead reaches every reading call, and answers carry the head they were
// read on and the forks.
func TestWithHead(t *testing.T) {
	fork := &historydv1.Fork{FromCheckpointId: "c2", Turn: 1, Questions: 3, NewestCheckpointId: "c9"}
	conn := &fakeConn{heads: map[string]string{}, replies: map[string]proto.Message{
		"/historyd.v1.ThreadHistory/Turns": &historydv1.TurnsResponse{Total: 2, HeadCheckpointId: "c7", Forks: []*historydv1.Fork{fork},
			Numbering: historydv1.TurnNumbering_TURN_NUMBERING_RUNS},
		"/historyd.v1.ThreadHistory/Snapshots": &historydv1.SnapshotsResponse{HeadCheckpointId: "c7"},
		"/historyd.v1.ThreadHistory/Snapshot":  &historydv1.SnapshotResponse{HeadCheckpointId: "c7", Result: &historydv1.SnapshotResponse_NoSuchTurn{NoSuchTurn: &historydv1.NoSuchTurn{}}},
		"/historyd.v1.ThreadHistory/Diff": &historydv1.DiffResponse{HeadCheckpointId: "c7",
			FromTurn: &historydv1.DiffTurn{Result: &historydv1.DiffTurn_NoSuchTurn{NoSuchTurn: &historydv1.NoSuchTurn{}}},
			ToTurn:   &historydv1.DiffTurn{Result: &historydv1.DiffTurn_NoSuchTurn{NoSuchTurn: &historydv1.NoSuchTurn{}}}},
	}}
	c := client.New(conn)
	ctx := context.Background()
	head := client.WithHead("c7")

	idx, err := c.TurnIndex(ctx, "t", head)
	if err != nil || idx.Head != "c7" || len(idx.Forks) != 1 || idx.Forks[0] != (client.Fork{From: "c2", Turn: 1, Questions: 3, Newest: "c9"}) ||
		idx.Numbering != client.NumberingRuns || idx.Numbering.String() != "runs" {
		t.Errorf("TurnIndex = %+v, %v", idx, err)
	}
	if h, err := c.Snapshots(ctx, "t", head); err != nil || h.Head != "c7" {
		t.Errorf("Snapshots = %+v, %v", h, err)
	}
	if s, err := c.Snapshot(ctx, "t", 1, head); err != nil || s.Head != "c7" {
		t.Errorf("Snapshot = %+v, %v", s, err)
	}
	if d, err := c.Diff(ctx, "t", 0, 0, head); err != nil || d.Head != "c7" {
		t.Errorf("Diff = %+v, %v", d, err)
	}
	for range c.StreamSnapshots(ctx, "t", head) {
	}
	wctx, cancel := context.WithCancel(ctx)
	conn.stream = []proto.Message{&historydv1.WatchTurnsResponse{HeadCheckpointId: "c7", Total: 1,
		Event: &historydv1.WatchTurnsResponse_HistoryRewound{HistoryRewound: &historydv1.HistoryRewound{Turn: 1, Fork: fork}}}}
	for ev, err := range c.WatchTurns(wctx, "t", head) {
		if err != nil || ev.Rewound == nil || ev.Rewound.Turn != 1 || ev.Rewound.Fork == nil || ev.Rewound.Fork.Newest != "c9" || ev.Head != "c7" {
			t.Errorf("watch event %+v, %v; want history_rewound to turn 1 from c9", ev, err)
		}
		cancel()
		break
	}
	cancel()
	for _, m := range []string{"Turns", "Snapshots", "Snapshot", "Diff", "StreamSnapshots", "WatchTurns"} {
		if got := conn.heads["/historyd.v1.ThreadHistory/"+m]; got != "c7" {
			t.Errorf("%s asked head %q, want c7", m, got)
		}
	}
}

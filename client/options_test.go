package client_test

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/historyd/historyd/client"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// recordConn records the request of each call and answers it with the
// smallest reply the client accepts; its streams end at once.
type recordConn struct {
	sent map[string]proto.Message // method → request
}

func (r *recordConn) Invoke(ctx context.Context, method string, req, reply any, opts ...grpc.CallOption) error {
	r.sent[method] = proto.Clone(req.(proto.Message))
	noTurn := &historydv1.NoSuchTurn{}
	switch reply := reply.(type) {
	case *historydv1.SnapshotResponse:
		reply.Result = &historydv1.SnapshotResponse_NoSuchTurn{NoSuchTurn: noTurn}
	case *historydv1.DiffResponse:
		reply.FromTurn = &historydv1.DiffTurn{Result: &historydv1.DiffTurn_NoSuchTurn{NoSuchTurn: noTurn}}
		reply.ToTurn = &historydv1.DiffTurn{Result: &historydv1.DiffTurn_NoSuchTurn{NoSuchTurn: noTurn}}
	}
	return nil
}

func (r *recordConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return &recordStream{conn: r, method: method, ctx: ctx}, nil
}

type recordStream struct {
	conn   *recordConn
	method string
	ctx    context.Context
}

func (s *recordStream) Header() (metadata.MD, error) { return nil, nil }
func (s *recordStream) Trailer() metadata.MD         { return nil }
func (s *recordStream) CloseSend() error             { return nil }
func (s *recordStream) Context() context.Context     { return s.ctx }
func (s *recordStream) RecvMsg(any) error            { return io.EOF }
func (s *recordStream) SendMsg(m any) error {
	s.conn.sent[s.method] = proto.Clone(m.(proto.Message))
	return nil
}

// Every call is given every option at once, and sends what the options
// that apply to it ask, as though the others had not been given.
func TestReadOptionsApplyToTheirCalls(t *testing.T) {
	after, before := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	every := []client.ReadOption{
		client.WithNamespace("ns"), client.WithChannel("files"), client.WithKeys("a"), client.WithKeys("b"), client.WithHead("c7"),
		client.WithValueFormat(client.ProtoValues), client.WithKeysWritten(), client.WithFromTurn(2), client.WithAfterTurn(3),
		client.WithCheckpoints(), client.WithIncludeUnchanged(), client.WithPrefix("p/"), client.WithPageSize(5), client.WithPageToken("tok"),
		client.WithNewestFirst(), client.WithActiveAfter(after), client.WithActiveBefore(before), client.WithIncludeTurns(), nil,
	}
	conn := &recordConn{sent: map[string]proto.Message{}}
	c := client.New(conn, client.WithRetry(0, 0))
	ctx := context.Background()
	if _, err := c.Snapshots(ctx, "t", every...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(ctx, "t", 1, every...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TurnIndex(ctx, "t", every...); err != nil {
		t.Fatal(err)
	}
	for _, err := range c.StreamSnapshots(ctx, "t", every...) {
		t.Fatal(err)
	}
	if _, err := c.Diff(ctx, "t", 1, 4, every...); err != nil {
		t.Fatal(err)
	}
	for range c.WatchTurns(ctx, "t", every...) {
		break // the stream's end, which this client does not retry
	}
	if _, err := c.Threads(ctx, every...); err != nil {
		t.Fatal(err)
	}

	const protoFormat = historydv1.ValueFormat_VALUE_FORMAT_PROTO
	keys := []string{"a", "b"}
	for method, want := range map[string]proto.Message{
		"Snapshots": &historydv1.SnapshotsRequest{ThreadId: "t", CheckpointNs: "ns", Keys: keys, Channel: "files", ValueFormat: protoFormat, HeadCheckpointId: "c7"},
		"Snapshot":  &historydv1.SnapshotRequest{ThreadId: "t", Turn: 1, CheckpointNs: "ns", Keys: keys, Channel: "files", ValueFormat: protoFormat, HeadCheckpointId: "c7"},
		"Turns":     &historydv1.TurnsRequest{ThreadId: "t", CheckpointNs: "ns", IncludeKeysWritten: true, Channel: "files", HeadCheckpointId: "c7"},
		"StreamSnapshots": &historydv1.StreamSnapshotsRequest{ThreadId: "t", CheckpointNs: "ns", Keys: keys, FromTurn: 2, Channel: "files", ValueFormat: protoFormat,
			HeadCheckpointId: "c7"},
		"Diff": &historydv1.DiffRequest{ThreadId: "t", CheckpointNs: "ns", FromTurn: 1, ToTurn: 4, Keys: keys, Channel: "files", IncludeUnchanged: true,
			ValueFormat: protoFormat, HeadCheckpointId: "c7"},
		"WatchTurns": &historydv1.WatchTurnsRequest{ThreadId: "t", CheckpointNs: "ns", AfterTurn: 3, Keys: keys, Channel: "files", Checkpoints: true,
			ValueFormat: protoFormat, HeadCheckpointId: "c7"},
		"Threads": &historydv1.ThreadsRequest{ThreadIdPrefix: "p/", CheckpointNs: "ns", PageSize: 5, PageToken: "tok", IncludeTurns: true,
			Order: historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY, LastActivityAfter: timestamppb.New(after), LastActivityBefore: timestamppb.New(before)},
	} {
		if got := conn.sent["/historyd.v1.ThreadHistory/"+method]; !proto.Equal(got, want) {
			t.Errorf("%s sent %v\nwant %v", method, got, want)
		}
	}
}

// Without options every call sends only its required arguments; a later
// option overrides an earlier one of the same kind, and keys accumulate.
func TestReadConfig(t *testing.T) {
	if got := client.NewReadConfig(); got.Namespace != "" || got.Keys != nil || got.ValueFormat != client.JSONValues || got.PageSize != 0 {
		t.Errorf("no options: %+v", got)
	}
	got := client.NewReadConfig(client.WithNamespace("a"), client.WithNamespace("b"), client.WithKeys("x"), nil, client.WithKeys("y", "z"),
		client.WithValueFormat(client.ProtoValues), client.WithRawValues(), client.WithPageSize(3), client.WithPageSize(7))
	if got.Namespace != "b" || len(got.Keys) != 3 || got.Keys[2] != "z" || got.ValueFormat != client.JSONValues || !got.RawValues || got.PageSize != 7 {
		t.Errorf("options in order: %+v", got)
	}

	conn := &recordConn{sent: map[string]proto.Message{}}
	c := client.New(conn)
	ctx := context.Background()
	if _, err := c.Diff(ctx, "t", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Threads(ctx); err != nil {
		t.Fatal(err)
	}
	for method, want := range map[string]proto.Message{
		"Diff":    &historydv1.DiffRequest{ThreadId: "t", ValueFormat: historydv1.ValueFormat_VALUE_FORMAT_JSON},
		"Threads": &historydv1.ThreadsRequest{},
	} {
		if got := conn.sent["/historyd.v1.ThreadHistory/"+method]; !proto.Equal(got, want) {
			t.Errorf("%s sent %v\nwant %v", method, got, want)
		}
	}
}

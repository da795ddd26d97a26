package load

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// Op names a request kind the driver sends.
type Op string

// The requests the driver sends. Health is grpc.health.v1 Check, the no-op
// anchor.
const (
	Snapshot        Op = "Snapshot"
	Snapshots       Op = "Snapshots"
	StreamSnapshots Op = "StreamSnapshots"
	Turns           Op = "Turns"
	Health          Op = "Health"
)

// Target is what one request asks about.
type Target struct {
	Thread string
	Turn   int // for Snapshot
	// Channel is the state channel a Snapshot reads; empty means the
	// server's default.
	Channel string
}

// Reply is what the driver checks and keeps from an answer.
type Reply struct {
	Total        int
	CheckpointID string // Snapshot: the turn's end
	Turns        int    // Snapshots, StreamSnapshots: retained turns received; Turns: turns listed
	Entries      int    // Snapshot: state keys
}

// Client sends the requests over one connection.
type Client struct {
	TH     historydv1.ThreadHistoryClient
	Health healthpb.HealthClient
	conn   grpc.ClientConnInterface
}

// NewClient wraps conn.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{TH: historydv1.NewThreadHistoryClient(conn), Health: healthpb.NewHealthClient(conn), conn: conn}
}

// Do sends one request and checks that the answer is a real one: a
// Snapshot of a retained turn must come back with state.
func (c *Client) Do(ctx context.Context, op Op, t Target) (Reply, error) {
	switch op {
	case Snapshot:
		r, err := c.TH.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: t.Thread, Turn: int32(t.Turn), Channel: t.Channel})
		if err != nil {
			return Reply{}, err
		}
		st := r.GetState()
		if st == nil {
			return Reply{}, fmt.Errorf("Snapshot(%s, %d): no state (total %d, result %T)", t.Thread, t.Turn, r.GetTotal(), r.GetResult())
		}
		return Reply{Total: int(r.GetTotal()), CheckpointID: st.GetCheckpointId(), Entries: len(st.GetEntries())}, nil
	case Snapshots:
		r, err := c.TH.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: t.Thread})
		if err != nil {
			return Reply{}, err
		}
		if r.GetTotal() == 0 {
			return Reply{}, fmt.Errorf("Snapshots(%s): total 0", t.Thread)
		}
		return Reply{Total: int(r.GetTotal()), Turns: len(r.GetTurns())}, nil
	case StreamSnapshots:
		s, err := c.TH.StreamSnapshots(ctx, &historydv1.StreamSnapshotsRequest{ThreadId: t.Thread})
		if err != nil {
			return Reply{}, err
		}
		var rep Reply
		for {
			m, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return rep, err
			}
			rep.Total = int(m.GetTotal())
			if m.GetTurn() != nil {
				rep.Turns++
			}
		}
		if rep.Turns == 0 {
			return rep, fmt.Errorf("StreamSnapshots(%s): no turn", t.Thread)
		}
		return rep, nil
	case Turns:
		r, err := c.TH.Turns(ctx, &historydv1.TurnsRequest{ThreadId: t.Thread})
		if err != nil {
			return Reply{}, err
		}
		if r.GetTotal() == 0 {
			return Reply{}, fmt.Errorf("Turns(%s): total 0", t.Thread)
		}
		return Reply{Total: int(r.GetTotal()), Turns: len(r.GetTurns())}, nil
	case Health:
		r, err := c.Health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return Reply{}, err
		}
		if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return Reply{}, fmt.Errorf("health %v", r.GetStatus())
		}
		return Reply{}, nil
	}
	return Reply{}, fmt.Errorf("unknown op %q", op)
}

// rawReply receives a response as its size, undecoded.
type rawReply struct{ n int }

// rawCodec marshals requests as protobuf and takes responses as bytes
// without decoding them, so that a load run measures what the server
// sustains rather than what the client spends turning state into Go
// values.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(*rawReply).n = data.Len()
	return nil
}

// SnapshotRaw sends a Snapshot and returns the size of the answer, which
// it does not decode.
func (c *Client) SnapshotRaw(ctx context.Context, t Target) (int, error) {
	var out rawReply
	err := c.conn.Invoke(ctx, historydv1.ThreadHistory_Snapshot_FullMethodName,
		&historydv1.SnapshotRequest{ThreadId: t.Thread, Turn: int32(t.Turn), Channel: t.Channel}, &out, grpc.ForceCodecV2(rawCodec{}))
	if err == nil && out.n == 0 {
		err = fmt.Errorf("Snapshot(%s, %d): empty answer", t.Thread, t.Turn)
	}
	return out.n, err
}

package load

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/historyd/historyd/client"
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

// Client sends the requests over one connection. Do goes through historyd's
// Go client (package client) with its defaults — JSON values, parsed into
// Go values — as a Go host would; TH is the bare stub, for checks.
type Client struct {
	TH     historydv1.ThreadHistoryClient
	GC     *client.Client
	Health healthpb.HealthClient
	conn   grpc.ClientConnInterface
}

// NewClient wraps conn. The Go client has no deadline and no retries of
// its own: the driver measures each request as sent once.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{TH: historydv1.NewThreadHistoryClient(conn), GC: client.New(conn, client.WithTimeout(0), client.WithRetry(0, 0)),
		Health: healthpb.NewHealthClient(conn), conn: conn}
}

// Do sends one request and checks that the answer is a real one: a
// Snapshot of a retained turn must come back with state.
func (c *Client) Do(ctx context.Context, op Op, t Target) (Reply, error) {
	switch op {
	case Snapshot:
		var opts []client.ReadOption
		if t.Channel != "" {
			opts = append(opts, client.WithChannel(t.Channel))
		}
		r, err := c.GC.Snapshot(ctx, t.Thread, t.Turn, opts...)
		if err != nil {
			return Reply{}, err
		}
		if r.Outcome != client.Found {
			return Reply{}, fmt.Errorf("Snapshot(%s, %d): %v (total %d)", t.Thread, t.Turn, r.Outcome, r.Total)
		}
		return Reply{Total: r.Total, CheckpointID: r.CheckpointID, Entries: len(r.State)}, nil
	case Snapshots:
		h, err := c.GC.Snapshots(ctx, t.Thread)
		if err != nil {
			return Reply{}, err
		}
		if h.Total == 0 {
			return Reply{}, fmt.Errorf("Snapshots(%s): total 0", t.Thread)
		}
		return Reply{Total: h.Total, Turns: len(h.Turns)}, nil
	case StreamSnapshots:
		var rep Reply
		for ts, err := range c.GC.StreamSnapshots(ctx, t.Thread) {
			if err != nil {
				return rep, err
			}
			rep.Turns++
			rep.Total = max(rep.Total, ts.Turn)
		}
		if rep.Turns == 0 {
			return rep, fmt.Errorf("StreamSnapshots(%s): no turn", t.Thread)
		}
		return rep, nil
	case Turns:
		ix, err := c.GC.TurnIndex(ctx, t.Thread)
		if err != nil {
			return Reply{}, err
		}
		if ix.Total == 0 {
			return Reply{}, fmt.Errorf("Turns(%s): total 0", t.Thread)
		}
		return Reply{Total: ix.Total, Turns: len(ix.Turns)}, nil
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

// SnapshotRawJSON is SnapshotRaw asking for values as JSON text.
func (c *Client) SnapshotRawJSON(ctx context.Context, t Target) (int, error) {
	var out rawReply
	err := c.conn.Invoke(ctx, historydv1.ThreadHistory_Snapshot_FullMethodName,
		&historydv1.SnapshotRequest{ThreadId: t.Thread, Turn: int32(t.Turn), Channel: t.Channel, ValueFormat: historydv1.ValueFormat_VALUE_FORMAT_JSON},
		&out, grpc.ForceCodecV2(rawCodec{}))
	if err == nil && out.n == 0 {
		err = fmt.Errorf("Snapshot(%s, %d): empty answer", t.Thread, t.Turn)
	}
	return out.n, err
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

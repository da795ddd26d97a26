package client

import (
	"context"
	"errors"
	"io"
	"iter"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// StreamSnapshots reads what Snapshots does, every retained turn's state in
// ascending order, one turn per message of historyd's StreamSnapshots rpc, so
// a long history never has to fit in one response nor in memory: each turn
// can be used and dropped before the next arrives. WithKeys, WithNamespace,
// WithChannel and WithFromTurn apply; each turn carries the numbering its
// message was sent with.
//
// The sequence yields each turn with a nil error, or, once, a nil turn and
// the error that ended the read. Breaking out of the loop cancels the call.
// A stream cut with UNAVAILABLE is resumed after the last turn received,
// under the Client's retry budget (see WithRetry), so no turn is yielded
// twice; the Client's timeout bounds the whole read. The thread's total is
// not part of the sequence: Turns and Snapshot carry it.
//
// It is a method of Client rather than of ThreadHistory: a turn read (the
// inspect tool's need) is a Snapshot, and streaming is a transport concern
// that in-memory and test implementations of ThreadHistory would only have
// to imitate.
func (c *Client) StreamSnapshots(ctx context.Context, threadID string, opts ...ReadOption) iter.Seq2[*TurnState, error] {
	return func(yield func(*TurnState, error) bool) {
		o := NewReadConfig(opts...)
		ctx, cancel, err := c.begin(ctx)
		if err != nil {
			yield(nil, c.fail("StreamSnapshots", threadID, err))
			return
		}
		defer cancel()
		from := int32(min(max(o.FromTurn, math.MinInt32), math.MaxInt32))
		failures := 0
		for {
			err := c.stream(ctx, &historydv1.StreamSnapshotsRequest{ThreadId: threadID, CheckpointNs: o.Namespace, Keys: o.Keys, FromTurn: from, Channel: o.Channel},
				func(t *TurnState) bool {
					failures = 0
					from = int32(min(t.Turn, math.MaxInt32-1)) + 1
					return yield(t, nil)
				})
			switch {
			case err == nil:
				return
			case errors.Is(err, errStopped):
				return
			case status.Code(err) != codes.Unavailable || failures >= c.retries || ctx.Err() != nil:
				yield(nil, c.fail("StreamSnapshots", threadID, err))
				return
			}
			failures++
			if err := sleep(ctx, c.backoff(ctx, uint(failures))); err != nil {
				yield(nil, c.fail("StreamSnapshots", threadID, err))
				return
			}
		}
	}
}

// errStopped says the consumer of a stream stopped reading it.
var errStopped = errors.New("stream consumer stopped")

// stream makes one StreamSnapshots call and hands each turn to fn until the
// stream ends (nil), fails (its error) or fn returns false (errStopped).
func (c *Client) stream(ctx context.Context, req *historydv1.StreamSnapshotsRequest, fn func(*TurnState) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the call when the consumer stops early
	s, err := c.rpc.StreamSnapshots(ctx, req)
	if err != nil {
		return err
	}
	for {
		msg, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if msg.GetTurn() == nil {
			continue // the one message of a thread with no retained turn
		}
		t := fromTurnState(msg.GetTurn(), msg.GetNumbering())
		if !fn(&t) {
			return errStopped
		}
	}
}

// sleep waits d, or until ctx is done, which it reports as the status a
// call ending there would have.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-timer.C:
		return nil
	}
}

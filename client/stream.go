package client

import (
	"context"
	"errors"
	"io"
	"iter"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// StreamSnapshots reads what Snapshots does, every retained turn's state in
// ascending order, one turn per message of historyd's StreamSnapshots rpc, so
// a long history never has to fit in one response nor in memory: each turn
// can be used and dropped before the next arrives. The ReadOptions of
// Snapshots apply, and WithFromTurn; it ignores the others. Each turn
// carries the numbering its message was sent with.
//
// The sequence yields each turn with a nil error, or, once, a nil turn and
// the error that ended the read. Breaking out of the loop cancels the call.
// A stream cut with UNAVAILABLE is resumed after the last turn received,
// under the Client's retry budget (see WithRetry), so no turn is yielded
// twice; the Client's timeout bounds the whole read. One stream keeps to
// the lineage it began on (see historyd.v1.StreamSnapshotsRequest); a
// resumed one reads the thread's head as it is then, unless WithHead named
// one. The thread's total is
// not part of the sequence: Turns and Snapshot carry it. A stream the
// server ends asking to be resumed (see resumeTrailer) is resumed at once,
// not counted as a failure.
//
// It is a method of Client rather than of ThreadHistory: a turn read (the
// inspect tool's need) is a Snapshot, and streaming is a transport concern
// that in-memory and test implementations of ThreadHistory would only have
// to imitate.
func (c *Client) StreamSnapshots(ctx context.Context, threadID string, opts ...ReadOption) iter.Seq2[*TurnState, error] {
	return func(yield func(*TurnState, error) bool) {
		o := NewReadConfig(opts...)
		from, err := wireTurn("from_turn", o.FromTurn)
		if err != nil {
			yield(nil, c.fail("StreamSnapshots", threadID, err))
			return
		}
		ctx, cancel, err := c.begin(ctx)
		if err != nil {
			yield(nil, c.fail("StreamSnapshots", threadID, err))
			return
		}
		defer cancel()
		failures := 0
		for {
			err := c.stream(ctx, &historydv1.StreamSnapshotsRequest{ThreadId: threadID, CheckpointNs: o.Namespace, Keys: o.Keys, FromTurn: from, Channel: o.Channel,
				ValueFormat: o.wireFormat(), HeadCheckpointId: o.Head}, o,
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
			case resumed(err) && ctx.Err() == nil:
				continue
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

// resumeTrailer is the trailer with which historyd ends a stream the
// client is to make again from where it got to (the stream reached the
// server's maximum age, or a reload of its token file changed what the
// call reads), with UNAVAILABLE; client/testdata/defaults.json names it
// for every client.
const resumeTrailer = "historyd-resume"

// resumeError is a stream's end that historyd asked the client to resume
// from: not a failure, so it is resumed at once and counts against no
// retry budget.
type resumeError struct{ err error }

func (e *resumeError) Error() string { return e.err.Error() }
func (e *resumeError) Unwrap() error { return e.err }

// streamEnd is the error a stream's Recv ended with, marked as a resume
// when the server's trailer asks for one.
func streamEnd(err error, trailer metadata.MD) error {
	if status.Code(err) == codes.Unavailable && len(trailer.Get(resumeTrailer)) > 0 {
		return &resumeError{err}
	}
	return err
}

// resumed reports whether err is a stream's end the server asked to be
// resumed from.
func resumed(err error) bool {
	var r *resumeError
	return errors.As(err, &r)
}

// stream makes one StreamSnapshots call and hands each turn to fn until the
// stream ends (nil), fails (its error) or fn returns false (errStopped).
func (c *Client) stream(ctx context.Context, req *historydv1.StreamSnapshotsRequest, o ReadConfig, fn func(*TurnState) bool) error {
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
			return streamEnd(err, s.Trailer())
		}
		if msg.GetTurn() == nil {
			continue // the one message of a thread with no retained turn
		}
		t, err := fromTurnState(msg.GetTurn(), msg.GetNumbering(), o)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
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

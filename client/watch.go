package client

import (
	"context"
	"errors"
	"io"
	"iter"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// WatchEvent is one event of a watched thread.
type WatchEvent struct {
	// Checkpoint says the event is a new checkpoint's state, not a turn's
	// end: State.Turn is the turn it belongs to, State.CheckpointID the
	// checkpoint, State.EndedAt when it was written.
	Checkpoint bool
	// State is the state: the turn's end, or the new checkpoint's.
	State TurnState
	// Total is how many turns the thread has had.
	Total int
	// Head is the checkpoint whose lineage the event was read on.
	Head string
	// Rewound, when set, says the event is not a state but a change of
	// lineage: the thread was rewound (a fork) and the turns yielded after
	// Rewound.Turn belong to the branch it abandoned. State is unset; the
	// new branch's turns follow as they end.
	Rewound *Rewound
}

// Rewound says a watched thread's lineage changed.
type Rewound struct {
	// Turn is the last turn the new lineage shares with the turns yielded
	// before.
	Turn int
	// Fork is the branch the watch had been following; nil when the
	// thread no longer holds it.
	Fork *Fork
}

// WatchTurns yields each turn of the thread as it ends (see
// historyd.v1.WatchTurnsResponse for when that is), after WithAfterTurn's
// turn, and with WithCheckpoints each new checkpoint's state as it is
// written. WithNamespace, WithChannel, WithHead, WithKeys and
// WithValueFormat apply too; WatchTurns ignores the other ReadOptions. The
// sequence runs until the consumer stops, ctx ends, or the watch fails: it
// yields each event with a nil error, or, once, a nil event and the error
// that ended it.
//
// The Client's timeout does not apply: a watch lasts as long as ctx. A
// watch the server ends (a server shutting down ends it with OK) or cuts
// with UNAVAILABLE is resumed after the last turn received, under the
// Client's retry budget (see WithRetry), counting failures in a row; past
// it the sequence ends with the error, UNAVAILABLE for a clean end. A
// watch the server ends at its maximum age (historyd serve's
// --watch-max-age), or after a reload of its token file that lets the
// tenant read the thread, is resumed at once and counts as no failure;
// one a reload revokes ends with UNAUTHENTICATED or PERMISSION_DENIED. A turn
// that ended again (its end moved) is yielded again; a resumed watch
// yields the checkpoints written from the time it resumed. A thread
// rewound under the watch yields an event with Rewound set, then the new
// branch's turns from the turn after Rewound.Turn; a rewind while the watch
// was being resumed is not seen as one (the resumed watch yields the turns
// after the last one received, on the new lineage).
func (c *Client) WatchTurns(ctx context.Context, threadID string, opts ...ReadOption) iter.Seq2[*WatchEvent, error] {
	return func(yield func(*WatchEvent, error) bool) {
		switch {
		case c == nil || c.rpc == nil:
			yield(nil, c.fail("WatchTurns", threadID, errNoConn))
			return
		case c.closed.Load():
			yield(nil, c.fail("WatchTurns", threadID, errClosed))
			return
		}
		if ctx == nil {
			ctx = context.Background()
		}
		o := NewReadConfig(opts...)
		after, err := wireTurn("after_turn", o.AfterTurn)
		if err != nil {
			yield(nil, c.fail("WatchTurns", threadID, err))
			return
		}
		// Values are parsed whatever WithRawValues says.
		rc := ReadConfig{ValueFormat: o.ValueFormat}
		failures := 0
		for {
			err := c.watch(ctx, &historydv1.WatchTurnsRequest{ThreadId: threadID, CheckpointNs: o.Namespace, AfterTurn: after, Keys: o.Keys, Channel: o.Channel, Checkpoints: o.Checkpoints,
				ValueFormat: rc.wireFormat(), HeadCheckpointId: o.Head}, rc,
				func(ev *WatchEvent) bool {
					failures = 0
					switch {
					case ev.Rewound != nil:
						// The turns after it are to come again, on the
						// new branch, resumed or not.
						after = min(after, int32(min(ev.Rewound.Turn, math.MaxInt32)))
					case !ev.Checkpoint:
						after = max(after, int32(min(ev.State.Turn, math.MaxInt32)))
					}
					return yield(ev, nil)
				})
			switch {
			case errors.Is(err, errStopped):
				return
			case resumed(err) && ctx.Err() == nil:
				// The server's maximum age, or a reload of its token file:
				// made again at once, from the last turn received.
				continue
			case err == nil:
				err = status.Error(codes.Unavailable, "the server ended the watch (it is shutting down)")
			}
			if status.Code(err) != codes.Unavailable || failures >= c.retries || ctx.Err() != nil {
				if ctx.Err() != nil {
					err = status.FromContextError(ctx.Err()).Err()
				}
				yield(nil, c.fail("WatchTurns", threadID, err))
				return
			}
			failures++
			if err := sleep(ctx, c.backoff(ctx, uint(failures))); err != nil {
				yield(nil, c.fail("WatchTurns", threadID, err))
				return
			}
		}
	}
}

// watch makes one WatchTurns call and hands each event to fn until the
// stream ends (nil), fails (its error) or fn returns false (errStopped).
func (c *Client) watch(ctx context.Context, req *historydv1.WatchTurnsRequest, rc ReadConfig, fn func(*WatchEvent) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.rpc.WatchTurns(ctx, req)
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
		ev := &WatchEvent{Total: int(msg.GetTotal()), Head: msg.GetHeadCheckpointId()}
		var ts *historydv1.TurnState
		switch e := msg.GetEvent().(type) {
		case *historydv1.WatchTurnsResponse_TurnEnded:
			ts = e.TurnEnded
		case *historydv1.WatchTurnsResponse_Checkpoint:
			ev.Checkpoint, ts = true, e.Checkpoint
		case *historydv1.WatchTurnsResponse_HistoryRewound:
			ev.Rewound = &Rewound{Turn: int(e.HistoryRewound.GetTurn())}
			if f := e.HistoryRewound.GetFork(); f != nil {
				fork := fromFork(f)
				ev.Rewound.Fork = &fork
			}
		default:
			continue // an event this client does not know
		}
		if ts != nil {
			if ev.State, err = fromTurnState(ts, msg.GetNumbering(), rc); err != nil {
				return status.Error(codes.Internal, err.Error())
			}
		}
		if !fn(ev) {
			return errStopped
		}
	}
}

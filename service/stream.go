package service

import (
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// streamBatch is how many turns' state one store read fetches while
// streaming: enough to amortise the query, few enough that a thread of
// megabyte-sized states never sits in memory whole.
const streamBatch = 4

// StreamSnapshots implements historyd.v1.ThreadHistory.StreamSnapshots.
// Calls denied by tenant isolation reach it too, over an empty store (see
// handlers.go).
func (s *Server) StreamSnapshots(req *historydv1.StreamSnapshotsRequest, stream historydv1.ThreadHistory_StreamSnapshotsServer) error {
	ctx := stream.Context()
	if err := firstError(checkThread(req.GetThreadId(), req.GetCheckpointNs()), checkKeys(req.GetKeys()), checkFromTurn(req.GetFromTurn()),
		s.checkChannel(req.GetChannel()), checkValueFormat(req.GetValueFormat())); err != nil {
		return s.fail(ctx, "StreamSnapshots", err)
	}
	ref := store.Ref{ThreadID: req.GetThreadId(), Namespace: req.GetCheckpointNs()}
	h, err := s.store.History(ctx, ref)
	if err != nil {
		return s.fail(ctx, "StreamSnapshots", err)
	}
	total, num := clampInt32(h.Total), numbering(h.Numbering)
	var turns []store.Turn
	for _, t := range h.Turns {
		if t.Retained && t.N >= int(req.GetFromTurn()) {
			turns = append(turns, t)
		}
	}
	if len(turns) == 0 {
		return stream.Send(&historydv1.StreamSnapshotsResponse{Total: total, Numbering: num})
	}
	for start := 0; start < len(turns); start += streamBatch {
		batch := turns[start:min(start+streamBatch, len(turns))]
		want := map[int]bool{}
		for _, t := range batch {
			want[t.N] = true
		}
		// Each batch is read from the thread as it is now: a turn pruned
		// since the stream began is left out rather than read from cache.
		_, batch, states, err := s.store.ReadEncoded(ctx, ref, req.GetChannel(), func(h *store.History) []store.Turn {
			var out []store.Turn
			for _, t := range h.Turns {
				if t.Retained && want[t.N] {
					out = append(out, t)
				}
			}
			return out
		}, req.GetKeys(), encoderFor(req.GetValueFormat()))
		if err != nil {
			return s.fail(ctx, "StreamSnapshots", err)
		}
		for i, t := range batch {
			if states[i].Lost {
				continue // its value cannot be rebuilt, as Snapshots leaves it out
			}
			if err := stream.Send(&historydv1.StreamSnapshotsResponse{Turn: toTurnState(t, states[i]), Total: total, Numbering: num}); err != nil {
				return err
			}
		}
	}
	return nil
}

package service

import (
	"context"
	"errors"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
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
		s.checkChannel(req.GetChannel()), checkValueFormat(req.GetValueFormat()), checkHead(req.GetHeadCheckpointId())); err != nil {
		return s.fail(ctx, "StreamSnapshots", err)
	}
	ref := refOf(req.GetThreadId(), req.GetCheckpointNs(), req.GetHeadCheckpointId())
	h, err := s.store.History(ctx, ref)
	if err != nil {
		return s.fail(ctx, "StreamSnapshots", err)
	}
	total, num, head := clampInt32(h.Total), numbering(h.Numbering), h.Head
	var turns []store.Turn
	for _, t := range h.Turns {
		if t.Retained && t.N >= int(req.GetFromTurn()) {
			turns = append(turns, t)
		}
	}
	if len(turns) == 0 {
		return stream.Send(&historydv1.StreamSnapshotsResponse{Total: total, Numbering: num, HeadCheckpointId: head})
	}
	for start := 0; start < len(turns); start += streamBatch {
		batch, states, err := s.streamBatch(ctx, ref, head, req, turns[start:min(start+streamBatch, len(turns))])
		if err != nil {
			return s.fail(ctx, "StreamSnapshots", err)
		}
		for i, t := range batch {
			if states[i].Lost {
				continue // its value cannot be rebuilt, as Snapshots leaves it out
			}
			msg := &historydv1.StreamSnapshotsResponse{Turn: toTurnState(t, states[i]), Total: total, Numbering: num, HeadCheckpointId: head}
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
	}
	return nil
}

// streamBatch reads the state of the turns of one batch. Each batch is read
// from the thread as it is now: a turn pruned since the stream began is
// left out rather than read from cache. But the turns stay those of the
// lineage the stream began on (head): if the thread was rewound since (head
// no longer on its lineage), the batch is read on head's lineage, so that
// a stream never goes on with another branch's turns under the same
// numbers. A head deleted since is read as the thread is.
func (s *Server) streamBatch(ctx context.Context, ref backend.Ref, head string, req *historydv1.StreamSnapshotsRequest, batch []store.Turn) ([]store.Turn, []store.EncodedState, error) {
	want := map[int]bool{}
	for _, t := range batch {
		want[t.N] = true
	}
	pick := func(h *store.History) []store.Turn {
		var out []store.Turn
		for _, t := range h.Turns {
			if t.Retained && want[t.N] {
				out = append(out, t)
			}
		}
		return out
	}
	h, turns, states, err := s.store.ReadEncoded(ctx, ref, req.GetChannel(), pick, req.GetKeys(), encoderFor(req.GetValueFormat()))
	if err != nil || ref.Head != "" || head == "" || h.Holds(head) {
		return turns, states, err
	}
	pinned := ref
	pinned.Head = head
	_, pturns, pstates, perr := s.store.ReadEncoded(ctx, pinned, req.GetChannel(), pick, req.GetKeys(), encoderFor(req.GetValueFormat()))
	if errors.Is(perr, store.ErrUnknownHead) {
		return turns, states, nil
	}
	return pturns, pstates, perr
}

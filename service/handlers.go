package service

import (
	"context"
	"math"
	"slices"

	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// The ThreadHistory handlers, here and StreamSnapshots in stream.go, answer
// two kinds of call:
//
//   - calls for threads the caller may read, on the Server that Register
//     registered, over the deployment's store;
//   - calls that tenant isolation denies (see isolation in auth.go): they
//     run through these same handlers, on isolation.unknownThreads, a second
//     Server whose store holds no checkpoints, so that a denied thread is
//     answered exactly as a thread that does not exist.
//
// So what a handler answers for an unknown thread is also what a tenant
// gets for every thread of another tenant: it must depend on the request
// alone (validation included), never on what else the store holds.
//
// Responses carry each state entry as its cached encoding, in the
// StateEntry's unknown fields (see toTurnState): on the server side an
// entry's getters read as unset. Code between the handlers and the wire
// that must read entries, an interceptor say, reads a copy from Decoded.

// Snapshots implements historyd.v1.ThreadHistory.Snapshots. Calls denied
// by tenant isolation reach it too, over an empty store (see above).
func (s *Server) Snapshots(ctx context.Context, req *historydv1.SnapshotsRequest) (*historydv1.SnapshotsResponse, error) {
	if err := firstError(checkThread(req.GetThreadId(), req.GetCheckpointNs()), checkKeys(req.GetKeys()), s.checkChannel(req.GetChannel()),
		checkValueFormat(req.GetValueFormat()), checkHead(req.GetHeadCheckpointId())); err != nil {
		return nil, s.fail(ctx, "Snapshots", err)
	}
	ref := refOf(req.GetThreadId(), req.GetCheckpointNs(), req.GetHeadCheckpointId())
	h, turns, states, err := s.store.ReadEncoded(ctx, ref, req.GetChannel(), (*store.History).RetainedTurns, req.GetKeys(), encoderFor(req.GetValueFormat()))
	if err != nil {
		return nil, s.fail(ctx, "Snapshots", err)
	}
	resp := &historydv1.SnapshotsResponse{Total: clampInt32(h.Total), Turns: make(map[int32]*historydv1.TurnState, len(turns)),
		Numbering: numbering(h.Numbering), HeadCheckpointId: h.Head}
	for i, t := range turns {
		if !states[i].Lost {
			resp.Turns[int32(t.N)] = toTurnState(t, states[i])
		}
	}
	if err := checkResponseSize(ctx, resp, snapshotsAdvice); err != nil {
		return nil, err
	}
	return resp, nil
}

// Snapshot implements historyd.v1.ThreadHistory.Snapshot. Calls denied by
// tenant isolation reach it too, over an empty store (see above).
func (s *Server) Snapshot(ctx context.Context, req *historydv1.SnapshotRequest) (*historydv1.SnapshotResponse, error) {
	if err := firstError(checkThread(req.GetThreadId(), req.GetCheckpointNs()), checkTurn(req.GetTurn()), checkKeys(req.GetKeys()),
		s.checkChannel(req.GetChannel()), checkValueFormat(req.GetValueFormat()), checkHead(req.GetHeadCheckpointId())); err != nil {
		return nil, s.fail(ctx, "Snapshot", err)
	}
	ref := refOf(req.GetThreadId(), req.GetCheckpointNs(), req.GetHeadCheckpointId())
	n := int(req.GetTurn())
	h, turns, states, err := s.store.ReadEncoded(ctx, ref, req.GetChannel(), func(h *store.History) []store.Turn {
		if t, found := h.Turn(n); found == store.Found {
			return []store.Turn{t}
		}
		return nil
	}, req.GetKeys(), encoderFor(req.GetValueFormat()))
	if err != nil {
		return nil, s.fail(ctx, "Snapshot", err)
	}
	resp := &historydv1.SnapshotResponse{Total: clampInt32(h.Total), RetainedTurns: retained(h), Numbering: numbering(h.Numbering),
		HeadCheckpointId: h.Head}
	t, found := h.Turn(n)
	if found == store.Found && states[0].Lost {
		// The channel's value at the turn's end was rebuilt from writes of
		// checkpoints since deleted: the state is gone as surely as if the
		// turn's own checkpoints were.
		found = store.NoLongerRetained
		resp.RetainedTurns = slices.DeleteFunc(resp.RetainedTurns, func(r int32) bool { return r == int32(n) })
	}
	switch found {
	case store.NoSuchTurn:
		resp.Result = &historydv1.SnapshotResponse_NoSuchTurn{NoSuchTurn: &historydv1.NoSuchTurn{Turn: req.GetTurn(), Total: resp.Total}}
	case store.NoLongerRetained:
		resp.Result = &historydv1.SnapshotResponse_NoLongerRetained{NoLongerRetained: &historydv1.NoLongerRetained{Turn: req.GetTurn(), Question: t.Question}}
	default:
		resp.Result = &historydv1.SnapshotResponse_State{State: toTurnState(turns[0], states[0])}
	}
	if err := checkResponseSize(ctx, resp, snapshotAdvice); err != nil {
		return nil, err
	}
	return resp, nil
}

// Turns implements historyd.v1.ThreadHistory.Turns. Calls denied by tenant
// isolation reach it too, over an empty store (see above).
func (s *Server) Turns(ctx context.Context, req *historydv1.TurnsRequest) (*historydv1.TurnsResponse, error) {
	if err := firstError(checkThread(req.GetThreadId(), req.GetCheckpointNs()), s.checkChannel(req.GetChannel()),
		checkHead(req.GetHeadCheckpointId())); err != nil {
		return nil, s.fail(ctx, "Turns", err)
	}
	ref := refOf(req.GetThreadId(), req.GetCheckpointNs(), req.GetHeadCheckpointId())
	// Without keys_written no state is read: the list alone is cheap.
	var (
		h      *store.History
		kept   []store.Turn
		states []store.EncodedState
		err    error
	)
	if req.GetIncludeKeysWritten() {
		h, kept, states, err = s.store.ReadEncoded(ctx, ref, req.GetChannel(), (*store.History).RetainedTurns, nil, entryEncoder{})
	} else {
		h, err = s.store.History(ctx, ref)
	}
	if err != nil {
		return nil, s.fail(ctx, "Turns", err)
	}
	resp := &historydv1.TurnsResponse{Total: clampInt32(h.Total), Turns: make([]*historydv1.TurnInfo, len(h.Turns)),
		Numbering: numbering(h.Numbering), HeadCheckpointId: h.Head, Forks: forks(h.Forks)}
	for i, t := range h.Turns {
		info := &historydv1.TurnInfo{Number: int32(t.N), Question: t.Question, Retained: t.Retained, AnsweredWith: int32s(t.AnsweredWith)}
		if t.Retained {
			info.CheckpointId = t.End.ID
			if !t.End.TS.IsZero() {
				info.EndedAt = timestamppb.New(t.End.TS)
			}
		}
		resp.Turns[i] = info
	}
	for j, st := range states {
		info := resp.Turns[kept[j].N-1]
		for _, e := range st.Entries {
			if e.Turn != nil && *e.Turn == int64(info.Number) {
				info.KeysWritten = append(info.KeysWritten, e.Key)
			}
		}
	}
	return resp, nil
}

// checkChannel validates a request's channel against the channels the
// server's store serves.
func (s *Server) checkChannel(channel string) *FieldError {
	return checkChannel(channel, s.store.StateChannels())
}

func retained(h *store.History) []int32 {
	var out []int32
	for _, n := range h.Retained() {
		out = append(out, int32(n))
	}
	return out
}

func int32s(ns []int) []int32 {
	var out []int32
	for _, n := range ns {
		out = append(out, int32(n))
	}
	return out
}

// numbering is a History's numbering on the wire.
func numbering(n store.Numbering) historydv1.TurnNumbering {
	switch n {
	case store.Complete:
		return historydv1.TurnNumbering_TURN_NUMBERING_COMPLETE
	case store.Counted:
		return historydv1.TurnNumbering_TURN_NUMBERING_COUNTED
	case store.Estimated:
		return historydv1.TurnNumbering_TURN_NUMBERING_ESTIMATED
	case store.Runs:
		return historydv1.TurnNumbering_TURN_NUMBERING_RUNS
	}
	return historydv1.TurnNumbering_TURN_NUMBERING_UNSPECIFIED
}

// forks are a History's forks on the wire.
func forks(fs []store.Fork) []*historydv1.Fork {
	var out []*historydv1.Fork
	for _, f := range fs {
		out = append(out, toFork(f))
	}
	return out
}

// toFork is one fork on the wire.
func toFork(f store.Fork) *historydv1.Fork {
	return &historydv1.Fork{FromCheckpointId: f.From, Turn: clampInt32(f.Turn), Questions: clampInt32(f.Questions), NewestCheckpointId: f.Newest}
}

func clampInt32(n int) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

// fail turns err into the status the caller gets, logging what the caller
// cannot act on.
func (s *Server) fail(ctx context.Context, method string, err error) error {
	r := ruleFor(err)
	if !r.summarise || !summarise(ctx, failureKind{code: r.code, what: r.message, by: "method"}, method, oneLine(err.Error())) {
		logCause(ctx, s.log, method, err)
	}
	return toStatus(err).Err()
}

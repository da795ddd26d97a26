// Package client reads a LangGraph thread's turn history from historyd.
//
// A host keeps tool results in session state, one value per key, and a later
// write to a key replaces what an earlier turn left there. historyd answers
// what that state held at the end of each turn the checkpointer still
// retains. This package is the Go side of that question:
//
//   - ThreadHistory is the small interface the rest of a host programs
//     against, so tests and other transports can stand in for the service.
//   - Client implements it over gRPC (Dial or New), with TLS, a bearer token,
//     a per-call timeout and retries of UNAVAILABLE, and adds Turns (and
//     TurnIndex, the same with the total and the numbering) and
//     StreamSnapshots (every turn, one message each, for long histories).
//     Its defaults are the Python and TypeScript clients' too
//     (client/testdata/defaults.json).
//   - Snapshot keeps the three answers to "what did turn n hold" apart in its
//     type: Found, NoSuchTurn and NoLongerRetained. A pruned turn and a turn
//     that never happened mean opposite things to a model, so nothing here
//     lets one pass for the other, and no other turn's state is ever put in
//     a missing turn's place.
//   - Every read says how sure its turn numbers are (Numbering: exact, or
//     estimated once pruning has hidden how many questions came first), and
//     a turn whose question came in one input with others says which
//     (AnsweredWith): one run answered them all, so they share its state.
//   - WithChannel reads another of the state channels the server serves
//     (its --state-channels), such as deepagents' files or todos.
//   - Every reading call takes its required arguments (the thread id, the
//     turn numbers) as parameters and everything optional as ReadOptions,
//     one family of With... functions for all of them; each option says
//     which calls it applies to, and the other calls ignore it.
//
// The model-facing inspect_state tool built on this lives in the inspect
// subpackage.
//
// Values arrive as plain JSON-like Go data (nil, bool, float64, string,
// []any, map[string]any), following the mapping documented on the
// historyd.v1.StateEntry message: integers beyond ±2^53 and non-finite floats
// are strings, bytes are base64 text, and Python and LangChain objects are
// their field maps.
package client

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ThreadHistory is what a host can ask about a thread's past: every retained
// turn's state at once, or one turn's. Implementations must be safe for
// concurrent use.
type ThreadHistory interface {
	// Snapshots returns the state at the end of every retained turn of the
	// thread, and how many turns it has had. An unknown thread is not an
	// error: it has no turns and a total of 0.
	Snapshots(ctx context.Context, threadID string, opts ...ReadOption) (*History, error)
	// Snapshot returns the state at the end of one turn, or which of the two
	// misses the turn is. Only that turn's state is read, so it is the call to
	// make when one turn is wanted. Turn 0 and a turn past the total are
	// answered with NoSuchTurn, not an error; a negative turn or one past
	// MaxTurn, which the wire cannot carry, is refused with InvalidArgument.
	Snapshot(ctx context.Context, threadID string, turn int, opts ...ReadOption) (*Snapshot, error)
}

// Outcome says what became of a request for one turn's state. The zero value
// is not a valid outcome, so a Snapshot that was never filled in cannot pass
// for a found one.
type Outcome int

const (
	// Found means the turn is retained and Snapshot.State holds its state.
	Found Outcome = iota + 1
	// NoSuchTurn means the thread never had the turn: it is below 1 or past
	// the thread's total. The caller miscounted; nothing was lost.
	NoSuchTurn
	// NoLongerRetained means the turn happened but the checkpointer no longer
	// holds any of its checkpoints. Its state existed and cannot be read.
	NoLongerRetained
)

// String returns the outcome's name as the wire and the inspect tool spell
// it: "found", "no_such_turn" or "no_longer_retained".
func (o Outcome) String() string {
	switch o {
	case Found:
		return "found"
	case NoSuchTurn:
		return "no_such_turn"
	case NoLongerRetained:
		return "no_longer_retained"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Entry is one session-state key's entry: the value a tool published and the
// bookkeeping the host recorded with it. A field the host did not record is
// its zero value; the conventions that write these fields count seq and turns
// from 1, so zero never stands for a recorded value.
type Entry struct {
	// Value is the published value as plain JSON-like data; unset when the
	// read asked WithRawValues.
	Value any
	// JSON is the value's JSON text as historyd sent it, with JSONValues
	// (the default); nil with ProtoValues.
	JSON []byte
	// Tool names the tool that wrote the value; empty when not recorded.
	Tool string
	// Seq is the entry's write order within the thread; 0 when not
	// recorded.
	Seq int64
	// Turn is the turn of the key's last write; 0 when not recorded.
	Turn int
	// TurnsWritten is how many turns have written the key, as of the state
	// the entry was read from; 0 when not recorded. Read it through
	// WrittenInTurns, which applies the convention's default.
	TurnsWritten int
	// Inputs maps each parameter of the producing call to the state key it
	// was read from, or to "model" when the model supplied it.
	Inputs map[string]string
	// Extra holds every other field the host stored in the entry, unchanged.
	Extra map[string]any
}

// WrittenInTurns returns how many turns wrote the entry's key. An entry that
// records no count reads as written in one turn: the convention stamps the
// count only when a later turn displaces a value, so its absence means no
// earlier turn is known to hold one.
func (e Entry) WrittenInTurns() int {
	return max(e.TurnsWritten, 1)
}

// Numbering says how sure a thread's turn numbers are, which depends on what
// the checkpointer still retains. The zero value means the server did not
// say (a server older than the field).
type Numbering int

const (
	// NumberingComplete means the thread's first checkpoint is retained:
	// every question was seen and every turn number is exact.
	NumberingComplete Numbering = iota + 1
	// NumberingCounted means the oldest checkpoints were pruned, and the
	// questions before the oldest one left were counted from the messages it
	// holds: exact unless messages were removed before it without a trace.
	NumberingCounted
	// NumberingEstimated means the oldest checkpoints were pruned and no
	// checkpoint left shows how many questions came before (the oldest holds
	// a summary of earlier messages, or a DeltaChannel's messages were
	// rebuilt past a pruned checkpoint): turn numbers may be too low. A
	// turn's Question says which question it was.
	NumberingEstimated
	// NumberingRuns means the thread's graph keeps no messages (a
	// StateGraph without a messages channel, the functional API), so each
	// run is a turn: a turn's Question is the run's input as JSON text (at
	// most 4,096 bytes). Say "run N" rather than "turn N" to a reader.
	NumberingRuns
)

// String returns the numbering as the Python and TypeScript clients spell
// it: "complete", "counted", "estimated", "runs", or "unspecified" for the
// zero value.
func (n Numbering) String() string {
	switch n {
	case 0:
		return "unspecified"
	case NumberingComplete:
		return "complete"
	case NumberingCounted:
		return "counted"
	case NumberingEstimated:
		return "estimated"
	case NumberingRuns:
		return "runs"
	}
	return fmt.Sprintf("Numbering(%d)", int(n))
}

// TurnState is a thread's session state at the end of one retained turn.
type TurnState struct {
	// Turn is the turn number, counted from 1.
	Turn int
	// CheckpointID is the checkpoint the turn ended on.
	CheckpointID string
	// Question is the text of the user's message that opened the turn.
	Question string
	// EndedAt is when the turn's last checkpoint was written; zero when the
	// checkpoint carries no timestamp.
	EndedAt time.Time
	// State maps each session-state key to its entry as the turn ended. It
	// holds only the requested keys when the read was projected with
	// WithKeys.
	State map[string]Entry
	// AnsweredWith lists, ascending, the other turns whose questions came
	// in the same input as this one's and were answered by the same run:
	// this turn's state is the one that run ended on, the same as theirs.
	// Empty for a turn asked on its own.
	AnsweredWith []int
	// Numbering says how sure the thread's turn numbers were when this turn
	// was read.
	Numbering Numbering
}

// History is every retained turn of a thread, and how many turns it has had.
// Turns are sparse: a pruned turn is counted in Total and absent from Turns.
type History struct {
	// Total is how many turns the thread has had, retained or not.
	Total int
	// Turns holds the retained turns in ascending order of Turn.
	Turns []TurnState
	// Numbering says how sure the turn numbers are.
	Numbering Numbering
	// Head is the checkpoint whose lineage the turns are numbered on: the
	// thread's newest checkpoint, or the one WithHead named. Empty for a
	// thread without checkpoints.
	Head string
}

// Retained returns the numbers of the retained turns in ascending order.
func (h *History) Retained() []int {
	out := make([]int, 0, len(h.Turns))
	for _, t := range h.Turns {
		out = append(out, t.Turn)
	}
	return out
}

// At answers for turn n what Snapshot would, from state already fetched, so
// code holding a History draws the same three-way distinction without a
// second call. The returned Snapshot shares its State map with h.
func (h *History) At(n int) *Snapshot {
	s := &Snapshot{Turn: n, Total: h.Total, Retained: h.Retained(), Numbering: h.Numbering, Head: h.Head}
	if n < 1 || n > h.Total {
		s.Outcome = NoSuchTurn
		return s
	}
	i, ok := slices.BinarySearchFunc(h.Turns, n, func(t TurnState, n int) int { return t.Turn - n })
	if !ok {
		s.Outcome = NoLongerRetained
		return s
	}
	s.found(h.Turns[i])
	return s
}

// Latest returns the newest retained turn, which is the thread's current
// state, and false when no turn is retained.
func (h *History) Latest() (TurnState, bool) {
	if len(h.Turns) == 0 {
		return TurnState{}, false
	}
	return h.Turns[len(h.Turns)-1], true
}

// Snapshot is the answer for one turn. Outcome says which of the three
// answers it is; the fields documented as Found-only are zero otherwise, so a
// missing turn never carries another turn's state.
type Snapshot struct {
	// Outcome says whether the turn's state was found, and if not, why.
	Outcome Outcome
	// Turn is the turn that was asked for.
	Turn int
	// Total is how many turns the thread has had.
	Total int
	// Retained lists the turns whose state can still be read, ascending. It
	// is what a NoLongerRetained answer can offer instead of a value.
	Retained []int
	// Question is the user's question of the turn: always set when Found,
	// and set for NoLongerRetained when the thread's newest messages still
	// hold it.
	Question string
	// CheckpointID is the checkpoint the turn ended on. Found only.
	CheckpointID string
	// EndedAt is when the turn's last checkpoint was written. Found only,
	// and zero when the checkpoint has no timestamp.
	EndedAt time.Time
	// State maps each session-state key to its entry as the turn ended.
	// Found only: nil for the two misses.
	State map[string]Entry
	// AnsweredWith lists, ascending, the other turns whose questions came
	// in the same input as this one's and were answered by the same run,
	// whose end state this one shares. Found only.
	AnsweredWith []int
	// Numbering says how sure the thread's turn numbers are, for every
	// outcome: with NumberingEstimated, Turn may name a later question than
	// the caller counted, and Total may be too low.
	Numbering Numbering
	// Head is the checkpoint whose lineage the turn was read on (see
	// History.Head), for every outcome.
	Head string
}

// found fills the Found-only fields from t.
func (s *Snapshot) found(t TurnState) {
	s.Outcome = Found
	s.Question, s.CheckpointID, s.EndedAt, s.State, s.AnsweredWith = t.Question, t.CheckpointID, t.EndedAt, t.State, t.AnsweredWith
}

// Current returns the thread's current session state: the state its newest
// turn ended on, or for a turn still in progress, its newest checkpoint so
// far. It costs two Snapshot calls, the first of which reads no state, rather
// than one Snapshots call that would read every retained turn's: it asks h
// for turn 0, whose NoSuchTurn answer carries the total, then for the total.
//
// A thread with no turns yet answers NoSuchTurn with Turn and Total 0. The
// newest turn is always retained while the thread exists, since its richest
// checkpoint is what the total is counted from; should it be pruned between
// the two calls, the answer is that turn's NoLongerRetained, never an older
// turn's state in its place.
func Current(ctx context.Context, h ThreadHistory, threadID string, opts ...ReadOption) (*Snapshot, error) {
	if h == nil {
		return nil, errNoHistory
	}
	probe, err := h.Snapshot(ctx, threadID, 0, opts...)
	if err != nil {
		return nil, err
	}
	if probe == nil {
		return nil, status.Error(codes.Internal, "thread history returned no snapshot")
	}
	if probe.Total == 0 {
		return probe, nil
	}
	return h.Snapshot(ctx, threadID, probe.Total, opts...)
}

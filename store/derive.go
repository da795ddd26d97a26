package store

import (
	"fmt"
	"time"
)

// Checkpoint is one checkpoint reduced to what turn derivation needs: its
// id, time and messages version, and how many messages and human messages
// its messages channel holds. Counts, not messages: a thread of hundreds of
// turns has thousands of checkpoints, and only the richest one's questions
// are ever shown.
type Checkpoint struct {
	// ID is the checkpoint id.
	ID string
	// Parent is the parent checkpoint's id; empty for a thread's first.
	Parent string
	// TS is the checkpoint's timestamp, zero when unknown.
	TS time.Time
	// Version is the checkpoint's version of the messages channel.
	Version string
	// Messages is the number of messages in the checkpoint's messages channel.
	Messages int
	// Humans is the number of human messages among them.
	Humans int
	// State is the checkpoint's version of the state channel; empty when
	// the channel has no value yet.
	State string
}

// Turn is one turn of a thread, without its state.
type Turn struct {
	// N is the turn number, counted from 1.
	N int
	// Question is the text of the turn's human message, from the thread's
	// richest checkpoint.
	Question string
	// Retained says whether some checkpoint of the turn is still stored.
	Retained bool
	// End is the checkpoint the turn ended on; only set when Retained.
	End Checkpoint
}

// History is a thread's turns: every turn from 1 to Total, retained or not.
type History struct {
	// Ref names the thread.
	Ref Ref
	// Total is how many turns the thread has had: the number of human messages
	// in its richest checkpoint.
	Total int
	// Turns holds turns 1..Total in order; Turns[i].N == i+1.
	Turns []Turn
	// Richest is the checkpoint holding the most human messages (the
	// greatest id among equals); its messages give every turn's question.
	// Zero when Total is 0.
	Richest Checkpoint
}

// SetQuestions fills each turn's question from the richest checkpoint's
// human messages, in order.
func (h *History) SetQuestions(humans []string) {
	for i := range h.Turns {
		if i < len(humans) {
			h.Turns[i].Question = humans[i]
		}
	}
}

// Outcome is which of the three answers a request for one turn gets. The
// service and the clients name them the same way. The zero value is not an
// outcome, so a result never filled in cannot pass for a found turn.
type Outcome int

const (
	// Found means the turn is retained: its state can be read.
	Found Outcome = iota + 1
	// NoSuchTurn means the thread never had the turn: n < 1 or n > Total.
	NoSuchTurn
	// NoLongerRetained means the turn existed but none of its checkpoints are
	// left.
	NoLongerRetained
)

// String returns the outcome as the API spells it: "found",
// "no_such_turn" or "no_longer_retained".
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

// Turn returns turn n and which of the three answers it gets.
func (h *History) Turn(n int) (Turn, Outcome) {
	if n < 1 || n > h.Total {
		return Turn{N: n}, NoSuchTurn
	}
	t := h.Turns[n-1]
	if !t.Retained {
		return t, NoLongerRetained
	}
	return t, Found
}

// Retained returns the retained turns' numbers in ascending order.
func (h *History) Retained() []int {
	var out []int
	for _, t := range h.Turns {
		if t.Retained {
			out = append(out, t.N)
		}
	}
	return out
}

// Derive builds a thread's turn history from its checkpoints, given in any
// order. It is the one place the turn rules live:
//
//   - a checkpoint's turn is its number of human messages; checkpoints with
//     none belong to no turn;
//   - a turn ends at its checkpoint with the most messages, equal counts going
//     to the greater checkpoint id (ids are time-ordered);
//   - the total is the human-message count of the richest checkpoint, which
//     survives however much older history was pruned;
//   - a turn in 1..total with no checkpoint is no longer retained;
//   - turn n's question is the n-th human message of the richest checkpoint
//     (History.Richest; the caller reads its messages and calls
//     SetQuestions).
//
// The result does not depend on the order of cps.
func Derive(ref Ref, cps []Checkpoint) *History {
	var richest *Checkpoint
	ends := map[int]*Checkpoint{}
	for i := range cps {
		c := &cps[i]
		n := c.Humans
		if n == 0 {
			continue
		}
		// Ties between equally rich checkpoints go to the greater id so the
		// questions do not depend on the order checkpoints were listed in.
		if richest == nil || n > richest.Humans || (n == richest.Humans && c.ID > richest.ID) {
			richest = c
		}
		if held, ok := ends[n]; !ok || endsLater(c, held) {
			ends[n] = c
		}
	}
	h := &History{Ref: ref}
	if richest == nil {
		return h
	}
	h.Total = richest.Humans
	h.Richest = *richest
	h.Turns = make([]Turn, h.Total)
	for i := range h.Turns {
		t := Turn{N: i + 1}
		if end, ok := ends[t.N]; ok {
			t.Retained = true
			t.End = *end
		}
		h.Turns[i] = t
	}
	return h
}

// endsLater reports whether c sits later in its turn than held. Within a turn
// the message list only grows, so more messages is later; a super-step that
// left the messages alone is placed by its time-ordered id.
func endsLater(c, held *Checkpoint) bool {
	if c.Messages != held.Messages {
		return c.Messages > held.Messages
	}
	return c.ID > held.ID
}

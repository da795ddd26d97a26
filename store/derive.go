package store

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/historyd/historyd/store/backend"
)

// Checkpoint is one checkpoint reduced to what turn derivation needs: its
// id and parent, its time, and the questions its messages channel holds.
// Questions, not messages: a thread of hundreds of turns has thousands of
// checkpoints, and their messages are read once, to find the questions.
type Checkpoint struct {
	// ID is the checkpoint id.
	ID string
	// Parent is the parent checkpoint's id; empty for a thread's first.
	Parent string
	// TS is the checkpoint's timestamp, zero when unknown.
	TS time.Time
	// Version is the checkpoint's version of the messages channel (or,
	// without one, of the functional API's saved value, whose messages key
	// is the channel: see SavedValueChannel); empty when the channel has
	// no value yet.
	Version string
	// Messages is the number of messages in the messages channel.
	Messages int
	// Asks are the questions the messages channel holds, in order, as
	// indexes into the thread's question table (see Derive): the human
	// messages nobody but the user wrote, by message identity.
	Asks []int32
	// Synthetic says the messages channel holds a synthetic human message
	// (a summary, a notification): a sign that messages were removed.
	Synthetic bool
	// Unplaced says the checkpoint's messages could not be read: a
	// DeltaChannel's list whose chain back to a stored value was deleted.
	// It belongs to no turn.
	Unplaced bool
	// Partial says the messages were rebuilt past a deleted checkpoint:
	// Asks holds only the questions asked since, and how many came before
	// is not known.
	Partial bool
	// Between says the checkpoint was made between runs, not by a run's
	// step: by an input (metadata source "input"; the run's question is
	// not in the messages channel yet, only in the checkpoint's pending
	// writes) or by update_state ("update", "fork"). It carries on the
	// state of its parent, whatever turn that was.
	Between bool
	// Input says the checkpoint is a run's input checkpoint (metadata
	// source "input"): where no human message numbers the turns, each run
	// is a turn, beginning here (see Runs).
	Input bool
	// InputText is an input checkpoint's run input as a Runs-numbered
	// turn's question (see MaxRunQuestion); empty until it is read, which
	// only a Runs-numbered history needs.
	InputText string
	// States maps each state channel, and the functional API's saved value
	// (__previous__), to its version at the checkpoint; a channel without
	// a value has none.
	States map[string]string
	// Rest says whether LangGraph had anything left to run from the
	// checkpoint, where the checkpoint records it (see
	// codec.Checkpoint.AtRest): a run's last checkpoint is AtRest.
	Rest Rest
}

// Rest says whether a run goes on from a checkpoint.
type Rest int8

const (
	// RestUnknown: the checkpoint does not record what its step updated
	// (LangGraph.js, older formats).
	RestUnknown Rest = iota
	// Running: the step that wrote the checkpoint triggered a node (or it
	// is an input, or an interrupted run waits to be resumed).
	Running
	// AtRest: nothing is left to run; the run ended at this checkpoint.
	AtRest
)

// State returns the checkpoint's version of a state channel, empty when
// the channel has no value there. Where the checkpoint has no such channel
// but holds the functional API's saved value, the channel is the saved
// value's key of its name, and the version the saved value's, marked.
func (c Checkpoint) State(channel string) string {
	_, v := c.stateSource(channel)
	return v
}

// Question is one question of a thread: a human message, by its id.
type Question struct {
	// ID is the message id (or, for a message without one, its place
	// among the human messages of the list that held it).
	ID string
	// Text is the message's text.
	Text string
}

// Turn is one turn of a thread, without its state.
type Turn struct {
	// N is the turn number, counted from 1.
	N int
	// Question is the text of the turn's question.
	Question string
	// Retained says whether the state the turn ended on can be read.
	Retained bool
	// End is the checkpoint the turn ended on; only set when Retained.
	End Checkpoint
	// AnsweredWith lists the other turns whose questions came in the same
	// input as this one's and were answered by the same run: the turn ended
	// on the state that run ended on.
	AnsweredWith []int
}

// Numbering says how sure a thread's turn numbers are.
type Numbering int

const (
	// Complete means the thread's first checkpoint is retained: every
	// question was seen, and every turn number is exact.
	Complete Numbering = iota + 1
	// Counted means the oldest checkpoints were deleted, and the questions
	// before the oldest one left are counted from the messages it still
	// holds, as the reference does. The numbers are exact unless messages
	// were removed before it without a trace.
	Counted
	// Estimated means checkpoints were deleted and what is left does not
	// show how many questions came before: the oldest one left shows that
	// messages were removed before it (it holds a summary), or a
	// DeltaChannel's messages are rebuilt past a deleted checkpoint and
	// show only the questions asked since. The numbers may be too low.
	Estimated
	// Runs means the thread's messages never held a human message (a graph
	// without a messages channel, the functional API): each run is a turn,
	// from its input checkpoint to the last checkpoint before the next
	// run's input on the lineage, and a turn's question is the run's input
	// as JSON text (see MaxRunQuestion).
	Runs
)

// String returns the numbering as the API spells it.
func (n Numbering) String() string {
	switch n {
	case Complete:
		return "complete"
	case Counted:
		return "counted"
	case Estimated:
		return "estimated"
	case Runs:
		return "runs"
	}
	return fmt.Sprintf("Numbering(%d)", int(n))
}

// History is a thread's turns: every turn from 1 to Total, retained or not.
type History struct {
	// Ref names the thread.
	Ref backend.Ref
	// Total is how many questions the thread has been asked.
	Total int
	// Turns holds turns 1..Total in order; Turns[i].N == i+1.
	Turns []Turn
	// Numbering says how sure the turn numbers are.
	Numbering Numbering
	// Head is the checkpoint whose lineage the turns are numbered on: the
	// thread's newest checkpoint, or backend.Ref.Head. Empty for a thread without
	// checkpoints.
	Head string
	// Forks lists the branches that leave the lineage, oldest fork point
	// first: each time the thread was rewound, the branch it abandoned.
	Forks []Fork
	// Steps are the checkpoints whose messages could be read, in
	// checkpoint order, each with the turn it belongs to (0 before the
	// first question). They point into the index the History was derived
	// from and must not be modified.
	Steps []Step
}

// Fork is a branch that leaves a History's lineage: a run started from an
// older checkpoint (time travel), or an update_state on one, left the
// checkpoints written after it on another branch.
type Fork struct {
	// From is the checkpoint on the lineage the abandoned branch left from.
	From string
	// Turn is the turn From belongs to on the lineage: the conversation was
	// rewound to the end of this turn (0: before the first question).
	Turn int
	// Questions is how many turns the abandoned branch held at its newest
	// checkpoint, as a History with backend.Ref.Head set to Newest counts them.
	Questions int
	// Newest is the abandoned branch's newest checkpoint.
	Newest string
}

// MaxRunQuestion is the most bytes of a run's input a Runs-numbered turn's
// question holds; a longer input is cut at a character boundary.
const MaxRunQuestion = 4096

// Holds reports whether checkpoint id is on the History's lineage: one of
// its Steps.
func (h *History) Holds(id string) bool {
	for _, s := range h.Steps {
		if s.Checkpoint.ID == id {
			return true
		}
	}
	return false
}

// Step is one checkpoint of a History and the turn it belongs to.
type Step struct {
	// Checkpoint is the checkpoint.
	Checkpoint *Checkpoint
	// Turn is the turn it belongs to: the last question asked up to it.
	Turn int
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

// RetainedTurns picks every retained turn, in order: the pick of a read
// of every turn whose state can be read (Store.ReadEncoded).
func (h *History) RetainedTurns() []Turn {
	var out []Turn
	for _, t := range h.Turns {
		if t.Retained {
			out = append(out, t)
		}
	}
	return out
}

// Ended reports whether turn t of h has ended: its last checkpoint is at
// rest, or was made between runs after the turn's own (the next input, an
// update_state: no run of the turn goes on), or a question came after it
// (and after those asked with it). turnOf gives the turn of each listed
// checkpoint (h.Steps).
//
// A checkpoint made between runs that asks the turn's question itself (an
// update_state adding it, followed by invoke(None); an input whose
// messages already hold it) is where the turn starts, not where it ends:
// the run that answers it is still to come. Taken for an end, a poll that
// lands just after it would send the turn with the state before its run,
// and again once the run is done.
func (h *History) Ended(t Turn, turnOf map[string]int) bool {
	last := t.N
	for _, n := range t.AnsweredWith {
		last = max(last, n)
	}
	if last < h.Total || t.End.Rest == AtRest {
		return true
	}
	if !t.End.Between {
		return false
	}
	// A parent that is not listed (pruned) leaves the question open: the
	// checkpoint is taken for an end, as before it was known.
	parentTurn, listed := turnOf[t.End.Parent]
	asks := t.End.Parent == "" || (listed && parentTurn < t.N)
	return !asks
}

// Derive builds a thread's turn history from its checkpoints, given in any
// order, and its question table (Checkpoint.Asks index it). It is the one
// place the turn rules live:
//
//   - checkpoints are taken in checkpoint order: a parent before its
//     children, ids (which are time-ordered) deciding the rest;
//   - a question is asked the first time a checkpoint holds it, and
//     questions are numbered in the order they are asked (in one
//     checkpoint, in list order);
//   - a checkpoint belongs to the turn of the last question asked up to it,
//     whatever its messages still hold (after a summary they may hold
//     none of them); checkpoints before the first question belong to none;
//   - a turn ends at its last checkpoint; a checkpoint made between runs
//     (Checkpoint.Between: the input checkpoint that opens the next run,
//     an update_state) counts only when it follows the turn's end (the
//     same state, carried on) or the turn has no other: one on another
//     branch (a fork back to an earlier turn) is not the state the turn
//     ended on; the total is the number of questions asked;
//   - a turn with no checkpoint whose question was asked together with
//     later ones (one input holding several questions, at a checkpoint
//     whose parent is retained and placed, or that is the thread's first) ended on the
//     state the run answering them ended on: the last of them's end;
//   - any other turn from 1 to the total has no checkpoint left: it is no
//     longer retained.
//
// On a thread whose messages were never removed this numbers turns exactly
// as counting human messages does. The result does not depend on the order
// of cps.
//
// Turns are numbered on the lineage only (see tree.lineage): the head
// (backend.Ref.Head, or the newest checkpoint) and its ancestors, and what agrees
// with them below a cut; every other checkpoint is on a branch, listed in
// Forks. A backend.Ref.Head that names no checkpoint of cps derives an empty
// History; Store refuses such a head with ErrUnknownHead before deriving.
func Derive(ref backend.Ref, cps []Checkpoint, questions []Question) *History {
	return deriveOn(ref, newTree(cps), questions)
}

// deriveOn derives the History of ref's head from the thread's tree: the
// lineage is picked first, then its turns numbered by the rules above,
// then the branches leaving it are listed.
func deriveOn(ref backend.Ref, t *tree, questions []Question) *History {
	l, ok := t.lineage(ref.Head)
	if !ok {
		return &History{Ref: ref, Numbering: Complete, Turns: []Turn{}}
	}
	h := number(ref, t.cps, l.members(), questions)
	// A lineage that never held a human message is numbered by runs
	// instead: this is where its History is handed over.
	h.Head = t.cps[l.head].ID
	h.Forks = t.forks(l, h.Steps)
	return h
}

// number applies the turn rules to the checkpoints of one lineage, those
// of cps that keep indexes; Steps point into cps.
//
// It is one function because its passes (order, placement, ends, grouping)
// share the indexes each pass builds, in the order the turn rules in the
// README state them.
func number(ref backend.Ref, cps []Checkpoint, keep []int, questions []Question) *History {
	h := &History{Ref: ref, Numbering: Complete}
	order := checkpointOrderOf(cps, keep)
	h.Steps = make([]Step, 0, len(order))
	listed := make(map[string]bool, len(keep))
	placed := make(map[string]bool, len(keep)) // listed, and its messages read
	for _, i := range keep {
		c := cps[i]
		listed[c.ID] = true
		placed[c.ID] = !c.Unplaced
	}
	if len(order) > 0 {
		oldest := cps[order[0]]
		if oldest.Parent != "" && !listed[oldest.Parent] {
			h.Numbering = Counted
			for _, i := range order {
				if !cps[i].Unplaced {
					// The oldest checkpoint whose messages are known says
					// whether messages were removed before it.
					if cps[i].Synthetic {
						h.Numbering = Estimated
					}
					break
				}
			}
		}
	}

	// lost says the lineage holds a checkpoint whose list is another
	// branch's (see foreignVersion): only then do turn ends and questions
	// need the lost-fork rules below (foreignAfter, foreignQuestion).
	lost := false
	for _, i := range keep {
		// Messages read in part, or not at all because the list stored
		// under their version is another branch's: questions may be
		// missing.
		c := cps[i]
		foreign := c.Unplaced && foreignVersion(c.Version)
		lost = lost || foreign
		if c.Partial && !c.Unplaced || foreign {
			h.Numbering = Estimated
		}
	}

	// The questions in the order they were asked. A question is asked
	// where a checkpoint first holds it, after every question asked
	// before; but a list that holds, ahead of a question already seen, one
	// not seen before proves it was asked earlier (its own checkpoints
	// were deleted, or read only in part): it goes before that one.
	seen := make([]bool, len(questions))
	firstAt := make([]int, len(questions))   // index in cps of the checkpoint first holding each question
	inserted := make([]bool, len(questions)) // placed ahead of a question seen before it
	var seq []int32
	for _, i := range order {
		c := cps[i]
		if c.Unplaced {
			continue
		}
		prior := make([]bool, len(c.Asks)) // seen before c
		last := -1                         // index in c.Asks of the last of those
		for k, q := range c.Asks {
			if q >= 0 && int(q) < len(seen) && seen[q] {
				prior[k], last = true, k
			}
		}
		for k, q := range c.Asks {
			if q < 0 || int(q) >= len(seen) || seen[q] {
				continue
			}
			seen[q], firstAt[q] = true, i
			if k > last {
				seq = append(seq, q)
				continue
			}
			// Ahead of the next question of c.Asks seen before c.
			next := k + 1 + slices.Index(prior[k+1:], true)
			seq = slices.Insert(seq, slices.Index(seq, c.Asks[next]), q)
			inserted[q] = true
		}
	}
	number := make(map[int32]int, len(seq)) // turn number of each question
	for n, q := range seq {
		number[q] = n + 1
	}
	// Each checkpoint belongs to the turn of the last question asked up to
	// it; a turn ends at its last checkpoint.
	ends := make([]int, len(seq)) // index in cps of each turn's last checkpoint; -1 for none
	for n := range ends {
		ends[n] = -1
	}
	askedUpTo := 0
	for _, i := range order {
		c := cps[i]
		if c.Unplaced {
			continue
		}
		for _, q := range c.Asks {
			askedUpTo = max(askedUpTo, number[q])
		}
		h.Steps = append(h.Steps, Step{Checkpoint: &cps[i], Turn: askedUpTo})
		if askedUpTo > 0 && (!c.Between || ends[askedUpTo-1] < 0 || cps[ends[askedUpTo-1]].ID == c.Parent) {
			ends[askedUpTo-1] = i
		}
	}
	var at map[string]int // index in cps of each listed checkpoint, for foreignQuestion
	if lost {
		foreignAfter(cps, order, ends)
		at = make(map[string]int, len(keep))
		for _, i := range keep {
			at[cps[i].ID] = i
		}
	}
	if h.Numbering == Estimated && holdsEvery(cps, keep, seq) {
		// A list read whole, with no sign of removed messages, holds every
		// question known: it proves the count as far as any list can.
		h.Numbering = Counted
	}
	if len(seq) == 0 && deriveRuns(h) {
		return h
	}
	h.Total = len(seq)
	h.Turns = make([]Turn, h.Total)
	for n := range h.Turns {
		t := Turn{N: n + 1, Question: questions[seq[n]].Text}
		if ends[n] >= 0 {
			t.Retained, t.End = true, cps[ends[n]]
		}
		if lost && foreignQuestion(cps, at, listed, firstAt[seq[n]], seq[n]) {
			// Its text, and any end found for it, came from another
			// branch's list: the turn is known to exist, nothing more.
			t.Question, t.Retained, t.End = "", false, Checkpoint{}
		}
		h.Turns[n] = t
	}
	// Questions first held together by a checkpoint the run asking them
	// made (its parent is there and was read, so it held none of them, or
	// it is the thread's first) came in one input. With the parent deleted
	// or unread, earlier questions may have been asked before it: those
	// stay no longer retained.
	// Questions placed ahead of earlier ones were not asked with the
	// questions first held next to them.
	for n := 0; n < h.Total; {
		m := n
		for m+1 < h.Total && firstAt[seq[m+1]] == firstAt[seq[n]] && !inserted[seq[n]] && !inserted[seq[m+1]] {
			m++
		}
		first := cps[firstAt[seq[n]]]
		if m > n && (first.Parent == "" || placed[first.Parent]) {
			for k := n; k <= m; k++ {
				for j := n; j <= m; j++ {
					if j != k {
						h.Turns[k].AnsweredWith = append(h.Turns[k].AnsweredWith, j+1)
					}
				}
				if !h.Turns[k].Retained && h.Turns[m].Retained {
					h.Turns[k].Retained, h.Turns[k].End = true, h.Turns[m].End
				}
			}
		}
		n = m + 1
	}
	return h
}

// foreignAfter moves each turn's end (ends, indexes into cps) past the
// checkpoints that follow it on the lineage, in order, whose messages are
// unread because the list stored under their version is another branch's
// (see foreignVersion): up to the next run's input, they are the steps of
// the run that reached the turn's end, so the turn ended on the last of them, not on the last one
// read. Reading its state there then gives that checkpoint's own value or
// refuses (ErrForeignValue), never the state of a step before its end.
func foreignAfter(cps []Checkpoint, order, ends []int) {
	pos := make(map[int]int, len(order)) // position in order of each index
	for k, i := range order {
		pos[i] = k
	}
	for n, e := range ends {
		if e < 0 || cps[e].Input {
			// An input checkpoint begins a run: the steps after it are
			// that run's, asking a question of their own.
			continue
		}
		for k := pos[e] + 1; k < len(order); k++ {
			c := cps[order[k]]
			if !c.Unplaced || !foreignVersion(c.Version) || c.Input || c.Parent != cps[ends[n]].ID {
				break
			}
			ends[n] = order[k]
		}
	}
}

// foreignQuestion reports whether question q, first held on the lineage
// (keep) by cps[first], came there in another branch's list: first's
// parent is unread because its version's list is another branch's, and a
// checkpoint off the lineage (not listed; at indexes the lineage by id)
// holds q. A saver that drops a fork's values
// (LangGraph.js's PostgresSaver) hands the next run the abandoned
// branch's list, which it carries on as its own.
func foreignQuestion(cps []Checkpoint, at map[string]int, listed map[string]bool, first int, q int32) bool {
	p, ok := at[cps[first].Parent]
	if !ok || !cps[p].Unplaced || !foreignVersion(cps[p].Version) {
		return false
	}
	for _, c := range cps {
		if !listed[c.ID] && !c.Unplaced && slices.Contains(c.Asks, q) {
			return true
		}
	}
	return false
}

// holdsEvery reports whether one checkpoint of cps that keep indexes holds
// every question of seq in a list read whole (not in part, with no
// synthetic message).
func holdsEvery(cps []Checkpoint, keep []int, seq []int32) bool {
	for _, i := range keep {
		c := cps[i]
		if c.Unplaced || c.Partial || c.Synthetic || len(c.Asks) < len(seq) {
			continue
		}
		held := make(map[int32]bool, len(c.Asks))
		for _, q := range c.Asks {
			held[q] = true
		}
		every := true
		for _, q := range seq {
			every = every && held[q]
		}
		if every {
			return true
		}
	}
	return false
}

// checkpointOrder returns the indexes of cps in checkpoint order: sorted
// by id, and a checkpoint whose parent sorts after it (clocks disagreeing)
// moved after its parent, so that a parent always comes first.
func checkpointOrder(cps []Checkpoint) []int {
	all := make([]int, len(cps))
	for i := range all {
		all[i] = i
	}
	return checkpointOrderOf(cps, all)
}

// checkpointOrderOf is checkpointOrder of the checkpoints of cps that keep
// indexes, a parent outside them not counting.
func checkpointOrderOf(cps []Checkpoint, keep []int) []int {
	order := slices.Clone(keep)
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(cps[a].ID, cps[b].ID) })
	at := make(map[string]int, len(keep))
	for _, i := range keep {
		at[cps[i].ID] = i
	}
	inversions := false
	for _, i := range keep {
		c := cps[i]
		if p, ok := at[c.Parent]; ok && cps[p].ID > c.ID {
			inversions = true
			break
		}
	}
	if !inversions {
		return order
	}
	// From each checkpoint in id order, its unplaced ancestors first; a
	// cycle (which no saver writes, and Store refuses with a CycleError
	// before deriving) is broken where met.
	out := make([]int, 0, len(keep))
	placed := make([]bool, len(cps))
	visit := func(i int) {
		var chain []int
		onChain := map[int]bool{}
		for j := i; !placed[j] && !onChain[j]; {
			chain = append(chain, j)
			onChain[j] = true
			p, ok := at[cps[j].Parent]
			if !ok {
				break
			}
			j = p
		}
		for k := len(chain) - 1; k >= 0; k-- {
			placed[chain[k]] = true
			out = append(out, chain[k])
		}
	}
	for _, i := range order {
		visit(i)
	}
	return out
}

package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// What answers claim, kept until the run is over and checked then against
// direct reads of the checkpoints they name. Each claim is kept once, with
// the number of answers that made it; two answers that claim different
// things of one checkpoint are a wrong answer at once.

// turnKey names a turn of a thread as served from one checkpoint.
type turnKey struct {
	thread string
	turn   int32
	cp     string
}

// turnClaim says turn `turn` was served from checkpoint cp with this
// question (and, when hasState, this state); ended says the answer also
// showed a later turn, so cp must be the turn's last checkpoint.
type turnClaim struct {
	question string
	state    string
	hasState bool
	ended    bool
	answers  int
}

// diffKey names a diff between two checkpoints' states.
type diffKey struct{ thread, from, to string }

type diffClaim struct {
	changes string
	answers int
}

// prunedKey names a turn an answer said is no longer retained.
type prunedKey struct {
	thread string
	turn   int32
}

type prunedClaim struct {
	question string // as the answer gave it; may be empty
	answers  int
}

// recorder collects claims and wrong answers from every caller.
type recorder struct {
	mu     sync.Mutex
	turns  map[turnKey]*turnClaim
	diffs  map[diffKey]*diffClaim
	pruned map[prunedKey]*prunedClaim
	heads  map[[2]string]int // thread, last checkpoint id listed by Threads → answers

	wrong    int
	examples []string
}

func newRecorder() *recorder {
	return &recorder{turns: map[turnKey]*turnClaim{}, diffs: map[diffKey]*diffClaim{},
		pruned: map[prunedKey]*prunedClaim{}, heads: map[[2]string]int{}}
}

// wrongf records a wrong answer.
func (r *recorder) wrongf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wrongLocked(fmt.Sprintf(format, args...))
}

func (r *recorder) wrongLocked(msg string) {
	r.wrong++
	if len(r.examples) < 20 {
		r.examples = append(r.examples, msg)
	}
}

// claimed returns the claim m holds under k, adding first (as the first
// answer made it) when there is none.
func claimed[K comparable, C any](m map[K]*C, k K, first C) *C {
	c := m[k]
	if c == nil {
		c = &first
		m[k] = c
	}
	return c
}

// turn records that an answer served turn n of thread from checkpoint cp.
func (r *recorder) turn(thread string, n int32, cp, question string, state *string, ended bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := claimed(r.turns, turnKey{thread, n, cp}, turnClaim{question: question})
	c.answers++
	c.ended = c.ended || ended
	if c.question != question {
		r.wrongLocked(fmt.Sprintf("%s turn %d at %s: question %q, another answer %q", thread, n, cp, question, c.question))
	}
	if state != nil {
		if c.hasState && c.state != *state {
			r.wrongLocked(fmt.Sprintf("%s turn %d at %s: two answers, two states: %s / %s", thread, n, cp, *state, c.state))
		}
		c.state, c.hasState = *state, true
	}
}

// prune records that an answer said turn n of thread is no longer
// retained.
func (r *recorder) prune(thread string, n int32, question string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := claimed(r.pruned, prunedKey{thread, n}, prunedClaim{})
	c.answers++
	if question != "" {
		if c.question != "" && c.question != question {
			r.wrongLocked(fmt.Sprintf("%s turn %d (not retained): question %q, another answer %q", thread, n, question, c.question))
		}
		c.question = question
	}
}

func (r *recorder) diff(thread, from, to, changes string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := claimed(r.diffs, diffKey{thread, from, to}, diffClaim{changes: changes})
	c.answers++
	if c.changes != changes {
		r.wrongLocked(fmt.Sprintf("%s diff %s → %s: two answers differ: %s / %s", thread, from, to, changes, c.changes))
	}
}

func (r *recorder) head(thread, cp string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heads[[2]string{thread, cp}]++
}

// verdict is what checking the claims against direct reads found.
type verdict struct {
	Claims, Answers int // claims checked, answers that made them
	Wrong           int // claims found wrong
	WrongAnswers    int // answers that made a wrong claim
	Examples        []string
}

// verify checks every claim against direct: for each thread, the facts of
// every checkpoint it ever had (those left after the run, and those
// retention read just before deleting them), and the set retained.
func (r *recorder) verify(direct map[string]map[string]facts, retained map[string]map[string]bool) verdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	var v verdict
	bad := func(answers int, format string, args ...any) {
		v.Wrong++
		v.WrongAnswers += answers
		if len(v.Examples) < 20 {
			v.Examples = append(v.Examples, fmt.Sprintf(format, args...))
		}
	}
	// ends[thread][n] is the last checkpoint of turn n; kept[thread][n]
	// whether turn n has a checkpoint left.
	ends := map[string]map[int]string{}
	kept := map[string]map[int]bool{}
	questions := map[string]map[int]string{}
	for thread, cps := range direct {
		ends[thread], kept[thread], questions[thread] = map[int]string{}, map[int]bool{}, map[int]string{}
		for id, f := range cps {
			if id > ends[thread][f.humans] {
				ends[thread][f.humans] = id
			}
			if retained[thread][id] {
				kept[thread][f.humans] = true
			}
			questions[thread][f.humans] = f.question
		}
	}
	for k, c := range r.turns {
		v.Claims++
		v.Answers += c.answers
		f, ok := direct[k.thread][k.cp]
		switch {
		case !ok:
			bad(c.answers, "%s turn %d: served from %s, a checkpoint the thread never had", k.thread, k.turn, k.cp)
		case f.humans != int(k.turn):
			bad(c.answers, "%s turn %d: served from %s, which belongs to turn %d", k.thread, k.turn, k.cp, f.humans)
		case f.question != c.question:
			bad(c.answers, "%s turn %d at %s: question %q, direct read %q", k.thread, k.turn, k.cp, c.question, f.question)
		case c.hasState && c.state != f.digest():
			bad(c.answers, "%s turn %d at %s: state %s, direct read %s", k.thread, k.turn, k.cp, c.state, f.digest())
		case c.ended && ends[k.thread][int(k.turn)] != k.cp:
			bad(c.answers, "%s turn %d: served as ending at %s, but it ends at %s", k.thread, k.turn, k.cp, ends[k.thread][int(k.turn)])
		}
	}
	for k, c := range r.pruned {
		v.Claims++
		v.Answers += c.answers
		switch {
		case kept[k.thread][int(k.turn)]:
			bad(c.answers, "%s turn %d: said no longer retained, but its checkpoints are still there", k.thread, k.turn)
		case questions[k.thread][int(k.turn)] == "" && k.turn > 0:
			bad(c.answers, "%s turn %d: said no longer retained, but the thread never had it", k.thread, k.turn)
		case c.question != "" && c.question != questions[k.thread][int(k.turn)]:
			bad(c.answers, "%s turn %d (not retained): question %q, direct read %q", k.thread, k.turn, c.question, questions[k.thread][int(k.turn)])
		}
	}
	for k, c := range r.diffs {
		v.Claims++
		v.Answers += c.answers
		from, ok1 := direct[k.thread][k.from]
		to, ok2 := direct[k.thread][k.to]
		if !ok1 || !ok2 {
			bad(c.answers, "%s diff %s → %s: a checkpoint the thread never had", k.thread, k.from, k.to)
			continue
		}
		if want := changesOf(from.entries, to.entries); want != c.changes {
			bad(c.answers, "%s diff %s → %s: %s, direct read %s", k.thread, k.from, k.to, c.changes, want)
		}
	}
	for k, n := range r.heads {
		v.Claims++
		v.Answers += n
		if _, ok := direct[k[0]][k[1]]; !ok {
			bad(n, "%s: listed with last checkpoint %s, a checkpoint the thread never had", k[0], k[1])
		}
	}
	return v
}

// changesOf is the canonical list of changes from one state to another:
// per key in key order, how it changed and its entries before and after.
func changesOf(from, to map[string]string) string {
	keys := slices.Sorted(maps.Keys(from))
	for k := range to {
		if _, ok := from[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		f, inFrom := from[k]
		t, inTo := to[k]
		switch {
		case inFrom && inTo && f == t:
			continue
		case inFrom && inTo:
			fmt.Fprintf(&b, "%q CHANGED %s → %s;", k, f, t)
		case inTo:
			fmt.Fprintf(&b, "%q ADDED → %s;", k, t)
		default:
			fmt.Fprintf(&b, "%q REMOVED %s;", k, f)
		}
	}
	return b.String()
}

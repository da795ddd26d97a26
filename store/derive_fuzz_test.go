package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/historyd/historyd/store/backend"
)

// fuzzThread plays fuzz input as a conversation, two bytes a step: the op
// and, for pruning, how much. It returns the checkpoints (each the child of
// the one before), the question table, whether any message was removed,
// and whether two questions ever came in one step.
//
//	0: a question is asked        1: another message is added
//	2: the oldest question left is removed   3: two questions at once
//	4: the oldest checkpoints (arg%8 of them) are deleted, as pruning does
func fuzzThread(data []byte) (cps []Checkpoint, qs []Question, removed, together bool) {
	tb := newTable()
	var msgs []string // "" for a non-human message
	asked := 0
	prune := 0
	var steps []step
	for i := 0; i+2 <= len(data) && len(steps) < 64; i += 2 {
		switch data[i] % 5 {
		case 0:
			asked++
			msgs = append(msgs, fmt.Sprintf("q%d", asked))
		case 1:
			msgs = append(msgs, "")
		case 2:
			for j, m := range msgs {
				if m != "" {
					msgs = slices.Delete(msgs, j, j+1)
					removed = true
					break
				}
			}
		case 3:
			msgs = append(msgs, fmt.Sprintf("q%d", asked+1), fmt.Sprintf("q%d", asked+2))
			asked += 2
			together = true
		case 4:
			prune += int(data[i+1] % 8)
			continue
		}
		var humans []string
		for _, m := range msgs {
			if m != "" {
				humans = append(humans, m)
			}
		}
		steps = append(steps, step{msgs: len(msgs), humans: humans})
	}
	cps = tb.chain("1f0c", steps)
	return cps[min(prune, len(cps)):], tb.qs, removed, together
}

// referenceDerive is the rule historyd had before questions were numbered
// by identity, and the reference implementation still has: a checkpoint's
// turn is its number of human messages, a turn ends at its checkpoint with
// the most messages (the greatest id among equals), the total is the most
// human messages any checkpoint holds.
func referenceDerive(cps []Checkpoint) (total int, ends map[int]string) {
	ends = map[int]string{}
	best := map[int]Checkpoint{}
	for _, c := range cps {
		n := len(c.Asks)
		total = max(total, n)
		if n == 0 {
			continue
		}
		held, ok := best[n]
		if !ok || c.Messages > held.Messages || c.Messages == held.Messages && c.ID > held.ID {
			best[n] = c
			ends[n] = c.ID
		}
	}
	return total, ends
}

// FuzzDerive checks the turn rules on arbitrary conversations: Derive never
// panics; its result does not depend on the order of its input; the total
// is the number of questions asked in the checkpoints it has; every turn is
// present, in order, and a retained one ends at a checkpoint of the
// thread; and on a thread whose messages were never removed it numbers
// turns exactly as counting human messages does (the reference rule),
// except that questions asked together end on their run's state instead of
// reading as pruned.
func FuzzDerive(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 1, 0, 1, 0, 0, 0, 1, 0})             // two questions
	f.Add([]byte{0, 0, 1, 0, 0, 0, 1, 0, 4, 3, 0, 0, 1, 0}) // pruned
	f.Add([]byte{0, 0, 1, 0, 3, 0, 1, 0})                   // two at once
	f.Add([]byte{0, 0, 1, 0, 0, 0, 2, 0, 1, 0, 0, 0})       // a removal
	f.Fuzz(func(t *testing.T, data []byte) {
		cps, qs, removed, together := fuzzThread(data)
		ref := backend.Ref{ThreadID: "fuzz"}
		input := slices.Clone(cps)
		h := Derive(ref, cps, qs)
		if !reflect.DeepEqual(cps, input) {
			t.Fatal("Derive modified its input")
		}
		for seed := range uint64(3) {
			s := slices.Clone(cps)
			rand.New(rand.NewPCG(seed, 1)).Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
			if got := Derive(ref, s, qs); !reflect.DeepEqual(got, h) {
				t.Fatalf("Derive depends on the order of its input:\n%+v\n%+v", got, h)
			}
		}
		seen := map[int32]bool{}
		ids := map[string]bool{}
		for _, c := range cps {
			ids[c.ID] = true
			for _, q := range c.Asks {
				seen[q] = true
			}
		}
		if h.Total != len(seen) || len(h.Turns) != h.Total {
			t.Fatalf("total %d with %d turns; %d questions were asked", h.Total, len(h.Turns), len(seen))
		}
		for i, turn := range h.Turns {
			if turn.N != i+1 || turn.Retained != (turn.End.ID != "") || turn.Retained && !ids[turn.End.ID] {
				t.Fatalf("turn %d: %+v", i+1, turn)
			}
		}
		if removed {
			return
		}
		total, ends := referenceDerive(cps)
		if h.Total != total {
			t.Fatalf("total %d, the reference rule says %d", h.Total, total)
		}
		for _, turn := range h.Turns {
			if together && len(turn.AnsweredWith) > 0 {
				continue
			}
			if end := ends[turn.N]; turn.End.ID != end {
				t.Fatalf("turn %d ends at %q, the reference rule says %q\n%+v", turn.N, turn.End.ID, end, cps)
			}
		}
	})
}

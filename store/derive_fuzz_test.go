package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// fuzzCheckpoints turns fuzz input into a thread's checkpoints, three bytes
// each: the id, the human-message count (0..31) and how many other messages
// there are (0..15). Ids are unique within a thread, as the checkpoint
// table's key makes them, so a repeated id byte is skipped. Equal counts get
// equal messages versions, as equal message lists do.
func fuzzCheckpoints(data []byte) []Checkpoint {
	seen := map[byte]bool{}
	var out []Checkpoint
	for i := 0; i+3 <= len(data); i += 3 {
		id, humans, others := data[i], int(data[i+1]%32), int(data[i+2]%16)
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, Checkpoint{
			ID:       fmt.Sprintf("1f0c-%02x", id),
			TS:       time.Unix(int64(id), 0).UTC(),
			Version:  fmt.Sprintf("%d/%d", humans, humans+others),
			Messages: humans + others,
			Humans:   humans,
		})
	}
	return out
}

// FuzzDerive checks the turn rules on arbitrary checkpoint sets: Derive never
// panics; its result does not depend on the order of its input; the total is
// the largest human-message count; turns 1..total are all present, in
// order; a turn is retained exactly when some checkpoint has that many human
// messages, and then ends at the one with the most messages (the greatest id
// among equals); the richest checkpoint has the greatest id among those with
// the most human messages.
func FuzzDerive(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 1, 1, 0, 2, 1, 1, 3, 1, 2, 4, 2, 2})
	f.Add([]byte{9, 3, 5, 1, 3, 5, 5, 3, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		cps := fuzzCheckpoints(data)
		input := slices.Clone(cps)
		ref := Ref{ThreadID: "fuzz", Namespace: "ns"}
		h := Derive(ref, cps)
		if !reflect.DeepEqual(cps, input) {
			t.Fatal("Derive modified its input")
		}
		checkDerived(t, ref, cps, h)

		reversed := slices.Clone(cps)
		slices.Reverse(reversed)
		shuffled := slices.Clone(cps)
		r := rand.New(rand.NewPCG(uint64(len(data)), 1))
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for name, order := range map[string][]Checkpoint{"reversed": reversed, "shuffled": shuffled} {
			if got := Derive(ref, order); !reflect.DeepEqual(got, h) {
				t.Fatalf("%s input: %+v\nin given order: %+v", name, got, h)
			}
		}

		// Questions: as many as the richest checkpoint's human messages,
		// and short lists (a scan that saw fewer) must not panic.
		qs := make([]string, h.Total)
		for i := range qs {
			qs[i] = fmt.Sprintf("q%d", i+1)
		}
		h.SetQuestions(qs)
		for _, turn := range h.Turns {
			if turn.Question != fmt.Sprintf("q%d", turn.N) {
				t.Fatalf("turn %d question = %q", turn.N, turn.Question)
			}
		}
		h.SetQuestions(qs[:len(qs)/2])
		h.SetQuestions(nil)
	})
}

func checkDerived(t *testing.T, ref Ref, cps []Checkpoint, h *History) {
	t.Helper()
	if h == nil {
		t.Fatal("Derive returned nil")
	}
	if h.Ref != ref {
		t.Fatalf("ref = %+v, want %+v", h.Ref, ref)
	}
	total := 0
	for _, c := range cps {
		total = max(total, c.Humans)
	}
	if h.Total != total {
		t.Fatalf("total = %d, want the largest human count %d", h.Total, total)
	}
	if len(h.Turns) != total {
		t.Fatalf("%d turns for a total of %d", len(h.Turns), total)
	}
	if total == 0 {
		if h.Richest != (Checkpoint{}) {
			t.Fatalf("richest = %+v with no turns", h.Richest)
		}
	} else {
		var richest Checkpoint
		for _, c := range cps {
			if c.Humans == total && c.ID > richest.ID {
				richest = c
			}
		}
		if h.Richest != richest {
			t.Fatalf("richest = %+v, want %+v", h.Richest, richest)
		}
	}
	var retained []int
	for i, turn := range h.Turns {
		if turn.N != i+1 {
			t.Fatalf("Turns[%d].N = %d", i, turn.N)
		}
		var end Checkpoint
		found := false
		for _, c := range cps {
			if c.Humans != turn.N {
				continue
			}
			if !found || c.Messages > end.Messages || c.Messages == end.Messages && c.ID > end.ID {
				end = c
			}
			found = true
		}
		if turn.Retained != found {
			t.Fatalf("turn %d retained = %v, but a checkpoint with %d human messages exists: %v", turn.N, turn.Retained, turn.N, found)
		}
		if !found {
			if turn.End != (Checkpoint{}) {
				t.Fatalf("turn %d is not retained but ends at %+v", turn.N, turn.End)
			}
			if _, l := h.Turn(turn.N); l != NoLongerRetained {
				t.Fatalf("Turn(%d) = %v, want NoLongerRetained", turn.N, l)
			}
			continue
		}
		retained = append(retained, turn.N)
		if turn.End.Humans != turn.N {
			t.Fatalf("turn %d ends at %+v, which has %d human messages", turn.N, turn.End, turn.End.Humans)
		}
		if turn.End != end {
			t.Fatalf("turn %d ends at %+v, want %+v", turn.N, turn.End, end)
		}
		if got, l := h.Turn(turn.N); l != Found || got.End != end {
			t.Fatalf("Turn(%d) = %+v, %v", turn.N, got, l)
		}
	}
	if got := h.Retained(); !slices.Equal(got, retained) {
		t.Fatalf("Retained() = %v, want %v", got, retained)
	}
	for _, n := range []int{-1, 0, total + 1} {
		if _, l := h.Turn(n); l != NoSuchTurn {
			t.Fatalf("Turn(%d) = %v with total %d, want NoSuchTurn", n, l, total)
		}
	}
}

package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/historyd/historyd/store/backend"
)

// table numbers questions for tests: each question's id is its text.
type table struct {
	qs   []Question
	byID map[string]int32
}

func newTable() *table { return &table{byID: map[string]int32{}} }

// asks indexes the questions, adding new ones.
func (tb *table) asks(humans ...string) []int32 {
	var out []int32
	for _, h := range humans {
		i, ok := tb.byID[h]
		if !ok {
			i = int32(len(tb.qs))
			tb.byID[h] = i
			tb.qs = append(tb.qs, Question{ID: h, Text: h})
		}
		out = append(out, i)
	}
	return out
}

// chain builds checkpoints each the child of the one before, from what
// each one's messages hold: their number and the questions among them.
type step struct {
	msgs   int
	humans []string
	// synthetic marks a summary among the messages.
	synthetic bool
	// between marks a checkpoint made between runs; partial, messages
	// rebuilt past a deleted checkpoint.
	between, partial bool
}

func (tb *table) chain(prefix string, steps []step) []Checkpoint {
	var out []Checkpoint
	for i, s := range steps {
		c := Checkpoint{ID: fmt.Sprintf("%s-%02d", prefix, i), Messages: s.msgs, Asks: tb.asks(s.humans...), Synthetic: s.synthetic,
			Version: fmt.Sprint(s.humans, s.msgs), Between: s.between, Partial: s.partial}
		if i > 0 {
			c.Parent = out[i-1].ID
		}
		out = append(out, c)
	}
	return out
}

// thread is a four-turn conversation: each turn's checkpoints add the
// question, then an AI tool call and an answer, after an empty first
// checkpoint.
func (tb *table) thread() []Checkpoint {
	qs := []string{"q1", "q2", "q3", "q4"}
	steps := []step{{}}
	msgs := 0
	for t := 1; t <= 4; t++ {
		for range 3 {
			msgs++
			steps = append(steps, step{msgs: msgs, humans: qs[:t]})
		}
	}
	return tb.chain("1ef", steps)
}

type turnWant struct {
	n        int
	retained bool
	end      string
	question string
	with     []int
}

func summarize(h *History) []turnWant {
	var out []turnWant
	for _, t := range h.Turns {
		out = append(out, turnWant{t.N, t.Retained, t.End.ID, t.Question, t.AnsweredWith})
	}
	return out
}

func without(cps []Checkpoint, ids ...string) []Checkpoint {
	return slices.DeleteFunc(slices.Clone(cps), func(c Checkpoint) bool { return slices.Contains(ids, c.ID) })
}

func TestDerive(t *testing.T) {
	tb := newTable()
	full := tb.thread()
	ids := func(cps []Checkpoint) (out []string) {
		for _, c := range cps {
			out = append(out, c.ID)
		}
		return out
	}
	tests := []struct {
		name      string
		cps       []Checkpoint
		total     int
		numbering Numbering
		want      []turnWant
	}{
		{
			name:  "full thread",
			cps:   full,
			total: 4, numbering: Complete,
			want: []turnWant{
				{1, true, "1ef-03", "q1", nil}, {2, true, "1ef-06", "q2", nil},
				{3, true, "1ef-09", "q3", nil}, {4, true, "1ef-12", "q4", nil},
			},
		},
		{name: "empty thread", total: 0, numbering: Complete},
		{
			name:  "only checkpoints without a question",
			cps:   tb.chain("nq", []step{{}, {msgs: 1}}),
			total: 0, numbering: Complete,
		},
		{
			name:  "oldest turns deleted keep the total",
			cps:   without(full, ids(full[:7])...),
			total: 4, numbering: Counted,
			want: []turnWant{
				{1, false, "", "q1", nil}, {2, false, "", "q2", nil},
				{3, true, "1ef-09", "q3", nil}, {4, true, "1ef-12", "q4", nil},
			},
		},
		{
			name:  "only the newest checkpoint",
			cps:   full[len(full)-1:],
			total: 4, numbering: Counted,
			want: []turnWant{
				{1, false, "", "q1", nil}, {2, false, "", "q2", nil}, {3, false, "", "q3", nil}, {4, true, "1ef-12", "q4", nil},
			},
		},
		{
			name:  "a turn deleted in the middle",
			cps:   without(full, ids(full[4:7])...),
			total: 4, numbering: Complete,
			want: []turnWant{
				{1, true, "1ef-03", "q1", nil}, {2, false, "", "q2", nil},
				{3, true, "1ef-09", "q3", nil}, {4, true, "1ef-12", "q4", nil},
			},
		},
		{
			name: "two questions in one input end on the run's state",
			cps: tb.chain("two", []step{
				{}, {msgs: 2, humans: []string{"a", "b"}}, {msgs: 3, humans: []string{"a", "b"}}, {msgs: 4, humans: []string{"a", "b", "c"}},
			}),
			total: 3, numbering: Complete,
			want: []turnWant{{1, true, "two-02", "a", []int{2}}, {2, true, "two-02", "b", []int{1}}, {3, true, "two-03", "c", nil}},
		},
		{
			name: "questions first seen where the parent was deleted are not taken for one input",
			cps: without(tb.chain("gone", []step{
				{}, {msgs: 1, humans: []string{"x"}}, {msgs: 2, humans: []string{"x", "y"}}, {msgs: 3, humans: []string{"x", "y"}},
			}), "gone-00", "gone-01"),
			total: 2, numbering: Counted,
			want: []turnWant{{1, false, "", "x", nil}, {2, true, "gone-03", "y", nil}},
		},
		{
			name: "a summary leaves the numbering and the turns as they were",
			cps: tb.chain("sum", []step{
				{}, {msgs: 2, humans: []string{"s1"}}, {msgs: 4, humans: []string{"s1", "s2"}},
				// The summary replaced everything but the newest question.
				{msgs: 2, humans: []string{"s2"}, synthetic: true}, {msgs: 4, humans: []string{"s2", "s3"}, synthetic: true},
				{msgs: 1, synthetic: true},
			}),
			total: 3, numbering: Complete,
			want: []turnWant{{1, true, "sum-01", "s1", nil}, {2, true, "sum-03", "s2", nil}, {3, true, "sum-05", "s3", nil}},
		},
		{
			name: "pruned past a summary, the numbering is estimated",
			cps: without(tb.chain("est", []step{
				{}, {msgs: 2, humans: []string{"e1"}}, {msgs: 2, humans: []string{"e2"}, synthetic: true},
				{msgs: 3, humans: []string{"e2", "e3"}, synthetic: true},
			}), "est-00", "est-01"),
			total: 2, numbering: Estimated,
			want: []turnWant{{1, true, "est-02", "e2", nil}, {2, true, "est-03", "e3", nil}},
		},
		{
			name: "unplaced checkpoints belong to no turn",
			cps: func() []Checkpoint {
				c := tb.chain("un", []step{{}, {msgs: 1, humans: []string{"u1"}}, {msgs: 2, humans: []string{"u1"}}, {msgs: 3, humans: []string{"u1", "u2"}}})
				c[2].Unplaced = true
				return c
			}(),
			total: 2, numbering: Complete,
			want: []turnWant{{1, true, "un-01", "u1", nil}, {2, true, "un-03", "u2", nil}},
		},
		{
			name: "an input checkpoint carries on the turn it follows",
			cps: tb.chain("in", []step{
				{between: true}, {msgs: 1, humans: []string{"i1"}}, {msgs: 2, humans: []string{"i1"}},
				{msgs: 2, humans: []string{"i1"}, between: true}, {msgs: 3, humans: []string{"i1", "i2"}},
			}),
			total: 2, numbering: Complete,
			want: []turnWant{{1, true, "in-03", "i1", nil}, {2, true, "in-04", "i2", nil}},
		},
		{
			name: "a fork back to an earlier turn numbers the lineage only: the abandoned turn is no turn",
			cps: func() []Checkpoint {
				c := tb.chain("fk", []step{
					{}, {msgs: 1, humans: []string{"f1"}}, {msgs: 2, humans: []string{"f1"}},
					{msgs: 3, humans: []string{"f1", "f2"}}, {msgs: 4, humans: []string{"f1", "f2"}},
					// update_state at turn 1's end, then the run it starts
					{msgs: 3, humans: []string{"f1"}, between: true}, {msgs: 3, humans: []string{"f1"}, between: true},
					{msgs: 4, humans: []string{"f1", "f3"}},
				})
				c[5].Parent = c[2].ID
				return c
			}(),
			// The update_state follows turn 1's end on the lineage: turn 1
			// ends on the state it left, as on a thread without a fork.
			total: 2, numbering: Complete,
			want: []turnWant{{1, true, "fk-06", "f1", nil}, {2, true, "fk-07", "f3", nil}},
		},
		{
			name: "past a deleted checkpoint, a list read whole orders the questions read in part",
			cps: without(tb.chain("pt", []step{
				{}, {msgs: 1, humans: []string{"p1"}}, {msgs: 2, humans: []string{"p1", "p2"}},
				// the break: read in part, only what was written since
				{partial: true}, {msgs: 1, humans: []string{"p3"}, partial: true}, {msgs: 2, humans: []string{"p3"}, partial: true},
				// a snapshot: the whole list
				{msgs: 7, humans: []string{"p1", "p2", "p3", "p4"}},
			}), "pt-00", "pt-01", "pt-02"),
			total: 4, numbering: Counted,
			want: []turnWant{{1, false, "", "p1", nil}, {2, false, "", "p2", nil}, {3, true, "pt-05", "p3", nil}, {4, true, "pt-06", "p4", nil}},
		},
		{
			name: "past a deleted checkpoint with no list read whole, the numbering is estimated",
			cps: without(tb.chain("pe", []step{
				{}, {msgs: 1, humans: []string{"e1"}},
				{partial: true}, {msgs: 1, humans: []string{"e2"}, partial: true}, {msgs: 2, humans: []string{"e2", "e3"}, partial: true},
			}), "pe-00", "pe-01"),
			total: 2, numbering: Estimated,
			want: []turnWant{{1, true, "pe-03", "e2", nil}, {2, true, "pe-04", "e3", nil}},
		},
		{
			name: "a later checkpoint ends its turn, fewer messages or not",
			cps: tb.chain("rm", []step{
				{}, {msgs: 3, humans: []string{"r1"}}, {msgs: 1, humans: nil},
			}),
			total: 1, numbering: Complete,
			want: []turnWant{{1, true, "rm-02", "r1", nil}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orders := map[string][]Checkpoint{"as given": tt.cps}
			for seed := range uint64(6) {
				s := slices.Clone(tt.cps)
				r := rand.New(rand.NewPCG(seed, 7))
				r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
				orders[fmt.Sprintf("shuffled %d", seed)] = s
			}
			for name, order := range orders {
				h := Derive(backend.Ref{ThreadID: "t"}, order, tb.qs)
				if h.Total != tt.total || h.Numbering != tt.numbering {
					t.Errorf("%s: total %d, numbering %v; want %d, %v", name, h.Total, h.Numbering, tt.total, tt.numbering)
				}
				if got := summarize(h); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s: turns = %+v\nwant %+v", name, got, tt.want)
				}
			}
		})
	}
}

// A parent written with a later id than its child (hosts whose clocks
// disagree) still comes first.
func TestDeriveParentsFirst(t *testing.T) {
	tb := newTable()
	cps := []Checkpoint{
		{ID: "b", Parent: "z", Asks: tb.asks("q1", "q2")},
		{ID: "z", Asks: tb.asks("q1")},
	}
	h := Derive(backend.Ref{ThreadID: "t"}, cps, tb.qs)
	if got := summarize(h); !reflect.DeepEqual(got, []turnWant{{1, true, "z", "q1", nil}, {2, true, "b", "q2", nil}}) {
		t.Errorf("turns = %+v", got)
	}
}

func TestHistoryTurn(t *testing.T) {
	tb := newTable()
	full := tb.thread()
	h := Derive(backend.Ref{ThreadID: "t"}, full[4:], tb.qs)
	tests := []struct {
		n    int
		want Outcome
	}{
		{-1, NoSuchTurn}, {0, NoSuchTurn}, {1, NoLongerRetained}, {2, Found}, {3, Found}, {5, NoSuchTurn},
	}
	for _, tt := range tests {
		turn, got := h.Turn(tt.n)
		if got != tt.want {
			t.Errorf("Turn(%d) = %v, want %v", tt.n, got, tt.want)
		}
		if got == Found && turn.N != tt.n {
			t.Errorf("Turn(%d).N = %d", tt.n, turn.N)
		}
	}
	if got, want := h.Retained(), []int{2, 3, 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("Retained() = %v, want %v", got, want)
	}
}

package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// cp builds a placed checkpoint holding msgs messages, len(humans) of them
// human; the questions go with the checkpoint's messages version.
func cp(id string, msgs int, humans ...string) Checkpoint {
	v := strings.Join(humans, "|")
	questions[v] = humans
	return Checkpoint{ID: id, Messages: msgs, Humans: len(humans), Version: v}
}

// questions maps a test messages version to its human messages.
var questions = map[string][]string{}

// derive runs Derive and fills the questions from the richest checkpoint,
// as Store does.
func derive(cps []Checkpoint) *History {
	h := Derive(Ref{ThreadID: "t"}, cps)
	h.SetQuestions(questions[h.Richest.Version])
	return h
}

// thread is a four-turn conversation: each turn's checkpoints add the
// question, then an AI tool call, a tool result and an answer.
func thread() []Checkpoint {
	qs := []string{"q1", "q2", "q3", "q4"}
	var out []Checkpoint
	msgs := 0
	for t := 1; t <= 4; t++ {
		for step := 0; step < 3; step++ {
			msgs++
			out = append(out, cp(fmt.Sprintf("1ef-%02d-%d", t, step), msgs, qs[:t]...))
		}
	}
	// The checkpoint before the first question holds no human message.
	out = append(out, cp("1ef-00-0", 0))
	return out
}

type turnWant struct {
	n        int
	retained bool
	end      string
	question string
}

func summarize(h *History) []turnWant {
	var out []turnWant
	for _, t := range h.Turns {
		out = append(out, turnWant{t.N, t.Retained, t.End.ID, t.Question})
	}
	return out
}

func TestDerive(t *testing.T) {
	full := thread()
	tests := []struct {
		name  string
		cps   []Checkpoint
		total int
		want  []turnWant
	}{
		{
			name:  "full thread",
			cps:   full,
			total: 4,
			want: []turnWant{
				{1, true, "1ef-01-2", "q1"}, {2, true, "1ef-02-2", "q2"},
				{3, true, "1ef-03-2", "q3"}, {4, true, "1ef-04-2", "q4"},
			},
		},
		{
			name:  "empty thread",
			cps:   nil,
			total: 0,
		},
		{
			name:  "only checkpoints without a human message",
			cps:   []Checkpoint{cp("a", 0), cp("b", 1)},
			total: 0,
		},
		{
			name: "oldest turns deleted keep the total",
			cps: slices.DeleteFunc(slices.Clone(full), func(p Checkpoint) bool {
				return p.Humans <= 2
			}),
			total: 4,
			want: []turnWant{
				{1, false, "", "q1"}, {2, false, "", "q2"},
				{3, true, "1ef-03-2", "q3"}, {4, true, "1ef-04-2", "q4"},
			},
		},
		{
			name:  "only the newest checkpoint",
			cps:   []Checkpoint{cp("z", 9, "q1", "q2", "q3")},
			total: 3,
			want: []turnWant{
				{1, false, "", "q1"}, {2, false, "", "q2"}, {3, true, "z", "q3"},
			},
		},
		{
			name: "equal message counts go to the greater id",
			cps: []Checkpoint{
				cp("1ef-a", 2, "q1"), cp("1ef-c", 2, "q1"), cp("1ef-b", 2, "q1"),
			},
			total: 1,
			want:  []turnWant{{1, true, "1ef-c", "q1"}},
		},
		{
			name: "more messages beats a greater id",
			cps: []Checkpoint{
				cp("1ef-9", 2, "q1"), cp("1ef-1", 3, "q1"),
			},
			total: 1,
			want:  []turnWant{{1, true, "1ef-1", "q1"}},
		},
		{
			name: "a gap in the middle",
			cps: []Checkpoint{
				cp("a", 1, "q1"), cp("c", 5, "q1", "q2", "q3"),
			},
			total: 3,
			want: []turnWant{
				{1, true, "a", "q1"}, {2, false, "", "q2"}, {3, true, "c", "q3"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orders := map[string][]Checkpoint{
				"as given":   tt.cps,
				"ascending":  sortedBy(tt.cps, func(a, b Checkpoint) int { return cmpStr(a.ID, b.ID) }),
				"descending": sortedBy(tt.cps, func(a, b Checkpoint) int { return cmpStr(b.ID, a.ID) }),
			}
			for seed := range uint64(5) {
				s := slices.Clone(tt.cps)
				r := rand.New(rand.NewPCG(seed, 7))
				r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
				orders[fmt.Sprintf("shuffled %d", seed)] = s
			}
			for name, order := range orders {
				h := derive(order)
				if h.Total != tt.total {
					t.Errorf("%s: total = %d, want %d", name, h.Total, tt.total)
				}
				if got := summarize(h); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s: turns = %+v\nwant %+v", name, got, tt.want)
				}
			}
		})
	}
}

func TestHistoryTurn(t *testing.T) {
	h := derive([]Checkpoint{cp("b", 4, "q1", "q2"), cp("c", 6, "q1", "q2", "q3")})
	tests := []struct {
		n    int
		want Outcome
	}{
		{-1, NoSuchTurn}, {0, NoSuchTurn}, {1, NoLongerRetained}, {2, Found}, {3, Found}, {4, NoSuchTurn},
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
	if got, want := h.Retained(), []int{2, 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("Retained() = %v, want %v", got, want)
	}
}

func sortedBy(cps []Checkpoint, cmp func(a, b Checkpoint) int) []Checkpoint {
	s := slices.Clone(cps)
	slices.SortFunc(s, cmp)
	return s
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

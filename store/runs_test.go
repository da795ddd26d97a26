package store

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/historyd/historyd/store/backend"
)

// run scripts one checkpoint of a thread without questions: an input
// checkpoint asking q, or a step (input false).
type run struct {
	input bool
	q     string
	// asks are questions its messages channel holds; synthetic marks a
	// summary among them.
	asks      []string
	synthetic bool
}

// runChain builds the checkpoints of steps, each the child of the one
// before.
func runChain(tb *table, prefix string, steps []run) []Checkpoint {
	var out []Checkpoint
	for i, s := range steps {
		c := Checkpoint{ID: fmt.Sprintf("%s-%02d", prefix, i), Input: s.input, Asks: tb.asks(s.asks...), Synthetic: s.synthetic}
		if s.input {
			c.InputText = s.q
		}
		if i > 0 {
			c.Parent = out[i-1].ID
		}
		out = append(out, c)
	}
	return out
}

func TestDeriveRuns(t *testing.T) {
	in := func(q string) run { return run{input: true, q: q} }
	step := run{}
	tests := []struct {
		name  string
		steps []run
		// cut drops the first checkpoints, as retention does.
		cut       int
		numbering Numbering
		// want is each turn's question and end (index into steps).
		want []string
		ends []int
		// turns is each step's turn.
		turns []int
	}{
		{
			name:      "three runs",
			steps:     []run{in("a"), step, step, in("b"), step, in("c"), step, step},
			numbering: Runs, want: []string{"a", "b", "c"}, ends: []int{2, 4, 7},
			turns: []int{1, 1, 1, 2, 2, 3, 3, 3},
		},
		{
			name:      "the last input not past: the run before goes on to its end only",
			steps:     []run{in("a"), step, in("b")},
			numbering: Runs, want: []string{"a"}, ends: []int{1},
			turns: []int{1, 1, 1},
		},
		{
			name:      "an input followed by an input is no run",
			steps:     []run{in("a"), step, in("lost"), in("b"), step},
			numbering: Runs, want: []string{"a", "b"}, ends: []int{1, 4},
			turns: []int{1, 1, 1, 2, 2},
		},
		{
			name:      "only an input: no run, as a messages graph's first checkpoint",
			steps:     []run{in(`{"messages":[]}`)},
			numbering: Complete, turns: []int{0},
		},
		{
			name:      "retention cut inside run 1: it is not counted",
			steps:     []run{in("a"), step, step, in("b"), step},
			cut:       1,
			numbering: Runs, want: []string{"b"}, ends: []int{4},
			turns: []int{0, 0, 1, 1},
		},
		{
			name:      "a messages channel holding a question: not runs",
			steps:     []run{in("a"), {asks: []string{"hello"}}, in("b"), step},
			numbering: Complete, want: []string{"hello"}, ends: []int{3},
			turns: []int{0, 1, 1, 1},
		},
		{
			name:      "a summary: messages were there, not runs",
			steps:     []run{in("a"), {synthetic: true}},
			numbering: Complete, turns: []int{0, 0},
		},
		{
			name:      "no input checkpoint at all (durability exit): no runs",
			steps:     []run{step, step},
			numbering: Complete, turns: []int{0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newTable()
			cps := runChain(tb, "1ef", tt.steps)[tt.cut:]
			numbering := tt.numbering
			if tt.cut > 0 && numbering != Runs {
				numbering = Counted
			}
			h := Derive(backend.Ref{ThreadID: "t"}, cps, tb.qs)
			if h.Numbering != numbering || h.Total != len(tt.want) {
				t.Fatalf("numbering %v, total %d; want %v, %d", h.Numbering, h.Total, numbering, len(tt.want))
			}
			for i, turn := range h.Turns {
				end := fmt.Sprintf("1ef-%02d", tt.ends[i])
				if turn.N != i+1 || turn.Question != tt.want[i] || !turn.Retained || turn.End.ID != end {
					t.Errorf("turn %d = %q, retained %v, end %s; want %q, end %s", turn.N, turn.Question, turn.Retained, turn.End.ID, tt.want[i], end)
				}
			}
			var turns []int
			for _, s := range h.Steps {
				turns = append(turns, s.Turn)
			}
			if fmt.Sprint(turns) != fmt.Sprint(tt.turns) {
				t.Errorf("steps' turns = %v; want %v", turns, tt.turns)
			}
		})
	}
}

// TestDeriveRunsAnyOrder: the runs do not depend on the order
// checkpoints are listed in.
func TestDeriveRunsAnyOrder(t *testing.T) {
	tb := newTable()
	cps := runChain(tb, "1ef", []run{{input: true, q: "a"}, {}, {input: true, q: "b"}, {}, {}})
	want := Derive(backend.Ref{}, cps, tb.qs)
	rev := make([]Checkpoint, len(cps))
	for i, c := range cps {
		rev[len(cps)-1-i] = c
	}
	got := Derive(backend.Ref{}, rev, tb.qs)
	if got.Total != 2 || got.Total != want.Total || got.Turns[1].End.ID != want.Turns[1].End.ID || got.Turns[1].Question != "b" {
		t.Errorf("reversed: %+v; want %+v", got.Turns, want.Turns)
	}
}

func TestRunQuestion(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"a map, keys sorted, compact", map[string]any{"question": "alpha", "a": int64(1), "f": 2.0}, `{"a":1,"f":2,"question":"alpha"}`},
		{"a string", "gamma ✓", `"gamma ✓"`},
		{"nothing", nil, "null"},
		{"a list", []any{"x", true}, `["x",true]`},
		{"quotes and newlines", "say \"hi\"\n", `"say \"hi\"\n"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runQuestion(tt.v); got != tt.want {
				t.Errorf("runQuestion = %s; want %s", got, tt.want)
			}
		})
	}
}

// TestRunQuestionCut: a long input is cut at most MaxRunQuestion bytes in,
// never inside a character.
func TestRunQuestionCut(t *testing.T) {
	for pad := range 4 {
		s := strings.Repeat("x", pad) + strings.Repeat("€", MaxRunQuestion) // 3 bytes each
		got := runQuestion(s)
		if len(got) > MaxRunQuestion || len(got) < MaxRunQuestion-3 || !utf8.ValidString(got) || !strings.HasPrefix(got, `"`+strings.Repeat("x", pad)+"€") {
			t.Errorf("pad %d: %d bytes, valid %v", pad, len(got), utf8.ValidString(got))
		}
	}
	if got := runQuestion(strings.Repeat("y", MaxRunQuestion-2)); len(got) != MaxRunQuestion || !strings.HasSuffix(got, `y"`) {
		t.Errorf("an input of exactly MaxRunQuestion bytes is cut: %d bytes", len(got))
	}
}

func TestStateSource(t *testing.T) {
	tests := []struct {
		name          string
		states        map[string]string
		from, version string
	}{
		{"the channel itself", map[string]string{"tool_state": "3", SavedValueChannel: "4"}, "tool_state", "3"},
		{"the saved value's key", map[string]string{SavedValueChannel: "4"}, SavedValueChannel, SavedValueChannel + ":4"},
		{"neither", map[string]string{"messages": "1"}, "tool_state", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Checkpoint{States: tt.states}
			from, v := c.stateSource("tool_state")
			if from != tt.from || v != tt.version || c.State("tool_state") != tt.version {
				t.Errorf("stateSource = %s, %s; want %s, %s", from, v, tt.from, tt.version)
			}
		})
	}
}

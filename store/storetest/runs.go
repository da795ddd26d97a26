package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// runsCases are the cases of graphs without a messages channel, whose runs
// are their turns.
var runsCases = []Case{
	{"A graph without messages has a turn per run", runsTurns},
	{"The functional API's saved value is served as channels", functionalTurns},
	{"The functional API's saved messages number its turns by question", functionalMessages},
	{"A run failed and resumed is one run", resumedRun},
	{"A run is a turn once it is past its input", runPastInput},
}

// RunWriter writes threads the way LangGraph 1.2 writes a graph without a
// messages channel: checkpoint ids prefix-000000, prefix-000001, …, each
// the child of the one before, a second apart from Base, with the metadata
// (source, step) and updated_channels Python's LangGraph records.
type RunWriter struct {
	w      Writer
	ref    backend.Ref
	prefix string
	step   int
	parent string
	// lastQuestion is the question channel's value: the last run's.
	lastQuestion string
}

// NewRunWriter returns a RunWriter for ref's checkpoints.
func NewRunWriter(w Writer, ref backend.Ref, prefix string) *RunWriter {
	return &RunWriter{w: w, ref: ref, prefix: prefix}
}

// Put writes the next checkpoint, with values in channel order, made by
// source, with the writes of the tasks that run from it, and returns its
// id.
func (r *RunWriter) Put(source string, values write.Map, updated []string, writes ...saver.Write) string {
	id := fmt.Sprintf("%s-%06d", r.prefix, r.step)
	r.w.Put(r.ref, saver.Checkpoint{
		ID: id, Parent: r.parent, TS: Base.Add(time.Duration(r.step) * time.Second), Values: values, UpdatedChannels: updated,
		Metadata: write.Map{{Key: "source", Value: source}, {Key: "step", Value: r.step - 1}},
		Writes:   writes,
	})
	r.parent = id
	r.step++
	return id
}

// StateRun is one run of a StateGraph whose state is a question and a
// tool_state (key → {"value": …}), without messages, as RunWriter.StateRun
// writes it.
type StateRun struct {
	// Question is the run's input's question field.
	Question string
	// Writes are the tool_state entries the run's tool writes.
	Writes map[string]any
	// Fails makes the run fail in its tool and be resumed with
	// invoke(None): LangGraph records the error as a write of the step's
	// checkpoint and writes no checkpoint for the failed step; the resumed
	// run writes the tool's checkpoint with no new input.
	Fails bool
}

// StateRun writes one run of a StateGraph without messages, state holding
// the tool_state entries of the runs so far, and returns its checkpoint
// ids, the last its end: the input checkpoint ({"question": …} in
// __start__), the step applying the input, and the tool's step.
func (r *RunWriter) StateRun(state map[string]map[string]any, run StateRun) (ids []string) {
	values := func(extra ...write.Field) write.Map {
		var m write.Map
		if r.lastQuestion != "" {
			m = append(m, write.Field{Key: "question", Value: r.lastQuestion})
		}
		if len(state) > 0 {
			m = append(m, write.Field{Key: "tool_state", Value: state})
		}
		return append(m, extra...)
	}
	ids = append(ids, r.Put("input", values(write.Field{Key: "__start__", Value: map[string]any{"question": run.Question}}), []string{"__start__"}))
	r.lastQuestion = run.Question
	var writes []saver.Write
	if run.Fails {
		writes = append(writes, saver.Write{TaskID: "tool-task", Idx: -1, Channel: "__error__", Value: "RuntimeError('boom')"})
	}
	ids = append(ids, r.Put("loop", values(write.Field{Key: "branch:to:tool", Value: nil}), []string{"branch:to:tool", "question"}, writes...))
	maps.Copy(state, entries(run.Writes))
	ids = append(ids, r.Put("loop", values(), []string{"tool_state"}))
	return ids
}

// entries puts values in the tool_state convention's bare form.
func entries(writes map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for k, v := range writes {
		out[k] = map[string]any{"value": v}
	}
	return out
}

// FunctionalRun writes one run of a functional API entrypoint that saves
// {"tool_state": …, "last": input} (the tool_state entries of the runs so
// far) and returns its checkpoint ids, the last its end: the input
// checkpoint (the input in __start__, the previous run's __end__ and
// __previous__ still there) and the run's one step.
func (r *RunWriter) FunctionalRun(saved *write.Map, state map[string]map[string]any, input string, writes map[string]any) []string {
	values := write.Map{{Key: "__start__", Value: input}}
	if *saved != nil {
		values = append(values, write.Field{Key: "__end__", Value: *saved}, write.Field{Key: "__previous__", Value: *saved})
	}
	in := r.Put("input", values, []string{"__start__"})
	maps.Copy(state, entries(writes))
	*saved = write.Map{{Key: "tool_state", Value: maps.Clone(state)}, {Key: "last", Value: input}}
	end := r.Put("loop", write.Map{{Key: "__end__", Value: *saved}, {Key: "__previous__", Value: *saved}}, []string{"__end__", "__previous__"})
	return []string{in, end}
}

// runQuestions are the inputs of the runs the cases write.
var runQuestions = []StateRun{
	{Question: "alpha", Writes: map[string]any{"alpha": 5.0}},
	{Question: "beta", Writes: map[string]any{"beta": 4.0, "alpha": 50.0}},
	{Question: "gamma ✓", Writes: map[string]any{"gamma": 5.0}},
}

// checkRuns checks h's turns against the runs written: numbered Runs, each
// retained, ending where the run ended, asking the question given.
func checkRuns(t *testing.T, h *store.History, ends []string, questions []string) {
	t.Helper()
	if h.Total != len(ends) || h.Numbering != store.Runs {
		t.Fatalf("total %d, numbering %v; want %d, runs", h.Total, h.Numbering, len(ends))
	}
	for i, turn := range h.Turns {
		if !turn.Retained || turn.End.ID != ends[i] || turn.Question != questions[i] {
			t.Errorf("turn %d = retained %v, end %s, question %q; want end %s, question %q", turn.N, turn.Retained, turn.End.ID, turn.Question, ends[i], questions[i])
		}
	}
}

func runsTurns(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-runs"}
	r := NewRunWriter(w, ref, "1f0e")
	state := map[string]map[string]any{}
	var ends []string
	var want []map[string]map[string]any
	for _, run := range runQuestions {
		ids := r.StateRun(state, run)
		ends = append(ends, ids[len(ids)-1])
		want = append(want, maps.Clone(state))
	}
	st := store.New(store.Config{Backend: b})
	h, _, states := Read(t, st, ref, Retained, nil)
	checkRuns(t, h, ends, []string{`{"question":"alpha"}`, `{"question":"beta"}`, `{"question":"gamma ✓"}`})
	for i := range states {
		CheckState(t, i+1, states[i], want[i])
	}
	if got := h.Turns[1].End.State("tool_state"); got == "" || got == h.Turns[0].End.State("tool_state") {
		t.Errorf("turn 2's tool_state version %q; want a new one", got)
	}
}

func functionalTurns(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-functional"}
	r := NewRunWriter(w, ref, "1f0e")
	var saved write.Map
	state := map[string]map[string]any{}
	var ends, questions []string
	var want []map[string]map[string]any
	for _, run := range runQuestions {
		ids := r.FunctionalRun(&saved, state, run.Question, run.Writes)
		ends = append(ends, ids[len(ids)-1])
		questions = append(questions, mustJSON(t, run.Question))
		want = append(want, maps.Clone(state))
	}
	st := store.New(store.Config{Backend: b, StateChannels: []string{"tool_state", "last"}})
	h, _, states := Read(t, st, ref, Retained, nil)
	checkRuns(t, h, ends, questions)
	for i := range states {
		CheckState(t, i+1, states[i], want[i])
	}
	_, _, proj := Read(t, st, ref, Only(2), []string{"alpha"})
	if len(proj) != 1 || len(proj[0]) != 1 || proj[0]["alpha"]["value"] != 50.0 {
		t.Errorf("turn 2's alpha = %v; want 50", proj)
	}
	// A saved key that is not a map is one entry named for it, as a
	// channel of the same name is.
	_, _, last, err := st.ReadEncoded(context.Background(), ref, "last", Retained, nil, EntryEncoder{})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range last {
		var got map[string]any
		if len(s.Entries) != 1 || s.Entries[0].Key != "last" || json.Unmarshal(s.Entries[0].Data, &got) != nil || got["value"] != runQuestions[i].Question {
			t.Errorf("turn %d's last = %+v; want %q", i+1, s.Entries, runQuestions[i].Question)
		}
	}
}

func resumedRun(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-resumed"}
	r := NewRunWriter(w, ref, "1f0e")
	state := map[string]map[string]any{}
	var ends []string
	for i, run := range runQuestions {
		run.Fails = i == 1
		ids := r.StateRun(state, run)
		ends = append(ends, ids[len(ids)-1])
	}
	st := store.New(store.Config{Backend: b})
	h, _, states := Read(t, st, ref, Retained, nil)
	checkRuns(t, h, ends, []string{`{"question":"alpha"}`, `{"question":"beta"}`, `{"question":"gamma ✓"}`})
	if len(states) == 3 {
		CheckState(t, 2, states[1], maps.Clone(map[string]map[string]any{"alpha": {"value": 50.0}, "beta": {"value": 4.0}}))
	}
}

func runPastInput(t *testing.T, open Open) {
	b, w := open(t)
	st := store.New(store.Config{Backend: b, RecountEvery: -1})
	ctx := context.Background()

	// A messages graph writes its input checkpoint before its messages
	// channel holds the question: no run, no turn.
	msgs := backend.Ref{ThreadID: "suite-messages-input"}
	NewRunWriter(w, msgs, "1f0e").Put("input",
		write.Map{{Key: "__start__", Value: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello"}}}}}, []string{"__start__"})
	h, err := st.History(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if h.Total != 0 || h.Numbering == store.Runs {
		t.Errorf("a messages graph's first input: total %d, numbering %v; want 0, not runs", h.Total, h.Numbering)
	}

	ref := backend.Ref{ThreadID: "suite-runs-input"}
	r := NewRunWriter(w, ref, "1f0e")
	state := map[string]map[string]any{}
	first := r.StateRun(state, runQuestions[0])
	// The next run's input only: it carries on run 1's state.
	r.Put("input", write.Map{{Key: "question", Value: "alpha"}, {Key: "tool_state", Value: state},
		{Key: "__start__", Value: map[string]any{"question": "beta"}}}, []string{"__start__"})
	h, err = st.History(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, h, first[2:], []string{`{"question":"alpha"}`})
	if s := h.Steps[len(h.Steps)-1]; s.Turn != 1 {
		t.Errorf("the input checkpoint of the run not past it is in turn %d; want 1", s.Turn)
	}
	// Past it: run 2 is a turn, read from the cached index.
	r.lastQuestion = "beta"
	second := r.Put("loop", write.Map{{Key: "question", Value: "beta"}, {Key: "tool_state", Value: state}}, []string{"question"})
	h, err = st.History(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	checkRuns(t, h, []string{first[2], second}, []string{`{"question":"alpha"}`, `{"question":"beta"}`})
	if !reflect.DeepEqual(h.Retained(), []int{1, 2}) {
		t.Errorf("retained = %v", h.Retained())
	}
}

func functionalMessages(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-functional-messages"}
	r := NewRunWriter(w, ref, "1f0e")
	var saved write.Map
	var msgs []any
	var inputs, ends []string
	var want []map[string]map[string]any
	for i, run := range runQuestions {
		values := write.Map{{Key: "__start__", Value: run.Question}}
		if saved != nil {
			values = append(values, write.Field{Key: "__end__", Value: "answer"}, write.Field{Key: "__previous__", Value: saved})
		}
		inputs = append(inputs, r.Put("input", values, []string{"__start__"}))
		msgs = append(msgs, write.Human(fmt.Sprintf("h%d", i), run.Question), write.AI(fmt.Sprintf("a%d", i), "answer"))
		state := entries(run.Writes)
		saved = write.Map{{Key: "messages", Value: append([]any(nil), msgs...)}, {Key: "tool_state", Value: state}}
		ends = append(ends, r.Put("loop", write.Map{{Key: "__end__", Value: "answer"}, {Key: "__previous__", Value: saved}}, []string{"__end__", "__previous__"}))
		want = append(want, state)
	}
	st := store.New(store.Config{Backend: b})
	h, _, states := Read(t, st, ref, Retained, nil)
	if h.Total != len(runQuestions) || h.Numbering != store.Complete {
		t.Fatalf("total %d, numbering %v; want %d, complete", h.Total, h.Numbering, len(runQuestions))
	}
	for i, turn := range h.Turns {
		// A turn ends where the next run's input carries its state on, as
		// a messages graph's does.
		end := ends[i]
		if i+1 < len(inputs) {
			end = inputs[i+1]
		}
		if turn.Question != runQuestions[i].Question || !turn.Retained || turn.End.ID != end {
			t.Errorf("turn %d = %q, retained %v, end %s; want %q, end %s", turn.N, turn.Question, turn.Retained, turn.End.ID, runQuestions[i].Question, end)
		}
	}
	for i := range states {
		CheckState(t, i+1, states[i], want[i])
	}
}

package store

import (
	"context"
	"unicode/utf8"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/store/backend"
)

// A graph without a messages channel (a StateGraph whose state holds a
// question field and tool state, the functional API's @entrypoint) asks no
// question that a human message holds, so turns cannot be numbered by
// question. Its runs are its turns instead: every run LangGraph starts
// with an input writes an input checkpoint (metadata source "input") whose
// __start__ channel holds the input, and the run's steps follow it until
// the next run's input.

// startChannel is the LangGraph channel holding a run's input at its input
// checkpoint.
const startChannel = "__start__"

// deriveRuns numbers the runs of h's steps (the lineage, in checkpoint
// order) as its turns, where no step holds a human message, and reports
// whether it numbered any; otherwise h is left as it was. The rules:
//
//   - a run begins at an input checkpoint (Checkpoint.Input) and holds
//     every step up to the next input checkpoint; a run resumed after a
//     failure or an interrupt (invoke(None), Command(resume=…)) writes no
//     input checkpoint, so it stays one run;
//   - a run counts only once a step follows its input on the lineage: the
//     input checkpoint alone is what a messages graph writes first too,
//     before its messages channel holds the question, so a thread holding
//     only that is no run yet (its step belongs to the run before, whose
//     state it carries on);
//   - a turn ends at its run's last step, an update_state after it
//     included, and its question is the run's input (Checkpoint.InputText);
//   - steps before the lineage's first input checkpoint (retention deleted
//     it) belong to no turn: the runs before the oldest retained
//     checkpoint are not counted, so numbers are exact only when the
//     thread's first checkpoint is retained.
func deriveRuns(h *History) bool {
	for _, s := range h.Steps {
		if len(s.Checkpoint.Asks) > 0 || s.Checkpoint.Synthetic {
			return false
		}
	}
	var turns []Turn
	run := 0 // the run the step belongs to; 0 before the first
	for i, s := range h.Steps {
		c := s.Checkpoint
		if c.Input {
			if i+1 >= len(h.Steps) || h.Steps[i+1].Checkpoint.Input {
				// Not past its input: no run (yet).
				h.Steps[i].Turn = run
				continue
			}
			run = len(turns) + 1
			turns = append(turns, Turn{N: run, Question: c.InputText})
		}
		h.Steps[i].Turn = run
		if run > 0 {
			turns[run-1].Retained, turns[run-1].End = true, *c
		}
	}
	if len(turns) == 0 {
		return false
	}
	h.Turns, h.Total, h.Numbering = turns, len(turns), Runs
	return true
}

// fillInputs sets the InputText of the input checkpoints of cps whose
// input th has read. cps must not be shared with an index's readers.
func (th *threadData) fillInputs(cps []Checkpoint) {
	th.mu.Lock()
	defer th.mu.Unlock()
	if len(th.inputs) == 0 {
		return
	}
	for i := range cps {
		if c := &cps[i]; c.Input && c.InputText == "" {
			c.InputText = th.inputs[c.ID]
		}
	}
}

// learnInput records the text of the run input of checkpoint id.
func (th *threadData) learnInput(id, text string) {
	th.mu.Lock()
	defer th.mu.Unlock()
	if th.inputs == nil {
		th.inputs = map[string]string{}
	}
	if _, ok := th.inputs[id]; !ok {
		th.size += questionSize(id, text)
	}
	th.inputs[id] = text
}

// readRunInputs reads the inputs of the runs on h's lineage whose text is
// not known yet, records them in th and fills them in (h's steps point
// into the checkpoints build derives from), and reports whether it read
// any. Only a Runs-numbered history needs them, so a messages graph never
// reads its inputs.
func (s *Store) readRunInputs(ctx context.Context, ref backend.Ref, th *threadData, h *History) (bool, error) {
	var ids []string
	var at []*Checkpoint
	for _, st := range h.Steps {
		if c := st.Checkpoint; c.Input && c.InputText == "" {
			ids, at = append(ids, c.ID), append(at, c)
		}
	}
	if len(ids) == 0 {
		return false, nil
	}
	err := s.eachValue(ctx, ref, startChannel, ids, func(i int, b backend.Blob) error {
		if b.Missing {
			// Deleted since it was listed: the next refresh notices.
			return nil
		}
		v, _, err := codec.Decode(b.Type, b.Data, s.limits)
		if err != nil {
			return &DecodeError{Ref: ref, CheckpointID: ids[i], Channel: startChannel, Err: err}
		}
		text := runQuestion(v)
		th.learnInput(ids[i], text)
		at[i].InputText = text
		return nil
	})
	return true, err
}

// runQuestion is a run's input as a Runs-numbered turn's question: its
// compact JSON text, map keys sorted (codec.AppendJSON), cut to at most
// MaxRunQuestion bytes at a character boundary. A checkpoint without an
// input value reads as null.
func runQuestion(v any) string {
	return cutText(codec.AppendJSON(nil, v), MaxRunQuestion)
}

// cutText returns b as text, cut to at most max bytes where a UTF-8
// character begins.
func cutText(b []byte, max int) string {
	if len(b) <= max {
		return string(b)
	}
	n := max
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n])
}

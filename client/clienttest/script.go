// Package clienttest writes the conversations historyd's client tests read:
// threads whose checkpoints are laid out one by one, for what
// storetest.Builder's one question per turn cannot show — several questions
// in one input, a summary replacing earlier messages, pruning between runs,
// and state channels besides tool_state (deepagents' files and todos). It
// writes through a storetest.Writer, so the same script lands in memory
// (storetest.Memory) for the client's unit tests and in a real saver's
// layout (lgsaver) for the shared cases of test/clients.
package clienttest

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// Input is one input to a thread and what the run answering it writes.
type Input struct {
	// Asked are the input's questions: more than one makes one run answer
	// them all.
	Asked []string
	// Summary, when set, makes the run start by replacing every message but
	// the input's with this summary, as LangChain's SummarizationMiddleware
	// does (a human message with additional_kwargs.lc_source
	// "summarization").
	Summary string
	// State are the run's tool_state writes, key → value. Each entry is
	// stamped as mcp-toolsets-runtime stamps it: tool, seq, the turn of the
	// input's last question, and turns_written.
	State map[string]any
	// Merge are writes to other map channels, channel → key → value, merged
	// key by key into what the channel held (deepagents' files).
	Merge map[string]map[string]any
	// Replace are other channels' new values, channel → value, replacing
	// what they held (deepagents' todos).
	Replace map[string]any
}

// Script writes one thread's checkpoints in order, each the child of the one
// before, holding the messages so far and every state channel with a value:
// per input, a checkpoint with the questions (metadata source "input"), one
// with the summary when there is one, one with the model's tool call, one
// with the tool result and the writes when there are any, and one with the
// answer — storetest.Builder's layout of a turn.
type Script struct {
	w        storetest.Writer
	ref      backend.Ref
	prefix   string
	step     int
	parent   string
	written  []string
	msgs     []any
	nmsg     int
	asked    int
	seq      int
	state    map[string]map[string]any
	channels map[string]any
}

// NewScript writes ref's first, empty checkpoint and returns a Script for
// its inputs. Checkpoint ids are prefix-000000, prefix-000001, …, so a
// prefix that sorts later makes later ids, as LangGraph's time-ordered ones
// are.
func NewScript(w storetest.Writer, ref backend.Ref, prefix string) *Script {
	s := &Script{w: w, ref: ref, prefix: prefix, msgs: []any{}, state: map[string]map[string]any{}, channels: map[string]any{}}
	s.put("input")
	return s
}

// put writes the next checkpoint.
func (s *Script) put(source string) {
	id := fmt.Sprintf("%s-%06d", s.prefix, s.step)
	values := write.Map{{Key: "messages", Value: slices.Clone(s.msgs)}}
	if len(s.state) > 0 {
		values = append(values, write.Field{Key: "tool_state", Value: s.state})
	}
	for _, ch := range slices.Sorted(maps.Keys(s.channels)) {
		values = append(values, write.Field{Key: ch, Value: s.channels[ch]})
	}
	s.w.Put(s.ref, saver.Checkpoint{
		ID: id, Parent: s.parent, TS: storetest.Base.Add(time.Duration(s.step) * time.Second), Values: values,
		Metadata: write.Map{{Key: "source", Value: source}, {Key: "step", Value: s.step - 1}},
	})
	s.written = append(s.written, id)
	s.parent = id
	s.step++
}

// message appends m with a fresh id and returns it.
func (s *Script) message(m write.Message) write.Message {
	m.ID = fmt.Sprintf("%s-msg-%d", s.prefix, s.nmsg)
	s.nmsg++
	s.msgs = append(s.msgs, m)
	return m
}

// Run writes in and the run answering it, and returns the id of the run's
// last checkpoint.
func (s *Script) Run(in Input) string {
	var asked []any
	for _, q := range in.Asked {
		asked = append(asked, s.message(write.Human("", q)))
	}
	s.asked += len(in.Asked)
	s.put("input")
	if in.Summary != "" {
		s.msgs = nil
		s.message(write.Message{Type: "human", Content: in.Summary, AdditionalKwargs: map[string]any{"lc_source": "summarization"}})
		s.msgs = append(s.msgs, asked...)
		s.put("loop")
	}
	s.message(write.AI("", "calling tools"))
	s.put("loop")
	if len(in.State)+len(in.Merge)+len(in.Replace) > 0 {
		next := maps.Clone(s.state)
		for _, k := range slices.Sorted(maps.Keys(in.State)) {
			s.seq++
			written := 1
			if old, ok := s.state[k]; ok {
				written = old["turns_written"].(int) + 1
			}
			next[k] = map[string]any{"value": in.State[k], "tool": "sketch_area", "seq": s.seq, "turn": s.asked, "turns_written": written}
		}
		s.state = next
		s.channels = maps.Clone(s.channels)
		for ch, writes := range in.Merge {
			merged, _ := s.channels[ch].(map[string]any)
			merged = maps.Clone(merged)
			if merged == nil {
				merged = map[string]any{}
			}
			maps.Copy(merged, writes)
			s.channels[ch] = merged
		}
		maps.Copy(s.channels, in.Replace)
		s.message(write.Tool("", "done", "sketch_area", "call"))
		s.put("loop")
	}
	s.message(write.AI("", "answer"))
	s.put("loop")
	return s.parent
}

// Prune deletes every checkpoint written so far, as a retention job keeping
// only the newest would: the next Run's checkpoints are the oldest left.
func (s *Script) Prune() {
	s.w.Delete(s.ref, s.written)
	s.written = nil
}

// FileData is a deepagents FileData holding text, created and last
// modified the given number of hours after storetest.Base.
func FileData(content string, created, modified int) map[string]any {
	at := func(h int) string { return storetest.Base.Add(time.Duration(h) * time.Hour).Format(time.RFC3339) }
	return map[string]any{"content": content, "encoding": "utf-8", "created_at": at(created), "modified_at": at(modified)}
}

// Todo is one item of deepagents' todos channel.
func Todo(content, status string) map[string]any {
	return map[string]any{"content": content, "status": status}
}

package storetest

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/historyd/historyd/store"
)

// Writer puts checkpoints into a backend's storage in that backend's own
// format, so one suite can run against every backend.
type Writer interface {
	// Put stores a checkpoint of ref whose channels hold the given plain
	// values (as produced by JSON decoding, or Message for messages).
	Put(ref store.Ref, id string, ts time.Time, values map[string]any)
	// Delete removes checkpoints of ref, as pruning would.
	Delete(ref store.Ref, ids []string)
}

// Turn scripts one turn of a conversation: the question, and the state
// writes made while answering it (key → value).
type Turn struct {
	Question string
	Writes   map[string]any
}

// Written is what Build recorded about one turn's end.
type Written struct {
	// End is the id of the turn's last checkpoint.
	End string
	// IDs are all checkpoint ids of the turn.
	IDs []string
	// State is the tool_state the turn ended on, in the tool_state
	// convention.
	State map[string]map[string]any
}

// Build writes a conversation into w the way LangGraph would: an empty
// checkpoint first, then per turn a checkpoint with the question, one with
// the model's tool call, one with the tool result and the state writes (when
// there are writes), and one with the answer. Entries carry value, tool,
// seq, turn and turns_written. It returns what was written per turn:
// element i is turn i+1.
func Build(w Writer, ref store.Ref, turns []Turn) []Written {
	b := NewBuilder(w, ref)
	out := make([]Written, len(turns))
	for i, t := range turns {
		out[i] = b.Turn(t)
	}
	return out
}

// Builder writes a conversation turn by turn, for tests that add turns
// while something reads.
type Builder struct {
	w      Writer
	ref    store.Ref
	prefix string
	step   int
	seq    int
	turns  int
	msgs   []any
	state  map[string]map[string]any
}

// NewBuilder writes the thread's first, empty checkpoint and returns a
// Builder for its turns. Checkpoint ids are 1f0c-000000, 1f0c-000001, ….
func NewBuilder(w Writer, ref store.Ref) *Builder { return NewBuilderWithPrefix(w, ref, "1f0c") }

// NewBuilderWithPrefix is NewBuilder with checkpoint ids starting with
// prefix instead of 1f0c: a thread written again after being deleted gets
// new ids, as LangGraph's time-ordered ones are, by a prefix that sorts
// later.
func NewBuilderWithPrefix(w Writer, ref store.Ref, prefix string) *Builder {
	b := &Builder{w: w, ref: ref, prefix: prefix, msgs: []any{}, state: map[string]map[string]any{}}
	b.put(nil)
	return b
}

var base = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func (b *Builder) put(into *Written) {
	id := fmt.Sprintf("%s-%06d", b.prefix, b.step)
	values := map[string]any{"messages": slices.Clone(b.msgs)}
	if len(b.state) > 0 {
		values["tool_state"] = b.state
	}
	b.w.Put(b.ref, id, base.Add(time.Duration(b.step)*time.Second), values)
	if into != nil {
		into.IDs = append(into.IDs, id)
		into.End = id
	}
	b.step++
}

// Turn writes one more turn and returns what it wrote.
func (b *Builder) Turn(t Turn) Written {
	b.turns++
	n := b.turns
	var w Written
	b.msgs = append(b.msgs, Message("HumanMessage", t.Question))
	b.put(&w)
	b.msgs = append(b.msgs, Message("AIMessage", "calling tools"))
	b.put(&w)
	if len(t.Writes) > 0 {
		next := make(map[string]map[string]any, len(b.state)+len(t.Writes))
		maps.Copy(next, b.state)
		// Sorted, so seq numbers do not depend on map order.
		for _, k := range slices.Sorted(maps.Keys(t.Writes)) {
			b.seq++
			tw := 1
			if old, ok := b.state[k]; ok {
				tw = old["turns_written"].(int) + 1
			}
			next[k] = map[string]any{"value": t.Writes[k], "tool": "tool_" + k, "seq": b.seq, "turn": n, "turns_written": tw}
		}
		b.state = next
		b.msgs = append(b.msgs, Message("ToolMessage", "done"))
		b.put(&w)
	}
	b.msgs = append(b.msgs, Message("AIMessage", "answer"))
	b.put(&w)
	w.State = b.state
	return w
}

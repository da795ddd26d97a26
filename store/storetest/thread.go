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

// Build writes a conversation into m the way LangGraph would: an empty
// checkpoint first, then per turn a checkpoint with the question, one with
// the model's tool call, one with the tool result and the state writes, and
// one with the answer. Entries carry value, tool, seq, turn and
// turns_written. It returns what was written per turn: element i is turn
// i+1.
func Build(w Writer, ref store.Ref, turns []Turn) []Written {
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	seq := 0
	msgs := []any{}
	state := map[string]map[string]any{}
	written := make([]Written, len(turns)+1)
	step := 0
	put := func(turn int) {
		id := fmt.Sprintf("1f0c-%04d", step)
		values := map[string]any{"messages": slices.Clone(msgs)}
		if len(state) > 0 {
			values["tool_state"] = state
		}
		w.Put(ref, id, base.Add(time.Duration(step)*time.Second), values)
		if turn > 0 {
			written[turn].IDs = append(written[turn].IDs, id)
			written[turn].End = id
		}
		step++
	}
	put(0)
	for i, t := range turns {
		n := i + 1
		msgs = append(msgs, Message("HumanMessage", t.Question))
		put(n)
		msgs = append(msgs, Message("AIMessage", "calling tools"))
		put(n)
		if len(t.Writes) > 0 {
			next := map[string]map[string]any{}
			for k, v := range state {
				next[k] = v
			}
			// Sorted, so seq numbers do not depend on map order.
			for _, k := range slices.Sorted(maps.Keys(t.Writes)) {
				v := t.Writes[k]
				seq++
				tw := 1
				if old, ok := state[k]; ok {
					tw = old["turns_written"].(int) + 1
				}
				next[k] = map[string]any{"value": v, "tool": "tool_" + k, "seq": seq, "turn": n, "turns_written": tw}
			}
			state = next
			msgs = append(msgs, Message("ToolMessage", "done"))
			put(n)
		}
		msgs = append(msgs, Message("AIMessage", "answer"))
		put(n)
		written[n].State = state
	}
	return written[1:]
}

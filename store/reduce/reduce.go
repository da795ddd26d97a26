// Package reduce holds, written again in Go, the reducers of the LangGraph
// channels historyd rebuilds from writes. A DeltaChannel stores its value
// only every so often (a snapshot); in between, the value at a checkpoint is
// the last stored one folded with the writes made since, through the
// channel's reducer. historyd cannot run a graph's Python or JavaScript, so
// it implements the reducers real graphs use, each checked against the
// original on real threads by the conformance suite:
//
//   - Messages: LangGraph's messages delta reducer (and deepagents' copy of
//     it): append, replace by id, RemoveMessage, REMOVE_ALL_MESSAGES;
//   - Merge: a map merged key by key, a nil value deleting its key, as
//     deepagents' file reducer does for the files channel;
//   - ToolState: mcp-toolsets-runtime's merge_tool_state;
//   - Last: the last write wins.
//
// A DeltaChannel replays writes as its replay_writes does (Replay): the last
// Overwrite among them resets the value, and the writes after it go through
// the reducer. A write the reducer cannot apply is an error naming why, never
// a guess.
package reduce

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/pyjson"
)

// Reducer folds a channel's writes, decoded as codec.Decode decodes
// them, into its value. Apply never modifies base: a value may be the base
// of several branches.
type Reducer struct {
	// Name is what configuration calls the reducer: "merge", "tool_state",
	// "last".
	Name string
	// Apply returns base with writes applied in order; a nil base is the
	// channel's empty value.
	Apply func(base any, writes []any) (any, error)
}

// ErrCannotApply marks a write a reducer cannot apply.
var ErrCannotApply = errors.New("the channel's reducer cannot apply the write")

// Replay is DeltaChannel.replay_writes: when writes hold an Overwrite, the
// last one's value becomes the base (nil: the empty value), and only the
// writes after it go through the reducer.
func (r Reducer) Replay(base any, writes []any) (any, error) {
	start := 0
	for i, w := range writes {
		if v, ok := codec.Overwritten(w); ok {
			base, start = v, i+1
		}
	}
	if start == len(writes) {
		return base, nil
	}
	return r.Apply(base, writes[start:])
}

// Value reducers by name, as configuration names them.
var (
	// Merge merges maps key by key; a nil value deletes its key
	// (deepagents' _file_data_delta_reducer).
	Merge = Reducer{Name: "merge", Apply: merge}
	// ToolState is mcp-toolsets-runtime's merge_tool_state, applied to each
	// write in turn.
	ToolState = Reducer{Name: "tool_state", Apply: toolState}
	// Last keeps the last write.
	Last = Reducer{Name: "last", Apply: last}
)

// Named returns the value reducer configuration calls name. "messages" is
// the messages channel's, which is not a value reducer (see Messages).
func Named(name string) (Reducer, bool) {
	for _, r := range []Reducer{Merge, ToolState, Last} {
		if r.Name == name {
			return r, true
		}
	}
	return Reducer{}, false
}

// Names lists the reducers configuration may name, messages included.
func Names() []string { return []string{"messages", Merge.Name, ToolState.Name, Last.Name} }

func asMap(v any, what string) (map[string]any, error) {
	switch m := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	}
	return nil, fmt.Errorf("%w: %s is %T, not a map of keys", ErrCannotApply, what, v)
}

func merge(base any, writes []any) (any, error) {
	b, err := asMap(base, "the value")
	if err != nil {
		return nil, err
	}
	out := maps.Clone(b)
	for _, w := range writes {
		m, err := asMap(w, "a write")
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			if v == nil {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
	}
	return out, nil
}

func last(base any, writes []any) (any, error) {
	if len(writes) == 0 {
		return base, nil
	}
	return writes[len(writes)-1], nil
}

// maxToolStateBytes is mcp-toolsets-runtime's MAX_TOOL_STATE_BYTES: past
// it, the oldest writes are dropped.
const maxToolStateBytes = 8 << 20

// toolState applies merge_tool_state to each write: keys merged, later
// writes winning; an entry written without a seq gets the next one after
// the highest held; one that displaces a value an earlier turn left counts
// one more turn in turns_written; and past the size budget the oldest
// entries are dropped.
func toolState(base any, writes []any) (any, error) {
	cur, err := asMap(base, "the value")
	if err != nil {
		return nil, err
	}
	merged := maps.Clone(cur)
	for _, w := range writes {
		update, err := asMap(w, "a write")
		if err != nil {
			return nil, err
		}
		if len(update) == 0 {
			continue
		}
		next := int64(0)
		for _, e := range merged {
			if s, ok := intOf(entryField(e, "seq")); ok && s > next {
				next = s
			}
		}
		next++
		// Python iterates the update dict in insertion order; a decoded map
		// has none, so keys go in sorted order. Only entries without a seq
		// see the difference, in which of them gets which number.
		for _, k := range slices.Sorted(maps.Keys(update)) {
			entry, ok := update[k].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%w: the entry under %q is %T, not a map", ErrCannotApply, k, update[k])
			}
			if entry["seq"] == nil {
				entry = maps.Clone(entry)
				entry["seq"] = next
				next++
			}
			merged[k] = counted(merged[k], entry)
		}
		if merged, err = withinBudget(merged); err != nil {
			return nil, err
		}
	}
	return merged, nil
}

func entryField(e any, k string) any {
	m, _ := e.(map[string]any)
	return m[k]
}

func intOf(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case uint64:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}

// counted is _counted: entry carrying how many turns hold a value for its
// key.
func counted(previous any, entry map[string]any) map[string]any {
	prev, ok := previous.(map[string]any)
	if !ok || entry["turns_written"] != nil {
		return entry
	}
	held := int64(1)
	if n, ok := intOf(prev["turns_written"]); ok {
		held = n
	}
	later := true
	before, okB := intOf(prev["turn"])
	after, okA := intOf(entry["turn"])
	if prev["turn"] != nil && entry["turn"] != nil && okA && okB {
		later = after > before
	}
	out := maps.Clone(entry)
	if later {
		out["turns_written"] = held + 1
	} else {
		out["turns_written"] = held
	}
	return out
}

// withinBudget is _within_budget: merged trimmed to the size budget,
// keeping the newest writes (by seq), always at least one.
func withinBudget(merged map[string]any) (map[string]any, error) {
	if len(merged) < 2 {
		return merged, nil
	}
	keys := slices.Collect(maps.Keys(merged))
	seq := func(k string) int64 {
		n, _ := intOf(entryField(merged[k], "seq"))
		return n
	}
	slices.SortStableFunc(keys, func(a, b string) int {
		switch sa, sb := seq(a), seq(b); {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return strings.Compare(a, b)
	})
	total := 0
	kept := 0
	for _, k := range keys {
		data, err := pyjson.Marshal(entryField(merged[k], "value"))
		if err == nil {
			total += len(data)
		}
		if total > maxToolStateBytes && kept > 0 {
			break
		}
		kept++
	}
	if kept == len(keys) {
		return merged, nil
	}
	out := make(map[string]any, kept)
	for _, k := range keys[:kept] {
		out[k] = merged[k]
	}
	return out, nil
}

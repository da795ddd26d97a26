package store

import (
	"maps"
	"math"
	"slices"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/store/backend"
)

// Entry is one session-state key's entry in the tool_state convention: a
// value and optional bookkeeping. Fields a host stored that the convention
// does not name are kept in Extra, never dropped.
type Entry struct {
	// Value is the stored value, decoded to plain data.
	Value any
	// Tool names the tool that wrote the value; nil when not recorded.
	Tool *string
	// Seq is the entry's write order; nil when not recorded.
	Seq *int64
	// Turn is the turn of the entry's last write; nil when not recorded.
	Turn *int64
	// TurnsWritten is how many turns wrote the key; nil when not recorded.
	TurnsWritten *int64
	// Inputs maps tool parameters to the state key they came from, or
	// "model"; nil when not recorded or not a map of strings.
	Inputs map[string]string
	// Extra holds every other stored field, and any convention field whose
	// type did not match the convention, under its stored name.
	Extra map[string]any
}

// valueField is the field of a stored entry that holds its value in the
// tool_state convention; it is left encoded until the layer above
// re-encodes it.
const valueField = "value"

// eachEntry decodes channel's value one entry at a time, keeping only the
// keys in keep (all when keep is nil), and hands fn each key with its entry
// before decoding the next. Entry values are left encoded as codec.Raw
// (codec.EachEntry), valid only during fn. A channel with no value, or a
// null one, has no entries; a value that is not a map (deepagents' todos,
// a list) is one entry named for the channel.
func eachEntry(b backend.Blob, channel string, keep map[string]bool, lim codec.Limits, fn func(string, Entry) error) error {
	whole, _, err := codec.EachEntry(b.Type, b.Data, keep, valueField, lim, func(k string, v any) error { return fn(k, ParseEntry(v)) })
	if err != nil || whole == nil {
		return err
	}
	return entriesOf(whole, channel, keep, fn)
}

// entriesOf hands fn the entries of a decoded channel value, in key order:
// a map's keys, or the whole value as one entry named for the channel.
func entriesOf(v any, channel string, keep map[string]bool, fn func(string, Entry) error) error {
	m, ok := v.(map[string]any)
	if !ok {
		if v == nil || keep != nil && !keep[channel] {
			return nil
		}
		return fn(channel, Entry{Value: v})
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if keep != nil && !keep[k] {
			continue
		}
		if err := fn(k, ParseEntry(m[k])); err != nil {
			return err
		}
	}
	return nil
}

// ParseEntry reads one stored entry. A map with a "value" field is an entry
// in the convention; anything else is a bare value with no bookkeeping.
func ParseEntry(raw any) Entry {
	m, ok := raw.(map[string]any)
	if !ok {
		return Entry{Value: raw}
	}
	val, ok := m[valueField]
	if !ok {
		return Entry{Value: raw}
	}
	e := Entry{Value: val}
	keep := func(k string, v any) {
		if e.Extra == nil {
			e.Extra = map[string]any{}
		}
		e.Extra[k] = v
	}
	for k, v := range m {
		switch k {
		case valueField:
		case "tool":
			if s, ok := v.(string); ok {
				e.Tool = &s
			} else if v != nil {
				keep(k, v)
			}
		case "seq", "turn", "turns_written":
			n, ok := asInt(v)
			if !ok {
				if v != nil {
					keep(k, v)
				}
				continue
			}
			switch k {
			case "seq":
				e.Seq = &n
			case "turn":
				e.Turn = &n
			default:
				e.TurnsWritten = &n
			}
		case "inputs":
			if in, ok := asStringMap(v); ok {
				e.Inputs = in
			} else if v != nil {
				keep(k, v)
			}
		default:
			keep(k, v)
		}
	}
	return e
}

// asInt accepts the integer forms a decoder yields, including integral
// floats (JavaScript has no other number).
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case uint64:
		if n <= math.MaxInt64 {
			return int64(n), true
		}
	case float64:
		if n == math.Trunc(n) && math.Abs(n) <= 1<<53 {
			return int64(n), true
		}
	}
	return 0, false
}

func asStringMap(v any) (map[string]string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}

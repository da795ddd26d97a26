package reduce

import (
	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/format"
)

// Messages folds writes to a messages DeltaChannel into its list, as
// DeltaChannel.replay_writes and LangGraph's _messages_delta_reducer (which
// deepagents copies) do over the messages as historyd reads them
// (codec.Message: type, id, and for human messages text and marks):
//
//   - the last Overwrite among the writes resets the list to its messages,
//     and only the writes after it are applied;
//   - the written messages are taken in order, each write a list or one
//     message; after the last RemoveMessage of REMOVE_ALL_MESSAGES, the list
//     and every message written before it are dropped;
//   - a RemoveMessage deletes the message with its id, when there is one;
//   - a message whose id the list holds replaces that message in place;
//   - any other message, and one without an id, is appended.
//
// base is not modified.
func Messages(base []codec.Message, writes []codec.MessageWrite) []codec.Message {
	start := 0
	for i, w := range writes {
		if w.Overwrite {
			base, start = w.Messages, i+1
		}
	}
	var flat []codec.Message
	for _, w := range writes[start:] {
		flat = append(flat, w.Messages...)
	}
	if len(flat) == 0 {
		return base
	}
	for i := len(flat) - 1; i >= 0; i-- {
		if flat[i].Type == "remove" && flat[i].ID == format.RemoveAll {
			base, flat = nil, flat[i+1:]
			break
		}
	}
	out := make([]codec.Message, 0, len(base)+len(flat))
	removed := 0
	index := make(map[string]int, len(base)+len(flat))
	for _, m := range base {
		if m.ID != "" {
			index[m.ID] = len(out)
		}
		out = append(out, m)
	}
	gone := make([]bool, len(out), cap(out))
	for _, m := range flat {
		switch i, held := index[m.ID]; {
		case m.ID == "":
			out = append(out, m)
			gone = append(gone, false)
		case m.Type == "remove":
			if held {
				gone[i] = true
				removed++
				delete(index, m.ID)
			}
		case held:
			out[i] = m
		default:
			index[m.ID] = len(out)
			out = append(out, m)
			gone = append(gone, false)
		}
	}
	if removed == 0 {
		return out
	}
	kept := out[:0]
	for i, m := range out {
		if !gone[i] {
			kept = append(kept, m)
		}
	}
	return kept
}

// Resets reports whether writes replace the whole messages list (an
// Overwrite, or a RemoveMessage of REMOVE_ALL_MESSAGES): the list they leave
// does not depend on the one they were applied to.
func Resets(writes []codec.MessageWrite) bool {
	for _, w := range writes {
		if w.Overwrite {
			return true
		}
		for _, m := range w.Messages {
			if m.Type == "remove" && m.ID == format.RemoveAll {
				return true
			}
		}
	}
	return false
}

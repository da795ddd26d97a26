package store

import (
	"context"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/store/backend"
)

// The functional API (@entrypoint, @task) keeps no state channels of its
// own: what a run saves for the next (its return value, or
// entrypoint.final's save) is one value in one channel. Its top-level keys
// are read as the channels of the same name: a tool_state key as the
// tool_state channel, a messages key as the messages channel.

// SavedValueChannel is the channel holding the value the functional API
// (@entrypoint) saves at the end of a run (entrypoint.final's save, else
// the return value): what the next run gets as previous, and what get_state
// shows as the thread's state. Its top-level keys are served as state
// channels: a state channel a checkpoint has no version of is read out of
// it (see Checkpoint.State). A backend told which channels to list (the
// PostgreSQL backend's Channels) must list it too.
const SavedValueChannel = "__previous__"

// stateSource returns the channel a state channel's value at c is read
// from, and the version that names it: the channel itself where c has a
// version of it, else the functional API's saved value (SavedValueChannel)
// where c has one, whose key of the channel's name is the channel's value.
// The saved value's versions are marked, so that they never name the same
// cached state as a version of the channel itself. An empty version: no
// value.
func (c Checkpoint) stateSource(channel string) (from, version string) {
	if v, ok := c.States[channel]; ok || channel == SavedValueChannel {
		return channel, v
	}
	if v, ok := c.States[SavedValueChannel]; ok {
		return SavedValueChannel, SavedValueChannel + ":" + v
	}
	return channel, ""
}

// savedState reads channel's value out of the functional API's saved value
// b (SavedValueChannel), encoding its entries with enc as a state channel's
// value is: a saved value that is not a map, or has no such key, holds
// none. The saved value is decoded whole, within the store's limits.
func (s *Store) savedState(b backend.Blob, channel string, enc Encoder) (EncodedState, error) {
	var st EncodedState
	v, _, err := codec.Decode(b.Type, b.Data, s.limits)
	if err != nil {
		return st, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return st, nil
	}
	err = entriesOf(m[channel], channel, nil, st.appendEncoded(enc))
	return st, err
}

// messagesSource returns the version of the messages channel a listed
// checkpoint holds, and whether it holds one: the channel's own, else the
// saved value's (marked, as stateSource marks it), whose messages key is
// the channel.
func (s *Store) messagesSource(versions map[string]string) (version string, saved, ok bool) {
	if v, ok := versions[s.messages]; ok {
		return v, false, true
	}
	if v, ok := versions[SavedValueChannel]; ok {
		return SavedValueChannel + ":" + v, true, true
	}
	return "", false, false
}

// placeSaved reads what the messages key of the saved value holds at the
// checkpoints of cps without a messages channel, each saved version once
// and not at all when th knows it, and records it in th; a saved value
// without the key holds no messages. Checkpoints found deleted are added
// to missing, and their versions read at another checkpoint holding them.
func (s *Store) placeSaved(ctx context.Context, ref backend.Ref, th *threadData, cps []listed, mode codec.ReadMode, missing map[string]bool) error {
	tried := map[string]bool{}
	for {
		var ids, versions []string
		queued := map[string]bool{}
		for _, c := range cps {
			v, saved, ok := s.messagesSource(c.versions)
			if !ok || !saved || queued[v] || tried[c.id] {
				continue
			}
			if _, known := th.lookup(v); known {
				continue
			}
			queued[v] = true
			ids, versions = append(ids, c.id), append(versions, v)
		}
		if len(ids) == 0 {
			return nil
		}
		for start := 0; start < len(ids); start += scanBatch {
			end := min(start+scanBatch, len(ids))
			err := s.eachValue(ctx, ref, SavedValueChannel, ids[start:end], func(j int, b backend.Blob) error {
				i := start + j
				tried[ids[i]] = true
				if b.Missing {
					missing[ids[i]] = true
					return nil
				}
				list, ok, err := codec.Field(b.Type, b.Data, s.messages)
				if err == nil && ok {
					var m codec.Messages
					if m, err = codec.ReadMessagesKnowing(b.Type, list, s.limits, mode, th.knows); err == nil {
						th.learn(versions[i], m.Count, m.List)
					}
				} else if err == nil {
					th.learn(versions[i], 0, nil)
				}
				if err != nil {
					return &DecodeError{Ref: ref, CheckpointID: ids[i], Channel: SavedValueChannel, Err: err}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
}

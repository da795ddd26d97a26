package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/store/reduce"

	"github.com/historyd/historyd/store/backend"
)

// Encoder turns one entry into the bytes the layer above serves. The store
// calls it once per entry of each stored state version and caches what it
// returns under the Encoder, so Encode's result must depend on the entry
// alone, and an Encoder must be comparable (a struct or a pointer, not a
// func or a map). The entry's Value may be an codec.Raw, the stored
// value not decoded yet (codec.Walk reads it without building it, its
// Decode method builds it); it is only valid during Encode.
type Encoder interface {
	Encode(Entry) ([]byte, error)
}

// EncodedEntry is one key's entry as the store's Encoder encoded it.
type EncodedEntry struct {
	// Key is the state key.
	Key string
	// Turn is the entry's Turn, kept so that the keys a turn wrote can be
	// listed without decoding again.
	Turn *int64
	// Data is what the Encoder returned. It is shared with the cache and
	// must not be modified.
	Data []byte
}

// EncodedState is the state a turn ended on, one encoded entry per key, in
// key order.
type EncodedState struct {
	// Entries are the state's entries, sorted by key.
	Entries []EncodedEntry
	// Lost says the value cannot be read: it is a DeltaChannel's, rebuilt
	// from the writes of earlier checkpoints, and one of those was
	// deleted. The turn's state is no longer retained.
	Lost bool
}

// cost is what the state holds in memory, roughly: the encodings, the keys
// and the per-entry bookkeeping.
func (st EncodedState) cost() int64 {
	n := int64(64)
	for _, e := range st.Entries {
		n += int64(len(e.Data) + len(e.Key) + 64)
	}
	return n
}

// project keeps the entries whose keys are in keys; no keys keeps all.
func (st EncodedState) project(keys []string) EncodedState {
	if len(keys) == 0 || st.Lost {
		return st
	}
	var out EncodedState
	for _, e := range st.Entries {
		if slices.Contains(keys, e.Key) {
			out.Entries = append(out.Entries, e)
		}
	}
	return out
}

// stateKey names one version of a thread's state channel. Versions only
// name a value within one lineage of the thread: a thread deleted and
// written again under the same id starts its versions over (LangGraph.js
// counts 1, 2, 3, …), so the key also holds the oldest checkpoint id of the
// index the version was read through, which a new lineage never shares.
type stateKey struct {
	enc     Encoder
	ref     backend.Ref
	channel string
	lineage string
	version string
}

// ErrUnknownChannel marks a request for a channel the store was not
// configured to read.
var ErrUnknownChannel = errors.New("not a state channel historyd serves")

// ReadEncoded derives the thread's history and reads channel's value at
// the end of each turn pick selects from it ("" reads the default state
// channel), restricted to keys, each entry encoded by enc. The encodings
// of each state version are cached (Config.CacheBytes), so a warm read
// decodes nothing; states too large for the cache are decoded one entry at
// a time, restricted to keys, and not kept. A DeltaChannel's value is
// rebuilt from writes where the turn's end stores none; a turn whose value
// cannot be rebuilt, the checkpoints it is rebuilt from having been
// deleted, is read as Lost. It never answers for a turn whose last
// checkpoint was deleted: when one turns out to be gone (a deletion that
// spared the thread's oldest checkpoint), it derives the history afresh and
// reads again, once.
func (s *Store) ReadEncoded(ctx context.Context, ref backend.Ref, channel string, pick func(*History) []Turn, keys []string, enc Encoder) (*History, []Turn, []EncodedState, error) {
	if channel == "" {
		channel = s.states[0]
	}
	if !slices.Contains(s.states, channel) {
		return nil, nil, nil, fmt.Errorf("channel %q: %w (it serves %s)", channel, ErrUnknownChannel, strings.Join(s.states, ", "))
	}
	return readFresh(ctx, s, ref, pick, func(ix *index, turns []Turn, sn seen) ([]EncodedState, error) {
		return s.encodedStates(ctx, threadKey(ref), channel, ix, turns, keys, enc, sn)
	})
}

// staleReads is how many times readFresh derives the history again when
// a turn's last checkpoint was deleted between deriving and reading. Each
// try costs one listing of what changed; a retention job deleting while a
// busy reader reads can overtake a try or two, and a refusal (ErrStale)
// should be what only a thread changing faster than it can be read gets.
const staleReads = 4

// readFresh derives the history, picks turns and reads them with read,
// deriving afresh and reading again (up to staleReads tries in all, while
// ctx lasts) when read reports ErrStale: a turn whose last checkpoint was
// deleted since the history was derived is never answered from the cache. The turns pick selects from the cached
// history are checked to still exist in the same read that refreshes the
// history, and read learns which checkpoints that read saw.
func readFresh[T any](ctx context.Context, s *Store, ref backend.Ref, pick func(*History) []Turn, read func(*index, []Turn, seen) (T, error)) (*History, []Turn, T, error) {
	var zero T
	thread := threadKey(ref)
	for attempt := 0; ; attempt++ {
		var verify []string
		if old, ok := s.indexes.get(thread); ok {
			if h, err := s.historyAt(old, ref); err == nil {
				for _, t := range pick(h) {
					if t.Retained {
						verify = append(verify, t.End.ID)
					}
				}
			}
		}
		ix, sn, err := s.indexChecking(ctx, thread, verify)
		if err == nil {
			var h *History
			if h, err = s.historyAt(ix, ref); err == nil {
				turns := pick(h)
				var out T
				if out, err = read(ix, turns, sn); err == nil {
					return h, turns, out, nil
				}
			}
		}
		if !errors.Is(err, ErrStale) || attempt+1 >= staleReads || ctx.Err() != nil {
			return nil, nil, zero, err
		}
	}
}

// encodedStates reads the turns' states from the cache when the refresh
// that derived them saw their last checkpoints (sn), and from the backend
// otherwise, which is also what notices a last checkpoint since deleted.
//
// It is one function because the cache's answer and the backend's must be
// decided together per turn: which turns are fresh depends on what the same
// read proves deleted.
func (s *Store) encodedStates(ctx context.Context, ref backend.Ref, channel string, ix *index, turns []Turn, keys []string, enc Encoder, sn seen) (_ []EncodedState, err error) {
	ctx, sp := s.startSpan(ctx, SpanReadState)
	defer func() { endSpan(sp, err) }()
	lineage := ix.minID
	out := make([]EncodedState, len(turns))
	var miss []int
	for i, t := range turns {
		if !t.Retained {
			return nil, fmt.Errorf("turn %d of thread %q is not retained", t.N, ref.ThreadID)
		}
		v := t.End.State(channel)
		if s.shares && foreignVersion(v) {
			return nil, &ForeignValueError{Ref: ref, CheckpointID: t.End.ID, Channel: channel}
		}
		if sn.has(t.End.ID) {
			if v == "" {
				continue // no value yet: an empty state
			}
			if st, ok := s.encoded.get(stateKey{enc, ref, channel, lineage, v}); ok {
				out[i] = st.project(keys)
				continue
			}
		}
		miss = append(miss, i)
	}
	s.encoded.count(len(turns)-len(miss), len(miss))
	note(ctx, AttrStateChannel.String(channel), AttrStateTurns.Int(len(turns)),
		AttrStateCacheHits.Int(len(turns)-len(miss)), AttrStateCacheMisses.Int(len(miss)))
	if len(miss) == 0 {
		return out, nil
	}
	// The functional API's turns are read out of its saved value.
	var saved []int
	miss = slices.DeleteFunc(miss, func(i int) bool {
		from, _ := turns[i].End.stateSource(channel)
		if from != channel {
			saved = append(saved, i)
		}
		return from != channel
	})
	var keep map[string]bool
	if len(keys) > 0 {
		keep = make(map[string]bool, len(keys))
		for _, k := range keys {
			keep[k] = true
		}
	}
	// Turns that ended on the same version share one decoding.
	decoded := map[string]EncodedState{}
	unstored := map[string][]int{} // version → turns whose value is rebuilt
	bytesDecoded := 0
	// each reads the values of the turns of miss from the channel from:
	// the channel itself, or the saved value it is a key of.
	each := func(from string, miss []int) func(j int, b backend.Blob) error {
		return func(j int, b backend.Blob) error {
			i := miss[j]
			t := turns[i]
			v := t.End.State(channel)
			switch {
			case b.Missing:
				s.indexes.remove(ref)
				return fmt.Errorf("turn %d of thread %q: %w", t.N, ref.ThreadID, ErrStale)
			case b.Type == format.TypeEmpty && from != channel:
				return nil // no saved value: an empty state
			case b.Type == format.TypeEmpty && v != "":
				// A version and no stored value: rebuilt from writes below.
				unstored[v] = append(unstored[v], i)
				return nil
			}
			if st, ok := decoded[v]; ok && v != "" {
				out[i] = st.project(keys)
				return nil
			}
			// A state the cache could not hold anyway is decoded for the
			// keys asked only; any other is decoded whole, once, and kept.
			cacheable := v != "" && len(b.Data) <= s.stateAdmit
			var only map[string]bool
			if !cacheable {
				only = keep
			}
			bytesDecoded += len(b.Data)
			var st EncodedState
			var err error
			if from == channel {
				st, err = s.encodeState(b, channel, only, enc)
			} else {
				st, err = s.savedState(b, channel, enc)
			}
			if err != nil {
				return &DecodeError{Ref: ref, CheckpointID: t.End.ID, Channel: from, Err: err}
			}
			if cacheable {
				decoded[v] = st
				s.encoded.put(stateKey{enc, ref, channel, lineage, v}, st, st.cost())
			}
			out[i] = st.project(keys)
			return nil
		}
	}
	// Decoded straight from the driver's buffer where the backend allows:
	// the encodings never alias the blob.
	for _, read := range []struct {
		from string
		miss []int
	}{{channel, miss}, {SavedValueChannel, saved}} {
		if len(read.miss) == 0 {
			continue
		}
		ids := make([]string, len(read.miss))
		for j, i := range read.miss {
			ids[j] = turns[i].End.ID
		}
		if err = s.eachValue(ctx, ref, read.from, ids, each(read.from, read.miss)); err != nil {
			break
		}
	}
	note(ctx, AttrStateBytesDecoded.Int(bytesDecoded), AttrStateDeltaRebuild.Bool(len(unstored) > 0))
	if err != nil {
		return nil, err
	}
	if len(unstored) > 0 {
		if err := s.rebuildStates(ctx, ref, channel, ix, turns, unstored, keys, enc, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// eachValue hands fn each of channel's values at the checkpoints in ids,
// straight from the driver's buffer (the blob is only valid during fn).
// Errors other than fn's own are wrapped with what was being read.
func (s *Store) eachValue(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(int, backend.Blob) error) error {
	var fnErr error
	call := func(i int, b backend.Blob) error {
		fnErr = fn(i, b)
		return fnErr
	}
	err := s.b.EachValue(ctx, ref, channel, ids, call)
	if err != nil && err != fnErr {
		return fmt.Errorf("read %s of thread %q: %w", channel, ref.ThreadID, err)
	}
	return err
}

// rebuildStates rebuilds, from writes, channel's value at the ends of the
// turns whose versions are in unstored, encodes and caches each, and
// fills out.
func (s *Store) rebuildStates(ctx context.Context, ref backend.Ref, channel string, ix *index, turns []Turn, unstored map[string][]int, keys []string, enc Encoder, out []EncodedState) error {
	reducer, ok := reduce.Named(s.reducers[channel])
	if !ok {
		return fmt.Errorf("channel %q of thread %q is rebuilt from writes, but %q is not a reducer historyd has", channel, ref.ThreadID, s.reducers[channel])
	}
	nodes := make(map[string]listed, len(ix.checkpoints))
	for _, c := range ix.checkpoints {
		nodes[c.ID] = listed{id: c.ID, parent: c.Parent, versions: c.States}
	}
	var targets []string
	at := map[string][]int{}
	for _, is := range unstored {
		id := turns[is[0]].End.ID
		targets = append(targets, id)
		at[id] = is
	}
	slices.Sort(targets)
	decode := func(id string, b backend.Blob) (any, error) {
		v, _, err := codec.Decode(b.Type, b.Data, s.limits)
		if err != nil {
			return nil, &DecodeError{Ref: ref, CheckpointID: id, Channel: channel, Err: err}
		}
		return v, nil
	}
	broken, err := rebuild(ctx, s, ref, channel, nodes, targets, folder[any]{
		seed:  decode,
		empty: func() any { return nil },
		apply: func(id string, base any, writes []backend.Write) (any, error) {
			vals := make([]any, len(writes))
			for i, w := range writes {
				v, err := decode(id, w.Value)
				if err != nil {
					return nil, err
				}
				vals[i] = v
			}
			v, err := reducer.Replay(base, vals)
			if err != nil {
				return nil, &DecodeError{Ref: ref, CheckpointID: id, Channel: channel, Err: &codec.UnsupportedError{
					Format: "writes", Feature: "DeltaChannel writes", Offset: -1,
					Reason: fmt.Sprintf("the %s reducer cannot apply them: %v; set the channel's reducer (--channel-reducers)", reducer.Name, err)}}
			}
			return v, nil
		},
		done: func(id string, v any) error {
			var st EncodedState
			if err := entriesOf(v, channel, nil, st.appendEncoded(enc)); err != nil {
				return &DecodeError{Ref: ref, CheckpointID: id, Channel: channel, Err: err}
			}
			if version := nodes[id].versions[channel]; st.cost() <= int64(s.stateAdmit) {
				s.encoded.put(stateKey{enc, ref, channel, ix.minID, version}, st, st.cost())
			}
			for _, i := range at[id] {
				out[i] = st.project(keys)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	for _, id := range broken {
		for _, i := range at[id] {
			out[i] = EncodedState{Lost: true}
		}
	}
	return nil
}

// appendEncoded is the entry callback that encodes each entry with enc
// and appends it to st.
func (st *EncodedState) appendEncoded(enc Encoder) func(string, Entry) error {
	return func(k string, e Entry) error {
		data, err := enc.Encode(e)
		if err != nil {
			return fmt.Errorf("encode key %q: %w", k, err)
		}
		st.Entries = append(st.Entries, EncodedEntry{Key: k, Turn: e.Turn, Data: data})
		return nil
	}
}

// encodeState decodes a state channel value one entry at a time, encoding
// each before the next is decoded. Entry values stay encoded
// (codec.EachEntry) until the encoder re-encodes them, so no state value
// is ever built in memory.
func (s *Store) encodeState(b backend.Blob, channel string, keep map[string]bool, enc Encoder) (EncodedState, error) {
	var st EncodedState
	if err := eachEntry(b, channel, keep, s.limits, st.appendEncoded(enc)); err != nil {
		return EncodedState{}, err
	}
	// A map may repeat a key; the last one stands, as when decoding to a map.
	slices.SortStableFunc(st.Entries, func(a, b EncodedEntry) int { return strings.Compare(a.Key, b.Key) })
	kept := st.Entries[:0]
	for i, e := range st.Entries {
		if i+1 < len(st.Entries) && st.Entries[i+1].Key == e.Key {
			continue
		}
		kept = append(kept, e)
	}
	st.Entries = kept
	return st, nil
}

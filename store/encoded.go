package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Encoder turns one entry into the bytes the layer above serves. The store
// calls it once per entry of each stored state version and caches what it
// returns under the Encoder, so Encode's result must depend on the entry
// alone, and an Encoder must be comparable (a struct or a pointer, not a
// func or a map). The entry's Value may be an lgcodec.Raw, the stored
// value not decoded yet (lgcodec.Walk reads it without building it, its
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
}

// cost is what the state holds in memory, roughly: the encodings, the keys
// and the per-entry bookkeeping.
func (st EncodedState) cost() int {
	n := 64
	for _, e := range st.Entries {
		n += len(e.Data) + len(e.Key) + 64
	}
	return n
}

// project keeps the entries whose keys are in keys; no keys keeps all.
func (st EncodedState) project(keys []string) EncodedState {
	if len(keys) == 0 {
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
	ref     Ref
	lineage string
	version string
}

// ReadEncoded derives the thread's history and reads the state of the
// turns pick selects from it, restricted to keys, each entry encoded by enc.
// The encodings of each state version are cached (Config.CacheStateBytes),
// so a warm read decodes nothing; states too large for the cache are
// decoded one entry at a time, restricted to keys, and not kept. It never
// answers for a turn whose last checkpoint was deleted: when one turns out
// to be gone (a deletion that spared the thread's oldest checkpoint), it
// derives the history afresh and reads again, once.
func (s *Store) ReadEncoded(ctx context.Context, ref Ref, pick func(*History) []Turn, keys []string, enc Encoder) (*History, []Turn, []EncodedState, error) {
	return readFresh(ctx, s, ref, pick, func(ix *index, turns []Turn, sn seen) ([]EncodedState, error) {
		return s.encodedStates(ctx, ref, ix.minID, turns, keys, enc, sn)
	})
}

// encodedStates reads the turns' states from the cache when the refresh
// that derived them saw their last checkpoints (sn), and from the backend
// otherwise, which is also what notices a last checkpoint since deleted.
func (s *Store) encodedStates(ctx context.Context, ref Ref, lineage string, turns []Turn, keys []string, enc Encoder, sn seen) ([]EncodedState, error) {
	out := make([]EncodedState, len(turns))
	var miss []int
	for i, t := range turns {
		if !t.Retained {
			return nil, fmt.Errorf("turn %d of thread %q is not retained", t.N, ref.ThreadID)
		}
		if sn.has(t.End.ID) {
			if t.End.State == "" {
				continue // no value yet: an empty state
			}
			if st, ok := s.states.get(stateKey{enc, ref, lineage, t.End.State}); ok {
				out[i] = st.project(keys)
				continue
			}
		}
		miss = append(miss, i)
	}
	s.stateHits.Add(int64(len(turns) - len(miss)))
	s.stateMisses.Add(int64(len(miss)))
	if len(miss) == 0 {
		return out, nil
	}
	ids := make([]string, len(miss))
	for j, i := range miss {
		ids[j] = turns[i].End.ID
	}
	var keep map[string]bool
	if len(keys) > 0 {
		keep = make(map[string]bool, len(keys))
		for _, k := range keys {
			keep[k] = true
		}
	}
	// Turns that ended on the same version share one decoding.
	decoded := map[string]EncodedState{}
	each := func(j int, b Blob) error {
		t := turns[miss[j]]
		if b.Missing {
			s.indexes.remove(ref)
			return fmt.Errorf("turn %d of thread %q: %w", t.N, ref.ThreadID, ErrStale)
		}
		if st, ok := decoded[t.End.State]; ok && t.End.State != "" {
			out[miss[j]] = st.project(keys)
			return nil
		}
		// A state the cache could not hold anyway is decoded for the keys
		// asked only; any other is decoded whole, once, and kept.
		cacheable := t.End.State != "" && len(b.Data) <= s.stateAdmit
		var only map[string]bool
		if !cacheable {
			only = keep
		}
		st, err := s.encodeState(b, only, enc)
		if err != nil {
			return &DecodeError{Ref: ref, CheckpointID: t.End.ID, Channel: s.state, Err: err}
		}
		if cacheable {
			decoded[t.End.State] = st
			s.states.putCost(stateKey{enc, ref, lineage, t.End.State}, st, st.cost())
		}
		out[miss[j]] = st.project(keys)
		return nil
	}
	// Decoded straight from the driver's buffer where the backend allows:
	// the encodings never alias the blob.
	if err := s.eachValue(ctx, ref, s.state, ids, each); err != nil {
		return nil, err
	}
	return out, nil
}

// encodeState decodes a state channel value one entry at a time, encoding
// each before the next is decoded. Entry values stay encoded
// (lgcodec.EachEntry) until the encoder re-encodes them, so no state value
// is ever built in memory.
func (s *Store) encodeState(b Blob, keep map[string]bool, enc Encoder) (EncodedState, error) {
	var st EncodedState
	err := eachEntry(b, keep, s.limits, func(k string, e Entry) error {
		data, err := enc.Encode(e)
		if err != nil {
			return fmt.Errorf("encode key %q: %w", k, err)
		}
		st.Entries = append(st.Entries, EncodedEntry{Key: k, Turn: e.Turn, Data: data})
		return nil
	})
	if err != nil {
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

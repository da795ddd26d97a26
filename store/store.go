package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sync/singleflight"

	"github.com/historyd/historyd/store/lgcodec"
)

// Config configures a Store. The zero value of every field but Backend is a
// usable default.
type Config struct {
	// Backend reads the checkpoints. Required.
	Backend Backend
	// MessagesChannel is the channel holding the conversation's messages.
	// Default "messages".
	MessagesChannel string
	// StateChannel is the channel holding session state, key → StateEntry.
	// Default "tool_state".
	StateChannel string
	// Limits bound each decoded value. Default: lgcodec's defaults.
	Limits lgcodec.Limits
	// CacheThreads is how many threads' turn indexes are kept in memory and
	// refreshed incrementally. Default 1024; negative disables the cache.
	CacheThreads int
	// CacheScans is how many messages versions' counts are kept. Versions
	// are immutable, so these never go stale. Default 65536; negative
	// disables.
	CacheScans int
}

// Store derives turns from a backend's checkpoints and reads the state each
// turn ended on. It is safe for concurrent use.
type Store struct {
	b        Backend
	messages string
	state    string
	limits   lgcodec.Limits
	indexes  *lru[Ref, *index]
	scans    *lru[scanKey, counts]
	flight   singleflight.Group
}

type counts struct{ messages, humans int }

// New returns a Store reading through cfg.Backend.
func New(cfg Config) *Store {
	s := &Store{b: cfg.Backend, messages: cfg.MessagesChannel, state: cfg.StateChannel, limits: cfg.Limits}
	if s.messages == "" {
		s.messages = "messages"
	}
	if s.state == "" {
		s.state = "tool_state"
	}
	s.indexes = newLRU[Ref, *index](orDefault(cfg.CacheThreads, 1024))
	s.scans = newLRU[scanKey, counts](orDefault(cfg.CacheScans, 65536))
	return s
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return max(n, 0)
}

// Backend returns the backend the store reads through.
func (s *Store) Backend() Backend { return s.b }

// StateChannel returns the name of the channel read as session state.
func (s *Store) StateChannel() string { return s.state }

// History derives the thread's turns. A cached index is refreshed by
// reading only checkpoints newer than the newest one seen, unless the
// thread's checkpoint count shows something was deleted, which forces a full
// reread: a pruned turn is never served from cache. Concurrent calls for
// one thread share one read. No session state is decoded. The History is
// shared with other callers and must not be modified.
func (s *Store) History(ctx context.Context, ref Ref) (*History, error) {
	key := ref.ThreadID + "\x00" + ref.Namespace
	v, err, _ := s.flight.Do(key, func() (any, error) { return s.refresh(ctx, ref) })
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The shared read ended with another caller's context; ours still
		// stands.
		v, err = s.refresh(ctx, ref)
	}
	if err != nil {
		return nil, err
	}
	return v.(*History), nil
}

func (s *Store) refresh(ctx context.Context, ref Ref) (*History, error) {
	old, cached := s.indexes.get(ref)
	if inc, ok := s.b.(Incremental); ok && cached {
		count, newer, err := inc.CheckpointsSince(ctx, ref, old.maxID)
		if err != nil {
			return nil, fmt.Errorf("list checkpoints of thread %q: %w", ref.ThreadID, err)
		}
		if count == len(old.placed)+len(newer) {
			if len(newer) == 0 {
				return old.hist, nil
			}
			placed, err := s.place(ctx, ref, newer)
			if err != nil {
				return nil, err
			}
			// old.placed is shared with readers of the old index: append
			// to a copy.
			all := append(slices.Clip(old.placed), placed...)
			return s.build(ctx, ref, all, old)
		}
	}
	cps, err := s.b.Checkpoints(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of thread %q: %w", ref.ThreadID, err)
	}
	placed, err := s.place(ctx, ref, cps)
	if err != nil {
		return nil, err
	}
	return s.build(ctx, ref, placed, old)
}

// build derives the history of placed, reads the questions from the
// richest checkpoint (reusing prev's when the richest is unchanged), and
// caches the result.
func (s *Store) build(ctx context.Context, ref Ref, placed []Placed, prev *index) (*History, error) {
	h := Derive(ref, placed)
	if h.Total > 0 {
		var questions []string
		if prev != nil && prev.hist.Total > 0 && prev.hist.Richest.Version == h.Richest.Version {
			questions = prev.questions
		} else {
			blobs, err := s.b.Values(ctx, ref, s.messages, []string{h.Richest.ID})
			if err != nil {
				return nil, fmt.Errorf("read %s of thread %q: %w", s.messages, ref.ThreadID, err)
			}
			m, err := lgcodec.ScanMessages(blobs[0].Type, blobs[0].Data, s.limits)
			if err != nil {
				return nil, &DecodeError{Ref: ref, CheckpointID: h.Richest.ID, Channel: s.messages, Err: err}
			}
			questions = m.Humans
		}
		h.SetQuestions(questions)
		ix := &index{placed: placed, hist: h, questions: questions}
		for _, p := range placed {
			ix.maxID = max(ix.maxID, p.ID)
		}
		s.indexes.put(ref, ix)
		return h, nil
	}
	ix := &index{placed: placed, hist: h}
	for _, p := range placed {
		ix.maxID = max(ix.maxID, p.ID)
	}
	s.indexes.put(ref, ix)
	return h, nil
}

// scanBatch is how many messages versions one backend read fetches.
const scanBatch = 16

// refuseDelta reports a thread whose graph uses DeltaChannel: its
// checkpoints leave such channels out between snapshots, so counting their
// messages would derive wrong turns.
func refuseDelta(ref Ref, cps []Checkpoint, channel string) error {
	for _, c := range cps {
		if c.Delta {
			return &DecodeError{Ref: ref, CheckpointID: c.ID, Channel: channel, Err: &lgcodec.UnsupportedError{
				Format: "checkpoint", Feature: "DeltaChannel", Offset: -1,
				Reason: "the thread's graph stores channels as deltas rebuilt from writes; historyd reads stored values only",
			}}
		}
	}
	return nil
}

// place counts the messages of each checkpoint, reading and scanning each
// distinct messages version once, and not at all when a scan is cached.
func (s *Store) place(ctx context.Context, ref Ref, cps []Checkpoint) ([]Placed, error) {
	if err := refuseDelta(ref, cps, s.messages); err != nil {
		return nil, err
	}
	found := map[string]counts{}
	var missing []string // checkpoint ids, one per unscanned version
	var missingVersion []string
	for _, c := range cps {
		v, ok := c.Versions[s.messages]
		if !ok {
			continue
		}
		if _, seen := found[v]; seen {
			continue
		}
		if n, ok := s.scans.get(scanKey{ref, v}); ok {
			found[v] = n
			continue
		}
		found[v] = counts{}
		missing = append(missing, c.ID)
		missingVersion = append(missingVersion, v)
	}
	// Every messages version holds the whole conversation so far, so a long
	// thread's versions add up to far more than any one of them: they are
	// read a batch at a time, never all at once.
	for start := 0; start < len(missing); start += scanBatch {
		end := min(start+scanBatch, len(missing))
		blobs, err := s.b.Values(ctx, ref, s.messages, missing[start:end])
		if err != nil {
			return nil, fmt.Errorf("read %s of thread %q: %w", s.messages, ref.ThreadID, err)
		}
		for j, b := range blobs {
			i := start + j
			m, err := lgcodec.ScanMessages(b.Type, b.Data, s.limits)
			if err != nil {
				return nil, &DecodeError{Ref: ref, CheckpointID: missing[i], Channel: s.messages, Err: err}
			}
			n := counts{m.Count, len(m.Humans)}
			found[missingVersion[i]] = n
			// A checkpoint deleted between listing and reading reads as
			// empty; that is not the version's value, so it is not cached.
			if b.Type != "empty" {
				s.scans.put(scanKey{ref, missingVersion[i]}, n)
			}
		}
	}
	placed := make([]Placed, len(cps))
	for i, c := range cps {
		p := Placed{ID: c.ID, TS: c.TS}
		if v, ok := c.Versions[s.messages]; ok {
			n := found[v]
			p.Version, p.Messages, p.Humans = v, n.messages, n.humans
		}
		placed[i] = p
	}
	return placed, nil
}

// States reads the session state each of the given turns ended on, restricted
// to keys when keys is not empty. Turns must be retained turns of a History
// of ref. The result is in the order of turns.
func (s *Store) States(ctx context.Context, ref Ref, turns []Turn, keys []string) ([]map[string]Entry, error) {
	out := make([]map[string]Entry, len(turns))
	if len(turns) == 0 {
		return out, nil
	}
	at := make([]string, len(turns))
	for i, t := range turns {
		if !t.Retained {
			return nil, fmt.Errorf("turn %d of thread %q is not retained", t.N, ref.ThreadID)
		}
		at[i] = t.End.ID
	}
	blobs, err := s.b.Values(ctx, ref, s.state, at)
	if err != nil {
		return nil, fmt.Errorf("read %s of thread %q: %w", s.state, ref.ThreadID, err)
	}
	// The projection is applied while decoding: keys not asked for are
	// stepped over, never built.
	var keep map[string]bool
	if len(keys) > 0 {
		keep = make(map[string]bool, len(keys))
		for _, k := range keys {
			keep[k] = true
		}
	}
	for i, b := range blobs {
		v, ok, err := lgcodec.DecodeKeys(b.Type, b.Data, keep, s.limits)
		if err != nil {
			return nil, &DecodeError{Ref: ref, CheckpointID: at[i], Channel: s.state, Err: err}
		}
		entries, err := parseState(v, ok, keys)
		if err != nil {
			return nil, &DecodeError{Ref: ref, CheckpointID: at[i], Channel: s.state, Err: err}
		}
		out[i] = entries
	}
	return out, nil
}

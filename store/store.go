package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

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
	// RecountEvery is how often a cached thread's checkpoints are counted.
	// Every refresh checks the oldest checkpoint, which catches pruning
	// (LangGraph's prune strategies and retention jobs delete the oldest
	// first, or the whole thread); a count also catches a checkpoint deleted
	// from the middle, or one committed late with an older id. Counting
	// costs time in proportion to the thread's length, so it is not done on
	// every request. Default 1s; negative counts on every refresh.
	RecountEvery time.Duration
	// CacheStateBytes bounds the memory (about the bytes the encoder
	// returned) held by ReadEncoded's cache of encoded state versions.
	// Versions are immutable, so a cached one never goes stale; a state
	// whose stored value is larger than a quarter of the bound is never
	// cached. Default 64 MiB; negative disables the cache.
	CacheStateBytes int
}

// Store derives turns from a backend's checkpoints and reads the state each
// turn ended on. It is safe for concurrent use.
type Store struct {
	b        Backend
	messages string
	state    string
	limits   lgcodec.Limits
	indexes  *lru[Ref, *index]
	recount  time.Duration
	scans    *lru[scanKey, counts]
	flight   singleflight.Group
	states   *lru[stateKey, EncodedState]
	// stateHits and stateMisses count encoded-state cache lookups.
	stateHits, stateMisses atomic.Int64
	// stateAdmit is the largest stored state value the state cache takes.
	stateAdmit int
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
	s.states = newLRU[stateKey, EncodedState](orDefault(cfg.CacheStateBytes, 64<<20))
	s.stateAdmit = s.states.cap / 4
	s.recount = cfg.RecountEvery
	if s.recount == 0 {
		s.recount = time.Second
	}
	return s
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return max(n, 0)
}

// CacheStats is what the store's caches hold and how well they serve.
type CacheStats struct {
	// Threads is how many threads' turn indexes are cached.
	Threads int
	// StateVersions and StateBytes are how many encoded state versions
	// the state cache holds, and about how much memory they take.
	StateVersions, StateBytes int
	// StateHits and StateMisses count the turns whose state was served
	// from the cache and those read from the backend, since New.
	StateHits, StateMisses int64
}

// CacheStats reports on the store's caches.
func (s *Store) CacheStats() CacheStats {
	return CacheStats{
		Threads:       s.indexes.len(),
		StateVersions: s.states.len(),
		StateBytes:    s.states.cost(),
		StateHits:     s.stateHits.Load(),
		StateMisses:   s.stateMisses.Load(),
	}
}

// Backend returns the backend the store reads through.
func (s *Store) Backend() Backend { return s.b }

// Ping reports whether the backend can be reached and holds checkpoint
// tables the store can read; health probes ask the store, not its backend.
func (s *Store) Ping(ctx context.Context) error { return s.b.Ping(ctx) }

// StateChannel returns the name of the channel read as session state.
func (s *Store) StateChannel() string { return s.state }

// History derives the thread's turns. A cached index is refreshed by
// reading only checkpoints newer than the newest one seen, unless the
// thread's checkpoint count shows something was deleted, which forces a full
// reread: a pruned turn is never served from cache. Concurrent calls for
// one thread share one read. No session state is decoded. The History is
// shared with other callers and must not be modified.
func (s *Store) History(ctx context.Context, ref Ref) (*History, error) {
	ix, _, err := s.indexChecking(ctx, ref, nil)
	if err != nil {
		return nil, err
	}
	return ix.hist, nil
}

// indexChecking refreshes the thread's index and, in the same read, checks
// which of the checkpoints in verify still exist; seen says which
// checkpoints the read saw. Concurrent calls with nothing to verify share
// one read.
func (s *Store) indexChecking(ctx context.Context, ref Ref, verify []string) (*index, seen, error) {
	if len(verify) > 0 {
		return s.refresh(ctx, ref, verify)
	}
	type result struct {
		ix   *index
		seen seen
	}
	key := ref.ThreadID + "\x00" + ref.Namespace
	v, err, _ := s.flight.Do(key, func() (any, error) {
		ix, sn, err := s.refresh(ctx, ref, nil)
		return result{ix, sn}, err
	})
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The shared read ended with another caller's context; ours still
		// stands.
		return s.refresh(ctx, ref, nil)
	}
	if err != nil {
		return nil, seen{}, err
	}
	r := v.(result)
	return r.ix, r.seen, nil
}

// seen is what one refresh saw of a thread's checkpoints: a cached state is
// served only for a checkpoint the same read saw exist.
type seen struct {
	// all says the whole thread was listed.
	all bool
	// after: every checkpoint with a greater id was listed.
	after string
	// present holds the checked checkpoints that exist.
	present map[string]bool
}

// has reports whether the refresh saw checkpoint id exist.
func (p seen) has(id string) bool {
	return p.all || (p.after != "" && id > p.after) || p.present[id]
}

// listed is one checkpoint row, parsed: what derivation and delta
// detection read of it.
type listed struct {
	id, parent string
	ts         time.Time
	versions   map[string]string
	delta      bool
}

// list reads the thread's checkpoints through the backend and parses each
// row as it comes, keeping only the versions of the channels the store
// reads.
func (s *Store) list(ctx context.Context, ref Ref, q Query) (Census, []listed, error) {
	var out []listed
	keep := func(ch string) bool { return ch == s.messages || ch == s.state }
	census, err := s.b.List(ctx, ref, q, func(r Row) error {
		cp, err := lgcodec.ParseCheckpoint(r.Checkpoint.Type, r.Checkpoint.Data, keep)
		if err != nil {
			return &DecodeError{Ref: ref, CheckpointID: r.ID, Channel: "checkpoint", Err: err}
		}
		md, err := lgcodec.ParseMetadata(r.Metadata.Type, r.Metadata.Data)
		if err != nil {
			return &DecodeError{Ref: ref, CheckpointID: r.ID, Channel: "metadata", Err: err}
		}
		out = append(out, listed{id: r.ID, parent: r.Parent, ts: cp.TS, versions: cp.Versions, delta: md.Delta})
		return nil
	})
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			return Census{}, nil, err
		}
		return Census{}, nil, fmt.Errorf("list checkpoints of thread %q: %w", ref.ThreadID, err)
	}
	return census, out, nil
}

func (s *Store) refresh(ctx context.Context, ref Ref, verify []string) (*index, seen, error) {
	old, cached := s.indexes.get(ref)
	if cached {
		now := time.Now()
		count := s.recount < 0 || now.Sub(old.counted) >= s.recount
		census, newer, err := s.list(ctx, ref, Query{After: old.maxID, Count: count, Verify: verify})
		if err != nil {
			return nil, seen{}, err
		}
		sn := seen{after: old.maxID, present: make(map[string]bool, len(census.Present))}
		for _, id := range census.Present {
			sn.present[id] = true
		}
		// A checked checkpoint the index holds and the storage no longer
		// does is a deletion, noticed at once.
		intact := census.MinID == old.minID && (!count || census.Count == len(old.checkpoints)+len(newer)) &&
			len(census.Present) == len(verify)
		if intact {
			counted := old.counted
			if count {
				counted = now
			}
			if len(newer) == 0 {
				if count {
					// Only the count's time changes; the index stays
					// shared with its readers.
					ix := *old
					ix.counted = counted
					s.indexes.put(ref, &ix)
					return &ix, sn, nil
				}
				return old, sn, nil
			}
			counts, err := s.count(ctx, ref, newer)
			if err != nil {
				return nil, seen{}, err
			}
			// old.checkpoints is shared with readers of the old index:
			// append to a copy.
			all := append(slices.Clip(old.checkpoints), counts...)
			ix, err := s.build(ctx, ref, all, old, counted)
			return ix, sn, err
		}
	}
	counted := time.Now()
	_, cps, err := s.list(ctx, ref, Query{})
	if err != nil {
		return nil, seen{}, err
	}
	if cached && !sharesCheckpoint(old, cps) {
		// Not one checkpoint survived: the thread was deleted and written
		// again under the same id, and its versions may have started over
		// (LangGraph.js counts them), so the scans cached under them are
		// another conversation's. Encoded states are keyed by the oldest
		// checkpoint id as well, which a new lineage never shares.
		s.scans.removeIf(func(k scanKey) bool { return k.ref == ref })
		old = nil // nor are its questions
	}
	counts, err := s.count(ctx, ref, cps)
	if err != nil {
		return nil, seen{}, err
	}
	ix, err := s.build(ctx, ref, counts, old, counted)
	return ix, seen{all: true}, err
}

// build derives the history of cps, reads the questions from the richest
// checkpoint (reusing prev's when the richest is unchanged), and caches the
// result.
func (s *Store) build(ctx context.Context, ref Ref, cps []Checkpoint, prev *index, counted time.Time) (*index, error) {
	h := Derive(ref, cps)
	var questions []string
	if h.Total > 0 {
		if prev != nil && prev.hist.Total > 0 && prev.hist.Richest.Version == h.Richest.Version {
			questions = prev.questions
		} else {
			err := s.eachValue(ctx, ref, s.messages, []string{h.Richest.ID}, func(_ int, b Blob) error {
				if b.Missing {
					s.indexes.remove(ref)
					return fmt.Errorf("thread %q: %w", ref.ThreadID, ErrStale)
				}
				m, err := lgcodec.ScanMessages(b.Type, b.Data, s.limits)
				if err != nil {
					return &DecodeError{Ref: ref, CheckpointID: h.Richest.ID, Channel: s.messages, Err: err}
				}
				questions = m.Humans
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		h.SetQuestions(questions)
	}
	ix := &index{checkpoints: cps, hist: h, questions: questions, counted: counted}
	for i, c := range cps {
		ix.maxID = max(ix.maxID, c.ID)
		if i == 0 || c.ID < ix.minID {
			ix.minID = c.ID
		}
	}
	s.indexes.put(ref, ix)
	return ix, nil
}

// sharesCheckpoint reports whether cps can be the thread the index was
// built from: the index was empty, or one of cps is in it. An empty index
// shares with anything, since there was nothing of an earlier conversation
// to hold on to.
func sharesCheckpoint(ix *index, cps []listed) bool {
	if len(ix.checkpoints) == 0 || len(cps) == 0 {
		return len(ix.checkpoints) == 0
	}
	ids := make(map[string]bool, len(ix.checkpoints))
	for _, c := range ix.checkpoints {
		ids[c.ID] = true
	}
	for _, c := range cps {
		if ids[c.id] {
			return true
		}
	}
	return false
}

// eachValue hands fn each of channel's values at the checkpoints in ids,
// straight from the driver's buffer (the blob is only valid during fn).
// Errors other than fn's own are wrapped with what was being read.
func (s *Store) eachValue(ctx context.Context, ref Ref, channel string, ids []string, fn func(int, Blob) error) error {
	var fnErr error
	call := func(i int, b Blob) error {
		fnErr = fn(i, b)
		return fnErr
	}
	err := s.b.EachValue(ctx, ref, channel, ids, call)
	if err != nil && err != fnErr {
		return fmt.Errorf("read %s of thread %q: %w", channel, ref.ThreadID, err)
	}
	return err
}

// scanBatch is how many messages versions one backend read fetches.
const scanBatch = 16

// refuseDelta reports a thread whose graph uses DeltaChannel: its
// checkpoints leave such channels out between snapshots, so counting their
// messages would derive wrong turns.
func refuseDelta(ref Ref, cps []listed, channel string) error {
	for _, c := range cps {
		if c.delta {
			return &DecodeError{Ref: ref, CheckpointID: c.id, Channel: channel, Err: &lgcodec.UnsupportedError{
				Format: "checkpoint", Feature: "DeltaChannel", Offset: -1,
				Reason: "the thread's graph stores channels as deltas rebuilt from writes; historyd reads stored values only",
			}}
		}
	}
	return nil
}

// count counts the messages of each checkpoint, reading and scanning each
// distinct messages version once, and not at all when a scan is cached.
func (s *Store) count(ctx context.Context, ref Ref, cps []listed) ([]Checkpoint, error) {
	if err := refuseDelta(ref, cps, s.messages); err != nil {
		return nil, err
	}
	found := map[string]counts{}
	var missing []string // checkpoint ids, one per unscanned version
	var missingVersion []string
	for _, c := range cps {
		v, ok := c.versions[s.messages]
		if !ok {
			continue
		}
		if _, done := found[v]; done {
			continue
		}
		if n, ok := s.scans.get(scanKey{ref, v}); ok {
			found[v] = n
			continue
		}
		found[v] = counts{}
		missing = append(missing, c.id)
		missingVersion = append(missingVersion, v)
	}
	// Every messages version holds the whole conversation so far, so a long
	// thread's versions add up to far more than any one of them: they are
	// read a batch at a time, never all at once.
	for start := 0; start < len(missing); start += scanBatch {
		end := min(start+scanBatch, len(missing))
		err := s.eachValue(ctx, ref, s.messages, missing[start:end], func(j int, b Blob) error {
			i := start + j
			if b.Missing {
				// Deleted since it was listed: counted as no messages for
				// now, and not cached, since that is not the version's
				// value. The next refresh notices the deletion.
				return nil
			}
			m, err := lgcodec.CountMessages(b.Type, b.Data, s.limits)
			if err != nil {
				return &DecodeError{Ref: ref, CheckpointID: missing[i], Channel: s.messages, Err: err}
			}
			n := counts{m.Count, m.HumanCount}
			found[missingVersion[i]] = n
			s.scans.put(scanKey{ref, missingVersion[i]}, n)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]Checkpoint, len(cps))
	for i, c := range cps {
		p := Checkpoint{ID: c.id, Parent: c.parent, TS: c.ts, State: c.versions[s.state]}
		if v, ok := c.versions[s.messages]; ok {
			n := found[v]
			p.Version, p.Messages, p.Humans = v, n.messages, n.humans
		}
		out[i] = p
	}
	return out, nil
}

// readFresh derives the history, picks turns and reads them with read,
// deriving afresh and reading once more when read reports ErrStale: a
// turn whose last checkpoint was deleted since the history was derived is
// never answered from the cache. The turns pick selects from the cached
// history are checked to still exist in the same read that refreshes the
// history, and read learns which checkpoints that read saw.
func readFresh[T any](ctx context.Context, s *Store, ref Ref, pick func(*History) []Turn, read func(*index, []Turn, seen) (T, error)) (*History, []Turn, T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		var verify []string
		if old, ok := s.indexes.get(ref); ok {
			for _, t := range pick(old.hist) {
				if t.Retained {
					verify = append(verify, t.End.ID)
				}
			}
		}
		ix, sn, err := s.indexChecking(ctx, ref, verify)
		if err == nil {
			turns := pick(ix.hist)
			var out T
			if out, err = read(ix, turns, sn); err == nil {
				return ix.hist, turns, out, nil
			}
		}
		if !errors.Is(err, ErrStale) || attempt > 0 {
			return nil, nil, zero, err
		}
	}
}

package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/store/reduce"

	"github.com/historyd/historyd/store/backend"
)

// Config configures a Store. The zero value of every field but Backend is
// its documented default; a negative cache bound turns that cache off.
type Config struct {
	// Backend reads the checkpoints. Required.
	Backend backend.Backend
	// MessagesChannel is the channel holding the conversation's messages.
	// Default "messages".
	MessagesChannel string
	// StateChannels are the channels holding session state that may be
	// read; the first is read when a request names none. A tool_state
	// channel holds key → StateEntry; any other map is served key by key,
	// and a value that is not a map as one entry named for the channel.
	// Default ["tool_state"].
	StateChannels []string
	// Reducers names the reducer of each channel whose value is rebuilt
	// from writes (a DeltaChannel's): "messages", "merge", "tool_state" or
	// "last" (see package reduce). Default: "messages" for the messages
	// channel, "tool_state" for a channel named tool_state, "merge" for any
	// other (deepagents' files).
	Reducers map[string]string
	// Limits bound each decoded value. Default: langgraph/codec's defaults.
	Limits codec.Limits
	// CacheBytes bounds the memory the store's caches hold together: the
	// turn indexes (each thread's checkpoints and what its messages
	// versions hold) and the encoded state versions, each charged about
	// what it holds in memory; the least recently used items, of either
	// cache, make room. A thread whose index alone would take more than a
	// quarter of it is served without being cached (Config.Logger says so
	// once), as is a state stored larger than a quarter of the state
	// cache's bound. Default DefaultCacheBytes(): a quarter of GOMEMLIMIT
	// when it is set, else 256 MiB; negative disables both caches.
	CacheBytes int64
	// CacheThreads, when above 0, also bounds how many threads' turn
	// indexes are cached; negative disables the index cache. Default 0: as
	// many as CacheBytes holds. (It was the index cache's only bound
	// before CacheBytes, 1024 by default.)
	CacheThreads int
	// RecountEvery is how often a cached thread's checkpoints are counted.
	// Every refresh checks the oldest checkpoint, which catches pruning
	// (LangGraph's prune strategies and retention jobs delete the oldest
	// first, or the whole thread); a count also catches a checkpoint deleted
	// from the middle, or one committed late with an older id. Counting
	// costs time in proportion to the thread's length, so it is not done on
	// every request. Default DefaultRecountEvery; negative counts on every
	// refresh.
	RecountEvery time.Duration
	// CacheStateBytes, when above 0, also bounds the part of CacheBytes
	// the encoded state versions ReadEncoded caches may take (versions are
	// immutable, so a cached one never goes stale); negative disables the
	// state cache. Default 0: as much of CacheBytes as is free. (It was the
	// state cache's own budget before CacheBytes, 64 MiB by default.)
	CacheStateBytes int
	// Logger receives what the store notices about the threads it reads:
	// a thread too large to cache, once per thread. Records are logged
	// with the read's context, and name the thread only as ThreadLabel
	// labels it. Default: nothing is logged.
	Logger *slog.Logger
	// ThreadLabel is how Logger's records name a thread: a keyed hash, say,
	// never the id itself, which may be personal. Default: they do not
	// name it.
	ThreadLabel func(threadID string) string
	// TracerProvider, when set, traces the turn index's refreshes and the
	// state reads (SpanIndex, SpanReadState). Nil: no spans, no cost.
	TracerProvider trace.TracerProvider
}

// DefaultMessagesChannel and DefaultStateChannel are the channels a Store
// reads when Config names none.
const (
	DefaultMessagesChannel = "messages"
	DefaultStateChannel    = "tool_state"
)

// DefaultRecountEvery is how often a cached thread's checkpoints are
// counted when Config.RecountEvery is zero.
const DefaultRecountEvery = time.Second

// Validate reports a configuration New would misread: a channel named
// twice or empty, or a reducer it does not know.
func (c Config) Validate() error {
	seen := map[string]bool{}
	for _, ch := range append([]string{c.MessagesChannel}, c.StateChannels...) {
		if ch == "" && len(seen) > 0 {
			return errors.New("store: a state channel name is empty")
		}
		if ch != "" && seen[ch] {
			return fmt.Errorf("store: channel %q is named twice", ch)
		}
		seen[ch] = true
	}
	for ch, name := range c.Reducers {
		if _, ok := reduce.Named(name); !ok && name != "messages" {
			return fmt.Errorf("store: channel %q: unknown reducer %q; want one of %s", ch, name, strings.Join(reduce.Names(), ", "))
		}
	}
	return nil
}

// Store derives turns from a backend's checkpoints and reads the state each
// turn ended on. It is safe for concurrent use.
type Store struct {
	b        backend.Backend
	messages string
	states   []string
	reducers map[string]string
	limits   codec.Limits
	caches   *cache
	indexes  *shelf[backend.Ref, *index]
	recount  time.Duration
	// refreshes shares refreshes of a thread that no turn's check ties to
	// the asking read (see indexChecking).
	refreshes refreshes
	// probes shares the warm path's freshness probes between reads.
	probes  *prober
	encoded *shelf[stateKey, EncodedState]
	// stateAdmit is the largest stored state value the state cache takes.
	stateAdmit int
	// tracer starts the store's spans; nil when the store is not traced.
	tracer trace.Tracer
	// uncached says what the store has noticed about threads too large to
	// cache (see Config.Logger).
	uncached notices
	// shares says the backend shares stored values by version: a foreign
	// version's value is never read (see foreignVersion).
	shares bool
}

// New returns a Store reading through cfg.Backend. A configuration
// Validate refuses is read as it stands: an unknown reducer fails the reads
// that need it.
func New(cfg Config) *Store {
	s := &Store{b: cfg.Backend, messages: cfg.MessagesChannel, states: slices.Clone(cfg.StateChannels), limits: cfg.Limits,
		reducers: map[string]string{}, probes: &prober{b: cfg.Backend}, tracer: newTracer(cfg.TracerProvider), shares: backend.SharesBlobs(cfg.Backend)}
	if s.messages == "" {
		s.messages = DefaultMessagesChannel
	}
	if len(s.states) == 0 {
		s.states = []string{DefaultStateChannel}
	}
	for _, ch := range append([]string{s.messages}, s.states...) {
		switch {
		case cfg.Reducers[ch] != "":
			s.reducers[ch] = cfg.Reducers[ch]
		case ch == s.messages:
			s.reducers[ch] = "messages"
		case ch == DefaultStateChannel:
			s.reducers[ch] = reduce.ToolState.Name
		default:
			s.reducers[ch] = reduce.Merge.Name
		}
	}
	budget := cfg.CacheBytes
	if budget == 0 {
		budget = DefaultCacheBytes()
	}
	s.caches = newCache(budget)
	s.indexes = newShelf[backend.Ref, *index](s.caches, cfg.CacheThreads < 0, s.caches.capacity/4, max(cfg.CacheThreads, 0), 0)
	states := s.caches.capacity
	if cfg.CacheStateBytes > 0 {
		states = min(states, int64(cfg.CacheStateBytes))
	}
	s.encoded = newShelf[stateKey, EncodedState](s.caches, cfg.CacheStateBytes < 0, states/4, 0, int64(max(cfg.CacheStateBytes, 0)))
	s.stateAdmit = int(min(states/4, math.MaxInt32))
	s.uncached = notices{log: cfg.Logger, label: cfg.ThreadLabel}
	s.recount = cfg.RecountEvery
	if s.recount == 0 {
		s.recount = DefaultRecountEvery
	}
	return s
}

// CacheStats is what the store's caches hold and how well they serve.
type CacheStats struct {
	// Capacity is the memory the caches may hold together
	// (Config.CacheBytes), and Bytes what they hold, in bytes.
	Capacity, Bytes int64
	// Index is the turn-index cache: a hit is a read that found the
	// thread's index cached (and read only what is newer), a miss one that
	// listed the whole thread; Uncached counts the indexes too large to
	// keep.
	Index CacheUse
	// State is the encoded-state cache: a hit is a turn whose state was
	// served from it, a miss one read from the backend.
	State CacheUse
	// Threads is Index.Entries, StateVersions State.Entries, StateBytes
	// State.Bytes, StateHits State.Hits and StateMisses State.Misses: the
	// statistics there were before the caches shared a budget.
	Threads, StateVersions, StateBytes int
	StateHits, StateMisses             int64
}

// CacheStats reports on the store's caches.
func (s *Store) CacheStats() CacheStats {
	st := CacheStats{Capacity: s.caches.capacity, Index: s.indexes.use(), State: s.encoded.use()}
	st.Bytes = st.Index.Bytes + st.State.Bytes
	st.Threads, st.StateVersions, st.StateBytes = st.Index.Entries, st.State.Entries, int(st.State.Bytes)
	st.StateHits, st.StateMisses = st.State.Hits, st.State.Misses
	return st
}

// Backend returns the backend the store reads through.
func (s *Store) Backend() backend.Backend { return s.b }

// Ping reports whether the backend can be reached and holds checkpoint
// tables the store can read; health probes ask the store, not its backend.
func (s *Store) Ping(ctx context.Context) error { return s.b.Ping(ctx) }

// StateChannels returns the channels that may be read as session state,
// the default first.
func (s *Store) StateChannels() []string { return slices.Clone(s.states) }

// MessagesChannel returns the channel turns are derived from.
func (s *Store) MessagesChannel() string { return s.messages }

// readsChannel reports whether channel is one the store reads: the
// messages channel, the state channels, and the functional API's saved
// value, which state channels are read out of (see Checkpoint.State).
func (s *Store) readsChannel(channel string) bool {
	return channel == s.messages || channel == SavedValueChannel || slices.Contains(s.states, channel)
}

// History derives the thread's turns. A cached index is refreshed by
// reading only checkpoints newer than the newest one seen, unless the
// thread's checkpoint count shows something was deleted, which forces a full
// reread: a pruned turn is never served from cache. Concurrent calls for
// one thread share one read. No session state is decoded. The History is
// shared with other callers and must not be modified.
//
// With ref.Head set the turns are those of the lineage ending there (see
// backend.Ref.Head), derived from the same cached index as the thread's own.
func (s *Store) History(ctx context.Context, ref backend.Ref) (*History, error) {
	ix, _, err := s.indexChecking(ctx, threadKey(ref), nil)
	if err != nil {
		return nil, err
	}
	return s.historyAt(ix, ref)
}

// indexChecking refreshes the thread's index and, in the same read, checks
// which of the checkpoints in verify still exist; seen says which
// checkpoints the read saw. Concurrent calls with nothing to verify share
// one read.
func (s *Store) indexChecking(ctx context.Context, ref backend.Ref, verify []string) (_ *index, _ seen, err error) {
	ctx, sp := s.startSpan(ctx, SpanIndex)
	defer func() { endSpan(sp, err) }()
	if len(verify) > 0 {
		return s.refresh(ctx, ref, verify)
	}
	return s.refreshes.do(ctx, ref, func(ctx context.Context) (*index, seen, error) {
		return s.refresh(ctx, ref, nil)
	})
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

// listed is one checkpoint row, parsed: what derivation and rebuilding
// read of it.
type listed struct {
	id, parent string
	ts         time.Time
	// versions holds the versions of the channels the store reads.
	versions map[string]string
	delta    bool
	// between says the checkpoint was made between runs (see
	// Checkpoint.Between).
	between bool
	// input says it is a run's input checkpoint (see Checkpoint.Input).
	input bool
	rest  Rest
}

// madeBetweenRuns reports whether a checkpoint whose metadata names source
// was made between runs: by an input, or by update_state (which LangGraph
// records as "update", and as "fork" when it branches off).
func madeBetweenRuns(source string) bool {
	return source == "input" || source == "update" || source == "fork"
}

// restOf reads whether a run goes on from a parsed checkpoint.
func restOf(cp codec.Checkpoint) Rest {
	rest, known := cp.AtRest()
	switch {
	case !known:
		return RestUnknown
	case rest:
		return AtRest
	}
	return Running
}

// list reads the thread's checkpoints through the backend and parses each
// row as it comes, keeping only the versions of the channels the store
// reads, as th shares them (see threadData.shareVersions).
func (s *Store) list(ctx context.Context, ref backend.Ref, q backend.Query, th *threadData) (backend.Census, []listed, error) {
	var out []listed
	rows := steps{ctx: ctx}
	census, err := s.b.List(ctx, ref, q, func(r backend.Row) error {
		if err := rows.next(); err != nil {
			return err
		}
		cp, err := codec.ParseCheckpoint(r.Checkpoint.Type, r.Checkpoint.Data, s.readsChannel)
		if err != nil {
			return &DecodeError{Ref: ref, CheckpointID: r.ID, Channel: "checkpoint", Err: err}
		}
		md, err := codec.ParseMetadata(r.Metadata.Type, r.Metadata.Data)
		if err != nil {
			return &DecodeError{Ref: ref, CheckpointID: r.ID, Channel: "metadata", Err: err}
		}
		out = append(out, listed{id: r.ID, parent: r.Parent, ts: cp.TS, versions: th.shareVersions(cp.Versions), delta: md.Delta, between: madeBetweenRuns(md.Source),
			input: md.Source == "input", rest: restOf(cp)})
		return nil
	})
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			return backend.Census{}, nil, err
		}
		return backend.Census{}, nil, fmt.Errorf("list checkpoints of thread %q: %w", ref.ThreadID, err)
	}
	return census, out, nil
}

// since reads what a cached index of the thread needs to be brought up to
// date: the census and the checkpoints newer than after. Without a count,
// a shared probe asks first (the warm path's common case is that nothing is
// new), and the rows are listed only when it finds newer ones.
func (s *Store) since(ctx context.Context, ref backend.Ref, th *threadData, after string, count bool, verify []string) (backend.Census, []listed, error) {
	if count {
		return s.list(ctx, ref, backend.Query{After: after, Count: true, Verify: verify}, th)
	}
	pr, err := s.probes.probe(ctx, backend.Probe{Ref: ref, After: after, Verify: verify})
	if err != nil {
		return backend.Census{}, nil, fmt.Errorf("probe thread %q: %w", ref.ThreadID, err)
	}
	if !pr.Newer {
		return backend.Census{Count: -1, MinID: pr.MinID, Present: pr.Present}, nil, nil
	}
	return s.list(ctx, ref, backend.Query{After: after, Verify: verify}, th)
}

func (s *Store) refresh(ctx context.Context, ref backend.Ref, verify []string) (*index, seen, error) {
	old, cached := s.indexes.get(ref)
	if cached {
		s.indexes.count(1, 0)
		now := time.Now()
		count := s.recount < 0 || now.Sub(old.counted) >= s.recount
		census, newer, err := s.since(ctx, ref, old.thread, old.maxID, count, verify)
		if err != nil {
			return nil, seen{}, err
		}
		note(ctx, AttrIndexCache.String("hit"), AttrIndexListed.Int(len(newer)),
			AttrIndexCheckpoints.Int(len(old.checkpoints)+len(newer)), AttrIndexTurns.Int(old.hist.Total))
		sn := seen{after: old.maxID, present: make(map[string]bool, len(census.Present))}
		for _, id := range census.Present {
			sn.present[id] = true
		}
		// A checked checkpoint the index holds and the storage no longer
		// does is a deletion, noticed at once.
		// A checkpoint listed since whose parent is neither indexed nor
		// listed with it (committed late with an older id, or a fork point
		// deleted) leaves the index unable to place it: read afresh.
		intact := census.MinID == old.minID && (!count || census.Count == len(old.checkpoints)+len(newer)) &&
			len(census.Present) == len(verify) && parentsKnown(old.checkpoints, newer)
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
					s.indexes.put(ref, &ix, ix.size)
					return &ix, sn, nil
				}
				return old, sn, nil
			}
			distinguish(old.checkpoints, newer, old.thread)
			placed, err := s.place(ctx, ref, old.thread, old.checkpoints, newer)
			if err != nil {
				return nil, seen{}, err
			}
			// old.checkpoints is shared with readers of the old index:
			// append to a copy.
			all := append(slices.Clip(old.checkpoints), placed...)
			ix, err := s.build(ctx, ref, all, old.thread, counted)
			if err != nil {
				return nil, seen{}, err
			}
			note(ctx, AttrIndexTurns.Int(ix.hist.Total))
			return ix, sn, nil
		}
	} else {
		s.indexes.count(0, 1)
	}
	counted := time.Now()
	// Read afresh, cold or not: after a deletion, what the store answers
	// must rest on what is left, not on what it happened to read before
	// (a DeltaChannel's list read at a checkpoint since deleted may be
	// beyond what the checkpoints left can show).
	th := newThreadData()
	_, cps, err := s.list(ctx, ref, backend.Query{}, th)
	if err != nil {
		return nil, seen{}, err
	}
	cache := "miss"
	if cached {
		cache = "invalidated"
	}
	note(ctx, AttrIndexCache.String(cache), AttrIndexListed.Int(len(cps)), AttrIndexCheckpoints.Int(len(cps)))
	distinguish(nil, cps, th)
	placed, err := s.place(ctx, ref, th, nil, cps)
	if err != nil {
		return nil, seen{}, err
	}
	ix, err := s.build(ctx, ref, placed, th, counted)
	if err != nil {
		return nil, seen{}, err
	}
	note(ctx, AttrIndexTurns.Int(ix.hist.Total))
	return ix, seen{all: true}, nil
}

// build derives the history of cps and caches the index, unless it is
// too large to: the read is then served from it all the same.
func (s *Store) build(ctx context.Context, ref backend.Ref, cps []Checkpoint, th *threadData, counted time.Time) (*index, error) {
	// Derivation walks every checkpoint without looking at the context:
	// a read whose caller has gone stops before it.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	th.fillInputs(cps)
	hist := Derive(ref, cps, th.table())
	if hist.Numbering == Runs {
		// The runs' questions are their inputs, read once per input.
		read, err := s.readRunInputs(ctx, ref, th, hist)
		if err != nil {
			return nil, err
		}
		if read {
			hist = Derive(ref, cps, th.table())
		}
	}
	ix := &index{checkpoints: cps, hist: hist, thread: th, counted: counted, heads: &heads{}}
	for i, c := range cps {
		ix.maxID = max(ix.maxID, c.ID)
		if i == 0 || c.ID < ix.minID {
			ix.minID = c.ID
		}
	}
	ix.size = indexSize(ix)
	if !s.indexes.put(ref, ix, ix.size) && !s.indexes.off {
		s.uncached.note(ctx, ref, len(cps), ix.size, s.indexes.admit)
	}
	return ix, nil
}

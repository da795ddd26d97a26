package client

import "time"

// ReadOption adjusts one reading call of a Client (Snapshots, Snapshot,
// Current, Turns, TurnIndex, StreamSnapshots, Diff, WatchTurns, Threads,
// AllThreads): which namespace, channel, keys and lineage it reads, how
// values travel, and what is particular to the call, such as a listing's
// page. A call's required arguments (the thread id, the turn numbers) are
// its parameters; everything optional is a ReadOption.
//
// ReadOptions are made only by this package's With... functions, and each
// one says which calls it applies to. A call ignores the options that do
// not apply to it, as though they were not given: one set of options (a
// host's namespace and channel, say, as inspect.Inspector.Options holds)
// can then be passed to every call, and the ones a call has no use for
// change nothing it sends. A nil ReadOption is ignored too.
type ReadOption interface {
	// applyRead records the option in c. It is unexported so that every
	// option is one of this package's, and documents its calls.
	applyRead(c *ReadConfig)
}

// readOption is a ReadOption from a function.
type readOption func(*ReadConfig)

func (f readOption) applyRead(c *ReadConfig) { f(c) }

// ReadConfig is what a set of ReadOptions asks for, for every call at once:
// each call reads the fields that apply to it. Implementations of
// ThreadHistory other than Client get it from NewReadConfig.
type ReadConfig struct {
	// Namespace is the checkpoint namespace; empty is the root graph.
	Namespace string
	// Channel is the state channel to read; empty is the server's default.
	Channel string
	// Keys restricts returned state to these keys; empty means every key.
	Keys []string
	// Head, when set, reads the lineage ending at this checkpoint instead
	// of the thread's head.
	Head string
	// ValueFormat is how values travel; the zero value is JSONValues.
	ValueFormat ValueFormat
	// RawValues leaves values as their JSON text (Entry.JSON) unparsed.
	RawValues bool
	// KeysWritten asks Turns for each turn's keys_written.
	KeysWritten bool
	// FromTurn makes StreamSnapshots skip retained turns before it; 0 and 1
	// both mean from the first turn. Past MaxTurn or negative,
	// StreamSnapshots refuses it.
	FromTurn int
	// AfterTurn makes WatchTurns skip the turns up to it; 0 sends every
	// turn. Past MaxTurn or negative, WatchTurns refuses it.
	AfterTurn int
	// Checkpoints makes WatchTurns also yield each new checkpoint's state.
	Checkpoints bool
	// IncludeUnchanged makes Diff also list the keys whose entry is the
	// same in both turns.
	IncludeUnchanged bool
	// Prefix makes Threads list only the thread ids starting with it.
	Prefix string
	// PageSize is the most threads one page of Threads holds; 0 is the
	// server's default.
	PageSize int
	// PageToken continues a Threads listing from the page before.
	PageToken string
	// NewestFirst makes Threads list by last activity, newest first.
	NewestFirst bool
	// ActiveAfter and ActiveBefore, when set, make Threads keep only the
	// threads whose last checkpoint was written after (before) them.
	ActiveAfter, ActiveBefore time.Time
	// IncludeTurns makes Threads count each listed thread's turns.
	IncludeTurns bool
}

// NewReadConfig applies opts, in order, to an empty ReadConfig; nil
// options are skipped.
func NewReadConfig(opts ...ReadOption) ReadConfig {
	var c ReadConfig
	for _, opt := range opts {
		if opt != nil {
			opt.applyRead(&c)
		}
	}
	return c
}

// WithNamespace reads the checkpoints of a subgraph's namespace instead of
// the root graph's (the empty namespace, the default). Every reading call
// takes it.
func WithNamespace(ns string) ReadOption {
	return readOption(func(o *ReadConfig) { o.Namespace = ns })
}

// WithChannel reads the state channel name instead of the server's default
// (the first of its --state-channels), e.g. deepagents' "files" or "todos".
// It must be one the server serves: any other fails with INVALID_ARGUMENT
// naming the ones it does. Every call that reads a thread takes it
// (Snapshots, Snapshot, Current, StreamSnapshots, Diff, WatchTurns, and
// Turns and TurnIndex, for which it picks the channel whose keys
// WithKeysWritten lists); Threads ignores it.
func WithChannel(name string) ReadOption {
	return readOption(func(o *ReadConfig) { o.Channel = name })
}

// WithKeys restricts the returned state to the given keys, so a reader after
// one key does not move every other key's value across the network. Keys a
// turn does not hold are absent from its state. Repeated uses accumulate.
// It applies to the calls that return state: Snapshots, Snapshot, Current,
// StreamSnapshots, WatchTurns, and Diff, which compares only these keys;
// Turns, TurnIndex and Threads ignore it.
func WithKeys(keys ...string) ReadOption {
	return readOption(func(o *ReadConfig) { o.Keys = append(o.Keys, keys...) })
}

// WithHead reads the lineage ending at checkpoint id (a branch a fork
// abandoned: Fork.Newest, listed by Client.TurnIndex) instead of the
// thread's head: turns are numbered on its parent chain. An id the thread
// does not hold fails with INVALID_ARGUMENT; at most 256 bytes. Every call
// that reads a thread takes it; Threads ignores it. Empty is the thread's
// head.
func WithHead(id string) ReadOption {
	return readOption(func(o *ReadConfig) { o.Head = id })
}

// WithValueFormat picks how values travel; JSONValues is the default. It
// applies to the calls that return values: Snapshots, Snapshot, Current,
// StreamSnapshots, Diff (entries and patches) and WatchTurns.
func WithValueFormat(f ValueFormat) ReadOption {
	return readOption(func(o *ReadConfig) { o.ValueFormat = f })
}

// WithRawValues leaves each entry's Value unset and its JSON holding the
// value's JSON text as historyd sent it, unparsed: for a host that hands
// values on as text (to a model, say) or parses them itself, the cheapest
// way to read a large state. It implies JSONValues. Snapshots, Snapshot,
// Current and StreamSnapshots take it; Diff and WatchTurns take only the
// JSONValues it implies, and parse their values.
func WithRawValues() ReadOption {
	return readOption(func(o *ReadConfig) {
		o.ValueFormat = JSONValues
		o.RawValues = true
	})
}

// WithKeysWritten asks Turns and TurnIndex to list, for each retained turn,
// the keys whose last write happened in that turn. It costs decoding each
// retained turn's state on the server, so it is off by default; other calls
// ignore it.
func WithKeysWritten() ReadOption {
	return readOption(func(o *ReadConfig) { o.KeysWritten = true })
}

// WithFromTurn makes StreamSnapshots start at turn n, skipping the retained
// turns before it, as when resuming a read that stopped; 0 and 1 both mean
// from the first turn. Past MaxTurn or negative, StreamSnapshots refuses it
// with InvalidArgument before sending. Other calls ignore it.
func WithFromTurn(n int) ReadOption {
	return readOption(func(o *ReadConfig) { o.FromTurn = n })
}

// WithAfterTurn makes WatchTurns skip the turns up to n: pass the last turn
// received to resume. 0, the default, sends every turn. Past MaxTurn or
// negative, WatchTurns refuses it with InvalidArgument before sending.
// Other calls ignore it.
func WithAfterTurn(n int) ReadOption {
	return readOption(func(o *ReadConfig) { o.AfterTurn = n })
}

// WithCheckpoints makes WatchTurns also yield the state at each new
// checkpoint as it is written, not only each turn's end. Other calls ignore
// it.
func WithCheckpoints() ReadOption {
	return readOption(func(o *ReadConfig) { o.Checkpoints = true })
}

// WithIncludeUnchanged makes Diff also list the keys whose entry is the
// same in both turns, as Unchanged. Other calls ignore it.
func WithIncludeUnchanged() ReadOption {
	return readOption(func(o *ReadConfig) { o.IncludeUnchanged = true })
}

// WithPrefix makes Threads and AllThreads list only the thread ids starting
// with prefix. Other calls ignore it.
func WithPrefix(prefix string) ReadOption {
	return readOption(func(o *ReadConfig) { o.Prefix = prefix })
}

// WithPageSize sets the most threads one page of Threads holds: 0 is the
// server's default (100), and it caps it at 1000 (100 with
// WithIncludeTurns); a negative size is refused by the server. For
// AllThreads it is each page's size. Other calls ignore it.
func WithPageSize(n int) ReadOption {
	return readOption(func(o *ReadConfig) { o.PageSize = n })
}

// WithPageToken continues a Threads listing: pass the NextPageToken of the
// page before, with every other option unchanged but WithPageSize.
// AllThreads starts from it. Other calls ignore it.
func WithPageToken(token string) ReadOption {
	return readOption(func(o *ReadConfig) { o.PageToken = token })
}

// WithNewestFirst makes Threads and AllThreads list by last activity,
// newest first, instead of by thread id. The server visits every thread
// under the prefix for each page of it and refuses (FAILED_PRECONDITION)
// past 10,000. Other calls ignore it.
func WithNewestFirst() ReadOption {
	return readOption(func(o *ReadConfig) { o.NewestFirst = true })
}

// WithActiveAfter makes Threads and AllThreads keep only the threads whose
// last checkpoint was written after t; the zero time keeps every thread.
// Other calls ignore it.
func WithActiveAfter(t time.Time) ReadOption {
	return readOption(func(o *ReadConfig) { o.ActiveAfter = t })
}

// WithActiveBefore makes Threads and AllThreads keep only the threads whose
// last checkpoint was written before t; the zero time keeps every thread.
// Other calls ignore it.
func WithActiveBefore(t time.Time) ReadOption {
	return readOption(func(o *ReadConfig) { o.ActiveBefore = t })
}

// WithIncludeTurns makes Threads and AllThreads give each listed thread's
// number of turns (Thread.Turns), which costs the server a derivation of
// each listed thread's turns. Other calls ignore it.
func WithIncludeTurns() ReadOption {
	return readOption(func(o *ReadConfig) { o.IncludeTurns = true })
}

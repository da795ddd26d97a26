// Package backend is the contract between historyd's store and the
// storage it reads LangGraph checkpoints from: the Backend interface a
// storage implements (store/postgres, store/sqlite, storetest's memory),
// the rows, blobs and queries it exchanges, and the errors it marks
// failures with. A backend answers queries with rows and bytes and nothing
// more: what the bytes mean is langgraph/codec's, and turns, caching and
// projection are package store's, above it, once for every backend.
//
// This file is the whole contract; the package's other files are helpers
// a backend or a test may build on (Empty, ProbeEach, PrefixRanges,
// Values).
package backend

import (
	"context"
	"errors"
)

// Ref names the checkpoints of one thread within one checkpoint namespace.
type Ref struct {
	// ThreadID is the LangGraph thread id.
	ThreadID string
	// Namespace is the checkpoint namespace; empty is the root graph.
	Namespace string
	// Head, when set, is the checkpoint whose lineage (its parent chain)
	// the turns are numbered on, instead of the thread's head (its newest
	// checkpoint): a branch a fork abandoned (store.History.Forks). A head
	// the thread does not hold is store.ErrUnknownHead. Reads of every head of a
	// thread share one cached index.
	Head string
}

// Row is one checkpoint as a backend read it, not parsed: what its bytes
// say is langgraph/codec's to read (codec.ParseCheckpoint, ParseMetadata).
type Row struct {
	// ID is the checkpoint id. Ids are time-ordered, so comparing them as
	// strings orders checkpoints by time of writing.
	ID string
	// Parent is the parent checkpoint's id; empty for a thread's first
	// checkpoint. Forks make the parent links, not id order, a checkpoint's
	// history.
	Parent string
	// Checkpoint is the stored checkpoint, or the part of it the backend
	// selected, in the serializer Checkpoint.Type names: a SqliteSaver row
	// is the whole checkpoint (format.TypeMsgpack or TypeJSON); a
	// PostgresSaver row is projected to its "ts" and "channel_versions"
	// (TypeJSON).
	Checkpoint Blob
	// Metadata is the checkpoint's metadata, or the part of it the backend
	// selected; empty when there is none.
	Metadata Blob
}

// Blob is one stored value, still encoded as the saver stored it.
type Blob struct {
	// Type is the saver's serializer name (format.TypeMsgpack,
	// format.TypeJSON, ...), or format.TypeEmpty when the channel has
	// no value at the checkpoint. Types historyd refuses to decode, such
	// as "pickle", are passed on for the decoder to refuse.
	Type string
	// Data is the encoded value.
	Data []byte
	// Missing says the checkpoint itself no longer exists: it was deleted
	// since it was listed. That is not the same as a channel without a
	// value, and the store never answers for such a checkpoint.
	Missing bool
}

// Write is one task's write to a channel, as LangGraph's checkpoint_writes
// (SqliteSaver: writes) table keeps it: attached to the checkpoint the task
// ran from. A DeltaChannel's value is rebuilt from these.
type Write struct {
	// CheckpointID is the checkpoint the write is attached to.
	CheckpointID string
	// TaskID is the writing task's id; graph input, update_state and
	// Command updates use the all-zero id.
	TaskID string
	// TaskPath is the task's path; empty where the saver keeps none.
	TaskPath string
	// Idx is the write's index within the task; negative for LangGraph's
	// special writes (errors, interrupts, resumes).
	Idx int
	// Value is the written value.
	Value Blob
}

// Query is what List is asked.
type Query struct {
	// After, when set, lists only the checkpoints whose id is greater:
	// the newest id already known. Empty lists the whole thread.
	After string
	// Count asks for Census.Count. Counting costs time in proportion to
	// the thread's length, the rest of the census does not, so it is
	// asked for only now and then.
	Count bool
	// Verify names checkpoints whose existence the census reports in
	// Present.
	Verify []string
}

// Census is what store.Store checks a cached index against to notice deleted
// checkpoints. It comes from the same consistent read as the rows.
type Census struct {
	// Count is how many checkpoints the thread has; -1 when not counted.
	Count int
	// MinID is the smallest checkpoint id; empty when there are none.
	MinID string
	// Present holds the checkpoints of Query.Verify that exist, in any
	// order.
	Present []string
}

// Probe is one thread's freshness check: the question every warm read
// asks before answering from the cache. It is what List with After set
// and no Count reports about the thread, without the rows.
type Probe struct {
	// Ref names the thread.
	Ref Ref
	// After is the newest checkpoint id the cache knows.
	After string
	// Verify names checkpoints whose existence ProbeResult.Present reports.
	Verify []string
}

// ProbeResult answers one Probe.
type ProbeResult struct {
	// MinID is the thread's smallest checkpoint id; empty when it has none.
	MinID string
	// Present holds the checkpoints of Probe.Verify that exist, in any
	// order.
	Present []string
	// Newer says the thread has a checkpoint whose id is greater than
	// Probe.After.
	Newer bool
}

// ThreadQuery is what Backend.Threads is asked: a walk over the storage's
// distinct thread ids, in ascending order as the storage sorts them.
type ThreadQuery struct {
	// Namespace is the checkpoint namespace whose checkpoints are counted
	// and whose first and last checkpoints are read.
	Namespace string
	// Prefixes, when not empty, restricts the walk to thread ids starting
	// with one of them, byte for byte. They are normalized (see
	// NormalizePrefixes): sorted, none a prefix of another.
	Prefixes []string
	// After, when not empty, starts the walk after this thread id; empty
	// starts from the first.
	After string
	// Limit is the most thread ids one walk visits. A walk visits only ids
	// under Prefixes: Prefixes are what a tenant may read, and nothing of
	// a tenant's listing (its cursor, its refusals, its cost) may depend
	// on threads outside them. A storage that cannot range over a prefix
	// (PostgreSQL whose thread_id sorts by a collation that is not
	// bytewise, with no index that is) fails a walk under Prefixes with
	// ErrUnorderedPrefixes rather than visit other ids.
	Limit int
}

// ThreadRow is one thread a walk visited and handed over: its checkpoints
// in the query's namespace, counted, and the oldest and newest of them by
// id.
type ThreadRow struct {
	// ThreadID is the thread id.
	ThreadID string
	// Count is how many checkpoints the thread has in the namespace; never
	// 0, as a thread with none there is not handed over.
	Count int64
	// First and Last are the checkpoints with the smallest and the largest
	// id, as List lists rows (Checkpoint holds at least "ts"; Metadata may
	// be empty).
	First, Last Row
}

// ThreadWalk is how a Backend.Threads walk ended.
type ThreadWalk struct {
	// Last is the last thread id the walk visited, handed over or not;
	// empty when it visited none.
	Last string
	// More says the walk stopped at Limit: threads after Last may remain.
	More bool
}

// Backend reads LangGraph checkpoints from one kind of storage. It answers
// queries with rows and bytes and nothing more: parsing, turn derivation,
// caching and projection happen above it, once for every backend.
// Implementations must be safe for concurrent use and must only read.
//
// Every method hands its results to a callback whose arguments are only
// valid until it returns, so that values are read straight out of the
// driver's buffers: a state of megabytes is then in memory once while it
// is decoded, not twice. An error from the callback ends the read and is
// returned as is.
type Backend interface {
	// List hands fn every checkpoint of the thread in the namespace, or
	// with q.After set those with a greater id, in any order, and takes the
	// census q asks for in the same consistent read. An unknown thread has
	// none, which is not an error.
	List(ctx context.Context, ref Ref, q Query, fn func(Row) error) (Census, error)
	// Probe answers the freshness probes of several threads, in the order
	// of ps, each as List would with its After and Verify and no Count,
	// without the rows. Concurrent reads share probes through it (one
	// statement for all the threads a batch asks about, where a statement
	// is costly); ProbeEach answers through List.
	Probe(ctx context.Context, ps []Probe) ([]ProbeResult, error)
	// EachValue hands fn channel's value at each checkpoint of ids: its
	// index in ids and the value, in any order, exactly once per index. A
	// checkpoint where the channel has no value gets a Blob of type
	// format.TypeEmpty; one that no longer exists a Missing Blob.
	EachValue(ctx context.Context, ref Ref, channel string, ids []string, fn func(i int, b Blob) error) error
	// EachWrite hands fn every write to channel attached to the checkpoints
	// of ids, in any order.
	EachWrite(ctx context.Context, ref Ref, channel string, ids []string, fn func(Write) error) error
	// Threads walks the storage's distinct thread ids in ascending order
	// as the storage sorts them (see ThreadQuery), visiting at most
	// q.Limit, and hands fn each visited thread that has checkpoints in
	// q.Namespace, with their count and its oldest and newest checkpoint.
	// It must not read a thread's other checkpoints: a walk costs its
	// threads, not their length, and never the whole store.
	Threads(ctx context.Context, q ThreadQuery, fn func(ThreadRow) error) (ThreadWalk, error)
	// Newest hands fn up to limit of the most recently written
	// checkpoints, newest first: the thread's in ref's namespace, or, with
	// ref nil, any thread's. It is for sampling which channels the store's
	// checkpoints hold, so it reads cheaply rather than exactly: across
	// threads, a backend may sample the most recently stored rows rather
	// than sort every checkpoint by id. Rows are as List's, except that a
	// row projected to chosen channels' versions holds every channel's.
	Newest(ctx context.Context, ref *Ref, limit int, fn func(Row) error) error
	// Ping reports whether the storage can be reached and holds checkpoint
	// tables historyd may read.
	Ping(ctx context.Context) error
	// Close releases the backend's connections.
	Close()
}

// BlobSharer is implemented by a backend whose storage keeps a channel's
// value once per (thread, namespace, channel, version), shared by every
// checkpoint holding that version, rather than inline in each checkpoint:
// PostgreSQL's checkpoint_blobs. A backend wrapping another forwards it.
type BlobSharer interface {
	// SharesBlobs reports whether checkpoints share stored values by
	// version. LangGraph.js PostgresSaver numbers versions 1, 2, 3, … and
	// keeps the first value stored under a version: a fork that produces a
	// version again, which the branch it abandoned already produced, reads
	// back that branch's value (see store.ErrForeignValue).
	SharesBlobs() bool
}

// ErrUnavailable marks errors caused by the checkpoint storage being
// unreachable; a retry may succeed once it is back.
var ErrUnavailable = errors.New("checkpoint store unavailable")

// ErrNotCheckpointStore marks storage where historyd cannot read LangGraph
// checkpoint tables: none where it was told to look (wrong database, schema
// or file), its role lacks SELECT on them, or the server refuses its login.
// Unlike ErrUnavailable it does not heal by waiting: the configuration or
// the database's grants must change.
var ErrNotCheckpointStore = errors.New("cannot read LangGraph checkpoint tables")

// ErrNoAnswer marks a read whose context ended while it waited for the
// checkpoint store itself: a statement in flight, or a shared freshness
// probe. A context that ends anywhere else (while a call waits for
// another's read of the thread, or decodes, or sends) is not marked, so
// that a caller is told the store kept it waiting only when it did.
var ErrNoAnswer = errors.New("the checkpoint store had not answered")

// CorruptError reports checkpoint storage that says its own files are
// damaged (SQLite's "database disk image is malformed", PostgreSQL's
// SQLSTATE XX001 data_corrupted and XX002 index_corrupted): neither a
// retry nor a configuration change reads them; they must be restored (an
// index rebuilt). Role names
// the damaged part by what it is to historyd, which a caller may read; Err
// is the driver's error, which names where it lives, for the operator's
// log.
type CorruptError struct {
	// Role says what the damaged part is, e.g. "the SQLite checkpoint
	// database".
	Role string
	// Err is the driver's error.
	Err error
}

// Error names the damaged part, then the driver's error.
func (e *CorruptError) Error() string { return e.Role + " is damaged: " + e.Err.Error() }

// Unwrap returns the driver's error.
func (e *CorruptError) Unwrap() error { return e.Err }

// ErrUnorderedPrefixes marks a listing under thread-id prefixes that the
// backend cannot walk without visiting other threads: its thread ids do
// not sort bytewise, so the ids under a prefix are no range of its index.
// It is the operator's to fix (for PostgreSQL, an index; the error says
// which), and it depends on nothing the store holds.
var ErrUnorderedPrefixes = errors.New("thread ids do not sort bytewise, so a thread-id prefix is no range of the index")

// Package store derives a LangGraph thread's turns from its checkpoints and
// reads the session state each turn ended on. It holds the turn rules, the
// caches and the StateEntry convention. Backends (store/postgres,
// store/sqlite) only answer queries with rows and bytes; what those bytes
// mean is langgraph/codec's, and the gRPC layer above only maps results to
// the wire.
package store

import (
	"context"
)

// Ref names the checkpoints of one thread within one checkpoint namespace.
type Ref struct {
	// ThreadID is the LangGraph thread id.
	ThreadID string
	// Namespace is the checkpoint namespace; empty is the root graph.
	Namespace string
	// Head, when set, is the checkpoint whose lineage (its parent chain)
	// the turns are numbered on, instead of the thread's head (its newest
	// checkpoint): a branch a fork abandoned (History.Forks). A head the
	// thread does not hold is ErrUnknownHead. Reads of every head of a
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

// Census is what Store checks a cached index against to notice deleted
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
	// back that branch's value (see ErrForeignValue).
	SharesBlobs() bool
}

// SharesBlobs reports whether b's checkpoints share stored values by
// version (BlobSharer); false for a backend that does not say.
func SharesBlobs(b Backend) bool {
	bs, ok := b.(BlobSharer)
	return ok && bs.SharesBlobs()
}

// Empty is the backend of a store that holds no checkpoints at all: every
// thread is unknown. Tenant isolation answers a thread the tenant may not
// read through a store over it, exactly as an unknown thread is answered.
type Empty struct{}

var _ Backend = Empty{}

// List implements Backend: there are no checkpoints.
func (Empty) List(context.Context, Ref, Query, func(Row) error) (Census, error) {
	return Census{Count: 0}, nil
}

// Probe implements Backend: no thread has a checkpoint.
func (Empty) Probe(_ context.Context, ps []Probe) ([]ProbeResult, error) {
	return make([]ProbeResult, len(ps)), nil
}

// EachValue implements Backend: every checkpoint is missing.
func (Empty) EachValue(_ context.Context, _ Ref, _ string, ids []string, fn func(int, Blob) error) error {
	for i := range ids {
		if err := fn(i, Blob{Missing: true}); err != nil {
			return err
		}
	}
	return nil
}

// EachWrite implements Backend: there are no writes.
func (Empty) EachWrite(context.Context, Ref, string, []string, func(Write) error) error { return nil }

// Newest implements Backend: there are no checkpoints.
func (Empty) Newest(context.Context, *Ref, int, func(Row) error) error { return nil }

// Ping implements Backend: an empty store is always reachable.
func (Empty) Ping(context.Context) error { return nil }

// Close implements Backend.
func (Empty) Close() {}

// Values collects channel's values at the checkpoints of ids, in the order
// of ids, each copied out of the backend's buffers: a convenience for
// tests and tools; the store streams.
func Values(ctx context.Context, b Backend, ref Ref, channel string, ids []string) ([]Blob, error) {
	out := make([]Blob, len(ids))
	err := b.EachValue(ctx, ref, channel, ids, func(i int, v Blob) error {
		v.Data = append([]byte(nil), v.Data...)
		out[i] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

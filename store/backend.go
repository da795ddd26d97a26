// Package store derives a LangGraph thread's turns from its checkpoints and
// reads the session state each turn ended on. It holds the turn rules and the
// StateEntry convention; backends (store/postgres, store/sqlite) only answer
// queries, and the gRPC layer above only maps results to the wire.
package store

import (
	"context"
	"time"
)

// Ref names the checkpoints of one thread within one checkpoint namespace.
type Ref struct {
	// ThreadID is the LangGraph thread id.
	ThreadID string
	// Namespace is the checkpoint namespace; empty is the root graph.
	Namespace string
}

// Checkpoint is what a backend lists about one checkpoint: small, with no
// channel values beyond the primitives a saver keeps inline.
type Checkpoint struct {
	// ID is the checkpoint id. Ids are time-ordered, so comparing them as
	// strings orders checkpoints by time of writing.
	ID string
	// TS is the checkpoint's own timestamp; zero when it has none.
	TS time.Time
	// Versions maps each channel to the version of its value at this
	// checkpoint. Equal versions of a channel hold equal values.
	Versions map[string]string
	// Delta says the checkpoint's metadata marks a graph with DeltaChannel
	// channels, whose values are rebuilt from writes rather than stored.
	Delta bool
}

// Blob is one channel's value at one checkpoint, still encoded as the saver
// stored it.
type Blob struct {
	// Type is the saver's serializer name: "msgpack", "json", "bytes",
	// "bytearray", "null", "empty" (no value), or a type historyd refuses to
	// decode such as "pickle".
	Type string
	// Data is the encoded value.
	Data []byte
}

// BlobMissing is the Blob type Values gives a checkpoint that no longer
// exists, which is not the same as a channel without a value.
const BlobMissing = "missing"

// Backend reads LangGraph checkpoints from one kind of storage. It answers
// queries and nothing more: turn derivation, caching and projection happen in
// Store, once for every backend. Implementations must be safe for concurrent
// use and must only read.
type Backend interface {
	// Checkpoints lists every checkpoint of the thread in the namespace, in
	// any order. An unknown thread has none, which is not an error.
	Checkpoints(ctx context.Context, ref Ref) ([]Checkpoint, error)
	// Values returns channel's encoded value at each of the checkpoints of
	// the thread named by ids, in the same order. A checkpoint where the
	// channel has no value gets a Blob of type "empty"; one that no longer
	// exists gets BlobMissing.
	Values(ctx context.Context, ref Ref, channel string, ids []string) ([]Blob, error)
	// Ping reports whether the storage can be reached.
	Ping(ctx context.Context) error
	// Close releases the backend's connections.
	Close()
}

// ValueStreamer is implemented by backends that can hand each value over
// while it is still in the driver's buffer, which saves a copy of every
// blob read: a state of megabytes is then in memory once while it is
// decoded, not twice.
type ValueStreamer interface {
	// EachValue is Values with a callback: fn gets the index in ids and
	// the value of each checkpoint, in any order, exactly once per index.
	// The Blob's Data is only valid until fn returns. An error from fn
	// ends the read and is returned.
	EachValue(ctx context.Context, ref Ref, channel string, ids []string, fn func(i int, b Blob) error) error
}

// EachValue hands fn channel's value at each checkpoint in ids, through
// b's EachValue when b is a ValueStreamer and from Values otherwise.
func EachValue(ctx context.Context, b Backend, ref Ref, channel string, ids []string, fn func(int, Blob) error) error {
	if vs, ok := b.(ValueStreamer); ok {
		return vs.EachValue(ctx, ref, channel, ids, fn)
	}
	blobs, err := b.Values(ctx, ref, channel, ids)
	if err != nil {
		return err
	}
	for i, blob := range blobs {
		if err := fn(i, blob); err != nil {
			return err
		}
	}
	return nil
}

// Incremental is implemented by backends that can list only the
// checkpoints written since a given one. Store uses it to refresh a cached
// turn index without rereading the whole thread.
type Incremental interface {
	// CheckpointsSince returns, in one consistent read, a census of the
	// thread's checkpoints in the namespace and those whose id is greater
	// than q.After, in any order.
	CheckpointsSince(ctx context.Context, ref Ref, q Since) (Census, []Checkpoint, error)
}

// Since is what CheckpointsSince is asked.
type Since struct {
	// After is the newest checkpoint id already known; newer ones are
	// listed.
	After string
	// Count asks for the census's Count. Counting costs time in proportion
	// to the thread's length, the rest of the census does not, so it is
	// asked for only now and then.
	Count bool
	// Verify names checkpoints whose existence the census reports in
	// Present.
	Verify []string
}

// Census is what Store checks a cached index against to notice deleted
// checkpoints.
type Census struct {
	// Count is how many checkpoints the thread has; -1 when not counted.
	Count int
	// MinID is the smallest checkpoint id; empty when there are none.
	MinID string
	// Present holds the checkpoints of Since.Verify that exist, in any
	// order.
	Present []string
}

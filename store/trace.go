package store

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/historyd/historyd/store/backend"
)

// TracerName is the instrumentation scope of the store's spans.
const TracerName = "github.com/historyd/historyd/store"

// The store's spans, when Config.TracerProvider is set. They cover the two
// things a slow call spends its time on above the database: deriving a
// thread's turn index, and reading and decoding turns' states. The
// backend's statements are their children. No span or attribute names a
// thread: the thread's id is in every error the store returns, so a failed
// span says only what kind of failure it was (ErrorKind).
const (
	// SpanIndex is one derivation or refresh of a thread's turn index,
	// with the Attr* attributes of the index.
	SpanIndex = "store.index"
	// SpanReadState is one read of the states the turns asked for ended
	// on, with the AttrState* attributes.
	SpanReadState = "store.read_state"
)

// The attributes of the store's spans.
const (
	// AttrIndexCache is what the cached index was worth: "hit" (refreshed
	// with only the checkpoints newer than it), "miss" (none cached: the
	// thread listed whole) or "invalidated" (a deletion noticed: listed
	// whole again).
	AttrIndexCache = attribute.Key("historyd.index.cache")
	// AttrIndexListed is how many checkpoints the refresh listed.
	AttrIndexListed = attribute.Key("historyd.index.checkpoints_listed")
	// AttrIndexCheckpoints is how many checkpoints the index holds.
	AttrIndexCheckpoints = attribute.Key("historyd.index.checkpoints")
	// AttrIndexTurns is the thread's total turns.
	AttrIndexTurns = attribute.Key("historyd.index.turns")
	// AttrIndexMessagesRead is how many messages versions were read and
	// scanned for questions.
	AttrIndexMessagesRead = attribute.Key("historyd.index.messages_read")
	// AttrIndexDeltaRebuild says messages lists were rebuilt from a
	// DeltaChannel's writes.
	AttrIndexDeltaRebuild = attribute.Key("historyd.index.delta_rebuild")
	// AttrIndexShared says the call waited for another call's refresh of
	// the same thread rather than reading itself; that call's span has the
	// details.
	AttrIndexShared = attribute.Key("historyd.index.shared")

	// AttrStateChannel is the state channel read.
	AttrStateChannel = attribute.Key("historyd.state.channel")
	// AttrStateTurns is how many turns' states were asked for.
	AttrStateTurns = attribute.Key("historyd.state.turns")
	// AttrStateCacheHits and AttrStateCacheMisses count the turns whose
	// state came from the state cache, and those read from the backend.
	AttrStateCacheHits   = attribute.Key("historyd.state.cache_hits")
	AttrStateCacheMisses = attribute.Key("historyd.state.cache_misses")
	// AttrStateBytesDecoded is how many bytes of stored values were
	// decoded.
	AttrStateBytesDecoded = attribute.Key("historyd.state.bytes_decoded")
	// AttrStateDeltaRebuild says some state was rebuilt from a
	// DeltaChannel's writes.
	AttrStateDeltaRebuild = attribute.Key("historyd.state.delta_rebuild")
)

// newTracer returns the store's tracer, nil when tp is: an untraced store
// starts no spans at all.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(TracerName)
}

// startSpan starts one of the store's spans, or returns ctx unchanged and
// a nil span when the store is not traced.
func (s *Store) startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, nil
	}
	return s.tracer.Start(ctx, name)
}

// endSpan ends sp, marking it failed with err's kind when err is set.
func endSpan(sp trace.Span, err error) {
	if sp == nil {
		return
	}
	if err != nil {
		kind := ErrorKind(err)
		sp.SetStatus(codes.Error, kind)
		sp.SetAttributes(semconv.ErrorTypeKey.String(kind))
	}
	sp.End()
}

// note adds attributes to the span of ctx, if it records.
func note(ctx context.Context, kv ...attribute.KeyValue) {
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		sp.SetAttributes(kv...)
	}
}

// ErrorKind names the kind of a store error without its text, which names
// the thread: what a span may say about a failure.
func ErrorKind(err error) string {
	var de *DecodeError
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, backend.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrStale):
		return "stale"
	case errors.Is(err, backend.ErrNotCheckpointStore):
		return "not_checkpoint_store"
	case errors.Is(err, ErrUnknownChannel):
		return "unknown_channel"
	case errors.As(err, &de):
		return "decode"
	}
	return "error"
}

package service

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// DefaultFailureSummaryEvery is how often repeated failures of one kind
// are summed up in the log (Frontend.FailureSummaryEvery).
const DefaultFailureSummaryEvery = 30 * time.Second

// Failures that come in floods are logged by summary: while the store is
// unreachable every call fails the same way, and a tenant past its rate
// limit may be refused thousands of times a second. A line (two, with the
// cause) for each such call would drown the rest of the log and cost more
// than refusing the call. So the first failure of a kind is logged as any
// failed call is, and the ones after it, for as long as they keep coming,
// are counted, and summed up in one line at the end of each period: how
// many, by method or tenant, and the latest cause. A period without such
// a failure ends the flood; the next failure is logged in full again.

// failureKind names a kind of failure that is summarised.
type failureKind struct {
	code codes.Code
	// what is what the caller was told: the same for every failure of the
	// kind.
	what string
	// by is what the count is broken down by, "method" or "tenant".
	by string
}

// flood is the count of one kind's failures in the current period.
type flood struct {
	count int
	by    map[string]int
	cause string
	timer *time.Timer
}

// failureSummary counts the failures of each kind and writes the summary
// lines. It is shared by all the calls of a server.
type failureSummary struct {
	log   *slog.Logger
	every time.Duration

	mu     sync.Mutex
	floods map[failureKind]*flood
}

func newFailureSummary(log *slog.Logger, every time.Duration) *failureSummary {
	if every <= 0 {
		every = DefaultFailureSummaryEvery
	}
	return &failureSummary{log: log, every: every, floods: map[failureKind]*flood{}}
}

// count counts one failure of kind, by key (the method or tenant), with
// cause, the error's text for the operator, and reports whether it is the
// first of a flood, to be logged as usual. Otherwise the call's own lines
// are left to the summary.
func (f *failureSummary) count(kind failureKind, key, cause string) (first bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.floods[kind]
	if !ok {
		fl = &flood{by: map[string]int{}}
		f.floods[kind] = fl
		fl.timer = time.AfterFunc(f.every, func() { f.flush(kind) })
		return true
	}
	fl.count++
	fl.by[key]++
	fl.cause = cause
	return false
}

// flush writes kind's summary line for the period just ended, or, when
// nothing was counted in it, ends the flood.
func (f *failureSummary) flush(kind failureKind) {
	f.mu.Lock()
	fl := f.floods[kind]
	if fl == nil {
		f.mu.Unlock()
		return
	}
	if fl.count == 0 {
		delete(f.floods, kind)
		f.mu.Unlock()
		return
	}
	count, by, cause := fl.count, fl.by, fl.cause
	fl.count, fl.by, fl.cause = 0, map[string]int{}, ""
	fl.timer.Reset(f.every)
	f.mu.Unlock()

	parts := make([]string, 0, len(by))
	for _, k := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, by[k]))
	}
	attrs := []any{"code", kind.code.String(), "message", kind.what, "calls", count, "period", f.every.String(), "by_" + kind.by, strings.Join(parts, " ")}
	if cause != "" {
		attrs = append(attrs, "last_cause", cause)
	}
	f.log.Log(context.Background(), levelOf(kind.code), "more calls failed the same way; their own lines were left out", attrs...)
}

// levelOf is the request log's level for a failure with code.
func levelOf(code codes.Code) slog.Level {
	return slog.Level(logging.DefaultServerCodeToLevel(code))
}

// callNote is what a call's interceptors and handler tell the request log
// about it; it is in the call's context from before the log's interceptor
// on.
type callNote struct {
	summary *failureSummary
	// summarised says the call's failure is left to the summary: its
	// "finished call" line is written at debug.
	summarised atomic.Bool
}

type callNoteKey struct{}

func noteFrom(ctx context.Context) *callNote {
	n, _ := ctx.Value(callNoteKey{}).(*callNote)
	return n
}

// summarise counts the call's failure as one of kind, and reports whether
// the call's own lines are to be left out: they are, but for the first of
// a flood. Without a note (a handler called outside the chain) nothing is
// left out.
func summarise(ctx context.Context, kind failureKind, key, cause string) (leaveOut bool) {
	n := noteFrom(ctx)
	if n == nil || n.summary == nil {
		return false
	}
	if tag, ok := threadTagFrom(ctx); ok && tag.raw != "" {
		// The summary is written outside the call, where the log cannot
		// hide its thread id.
		cause = tag.redact(cause)
	}
	if n.summary.count(kind, key, cause) {
		return false
	}
	n.summarised.Store(true)
	return true
}

// noteCalls puts a callNote in each call's context.
func noteCalls(f *failureSummary) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			return handler(context.WithValue(ctx, callNoteKey{}, &callNote{summary: f}), req)
		}, func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			ctx := context.WithValue(ss.Context(), callNoteKey{}, &callNote{summary: f})
			return handler(srv, &contextStream{ServerStream: ss, ctx: ctx})
		}
}

// contextStream is a stream with a context of its own.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }

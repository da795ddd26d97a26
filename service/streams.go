package service

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/auth"
)

// DefaultStreamMaxAge is how long a server-streaming call (WatchTurns,
// and StreamSnapshots where the call's deadline cap is off) may last
// (Frontend.StreamMaxAge).
const DefaultStreamMaxAge = time.Hour

// ResumeTrailer is the trailer with which historyd ends a stream that the
// client should simply make again, from where it got to: the stream
// reached its maximum age, or the token file changed what the call may
// read. Its status is UNAVAILABLE, which clients that do not know the
// trailer resume too, as after any cut stream; the Go, Python and
// TypeScript clients resume at once and count it as no failure. The value
// says why: ResumeMaxAge or ResumeReauthorized.
const ResumeTrailer = "historyd-resume"

// The values of ResumeTrailer.
const (
	// ResumeMaxAge: the stream reached its maximum age.
	ResumeMaxAge = "max-age"
	// ResumeReauthorized: the token file was reloaded and the call, made
	// again, is answered differently (the tenant may now read the thread).
	ResumeReauthorized = "reauthorized"
)

// streamEnd is why historyd ended a stream itself: the status the call
// ends with, and the trailer value when the client is to resume.
type streamEnd struct {
	st     *status.Status
	resume string
}

func (e *streamEnd) Error() string { return e.st.Message() }

// GRPCStatus makes a handler that fails with the end (a send refused once
// the stream was ended) fail with its status, not as an unknown error.
func (e *streamEnd) GRPCStatus() *status.Status { return e.st }

// streamGuard bounds how long server-streaming calls live and holds open
// ones to the token file in force: a credential revoked, or a tenant no
// longer granted the thread, ends every stream made with it, with the
// code a fresh call would get, rather than letting a stolen credential
// read on for as long as its streams stay open.
type streamGuard struct {
	auth   *auth.Authenticator // nil: no credentials to hold streams to
	maxAge time.Duration       // 0: no maximum

	mu   sync.Mutex
	open map[*openStream]struct{}
}

// openStream is one stream the guard holds.
type openStream struct {
	// ctx is the call's context as it arrived: its metadata and peer are
	// what the caller authenticated with.
	ctx context.Context
	// thread is the thread the call names, if it names one (named).
	thread string
	named  bool
	// readable says the tenant could read the thread when the call began,
	// so that it reads the store rather than tenant isolation's empty one.
	readable bool
	end      context.CancelCauseFunc
}

// newStreamGuard returns the guard of a server's streams, re-authorizing
// them on every reload of a's token file when a is not nil.
func newStreamGuard(a *auth.Authenticator, maxAge time.Duration) *streamGuard {
	g := &streamGuard{auth: a, maxAge: maxAge, open: map[*openStream]struct{}{}}
	if a != nil {
		a.OnReload(g.reauthorize)
	}
	return g
}

// stream is the guard's interceptor. It runs after authentication and
// before tenant isolation, so the tenant is known and the call not yet
// routed.
func (g *streamGuard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !info.IsServerStream || info.IsClientStream {
		return handler(srv, ss)
	}
	ctx, end := context.WithCancelCause(ss.Context())
	defer end(nil)
	if g.maxAge > 0 {
		aged := time.AfterFunc(g.maxAge, func() {
			end(&streamEnd{st: status.Newf(codes.Unavailable, "the stream reached this server's maximum age of %s (--watch-max-age); make the call again from the last message received", g.maxAge), resume: ResumeMaxAge})
		})
		defer aged.Stop()
	}
	if g.auth != nil {
		o := &openStream{ctx: ss.Context(), end: end}
		if req, ok := streamRequest(ss.Context()); ok {
			if r, ok := req.(threadRequest); ok {
				o.thread, o.named = r.GetThreadId(), true
			}
		}
		t, _ := auth.TenantFromContext(ss.Context())
		o.readable = o.named && t.CanRead(o.thread)
		g.mu.Lock()
		g.open[o] = struct{}{}
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			delete(g.open, o)
			g.mu.Unlock()
		}()
	}
	err := handler(srv, &guardedStream{ServerStream: ss, ctx: ctx})
	var se *streamEnd
	if err == nil || !errors.As(context.Cause(ctx), &se) {
		return err
	}
	// Whatever the handler was doing when the stream was ended, the call
	// ends with the guard's status.
	if se.resume != "" {
		ss.SetTrailer(metadata.Pairs(ResumeTrailer, se.resume))
	}
	return se.st.Err()
}

// reauthorize holds every open stream to the token file now in force, as
// a fresh call with the same credentials would be held: one whose
// credential no longer authenticates ends with UNAUTHENTICATED, one whose
// tenant may no longer read the thread with PERMISSION_DENIED, and one
// that tenant isolation answered over its empty store, but that the
// tenant may now read, with UNAVAILABLE and ResumeTrailer, so that the
// client makes the call again and reads the thread.
func (g *streamGuard) reauthorize() {
	g.mu.Lock()
	open := make([]*openStream, 0, len(g.open))
	for o := range g.open {
		open = append(open, o)
	}
	g.mu.Unlock()
	for _, o := range open {
		if end := g.check(o); end != nil {
			o.end(end)
		}
	}
}

// check says how o ends under the token file in force, or nil when it
// goes on.
func (g *streamGuard) check(o *openStream) *streamEnd {
	ctx, err := g.auth.Authenticate(o.ctx)
	if err != nil {
		st := status.Convert(err)
		return &streamEnd{st: status.New(st.Code(), "the token file was reloaded and no longer accepts this call's credentials: "+st.Message())}
	}
	t, _ := auth.TenantFromContext(ctx)
	switch {
	case !o.named && !t.AllThreads:
		return &streamEnd{st: status.Newf(codes.PermissionDenied, "the token file was reloaded: tenant %q may no longer make this call", t.Name)}
	case o.readable && !t.CanRead(o.thread):
		return &streamEnd{st: status.Newf(codes.PermissionDenied, "the token file was reloaded: tenant %q may no longer read this thread", t.Name)}
	case o.named && !o.readable && t.CanRead(o.thread):
		return &streamEnd{st: status.New(codes.Unavailable, "the token file was reloaded; make the call again"), resume: ResumeReauthorized}
	}
	return nil
}

// guardedStream is a stream the guard may end: once it has, nothing more
// is sent on it, even by a handler that sends without reading the store.
type guardedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *guardedStream) Context() context.Context { return s.ctx }

func (s *guardedStream) SendMsg(m any) error {
	var se *streamEnd
	if s.ctx.Err() != nil && errors.As(context.Cause(s.ctx), &se) {
		return se
	}
	return s.ServerStream.SendMsg(m)
}

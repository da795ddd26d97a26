package service

import (
	"context"
	"crypto/tls"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/service/wire"
)

// Options configures everything between the network and the handlers:
// transport security, limits and the interceptor chain. A zero field
// leaves its concern off (or at gRPC's own default); the serve command
// supplies the documented defaults.
type Options struct {
	// Logger receives the request log and recovered panics. It is wrapped
	// with RedactThreadIDs. Default slog.Default().
	Logger *slog.Logger
	// ThreadIDs says how request logs show thread ids: hashed (the
	// default) or omitted.
	ThreadIDs ThreadIDLogging
	// ThreadIDSalt keys the thread id hash. Empty: random per process.
	ThreadIDSalt []byte
	// FailureSummaryEvery is how often failures that come in floods (the
	// store unreachable, a tenant past its rate limit) are summed up in the
	// log: the first of a flood is logged as any failed call is, the rest
	// counted and summed up in one line per period. Default
	// DefaultFailureSummaryEvery.
	FailureSummaryEvery time.Duration
	// LogSuccessEvery logs one successful ThreadHistory call in this many
	// at info and the others at debug: formatting and writing a line for
	// every call costs a tenth of a small call's CPU. Failed calls are
	// always logged at their level. 0 and 1 log every call.
	LogSuccessEvery int

	// TLS, when set, serves TLS with this configuration (see
	// auth.ServerTLS). Nil serves plaintext.
	TLS *tls.Config
	// Auth, when set, requires credentials on every service but health
	// and reflection, and keeps each tenant to its threads. Nil: no
	// authentication, every caller reads every thread.
	Auth *auth.Authenticator
	// Metrics, when set, counts and times every call to the services that
	// require credentials (see OpenService), and with MetricsAllMethods
	// to health and reflection as well.
	Metrics *grpcprom.ServerMetrics
	// MetricsAllMethods counts health and reflection calls in Metrics too.
	MetricsAllMethods bool
	// TracerProvider, when set, traces every call but health checks and
	// reflection (otelgrpc's server handler), as a child of the caller's
	// span when the call carries W3C trace context. No span names a thread
	// in clear: the span has the thread's hash under AttrThread, as the
	// request log has it (none with ThreadIDsOmitted), and a status message
	// naming the thread is redacted as logs are. Nil: nothing is installed.
	TracerProvider trace.TracerProvider
	// DisableReflection answers server reflection as an unknown service.
	DisableReflection bool
	// Watches holds the WatchTurns limits, shared with the Server the
	// handlers run on (Config.Watches), so that denied watches count
	// against them too. Default: limits of their own.
	Watches *Watches
	// StateChannels are the state channels the deployment's store serves;
	// tenant isolation answers denied calls over an empty store serving the
	// same ones. Default: the store's default, ["tool_state"]. server.New
	// sets it from the store's configuration.
	StateChannels []string

	// RateLimit is the calls per second each tenant may make (all callers
	// share one bucket without Auth). Zero: unlimited.
	RateLimit float64
	// RateBurst is how many calls a tenant may make at once after being
	// idle. Zero: RateLimit rounded up, at least 1.
	RateBurst int
	// MaxCallDuration caps how long a call may run: a caller's deadline
	// that is later, or none, is replaced by it. Zero: no cap.
	MaxCallDuration time.Duration
	// MaxRequestBytes is the largest request message accepted (gRPC's
	// default is 4 MiB).
	MaxRequestBytes int
	// MaxResponseBytes is the largest response message sent; a larger
	// Snapshots or Snapshot response, or StreamSnapshots message, fails
	// with ResourceExhausted saying what to ask for instead. Zero: gRPC's
	// default (no limit).
	MaxResponseBytes int
	// StreamMaxAge ends server-streaming calls (WatchTurns, and
	// StreamSnapshots when MaxCallDuration does not end it first) once
	// they have lasted this long, with UNAVAILABLE and ResumeTrailer, which
	// historyd's clients resume from at once: a watch then lasts as long
	// as its client wants, but no credential reads through one stream
	// longer than this. Zero: no maximum.
	StreamMaxAge time.Duration
	// MaxConcurrentStreams bounds the calls in flight on one connection.
	MaxConcurrentStreams uint32
	// KeepaliveEnforcement rejects clients that ping more often than it
	// allows, so a misbehaving client cannot keep the server busy with
	// pings.
	KeepaliveEnforcement *keepalive.EnforcementPolicy
	// Keepalive sets how the server pings idle connections to find dead
	// peers, and how long connections may live.
	Keepalive *keepalive.ServerParameters
}

// ServerOptions returns the grpc.ServerOptions every historyd server runs
// with, the interceptor chain assembled here and nowhere else. Outermost
// first:
//
//  1. metrics, so every outcome is counted, panics and refusals included
//     (for health and reflection only with MetricsAllMethods);
//  2. a note in the call's context, through which what follows tells the
//     request log to leave a failure to its summary (see failureSummary);
//  3. thread tagging, so what follows can log the thread's hash, never its
//     id (server-streaming calls have their request read here, once
//     their credentials are accepted, see prefetchStream);
//  4. request logging (method, code, duration, tenant, thread hash), at
//     info or above, except successful health and reflection calls: at
//     debug, since probes would otherwise drown the calls that matter; and
//     with LogSuccessEvery, all but one in that many successful calls;
//  5. panic recovery: Internal, logged with the stack, the process lives on;
//  6. per-call limits: the response size limit and the deadline cap;
//  7. reflection switch (streams only);
//  8. authentication (not for health and reflection);
//  9. per-tenant rate limiting (after authentication, to know the tenant);
//  10. the stream guard (streams only; see streamGuard), which ends a
//     stream at StreamMaxAge, and when a reload of the token file revokes
//     what it was allowed;
//  11. the refusal of requests whose bytes are no valid message, or hold an
//     integer its field cannot (INVALID_ARGUMENT, see decode.go): after
//     authentication, so that a caller without credentials learns only
//     that, and before isolation, which has no thread to route such a
//     call by;
//  12. tenant isolation (see isolation), which sends denied calls to the
//     same handlers over an empty store;
//
// then the handler, which validates the request. With TracerProvider set,
// otelgrpc's stats handler traces the call around all of them. An
// interceptor added to this chain sees responses whose state entries are
// still encoded, their getters unset (see wire.TurnState); one that must read entries reads them
// from a copy made with Decoded.
//
// server.New is the one place a grpc.Server is built with these options;
// build servers with it rather than by hand.
func ServerOptions(o Options) []grpc.ServerOption {
	log := RedactThreadIDs(o.Logger)
	tagger := newThreadTagger(o.ThreadIDs, o.ThreadIDSalt)

	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		// Request payloads are not logged: they name other people's
		// conversations. The thread appears only as its tag.
		logging.WithFieldsFromContext(func(ctx context.Context) logging.Fields {
			if t, ok := threadTagFrom(ctx); ok && t.hashed {
				return logging.Fields{"thread", t.shown}
			}
			return nil
		}),
	}
	openLogOpts := append(slices.Clone(logOpts), logging.WithLevels(openServiceLevel))
	if o.LogSuccessEvery > 1 {
		logOpts = append(logOpts, logging.WithLevels(sampledLevel(uint64(o.LogSuccessEvery))))
	}
	recoverOpts := []recovery.Option{
		recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
			log.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()))
			return status.Error(codes.Internal, "internal error")
		}),
	}
	// Limits, credentials and isolation apply to every service but health
	// and reflection: probes must work without credentials, and health
	// watches and reflection sessions are long-lived streams that a
	// deadline cap would cut.
	guarded := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool { return !OpenService(c.Service) })
	open := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool { return OpenService(c.Service) })
	lim := limits{maxResponse: o.MaxResponseBytes, maxDuration: o.MaxCallDuration}

	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	switch {
	case o.Metrics != nil && o.MetricsAllMethods:
		unary = append(unary, o.Metrics.UnaryServerInterceptor())
		stream = append(stream, o.Metrics.StreamServerInterceptor())
	case o.Metrics != nil:
		unary = append(unary, selector.UnaryServerInterceptor(o.Metrics.UnaryServerInterceptor(), guarded))
		stream = append(stream, selector.StreamServerInterceptor(o.Metrics.StreamServerInterceptor(), guarded))
	}
	noteUnary, noteStream := noteCalls(newFailureSummary(log, o.FailureSummaryEvery))
	unary = append(unary,
		noteUnary,
		tagThreadUnary(tagger),
		selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(slogAdapter(log), logOpts...), guarded),
		selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(slogAdapter(log), openLogOpts...), open),
		recovery.UnaryServerInterceptor(recoverOpts...),
		selector.UnaryServerInterceptor(lim.unary, guarded),
	)
	stream = append(stream,
		noteStream,
		prefetchStream(tagger, o.Auth),
		selector.StreamServerInterceptor(logging.StreamServerInterceptor(slogAdapter(log), logOpts...), guarded),
		selector.StreamServerInterceptor(logging.StreamServerInterceptor(slogAdapter(log), openLogOpts...), open),
		recovery.StreamServerInterceptor(recoverOpts...),
		selector.StreamServerInterceptor(lim.stream, guarded),
	)
	if o.DisableReflection {
		stream = append(stream, reflectionOff)
	}
	if o.Auth != nil {
		authFn := authenticate(o.Auth)
		unary = append(unary, selector.UnaryServerInterceptor(grpcauth.UnaryServerInterceptor(authFn), guarded))
		stream = append(stream, selector.StreamServerInterceptor(grpcauth.StreamServerInterceptor(authFn), guarded))
	}
	if o.RateLimit > 0 {
		tl := newTenantLimiter(o.RateLimit, o.RateBurst)
		unary = append(unary, selector.UnaryServerInterceptor(tl.unary, guarded))
		stream = append(stream, selector.StreamServerInterceptor(tl.stream, guarded))
	}
	if o.Auth != nil || o.StreamMaxAge > 0 {
		g := newStreamGuard(o.Auth, o.StreamMaxAge)
		stream = append(stream, selector.StreamServerInterceptor(g.stream, guarded))
	}
	unary = append(unary, refuseMalformedUnary)
	stream = append(stream, refuseMalformedStream)
	if o.Auth != nil {
		iso := newIsolation(log, o.StateChannels, o.Watches)
		unary = append(unary, selector.UnaryServerInterceptor(iso.unary, guarded))
		stream = append(stream, selector.StreamServerInterceptor(iso.stream, guarded))
	}

	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.ForceServerCodecV2(wire.NewCodec()),
		// Calls run on a fixed set of goroutines whose stacks have already
		// grown to what a call needs, instead of a new goroutine per call
		// growing its stack anew (a tenth of a small call's CPU).
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
	if o.TracerProvider != nil {
		// A stats handler sees each call before the first interceptor and
		// after the last, so the span covers all of the chain.
		opts = append(opts, grpc.StatsHandler(tracingHandler(o.TracerProvider, tagger)))
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	if o.MaxRequestBytes > 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(o.MaxRequestBytes))
	}
	if o.MaxResponseBytes > 0 {
		// The handlers' own check names the limit and what to ask for
		// instead; this catches every other method.
		opts = append(opts, grpc.MaxSendMsgSize(o.MaxResponseBytes))
	}
	if o.MaxConcurrentStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(o.MaxConcurrentStreams))
	}
	if o.KeepaliveEnforcement != nil {
		opts = append(opts, grpc.KeepaliveEnforcementPolicy(*o.KeepaliveEnforcement))
	}
	if o.Keepalive != nil {
		opts = append(opts, grpc.KeepaliveParams(*o.Keepalive))
	}
	return opts
}

// openServiceLevel is the request log's level for health and reflection
// calls: debug when they succeed, as for any other call when they fail.
func openServiceLevel(code codes.Code) logging.Level {
	if code == codes.OK {
		return logging.LevelDebug
	}
	return logging.DefaultServerCodeToLevel(code)
}

// sampledLevel is the request log's level for ThreadHistory calls with
// LogSuccessEvery set: info for one successful call in every, counting
// from the first, debug for the others; as for any call when they fail.
func sampledLevel(every uint64) logging.CodeToLevel {
	var calls atomic.Uint64
	return func(code codes.Code) logging.Level {
		if code == codes.OK && (calls.Add(1)-1)%every != 0 {
			return logging.LevelDebug
		}
		return logging.DefaultServerCodeToLevel(code)
	}
}

// slogAdapter lets go-grpc-middleware's logging write through slog.
func slogAdapter(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		if n := noteFrom(ctx); n != nil && n.summarised.Load() {
			lvl = logging.LevelDebug // the failure's summary line counts it
		}
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

package service

import (
	"context"
	"crypto/tls"
	"log/slog"
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
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/auth"
)

// Frontend configures everything between the network and the handlers:
// transport security, limits and the interceptors (see Interceptors). A
// zero field leaves its concern off (or at gRPC's own default); the serve
// command supplies the documented defaults.
type Frontend struct {
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

// Interceptors are the interceptors that stand between the network and one
// Handlers, configured by one Frontend. Each method returns one Link of the
// chain; server.New decides which links a server runs and in which order,
// and installs the chain, the tracing handler and the codec (wire.Codec).
// The links share what must be shared across them: the logger, the thread
// tagger and the failure summary.
type Interceptors struct {
	f       Frontend
	h       *Handlers
	log     *slog.Logger
	tagger  threadTagger
	summary *failureSummary

	logOpts, openLogOpts []logging.Option
	// guarded matches every service but health and reflection: limits,
	// credentials and isolation apply to those alone, since probes must
	// work without credentials, and health watches and reflection sessions
	// are long-lived streams that a deadline cap would cut. open matches
	// the others.
	guarded, open selector.Matcher
}

// Link is one link of the interceptor chain: its unary and its stream
// interceptor, either nil when the link concerns only the other kind of
// call.
type Link struct {
	// Unary intercepts unary calls; nil passes them on.
	Unary grpc.UnaryServerInterceptor
	// Stream intercepts streaming calls; nil passes them on.
	Stream grpc.StreamServerInterceptor
}

// NewInterceptors returns the interceptors configured by f in front of h.
func NewInterceptors(f Frontend, h *Handlers) *Interceptors {
	log := RedactThreadIDs(f.Logger)
	ic := &Interceptors{f: f, h: h, log: log, tagger: newThreadTagger(f.ThreadIDs, f.ThreadIDSalt), summary: newFailureSummary(log, f.FailureSummaryEvery)}
	ic.logOpts = []logging.Option{
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
	ic.openLogOpts = append(slices.Clone(ic.logOpts), logging.WithLevels(openServiceLevel))
	if f.LogSuccessEvery > 1 {
		ic.logOpts = append(ic.logOpts, logging.WithLevels(sampledLevel(uint64(f.LogSuccessEvery))))
	}
	ic.guarded = selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool { return !OpenService(c.Service) })
	ic.open = selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool { return OpenService(c.Service) })
	return ic
}

// guard applies l to every service but health and reflection.
func (ic *Interceptors) guard(l Link) Link {
	var out Link
	if l.Unary != nil {
		out.Unary = selector.UnaryServerInterceptor(l.Unary, ic.guarded)
	}
	if l.Stream != nil {
		out.Stream = selector.StreamServerInterceptor(l.Stream, ic.guarded)
	}
	return out
}

// Metrics counts and times every call to the services that require
// credentials with Frontend.Metrics, and with MetricsAllMethods to health
// and reflection as well. Frontend.Metrics must be set.
func (ic *Interceptors) Metrics() Link {
	l := Link{ic.f.Metrics.UnaryServerInterceptor(), ic.f.Metrics.StreamServerInterceptor()}
	if ic.f.MetricsAllMethods {
		return l
	}
	return ic.guard(l)
}

// NoteFailures puts a note in each call's context, through which the links
// after it tell the request log to leave a failure to its summary (see
// failureSummary).
func (ic *Interceptors) NoteFailures() Link {
	u, s := noteCalls(ic.summary)
	return Link{u, s}
}

// TagThreads tags each call with its thread, so that what follows can log
// the thread's hash, never its id. Server-streaming calls have their
// request read here, once their credentials are accepted (see
// prefetchStream).
func (ic *Interceptors) TagThreads() Link {
	return Link{tagThreadUnary(ic.tagger), prefetchStream(ic.tagger, ic.f.Auth)}
}

// RequestLog logs every call to the services that require credentials
// (method, code, duration, tenant, thread hash), at info or above; with
// LogSuccessEvery, all but one in that many successful calls at debug.
func (ic *Interceptors) RequestLog() Link {
	return ic.guard(Link{
		logging.UnaryServerInterceptor(slogAdapter(ic.log), ic.logOpts...),
		logging.StreamServerInterceptor(slogAdapter(ic.log), ic.logOpts...),
	})
}

// OpenRequestLog logs health and reflection calls as RequestLog logs the
// others, but successful ones at debug, since probes would otherwise drown
// the calls that matter.
func (ic *Interceptors) OpenRequestLog() Link {
	return Link{
		selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(slogAdapter(ic.log), ic.openLogOpts...), ic.open),
		selector.StreamServerInterceptor(logging.StreamServerInterceptor(slogAdapter(ic.log), ic.openLogOpts...), ic.open),
	}
}

// Recover turns a handler's panic into Internal, logged with the stack;
// the process lives on.
func (ic *Interceptors) Recover() Link {
	opts := []recovery.Option{
		recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
			ic.log.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()))
			return status.Error(codes.Internal, "internal error")
		}),
	}
	return Link{recovery.UnaryServerInterceptor(opts...), recovery.StreamServerInterceptor(opts...)}
}

// Limits applies the per-call limits, MaxResponseBytes and the
// MaxCallDuration cap, to every service but health and reflection.
func (ic *Interceptors) Limits() Link {
	lim := limits{maxResponse: ic.f.MaxResponseBytes, maxDuration: ic.f.MaxCallDuration}
	return ic.guard(Link{lim.unary, lim.stream})
}

// ReflectionOff answers server reflection as an unknown service
// (Frontend.DisableReflection).
func (ic *Interceptors) ReflectionOff() Link { return Link{Stream: reflectionOff} }

// Authenticate requires Frontend.Auth's credentials on every service but
// health and reflection, and records the tenant in the request log.
// Frontend.Auth must be set.
func (ic *Interceptors) Authenticate() Link {
	authFn := authenticate(ic.f.Auth)
	return ic.guard(Link{grpcauth.UnaryServerInterceptor(authFn), grpcauth.StreamServerInterceptor(authFn)})
}

// RateLimit limits each tenant to Frontend.RateLimit calls a second (all
// callers share one bucket without Auth); after Authenticate, to know the
// tenant.
func (ic *Interceptors) RateLimit() Link {
	tl := newTenantLimiter(ic.f.RateLimit, ic.f.RateBurst)
	return ic.guard(Link{tl.unary, tl.stream})
}

// StreamGuard ends a stream at StreamMaxAge, and when a reload of the token
// file revokes what it was allowed (see streamGuard).
func (ic *Interceptors) StreamGuard() Link {
	g := newStreamGuard(ic.f.Auth, ic.f.StreamMaxAge)
	return ic.guard(Link{Stream: g.stream})
}

// RefuseMalformed refuses requests whose bytes are no valid message, or
// hold an integer its field cannot, as INVALID_ARGUMENT (see decode.go).
// It belongs after authentication, so that a caller without credentials
// learns only that, and before isolation, which has no thread to route
// such a call by.
func (ic *Interceptors) RefuseMalformed() Link {
	return Link{refuseMalformedUnary, refuseMalformedStream}
}

// Isolation keeps each tenant to its own threads (see isolation): a call
// for another tenant's thread is answered by the same handlers over a
// store in which no thread exists, exactly as a call for an unknown
// thread. It belongs after authentication, which tells it the tenant.
func (ic *Interceptors) Isolation() Link {
	iso := newIsolation(ic.h)
	return ic.guard(Link{iso.unary, iso.stream})
}

// TracingHandler is the stats handler that traces every call with
// Frontend.TracerProvider (see tracingHandler). A stats handler sees each
// call before the first interceptor and after the last, so the span covers
// all of the chain. Frontend.TracerProvider must be set.
func (ic *Interceptors) TracingHandler() stats.Handler {
	return tracingHandler(ic.f.TracerProvider, ic.tagger)
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

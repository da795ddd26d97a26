package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/historyd/historyd/auth"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// What a caller is told to do about a response over the size limit.
const (
	snapshotsAdvice = "ask for fewer keys with `keys`, or read one turn per message with StreamSnapshots (or one turn with Snapshot)"
	snapshotAdvice  = "ask for fewer keys with `keys`"
)

type maxResponseKey struct{}

// checkResponseSize fails with ResourceExhausted when resp is larger than
// the call's response limit (set by the limits interceptor; none when
// absent). It runs before the response is handed to gRPC, so the caller
// learns the limit and what to ask for instead, rather than gRPC's bare
// "message larger than max".
func checkResponseSize(ctx context.Context, resp proto.Message, advice string) error {
	limit, _ := ctx.Value(maxResponseKey{}).(int)
	if limit <= 0 {
		return nil
	}
	if n := proto.Size(resp); n > limit {
		return status.Errorf(codes.ResourceExhausted, "response would be %d bytes, over this server's limit of %d bytes per response; %s", n, limit, advice)
	}
	return nil
}

// deadlineCapError is the cause of a call's context ending at the server's
// cap rather than at the caller's own deadline.
type deadlineCapError struct{ max time.Duration }

func (e deadlineCapError) Error() string {
	return fmt.Sprintf("call ran past this server's limit of %s per call", e.max)
}

// limits applies the per-call limits: the response size limit, for
// checkResponseSize, and the cap on a call's deadline.
type limits struct {
	maxResponse int
	maxDuration time.Duration
}

func (l limits) apply(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.maxResponse > 0 {
		ctx = context.WithValue(ctx, maxResponseKey{}, l.maxResponse)
	}
	if l.maxDuration > 0 {
		// A caller's earlier deadline still wins: WithTimeout never
		// extends one.
		return context.WithTimeoutCause(ctx, l.maxDuration, deadlineCapError{l.maxDuration})
	}
	return ctx, func() {}
}

// explain says so when a call failed because the server's cap, not the
// caller's deadline, ran out; otherwise the caller would see a deadline it
// never set.
func (l limits) explain(ctx context.Context, err error) error {
	var capped deadlineCapError
	timedOut := status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)
	if err != nil && timedOut && errors.As(context.Cause(ctx), &capped) {
		return status.Errorf(codes.DeadlineExceeded, "%v: %s", capped, status.Convert(err).Message())
	}
	return err
}

func (l limits) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, cancel := l.apply(ctx)
	defer cancel()
	resp, err := handler(ctx, req)
	return resp, l.explain(ctx, err)
}

func (l limits) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod == historydv1.ThreadHistory_WatchTurns_FullMethodName {
		l.maxDuration = 0 // a watch lasts until it is cancelled, by design
	}
	ctx, cancel := l.apply(ss.Context())
	defer cancel()
	w := &limitedStream{ServerStream: ss, ctx: ctx, max: l.maxResponse}
	return l.explain(ctx, handler(srv, w))
}

// limitedStream checks each message against the response limit before
// sending it, so that a stream too large a message fails saying what to
// ask for, not with gRPC's bare "message larger than max".
type limitedStream struct {
	grpc.ServerStream
	ctx context.Context
	max int
}

func (s *limitedStream) Context() context.Context { return s.ctx }

func (s *limitedStream) SendMsg(m any) error {
	if pm, ok := m.(proto.Message); ok && s.max > 0 {
		if n := proto.Size(pm); n > s.max {
			return status.Errorf(codes.ResourceExhausted, "a message of this stream would be %d bytes, over this server's limit of %d bytes per message; %s", n, s.max, snapshotAdvice)
		}
	}
	return s.ServerStream.SendMsg(m)
}

// tenantLimiter is a token bucket per tenant. Without authentication every
// caller is the same anonymous tenant and shares one bucket.
type tenantLimiter struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter // by tenant name; bounded by the token file
}

func newTenantLimiter(perSecond float64, burst int) *tenantLimiter {
	if burst < 1 {
		burst = max(1, int(math.Ceil(perSecond)))
	}
	return &tenantLimiter{limit: rate.Limit(perSecond), burst: burst, buckets: map[string]*rate.Limiter{}}
}

func (l *tenantLimiter) bucket(tenant string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[tenant]
	if !ok {
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[tenant] = b
	}
	return b
}

// admit takes a token from the tenant's bucket, or fails with
// ResourceExhausted carrying a RetryInfo detail and the same hint in the
// message. The go-grpc-middleware ratelimit interceptor is not used
// because it rewrites the error into its own text and drops the details.
func (l *tenantLimiter) admit(ctx context.Context) error {
	name := ""
	if t, ok := auth.TenantFromContext(ctx); ok {
		name = t.Name
	}
	now := time.Now()
	r := l.bucket(name).ReserveN(now, 1)
	wait := r.DelayFrom(now)
	if r.OK() && wait == 0 {
		return nil
	}
	r.CancelAt(now) // a refused call must not use up a later call's token
	wait = max(wait.Round(time.Millisecond), time.Millisecond)
	who, key := "", "(all callers)"
	if name != "" {
		who, key = fmt.Sprintf(" for tenant %q", name), name
	}
	// A tenant at its limit may be refused thousands of times a second.
	summarise(ctx, rateLimited, key, "")
	st := status.Newf(codes.ResourceExhausted, "rate limit of %g calls/s (burst %d) exceeded%s; retry in %s", float64(l.limit), l.burst, who, wait)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = d
	}
	return st.Err()
}

// rateLimited is the kind of failure the rate limit's refusals are
// summarised as.
var rateLimited = failureKind{code: codes.ResourceExhausted, what: "rate limit exceeded", by: "tenant"}

func (l *tenantLimiter) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := l.admit(ctx); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (l *tenantLimiter) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := l.admit(ss.Context()); err != nil {
		return err
	}
	return handler(srv, ss)
}

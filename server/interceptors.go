package server

import (
	"runtime"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/service/wire"
)

// grpcOptions returns the grpc.ServerOptions every historyd server runs
// with, f configuring them, the interceptor chain in front of h assembled
// here and nowhere else. Outermost first:
//
//  1. metrics, so every outcome is counted, panics and refusals included
//     (for health and reflection only with MetricsAllMethods);
//  2. a note in the call's context, through which what follows tells the
//     request log to leave a failure to its summary;
//  3. thread tagging, so what follows can log the thread's hash, never its
//     id (server-streaming calls have their request read here, once
//     their credentials are accepted);
//  4. request logging (method, code, duration, tenant, thread hash), at
//     info or above, except successful health and reflection calls: at
//     debug, since probes would otherwise drown the calls that matter; and
//     with LogSuccessEvery, all but one in that many successful calls;
//  5. panic recovery: Internal, logged with the stack, the process lives on;
//  6. per-call limits: the response size limit and the deadline cap;
//  7. reflection switch (streams only);
//  8. authentication (not for health and reflection);
//  9. per-tenant rate limiting (after authentication, to know the tenant);
//  10. the stream guard (streams only), which ends a stream at
//     StreamMaxAge, and when a reload of the token file revokes what it
//     was allowed;
//  11. the refusal of requests whose bytes are no valid message, or hold an
//     integer its field cannot (INVALID_ARGUMENT): after authentication,
//     so that a caller without credentials learns only that, and before
//     isolation, which has no thread to route such a call by;
//  12. tenant isolation, which answers a call for another tenant's thread
//     on the same handlers over a store in which no thread exists;
//
// then the handler, which validates the request. With TracerProvider set,
// otelgrpc's stats handler traces the call around all of them. An
// interceptor added to this chain sees responses whose state entries are
// still encoded, their getters unset (see wire.TurnState); one that must
// read entries reads them from a copy made with service.Decoded.
func grpcOptions(f service.Frontend, h *service.Handlers) []grpc.ServerOption {
	ic := service.NewInterceptors(f, h)
	var chain []service.Link
	if f.Metrics != nil {
		chain = append(chain, ic.Metrics())
	}
	chain = append(chain, ic.NoteFailures(), ic.TagThreads(), ic.RequestLog(), ic.OpenRequestLog(), ic.Recover(), ic.Limits())
	if f.DisableReflection {
		chain = append(chain, ic.ReflectionOff())
	}
	if f.Auth != nil {
		chain = append(chain, ic.Authenticate())
	}
	if f.RateLimit > 0 {
		chain = append(chain, ic.RateLimit())
	}
	if f.Auth != nil || f.StreamMaxAge > 0 {
		chain = append(chain, ic.StreamGuard())
	}
	chain = append(chain, ic.RefuseMalformed())
	if f.Auth != nil {
		chain = append(chain, ic.Isolation())
	}
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	for _, l := range chain {
		if l.Unary != nil {
			unary = append(unary, l.Unary)
		}
		if l.Stream != nil {
			stream = append(stream, l.Stream)
		}
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
	if f.TracerProvider != nil {
		// A stats handler sees each call before the first interceptor and
		// after the last, so the span covers all of the chain.
		opts = append(opts, grpc.StatsHandler(ic.TracingHandler()))
	}
	if f.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(f.TLS)))
	}
	if f.MaxRequestBytes > 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(f.MaxRequestBytes))
	}
	if f.MaxResponseBytes > 0 {
		// The handlers' own check names the limit and what to ask for
		// instead; this catches every other method.
		opts = append(opts, grpc.MaxSendMsgSize(f.MaxResponseBytes))
	}
	if f.MaxConcurrentStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(f.MaxConcurrentStreams))
	}
	if f.KeepaliveEnforcement != nil {
		opts = append(opts, grpc.KeepaliveEnforcementPolicy(*f.KeepaliveEnforcement))
	}
	if f.Keepalive != nil {
		opts = append(opts, grpc.KeepaliveParams(*f.Keepalive))
	}
	return opts
}

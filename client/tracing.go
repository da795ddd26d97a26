package client

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// WithTracing sets how Dial's connection traces calls: tp starts a client
// span for each call (each retry is a call of its own), and p injects the
// span's context into the call's metadata, so that historyd's span for the
// call is its child. A nil tp or p stands for OpenTelemetry's global one
// (otel.GetTracerProvider, otel.GetTextMapPropagator), which is what Dial
// uses without this option: a host that sets those up has its historyd
// calls in its traces, propagated as its propagator says (W3C traceparent
// with propagation.TraceContext); one that does not gets no-op spans and
// sends nothing. New's connection is the caller's: trace it with
// otelgrpc.NewClientHandler among its own dial options.
//
// A failed call's span carries its status code, not the server's message,
// which may name the thread: thread ids stay out of traces on this side
// too.
func WithTracing(tp trace.TracerProvider, p propagation.TextMapPropagator) Option {
	return func(c *config) { c.tracing = tracingConfig{tp: tp, prop: p} }
}

// tracingConfig is what WithTracing set.
type tracingConfig struct {
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

// handler returns the connection's stats handler: otelgrpc's client handler
// with what the status message says left out.
func (tc tracingConfig) handler() stats.Handler {
	var opts []otelgrpc.Option
	if tc.tp != nil {
		opts = append(opts, otelgrpc.WithTracerProvider(tc.tp))
	}
	if tc.prop != nil {
		opts = append(opts, otelgrpc.WithPropagators(tc.prop))
	}
	return codeOnly{otelgrpc.NewClientHandler(opts...)}
}

// codeOnly hands its handler each call's end with the status reduced to its
// code.
type codeOnly struct{ stats.Handler }

func (h codeOnly) HandleRPC(ctx context.Context, rs stats.RPCStats) {
	if end, ok := rs.(*stats.End); ok && end.Error != nil {
		reduced := *end
		code := status.Code(end.Error)
		reduced.Error = status.Error(code, code.String())
		rs = &reduced
	}
	h.Handler.HandleRPC(ctx, rs)
}

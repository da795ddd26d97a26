package service

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/service/wire"
	"github.com/historyd/historyd/tracing"
)

// AttrThread is the attribute of an RPC span naming the call's thread: its
// hash as the request log shows it (ThreadIDsHashed, with the same salt),
// so that a trace and the call's log line can be found from each other.
// With ThreadIDsOmitted spans carry no trace of the thread.
const AttrThread = attribute.Key("historyd.thread")

// tracingHandler returns the stats handler that traces every call with
// otelgrpc, reading the caller's W3C trace context, wrapped so that no
// thread id reaches a span in clear. otelgrpc never records payloads (no
// message events are asked for), and its span names and attributes are
// the method's; what could show a thread id is the status message of a
// failed call (DATA_LOSS and UNAVAILABLE name the thread), which the
// wrapper redacts as the logs are. Health checks and reflection are not
// traced: health watches and reflection sessions are long-lived streams
// that say nothing about a call's cost.
func tracingHandler(tp trace.TracerProvider, tagger threadTagger) stats.Handler {
	return tracedCalls{
		inner: otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(tp),
			otelgrpc.WithPropagators(tracing.Propagator()),
			// Call metrics are Prometheus's (package metrics).
			otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelgrpc.WithFilter(filters.None(filters.HealthCheck(), filters.ServicePrefix("grpc.reflection."))),
		),
		tagger: tagger,
	}
}

// tracedCalls is otelgrpc's server handler, told each call's thread by its
// request so that it can tag the span with the thread's hash and redact
// the id from the status message.
type tracedCalls struct {
	inner  stats.Handler
	tagger threadTagger
}

// callThread is the thread a call's request named, filled in when the
// request arrives and read when the call ends; both happen on the call's
// own goroutine.
type callThread struct {
	tag threadTag
	set bool
}

type callThreadKey struct{}

func (h tracedCalls) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return h.inner.TagConn(ctx, info)
}

func (h tracedCalls) HandleConn(ctx context.Context, cs stats.ConnStats) { h.inner.HandleConn(ctx, cs) }

func (h tracedCalls) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(h.inner.TagRPC(ctx, info), callThreadKey{}, &callThread{})
}

func (h tracedCalls) HandleRPC(ctx context.Context, rs stats.RPCStats) {
	ct, _ := ctx.Value(callThreadKey{}).(*callThread)
	switch rs := rs.(type) {
	case *stats.InPayload:
		if r, ok := wire.RequestOf(rs.Payload).(threadRequest); ok && ct != nil && !ct.set && r.GetThreadId() != "" {
			ct.tag, ct.set = h.tagger.tag(r.GetThreadId()), true
			if sp := trace.SpanFromContext(ctx); ct.tag.hashed && sp.IsRecording() {
				sp.SetAttributes(AttrThread.String(ct.tag.shown))
			}
		}
	case *stats.End:
		if rs.Error != nil && ct != nil {
			st := status.Convert(rs.Error)
			red := redaction{tag: ct.tag, hasTag: ct.set, tagger: h.tagger, hasTagger: true}
			if msg := red.redact(st.Message()); msg != st.Message() {
				end := *rs
				end.Error = status.Error(st.Code(), msg)
				h.inner.HandleRPC(ctx, &end)
				return
			}
		}
	}
	h.inner.HandleRPC(ctx, rs)
}

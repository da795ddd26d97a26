package client_test

import (
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// Without WithTracing, Dial traces with OpenTelemetry's global provider and
// propagator: a host that set them up has its historyd calls in its
// traces, historyd's span the child of the client's, the client's of the
// host's. (server's TestTracing checks the same over OTLP, with WithTracing.)
func TestDialTracesWithTheGlobals(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})

	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "t"}, []storetest.Turn{{Question: "q", Writes: map[string]any{"k": 1}}})
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: mem}, TracerProvider: tp})
	c, err := client.Dial(servertest.Target, client.WithInsecure(), client.WithDialOptions(srv.Dialer()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, parent := tp.Tracer("host").Start(t.Context(), "agent turn")
	if _, err := c.Turns(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	for _, err := range c.StreamSnapshots(ctx, "t") {
		if err != nil {
			t.Fatal(err)
		}
	}
	parent.End()
	// A server span ends after the call's status is sent, so the client
	// can be done before it is: wait for both.
	serverSpan := func(name string) func(sdktrace.ReadOnlySpan) bool {
		return func(s sdktrace.ReadOnlySpan) bool {
			return s.Name() == "historyd.v1.ThreadHistory/"+name && s.SpanKind() == trace.SpanKindServer
		}
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ended := rec.Ended(); slices.ContainsFunc(ended, serverSpan("Turns")) && slices.ContainsFunc(ended, serverSpan("StreamSnapshots")) {
			break
		}
	}
	srv.Close()

	turns := map[trace.SpanKind]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.Name() == "historyd.v1.ThreadHistory/Turns" {
			turns[s.SpanKind()] = s
		}
	}
	call, rpc := turns[trace.SpanKindClient], turns[trace.SpanKindServer]
	if call == nil || rpc == nil {
		t.Fatalf("spans %v: want the client's and the server's for Turns", rec.Ended())
	}
	if call.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("client span's parent %s, want the host's span %s", call.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	if rpc.Parent().SpanID() != call.SpanContext().SpanID() || !rpc.Parent().IsRemote() {
		t.Errorf("server span's parent %v, want the client's span %s, arrived over the wire", rpc.Parent(), call.SpanContext().SpanID())
	}
	// A stream is traced the same way, its request read for the thread's
	// hash as a unary call's is.
	var stream sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "historyd.v1.ThreadHistory/StreamSnapshots" && s.SpanKind() == trace.SpanKindServer {
			stream = s
		}
	}
	if stream == nil || stream.Parent().TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("no server span for StreamSnapshots in the host's trace among %v", rec.Ended())
	}
	hashed := false
	for _, kv := range stream.Attributes() {
		hashed = hashed || (kv.Key == service.AttrThread && len(kv.Value.AsString()) == 12)
	}
	if !hashed {
		t.Errorf("StreamSnapshots span attributes %v: no %s hash", stream.Attributes(), service.AttrThread)
	}
}

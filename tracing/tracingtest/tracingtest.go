// Package tracingtest runs an OpenTelemetry collector's receiving end
// inside a test process: the OTLP trace service over gRPC and OTLP/HTTP
// with protobuf bodies, on loopback, speaking the real protocol
// (go.opentelemetry.io/proto/otlp), so that what a test asserts is what a
// collector would have received. It keeps every span, and every request's
// bytes as they arrived, for checks of what must never be exported.
//
//	rcv := tracingtest.Start(t)
//	rcv.SetEnv(t, tracing.ProtocolGRPC) // OTEL_* pointing at it
//	tr, _ := tracing.FromEnv(ctx, "test", nil)
package tracingtest

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with the resource and scope it came under.
type Span struct {
	*tracepb.Span
	// Resource holds the resource's attributes.
	Resource map[string]any
	// Scope is the instrumentation scope's name.
	Scope string
}

// TraceIDHex is the span's trace id in hex, as W3C traceparent headers
// write it.
func (s Span) TraceIDHex() string { return hex.EncodeToString(s.TraceId) }

// SpanIDHex is the span's id in hex.
func (s Span) SpanIDHex() string { return hex.EncodeToString(s.SpanId) }

// ParentHex is the parent span's id in hex, "" for a root span.
func (s Span) ParentHex() string { return hex.EncodeToString(s.ParentSpanId) }

// Attr returns the value of the span's attribute key: a string, bool,
// int64, float64, or []any for arrays.
func (s Span) Attr(key string) (any, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return value(kv.Value), true
		}
	}
	return nil, false
}

// Attrs returns every attribute of the span, as Attr gives them.
func (s Span) Attrs() map[string]any { return attrs(s.Attributes) }

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = value(kv.Value)
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	}
	return nil
}

// Receiver is an OTLP trace receiver on loopback.
type Receiver struct {
	collectorpb.UnimplementedTraceServiceServer

	grpcAddr string
	httpAddr string

	mu    sync.Mutex
	spans []Span
	raw   [][]byte
}

// Start starts a Receiver serving OTLP over gRPC and over HTTP, each on a
// loopback port of its own, and stops it when the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tracingtest: listen: %v", err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		t.Fatalf("tracingtest: listen: %v", err)
	}
	r.grpcAddr, r.httpAddr = gl.Addr().String(), hl.Addr().String()

	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, r)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = gs.Serve(gl) }()
	go func() { _ = hs.Serve(hl) }()
	t.Cleanup(func() {
		gs.Stop()
		_ = hs.Close()
	})
	return r
}

// Endpoint is the receiver's URL for protocol (tracing.ProtocolGRPC or
// tracing.ProtocolHTTPProtobuf), as OTEL_EXPORTER_OTLP_ENDPOINT takes it.
func (r *Receiver) Endpoint(protocol string) string {
	if protocol == "grpc" {
		return "http://" + r.grpcAddr
	}
	return "http://" + r.httpAddr
}

// SetEnv points the OTEL_* variables tracing.FromEnv reads at the receiver
// over protocol, sampling every trace and exporting each span within a
// few milliseconds, for the rest of the test (t.Setenv: not for parallel
// tests).
func (r *Receiver) SetEnv(t testing.TB, protocol string) {
	t.Helper()
	for k, v := range map[string]string{
		"OTEL_SDK_DISABLED":                  "",
		"OTEL_TRACES_EXPORTER":               "",
		"OTEL_EXPORTER_OTLP_ENDPOINT":        r.Endpoint(protocol),
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
		"OTEL_EXPORTER_OTLP_PROTOCOL":        protocol,
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "",
		"OTEL_TRACES_SAMPLER":                "always_on",
		"OTEL_TRACES_SAMPLER_ARG":            "",
		"OTEL_BSP_SCHEDULE_DELAY":            "10",
	} {
		t.Setenv(k, v)
	}
}

// Export implements the OTLP trace service.
func (r *Receiver) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	raw, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	r.add(req, raw)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("Content-Type %q: want application/x-protobuf", ct), http.StatusUnsupportedMediaType)
		return
	}
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg, raw)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) add(req *collectorpb.ExportTraceServiceRequest, raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, raw)
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Span: sp, Resource: res, Scope: ss.GetScope().GetName()})
			}
		}
	}
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Contains reports whether any request received so far holds s anywhere in
// its bytes: span names, attribute keys and values, events, status
// messages, the resource. Protobuf keeps strings as they are, so a thread id
// that reached the collector in any field is found.
func (r *Receiver) Contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, raw := range r.raw {
		if bytes.Contains(raw, []byte(s)) {
			return true
		}
	}
	return false
}

// WaitFor waits up to timeout for the spans received to satisfy done, and
// returns them; it fails the test, listing what arrived, when they do not.
func (r *Receiver) WaitFor(t testing.TB, timeout time.Duration, what string, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		if done(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("tracingtest: no %s within %v; received:\n%s", what, timeout, Describe(spans))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Describe lists spans one a line, for failure messages.
func Describe(spans []Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s trace %s span %s parent %s scope %s %v\n", s.Name, s.TraceIDHex(), s.SpanIDHex(), s.ParentHex(), s.Scope, s.Attrs())
	}
	return b.String()
}

// Named returns the spans called name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Children returns the spans whose parent is parent.
func Children(spans []Span, parent Span) []Span {
	var out []Span
	for _, s := range spans {
		if bytes.Equal(s.ParentSpanId, parent.SpanId) && bytes.Equal(s.TraceId, parent.TraceId) {
			out = append(out, s)
		}
	}
	return out
}

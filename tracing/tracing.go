// Package tracing sets up historyd's OpenTelemetry tracing from the
// standard OTEL_* environment variables, and is off unless they name a
// collector: with no endpoint set there is no exporter and no tracer
// provider, and the server installs no instrumentation at all, so tracing
// costs nothing until it is configured.
//
// What is traced is decided where the work is done: every RPC (otelgrpc's
// server handler, installed by server.New), the store's turn
// index and state reads (package store), and every statement the backends
// run (otelpgx on the PostgreSQL pool, the SQLite backend's own spans).
// Thread ids never appear in clear: see service.Frontend.TracerProvider.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of historyd's spans unless
// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says
// otherwise.
const ServiceName = "historyd"

// The OTLP protocols historyd exports with, as OTEL_EXPORTER_OTLP_PROTOCOL
// names them.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// Propagator is how trace context crosses a call: W3C traceparent and
// tracestate headers, what every OpenTelemetry SDK sends by default. The
// server reads calls' context with it whatever the process's global
// propagator is, so that an embedder's global settings cannot turn it off.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Tracing is the process's tracing as FromEnv configured it: on, with an
// exporter and a tracer provider, or off.
type Tracing struct {
	tp *sdktrace.TracerProvider
}

// FromEnv configures tracing from the environment, as the OpenTelemetry
// specification defines the variables:
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off.
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT:
//     the collector, a URL (http://collector:4317); neither set: off. The
//     exporter also reads the other OTEL_EXPORTER_OTLP_* variables (headers,
//     timeout, certificates, compression) itself.
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
//     grpc or http/protobuf (the default, as the specification says).
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG: always_on,
//     always_off, traceidratio, parentbased_always_on (the default),
//     parentbased_always_off, parentbased_traceidratio.
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES: the resource, over
//     service.name historyd and service.version version.
//
// A value it cannot use is an error naming the variable and what it
// accepts, rather than tracing silently going somewhere else; the protocol
// and sampler are checked even while no endpoint is set. When tracing
// is on, the SDK's own errors (a collector that cannot be reached) are
// logged to log, and FromEnv logs where spans go. Shut the result down
// once the server has stopped, to send the spans still buffered.
func FromEnv(ctx context.Context, version string, log *slog.Logger) (*Tracing, error) {
	if log == nil {
		log = slog.Default()
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return &Tracing{}, nil
	}
	switch e := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); e {
	case "", "otlp":
	case "none":
		return &Tracing{}, nil
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: historyd exports with otlp (or none for no tracing)", e)
	}
	// Checked even while no endpoint is set: a typo found now is not found
	// the day tracing is turned on.
	protocolVar, protocol := firstSet("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	switch protocol {
	case "":
		protocol = ProtocolHTTPProtobuf
	case ProtocolGRPC, ProtocolHTTPProtobuf:
	default:
		return nil, fmt.Errorf("%s=%q: want %s or %s", protocolVar, protocol, ProtocolGRPC, ProtocolHTTPProtobuf)
	}
	sampler, samplerName, err := samplerFromEnv()
	if err != nil {
		return nil, err
	}
	endpointVar, endpoint := firstSet("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if endpoint == "" {
		return &Tracing{}, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s=%q: want a URL with scheme http or https and a host, e.g. http://otel-collector:4317", endpointVar, endpoint)
	}

	var exp sdktrace.SpanExporter
	if protocol == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter (%s to %s): %w", protocol, u.Redacted(), err)
	}
	// Later sources win: the environment over historyd's defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version)),
		resource.WithHost(),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	// The SDK reports export failures through the global handler; they
	// belong in historyd's own log, with its format.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: exporting spans failed", "err", err)
	}))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	log.Info("tracing: exporting spans over OTLP", "endpoint", u.Redacted(), "protocol", protocol, "sampler", samplerName)
	return &Tracing{tp: tp}, nil
}

// firstSet returns the first of the variables that is set and not empty,
// and its value.
func firstSet(names ...string) (string, string) {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return n, v
		}
	}
	return names[len(names)-1], ""
}

// samplerFromEnv reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. The
// SDK would read them too, but falls back to its default on a value it
// does not know; a typo in a sampling rate should stop the start instead.
func samplerFromEnv() (sdktrace.Sampler, string, error) {
	name := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER"))
	if name == "" {
		name = "parentbased_always_on"
	}
	ratio := func() (float64, error) {
		arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1 for %s", arg, name)
		}
		return r, nil
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), name, nil
	case "always_off":
		return sdktrace.NeverSample(), name, nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), name, nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), name, nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, "", err
		}
		s := sdktrace.TraceIDRatioBased(r)
		if name == "parentbased_traceidratio" {
			s = sdktrace.ParentBased(s)
		}
		return s, fmt.Sprintf("%s %g", name, r), nil
	}
	return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// FlushTimeout bounds Close. historyd serve closes tracing after the
// server has drained for --shutdown-grace; the deployment's termination
// grace period leaves a few seconds for this (docs/deploy.md).
const FlushTimeout = 3 * time.Second

// Close is Shutdown within FlushTimeout, logging to log what could not be
// sent: what historyd serve does as it exits.
func (t *Tracing) Close(log *slog.Logger) {
	if !t.Enabled() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil && log != nil {
		log.Warn("tracing: spans not sent at shutdown", "err", err)
	}
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.tp != nil }

// TracerProvider returns the provider to trace with, or nil when tracing is
// off: nil is what server.Config.TracerProvider takes to install nothing.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if !t.Enabled() {
		return nil
	}
	return t.tp
}

// Shutdown sends the spans still buffered and stops the exporter, waiting
// at most until ctx is done. Call it once the server has stopped, so that
// the last calls' spans are sent too. It does nothing when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flush spans: %w", err)
	}
	return nil
}

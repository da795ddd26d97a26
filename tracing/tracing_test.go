package tracing_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/historyd/historyd/tracing"
	"github.com/historyd/historyd/tracing/tracingtest"
)

// clearEnv unsets every variable FromEnv reads, for the rest of the test.
func clearEnv(t *testing.T) {
	for _, k := range []string{
		"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	} {
		t.Setenv(k, "")
	}
}

func setEnv(t *testing.T, env map[string]string) {
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// Without a collector named, or with tracing turned off by the standard
// switches, FromEnv installs nothing.
func TestOff(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"no endpoint":           {"OTEL_TRACES_SAMPLER": "always_on", "OTEL_SERVICE_NAME": "x"},
		"sdk disabled":          {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_SDK_DISABLED": "TRUE"},
		"exporter none":         {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_TRACES_EXPORTER": "none"},
		"blank endpoint":        {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "},
		"disabled, bogus":       {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_SAMPLER": "sometimes"},
		"traces endpoint empty": {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			setEnv(t, env)
			tr, err := tracing.FromEnv(t.Context(), "v1", quiet)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Enabled() || tr.TracerProvider() != nil {
				t.Fatal("tracing on")
			}
			if err := tr.Shutdown(t.Context()); err != nil {
				t.Errorf("Shutdown of tracing that is off: %v", err)
			}
		})
	}
}

// A value FromEnv cannot use stops the start, naming the variable and what
// it takes.
func TestRefuses(t *testing.T) {
	base := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, `OTEL_TRACES_EXPORTER="zipkin": historyd exports with otlp`},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": want grpc or http/protobuf`},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="udp"`},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, `OTEL_EXPORTER_OTLP_ENDPOINT="collector:4317": want a URL with scheme http or https`},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://c/v1/traces"}, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="ftp://c/v1/traces"`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, `OTEL_TRACES_SAMPLER="sometimes": want always_on, always_off, traceidratio`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, `OTEL_TRACES_SAMPLER_ARG="1.5": want a ratio from 0 to 1`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "5%"}, `OTEL_TRACES_SAMPLER_ARG="5%"`},
		// Before tracing is turned on too.
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_TRACES_SAMPLER": "parentbased_ratio"}, `OTEL_TRACES_SAMPLER="parentbased_ratio"`},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_PROTOCOL": "gRPC"}, `OTEL_EXPORTER_OTLP_PROTOCOL="gRPC"`},
	} {
		t.Run(tt.want, func(t *testing.T) {
			clearEnv(t)
			setEnv(t, base)
			setEnv(t, tt.env)
			tr, err := tracing.FromEnv(t.Context(), "v1", quiet)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("FromEnv = %v, %v; want an error saying %s", tr, err, tt.want)
			}
		})
	}
}

// Spans reach a real OTLP receiver over either protocol, under historyd's
// resource, with what the environment adds.
func TestExports(t *testing.T) {
	for _, protocol := range []string{tracing.ProtocolGRPC, tracing.ProtocolHTTPProtobuf} {
		t.Run(protocol, func(t *testing.T) {
			clearEnv(t)
			rcv := tracingtest.Start(t)
			rcv.SetEnv(t, protocol)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "k8s.pod.name=historyd-abc")
			var logs bytes.Buffer
			tr, err := tracing.FromEnv(t.Context(), "v1.2.3", slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), "protocol="+protocol) || !strings.Contains(logs.String(), rcv.Endpoint(protocol)) {
				t.Errorf("log %q does not say where spans go", logs.String())
			}
			_, span := tr.TracerProvider().Tracer("test").Start(t.Context(), "work")
			span.End()
			if err := tr.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			spans := rcv.Spans()
			if len(spans) != 1 || spans[0].Name != "work" {
				t.Fatalf("received after Shutdown:\n%s", tracingtest.Describe(spans))
			}
			for k, want := range map[string]string{"service.name": "historyd", "service.version": "v1.2.3", "k8s.pod.name": "historyd-abc"} {
				if got := spans[0].Resource[k]; got != want {
					t.Errorf("resource %s = %v, want %q", k, got, want)
				}
			}
		})
	}
}

// The trace-specific variables win over the general ones, and
// OTEL_SERVICE_NAME over everything.
func TestTraceSpecificVariablesWin(t *testing.T) {
	clearEnv(t)
	rcv := tracingtest.Start(t)
	setEnv(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://127.0.0.1:1",
		"OTEL_EXPORTER_OTLP_PROTOCOL":        "grpc",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.Endpoint(tracing.ProtocolHTTPProtobuf) + "/v1/traces",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
		"OTEL_SERVICE_NAME":                  "historyd-eu",
		"OTEL_RESOURCE_ATTRIBUTES":           "service.name=ignored",
	})
	tr, err := tracing.FromEnv(t.Context(), "v1", quiet)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.TracerProvider().Tracer("test").Start(t.Context(), "work")
	span.End()
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 1 {
		t.Fatalf("received:\n%s", tracingtest.Describe(spans))
	}
	if got := spans[0].Resource["service.name"]; got != "historyd-eu" {
		t.Errorf("service.name = %v, want OTEL_SERVICE_NAME's historyd-eu", got)
	}
}

// The sampler is the one the environment names: a ratio of 0 and
// always_off export nothing, a child of a sampled remote parent is
// sampled under parentbased_traceidratio whatever the ratio.
func TestSampler(t *testing.T) {
	for _, tt := range []struct {
		sampler, arg string
		parent       bool // a sampled remote parent, as a traced caller sends
		want         int
	}{
		{"always_off", "", false, 0},
		{"traceidratio", "0", false, 0},
		{"traceidratio", "1", false, 1},
		{"always_on", "", false, 1},
		{"", "", false, 1}, // parentbased_always_on
		{"parentbased_traceidratio", "0", false, 0},
		{"parentbased_traceidratio", "0", true, 1},
		{"parentbased_always_off", "", true, 1},
	} {
		t.Run(fmt.Sprintf("%s %s parent %v", tt.sampler, tt.arg, tt.parent), func(t *testing.T) {
			clearEnv(t)
			rcv := tracingtest.Start(t)
			rcv.SetEnv(t, tracing.ProtocolGRPC)
			setEnv(t, map[string]string{"OTEL_TRACES_SAMPLER": tt.sampler, "OTEL_TRACES_SAMPLER_ARG": tt.arg})
			tr, err := tracing.FromEnv(t.Context(), "v1", quiet)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tt.parent {
				ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
					TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true,
				}))
			}
			_, span := tr.TracerProvider().Tracer("test").Start(ctx, "work")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tr.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if got := len(rcv.Spans()); got != tt.want {
				t.Errorf("%d spans exported, want %d", got, tt.want)
			}
		})
	}
}

// quiet discards what FromEnv logs.
var quiet = slog.New(slog.DiscardHandler)

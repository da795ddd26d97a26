package clients_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/historyd/historyd/internal/testbin"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
	"github.com/historyd/historyd/tracing"
	"github.com/historyd/historyd/tracing/tracingtest"
)

// pythonTraced reads turn 1 of a thread with the Python client inside a
// span whose context is given, through opentelemetry-api alone (no SDK),
// as a host's instrumented code would hold it.
const pythonTraced = `
import asyncio, sys
from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from historyd_client import HistorydThreadHistory

target, trace_id, span_id, thread = sys.argv[1:]
span = NonRecordingSpan(SpanContext(trace_id=int(trace_id, 16), span_id=int(span_id, 16), is_remote=False,
                                    trace_flags=TraceFlags(TraceFlags.SAMPLED)))

async def main():
    async with HistorydThreadHistory(target, plaintext=True) as h:
        token = context.attach(trace.set_span_in_context(span))
        try:
            result = await h.turn(thread, 1)
        finally:
            context.detach(token)
        print(result.outcome.value)

asyncio.run(main())
`

// jsTraced is the same with the TypeScript client, the host's context
// manager and propagator set up as its OpenTelemetry SDK would.
const jsTraced = `
import { context, propagation, trace, TraceFlags } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { ThreadHistory } from "./dist/index.js";

const [target, traceId, spanId, thread] = process.argv.slice(1);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
const h = new ThreadHistory(target, { plaintext: true });
const ctx = trace.setSpanContext(context.active(), { traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: false });
const snap = await context.with(ctx, () => h.snapshot(thread, 1));
console.log(snap.outcome);
h.close();
`

// TestTracePropagation: the Python and TypeScript clients send their
// caller's trace context, so historyd's span for the call is the caller's
// span's child, as an OTLP receiver sees it. (The Go client's is in
// server's TestTracing.)
func TestTracePropagation(t *testing.T) {
	skipIfShort(t)
	root := testbin.RepoRoot(t)
	python := need(t, "HISTORYD_TEST_PYTHON", "the Python client runs with opentelemetry-api in the conformance virtualenv (scripts/pyenv.sh builds it)")
	jsDir := need(t, "HISTORYD_TEST_CLIENT_JS", "the TypeScript client runs from client/js with its node_modules, @opentelemetry/api among them (scripts/jsclient.sh installs them)")

	rcv := tracingtest.Start(t)
	rcv.SetEnv(t, tracing.ProtocolGRPC)
	tr, err := tracing.FromEnv(t.Context(), "test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	const thread = "acme/propagated-thread-0001"
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: thread}, []storetest.Turn{{Question: "q", Writes: map[string]any{"k": 1}}})
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: mem}, TracerProvider: tr.TracerProvider()}, servertest.WithTCP())

	run(t, jsDir, nil, "npm", "run", "--silent", "build")
	callers := []struct {
		name, traceID, spanID string
		argv                  []string
		dir                   string
		env                   []string
	}{
		{"python", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7",
			[]string{python, "-c", pythonTraced}, root, []string{"PYTHONPATH=" + filepath.Join(root, "client/python/src")}},
		{"typescript", "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331",
			[]string{"node", "--input-type=module", "-e", jsTraced}, jsDir, nil},
	}
	for _, c := range callers {
		argv := append(c.argv, srv.Addr(), c.traceID, c.spanID, thread)
		if out := strings.TrimSpace(run(t, c.dir, c.env, argv...)); out != "found" {
			t.Fatalf("%s client read %q, want found", c.name, out)
		}
	}
	srv.Close()
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.WaitFor(t, 10*time.Second, "both clients' calls", func(s []tracingtest.Span) bool {
		return len(tracingtest.Named(s, "historyd.v1.ThreadHistory/Snapshot")) == 2
	})
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			var found []string
			for _, s := range tracingtest.Named(spans, "historyd.v1.ThreadHistory/Snapshot") {
				if s.TraceIDHex() == c.traceID {
					found = append(found, fmt.Sprintf("parent %s kind %v", s.ParentHex(), s.Kind))
					if s.ParentHex() != c.spanID || s.Kind != tracepb.Span_SPAN_KIND_SERVER {
						t.Errorf("historyd's span in the caller's trace has parent %s (%v), want the caller's span %s", s.ParentHex(), s.Kind, c.spanID)
					}
				}
			}
			if len(found) != 1 {
				t.Errorf("%d historyd spans in the %s caller's trace %s, want one:\n%s", len(found), c.name, c.traceID, tracingtest.Describe(spans))
			}
		})
	}
	if rcv.Contains(thread) {
		t.Errorf("the thread id reached the collector:\n%s", tracingtest.Describe(spans))
	}
}

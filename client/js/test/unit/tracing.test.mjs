import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { context, propagation, trace, TraceFlags } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";

import { ThreadHistory } from "../../dist/index.js";
import { serve } from "../support/server.mjs";

// The host's OpenTelemetry setup, as its SDK would make it: a context
// manager that follows async calls, and the W3C propagator. (The real
// historyd's spans are checked against this in test/clients.)
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());

const TRACE = "0af7651916cd43dd8448eb211c80319c";

function inSpan(spanId, fn) {
  const ctx = trace.setSpanContext(context.active(), { traceId: TRACE, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: false });
  return context.with(ctx, fn);
}

describe("trace context", () => {
  let srv;
  before(async () => (srv = await serve()));
  after(() => srv.close());

  test("every call carries the active span's context, retries and streams included", async () => {
    const h = new ThreadHistory(srv.target, { plaintext: true, backoffMs: 1 });
    const start = srv.calls.length;
    srv.flaky.fail = 1; // the first try fails with UNAVAILABLE: the retry carries it too
    await inSpan("b7ad6b7169203331", () => h.snapshot("t", 3));
    await inSpan("00f067aa0ba902b7", async () => {
      for await (const _ of h.streamSnapshots("t")) {
        // read it all
      }
    });
    await h.turns("t"); // no span: nothing to send
    const got = srv.calls.slice(start).map((c) => c.traceparent);
    assert.deepEqual(got, [`00-${TRACE}-b7ad6b7169203331-01`, `00-${TRACE}-b7ad6b7169203331-01`, `00-${TRACE}-00f067aa0ba902b7-01`, null]);
  });

  test("traceContext: false sends none", async () => {
    const h = new ThreadHistory(srv.target, { plaintext: true, traceContext: false });
    const start = srv.calls.length;
    await inSpan("b7ad6b7169203331", () => h.snapshot("t", 3));
    assert.deepEqual(srv.calls.slice(start).map((c) => c.traceparent), [null]);
  });
});

// Trace context on historyd calls, for hosts that trace with OpenTelemetry.

import type { Interceptor } from "@connectrpc/connect";

type OtelApi = typeof import("@opentelemetry/api");

// @opentelemetry/api, loaded on the first call, or null when the host has
// not installed it (it is an optional peer dependency).
let api: Promise<OtelApi | null> | undefined;
let loaded: OtelApi | null | undefined;

function load(): Promise<OtelApi | null> {
  api ??= import("@opentelemetry/api").then(
    (m) => (loaded = m),
    () => (loaded = null),
  );
  return api;
}

/**
 * A Connect interceptor that sends the caller's OpenTelemetry trace context
 * with every call, injected by the host's propagator (`@opentelemetry/api`'s
 * `propagation.inject` of the active context: W3C `traceparent` with the
 * SDK's defaults), so that historyd's span for the call is a child of the
 * host's span. `ThreadHistory` installs it on the transport it makes (the
 * `traceContext` option turns it off); add it to a transport of your own.
 * Without `@opentelemetry/api` installed, calls pass untouched. The API alone
 * is enough: recording and exporting spans is the host's SDK's business.
 */
export function traceContextInterceptor(): Interceptor {
  return (next) => async (req) => {
    const otel = loaded !== undefined ? loaded : await load();
    if (otel) {
      otel.propagation.inject(otel.context.active(), req.header, {
        set: (headers, key, value) => headers.set(key, value),
      });
    }
    return next(req);
  };
}

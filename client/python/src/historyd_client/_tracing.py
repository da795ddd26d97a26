"""Trace context on historyd calls, for hosts that trace with OpenTelemetry.

With ``opentelemetry-api`` installed (the ``[tracing]`` extra), every call
carries the caller's current trace context in its metadata, injected by the
host's own propagator (``opentelemetry.propagate``: W3C ``traceparent`` and
``tracestate`` unless the host configured otherwise), so historyd's span for
the call is a child of the host's span. Without it, calls carry none and
nothing is imported. The API alone is enough: it is the host's SDK, if any,
that records and exports spans.
"""

from __future__ import annotations

from collections.abc import Callable

#: Builds the current context's trace metadata: ``((key, value), ...)``.
Injector = Callable[[], tuple[tuple[str, str], ...]]


def injector() -> Injector | None:
    """The trace-context injector, or ``None`` when opentelemetry-api is not installed.

    Called once per client, outside any event loop: importing the
    propagators reads their entry points.
    """
    try:
        from opentelemetry import propagate
    except ImportError:
        return None

    def inject() -> tuple[tuple[str, str], ...]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        # gRPC metadata keys are lower case; the W3C headers already are.
        return tuple((k.lower(), v) for k, v in carrier.items())

    return inject

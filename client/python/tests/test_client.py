"""Unit tests of historyd_client against an in-process gRPC server.

Plain unittest, no pytest: from the repository root,

    PYTHONPATH=client/python/src .cache/venv/bin/python -m unittest discover -s client/python/tests -v

The server is a Python implementation of historyd.v1.ThreadHistory serving
canned answers on 127.0.0.1, so these need neither historyd nor PostgreSQL
(test/e2e runs the client against the real service). What they pin down:
the conversion of StateEntry back to tool_state entries (from value_json,
the default, and from value, the same), the three Snapshot outcomes, the result types (mcp-toolsets-runtime's own when it
imports, look-alikes when it does not), the bearer token, deadlines, error
codes, StreamSnapshots with its Snapshots fallback, and use from more than one
event loop. Every test served here runs twice: against HistorydThreadHistory,
and against SyncHistorydThreadHistory seen through ``AsyncView`` (each call in
a thread), so the two clients are held to the same behaviour.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import importlib.abc
import math
import os
import subprocess
import sys
import threading
import unittest

BLOCK_REFERENCE = "HISTORYD_CLIENT_TEST_WITHOUT_REFERENCE"

if os.environ.get(BLOCK_REFERENCE) == "1":

    class _Blocker(importlib.abc.MetaPathFinder):
        """Makes mcp-toolsets-runtime's modules unimportable, as if not installed."""

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("mcp_state", "mcp_agent"):
                raise ImportError(f"{name} blocked for this test")
            return None

    sys.meta_path.insert(0, _Blocker())

import grpc  # noqa: E402
import grpc.aio  # noqa: E402
from google.protobuf import struct_pb2, timestamp_pb2  # noqa: E402

import historyd_client  # noqa: E402
from historyd_client import (  # noqa: E402
    HistorydError,
    HistorydThreadHistory,
    Outcome,
    SyncHistorydThreadHistory,
    TurnResult,
)
from historyd_client.gen.historyd.v1 import history_pb2 as pb  # noqa: E402
from historyd_client.gen.historyd.v1 import history_pb2_grpc as pb_grpc  # noqa: E402

# Resolve the result types now, outside any event loop: finding
# mcp-toolsets-runtime imports LangChain, seconds under asyncio's debug mode.
historyd_client.Snapshot, historyd_client.History  # noqa: B018


def reference_imports() -> bool:
    try:
        import mcp_agent.history  # noqa: F401
        import mcp_state.history  # noqa: F401
    except Exception:
        return False
    return True


def value(x) -> struct_pb2.Value:
    v = struct_pb2.Value()
    if isinstance(x, dict):
        v.struct_value.update(x)
    elif isinstance(x, list):
        v.list_value.extend(x)
    elif x is None:
        v.null_value = struct_pb2.NULL_VALUE
    elif isinstance(x, bool):
        v.bool_value = x
    elif isinstance(x, (int, float)):
        v.number_value = x
    else:
        v.string_value = x
    return v


def historyd_json(v: struct_pb2.Value) -> bytes:
    """A Value as historyd writes value_json: compact, numbers as JavaScript
    writes them (shortest digits, no fraction when integral below 1e21,
    exponents below 1e-6 and from 1e21), and each map's keys in reverse
    order, so that a client keeping the text's order would be caught."""
    kind = v.WhichOneof("kind")
    if kind == "struct_value":
        fields = v.struct_value.fields
        items = (f"{js_string(k)}:{historyd_json(fields[k]).decode()}" for k in sorted(fields, reverse=True))
        return ("{" + ",".join(items) + "}").encode()
    if kind == "list_value":
        return ("[" + ",".join(historyd_json(x).decode() for x in v.list_value.values) + "]").encode()
    if kind == "string_value":
        return js_string(v.string_value).encode()
    if kind == "bool_value":
        return b"true" if v.bool_value else b"false"
    if kind == "number_value":
        return js_number(v.number_value).encode()
    return b"null"


def js_string(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


def js_number(x: float) -> str:
    """A double as JavaScript's Number.prototype.toString (and historyd) writes it."""
    if x == 0:
        return "-0" if math.copysign(1, x) < 0 else "0"
    shortest = decimal.Decimal(repr(x))
    if 1e-6 <= abs(x) < 1e21:
        if x.is_integer():
            shortest = shortest.to_integral_value()
        return format(shortest, "f")
    return repr(x)  # "1e-07", "1.5e+300": valid JSON as it is


def extra(d: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(d)
    return s


AREA = "sketch-ops/sketch_area/area"
SUMMARY = "hydro/catchment_stats/summary"
NOTE = "notes/plain"

# Turn 3 of a thread of 5 whose turns 1 and 2 were pruned.
TURN3 = pb.TurnState(
    turn=3,
    checkpoint_id="1f0-three",
    question="Thanks. Just summarise what we have so far.",
    ended_at=timestamp_pb2.Timestamp(seconds=1_780_000_000, nanos=250_000_000),
    entries={
        AREA: pb.StateEntry(
            value=value({"amount": 14123.456, "unit": "km2", "vertices": 60000}),
            tool="sketch_area",
            seq=3,
            inputs={"geometry": "sketch-ops/sketch_polygon/geometry", "unit": "model"},
            turn=2,
            turns_written=1,
        ),
        SUMMARY: pb.StateEntry(
            value=value(
                {
                    "gauges": "1152921504606846983",
                    "exactly_2_53": 2**53,
                    "ratio": 0.30000000000000004,
                    "nan": "NaN",
                    "big_float": 1e300,
                    "nested": {"c": [1, [2, [3, {"d": "deep"}]]], "none": [], "empty": {}},
                    "missing": None,
                    "ok": True,
                }
            ),
            tool="catchment_stats",
            seq=4,
            inputs={"river": "model"},
            turn=2,
            turns_written=1,
            extra=extra({"source": {"provider": "Environment Agency"}, "tool": "shadowed"}),
        ),
        # A key stored bare: the whole value, nothing else.
        NOTE: pb.StateEntry(value=value("verified ✓")),
        # inputs that were not a map of strings: kept whole in extra.
        "odd/inputs": pb.StateEntry(value=value(1), extra=extra({"inputs": ["a", 1]})),
    },
)
TURN4 = pb.TurnState(
    turn=4,
    checkpoint_id="1f0-four",
    question="Now redraw it with the tidal reach only, please.",
    entries={AREA: pb.StateEntry(value=value({"amount": 310.5, "unit": "km2"}), seq=6, turn=4, turns_written=2)},
    # Asked in one input with turn 5, and answered by the same run.
    answered_with=[5],
)
TOTAL = 5
RETAINED = [3, 4, 5]
QUESTIONS = ["q1", "q2", TURN3.question, TURN4.question, "q5"]


class FakeHistory(pb_grpc.ThreadHistoryServicer):
    """Canned answers for thread "t"; "slow" sleeps, "denied" is refused."""

    def __init__(self, *, stream: bool = True, json: bool = True) -> None:
        self.stream = stream
        #: Whether value_format JSON is honoured; a server older than
        #: value_json ignores it and sends every value as a Value.
        self.json = json
        #: Each key's value_json instead of historyd_json's, when set here.
        self.texts: dict[str, bytes] = {}
        self.requests: list[tuple[str, object]] = []
        #: Every response's numbering: turns 1 and 2 were pruned.
        self.numbering = pb.TURN_NUMBERING_COUNTED
        self.authorization: list[str | None] = []
        self.traceparent: list[str | None] = []
        self.user_agents: list[str] = []

    async def _enter(self, name, request, context):
        self.requests.append((name, request))
        md = dict(context.invocation_metadata())
        self.authorization.append(md.get("authorization"))
        self.traceparent.append(md.get("traceparent"))
        self.user_agents.append(md.get("user-agent", ""))
        if request.thread_id == "slow":
            await asyncio.sleep(5)
        if request.thread_id == "denied":
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "token may not read thread denied")
        if request.thread_id == "":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "thread_id: required")
        if request.channel not in ("", "tool_state", "files"):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"channel: {request.channel!r} is not a channel this server serves; it serves tool_state, files",
            )

    def _turns(self, request):
        if request.thread_id != "t":
            return {}, 0
        turns = {3: TURN3, 4: TURN4, 5: pb.TurnState(turn=5, checkpoint_id="1f0-four", question="q5", answered_with=[4])}
        if getattr(request, "keys", None):
            for n, state in list(turns.items()):
                cut = pb.TurnState()
                cut.CopyFrom(state)
                for key in list(cut.entries):
                    if key not in request.keys:
                        del cut.entries[key]
                turns[n] = cut
        if self.json and getattr(request, "value_format", None) == pb.VALUE_FORMAT_JSON:
            turns = {n: self._as_json(state) for n, state in turns.items()}
        return turns, TOTAL

    def _as_json(self, state: pb.TurnState) -> pb.TurnState:
        out = pb.TurnState()
        out.CopyFrom(state)
        for key, e in out.entries.items():
            if e.HasField("value"):
                e.value_json = self.texts.get(key) or historyd_json(e.value)
                e.ClearField("value")
        return out

    async def Snapshot(self, request, context):
        await self._enter("Snapshot", request, context)
        turns, total = self._turns(request)
        out = pb.SnapshotResponse(total=total, retained_turns=sorted(turns), numbering=self.numbering)
        n = request.turn
        if n < 1 or n > total:
            out.no_such_turn.CopyFrom(pb.NoSuchTurn(turn=n, total=total))
        elif n in turns:
            out.state.CopyFrom(turns[n])
        else:
            out.no_longer_retained.CopyFrom(pb.NoLongerRetained(turn=n, question=QUESTIONS[n - 1]))
        return out

    async def Snapshots(self, request, context):
        await self._enter("Snapshots", request, context)
        turns, total = self._turns(request)
        return pb.SnapshotsResponse(turns=turns, total=total, numbering=self.numbering)

    async def StreamSnapshots(self, request, context):
        if not self.stream:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "method StreamSnapshots not implemented")
        await self._enter("StreamSnapshots", request, context)
        turns, total = self._turns(request)
        if not turns:
            yield pb.StreamSnapshotsResponse(total=total, numbering=self.numbering)
        for n in sorted(turns):
            if n >= request.from_turn:
                yield pb.StreamSnapshotsResponse(turn=turns[n], total=total, numbering=self.numbering)

    async def Turns(self, request, context):
        await self._enter("Turns", request, context)
        turns, total = self._turns(request)
        out = pb.TurnsResponse(total=total, numbering=self.numbering)
        for n in range(1, total + 1):
            info = pb.TurnInfo(number=n, question=QUESTIONS[n - 1], retained=n in turns)
            if n in turns:
                info.checkpoint_id = turns[n].checkpoint_id
                info.answered_with.extend(turns[n].answered_with)
                if turns[n].HasField("ended_at"):
                    info.ended_at.CopyFrom(turns[n].ended_at)
                if request.include_keys_written:
                    info.keys_written.extend(
                        sorted(k for k, e in turns[n].entries.items() if e.HasField("turn") and e.turn == n)
                    )
            out.turns.append(info)
        return out


_END = object()


class AsyncView:
    """A SyncHistorydThreadHistory behind the async client's API: each call runs
    in a thread (the in-process server needs the event loop), each stream is
    an async iterator over the sync one, so a test written for
    HistorydThreadHistory holds the sync client to the same."""

    def __init__(self, sync: SyncHistorydThreadHistory) -> None:
        self.sync = sync

    def __getattr__(self, name: str):
        attr = getattr(self.sync, name)
        if name in ("stream_snapshots", "stream_turns"):

            def stream(*args, **kwargs):
                async def items():
                    it = await asyncio.to_thread(lambda: iter(attr(*args, **kwargs)))
                    while (item := await asyncio.to_thread(next, it, _END)) is not _END:
                        yield item

                return items()

            return stream
        if callable(attr):

            async def call(*args, **kwargs):
                return await asyncio.to_thread(attr, *args, **kwargs)

            return call
        return attr

    def __repr__(self) -> str:
        return repr(self.sync)

    async def __aenter__(self) -> AsyncView:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.sync.close)


def sync_client(target: str, **kw) -> AsyncView:
    """A SyncHistorydThreadHistory, through AsyncView."""
    return AsyncView(SyncHistorydThreadHistory(target, **kw))


#: The error a failed call chains to, per client.
CAUSE = {HistorydThreadHistory: grpc.aio.AioRpcError, sync_client: grpc.RpcError}


def also_sync(cls):
    """``cls`` and, beside it in its module, a copy run against the sync client."""
    module = sys.modules[cls.__module__]
    twin = type("Sync" + cls.__name__, (cls,), {"make": staticmethod(sync_client), "__doc__": cls.__doc__})
    twin.__module__ = cls.__module__
    setattr(module, twin.__name__, twin)
    return cls


class Served(unittest.IsolatedAsyncioTestCase):
    stream = True
    #: Makes the client under test: HistorydThreadHistory, or sync_client.
    make = staticmethod(HistorydThreadHistory)

    async def asyncSetUp(self) -> None:
        self.fake = FakeHistory(stream=self.stream)
        self.server = grpc.aio.server()
        pb_grpc.add_ThreadHistoryServicer_to_server(self.fake, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.target = f"127.0.0.1:{port}"

    async def asyncTearDown(self) -> None:
        await self.server.stop(None)

    def client(self, **kw) -> HistorydThreadHistory:
        return self.make(self.target, plaintext=True, **kw)


@also_sync
class SnapshotTest(Served):
    async def test_retained_turn_converts_entries(self) -> None:
        async with self.client() as h:
            snap = await h.snapshot("t", 3)
        self.assertEqual(snap.total, TOTAL)
        self.assertEqual(snap.retained, frozenset(RETAINED))
        self.assertIsInstance(snap.retained, frozenset)
        self.assertFalse(snap.never_had(3))
        self.assertEqual(
            snap.state[AREA],
            {
                "value": {"amount": 14123.456, "unit": "km2", "vertices": 60000},
                "tool": "sketch_area",
                "seq": 3,
                "inputs": {"geometry": "sketch-ops/sketch_polygon/geometry", "unit": "model"},
                "turn": 2,
                "turns_written": 1,
            },
        )
        summary = snap.state[SUMMARY]
        # Conventional fields win over a same-named field in extra; the rest
        # of extra is kept.
        self.assertEqual(summary["tool"], "catchment_stats")
        self.assertEqual(summary["source"], {"provider": "Environment Agency"})
        v = summary["value"]
        self.assertEqual(v["gauges"], "1152921504606846983")  # beyond 2^53: decimal string, kept
        self.assertEqual(v["exactly_2_53"], 2**53)
        self.assertIs(type(v["exactly_2_53"]), int)
        self.assertIs(type(v["ratio"]), float)
        self.assertEqual(v["ratio"], 0.30000000000000004)
        self.assertEqual(v["nan"], "NaN")
        self.assertIs(type(v["big_float"]), float)
        self.assertEqual(v["nested"], {"c": [1, [2, [3, {"d": "deep"}]]], "none": [], "empty": {}})
        self.assertIs(type(v["nested"]["c"][0]), int)
        self.assertIsNone(v["missing"])
        self.assertIs(v["ok"], True)
        for key in ("seq", "turn", "turns_written"):
            self.assertIs(type(summary[key]), int, key)
        # A bare key comes back as an entry with its value alone.
        self.assertEqual(snap.state[NOTE], {"value": "verified ✓"})
        # Map order does not survive the wire; sorted keys make every read
        # print the same.
        self.assertEqual(list(v), sorted(v))
        self.assertEqual(list(snap.state), sorted(snap.state))
        self.assertEqual(list(summary), ["value", "tool", "seq", "inputs", "turn", "turns_written", "source"])
        # inputs that were not a map of strings come back as stored.
        self.assertEqual(snap.state["odd/inputs"], {"value": 1, "inputs": ["a", 1]})

    async def test_misses(self) -> None:
        async with self.client() as h:
            pruned = await h.snapshot("t", 1)
            beyond = await h.snapshot("t", TOTAL + 1)
            zero = await h.snapshot("t", 0)
            negative = await h.snapshot("t", -4)
            huge = await h.snapshot("t", 2**40)
            unknown = await h.snapshot("never-written", 1)
        self.assertIsNone(pruned.state)
        self.assertFalse(pruned.never_had(1))
        self.assertEqual((pruned.retained, pruned.total), (frozenset(RETAINED), TOTAL))
        for n, snap in ((TOTAL + 1, beyond), (0, zero), (-4, negative), (2**40, huge)):
            self.assertIsNone(snap.state, n)
            self.assertTrue(snap.never_had(n), n)
            self.assertEqual((snap.retained, snap.total), (frozenset(RETAINED), TOTAL), n)
        self.assertEqual((unknown.state, unknown.retained, unknown.total), (None, frozenset(), 0))
        self.assertTrue(unknown.never_had(1))
        # Turns the API cannot carry are asked as 0, which the server answers
        # with the total and the retained turns.
        sent = [r.turn for name, r in self.fake.requests if name == "Snapshot"]
        self.assertEqual(sent, [1, TOTAL + 1, 0, 0, 0, 1])

    async def test_keys_namespace_and_types(self) -> None:
        async with self.client(namespace="sub:1") as h:
            snap = await h.snapshot("t", 3, keys=[AREA, "no/such/key"])
            with self.assertRaises(TypeError):
                await h.snapshot("t", 3, keys=AREA)
            with self.assertRaises(TypeError):
                await h.snapshot("t", "3")  # type: ignore[arg-type]
            with self.assertRaises(TypeError):
                await h.snapshot("t", True)  # type: ignore[arg-type]
        self.assertEqual(list(snap.state), [AREA])
        _, request = self.fake.requests[-1]
        self.assertEqual(request.checkpoint_ns, "sub:1")
        self.assertEqual(list(request.keys), [AREA, "no/such/key"])

    async def test_result_type(self) -> None:
        async with self.client() as h:
            snap = await h.snapshot("t", 4)
        if reference_imports():
            from mcp_state.history import Snapshot

            self.assertIs(type(snap), Snapshot)
            self.assertIs(historyd_client.Snapshot, Snapshot)
        else:
            self.assertIs(type(snap), historyd_client.LocalSnapshot)
        self.assertEqual(snap._fields, ("state", "retained", "total"))


@also_sync
class AuthTest(Served):
    async def test_bearer_token(self) -> None:
        tokens = iter(["first", "second"])
        async with self.client(token="s3cret") as h:
            await h.snapshot("t", 3)
        async with self.client(token=lambda: next(tokens)) as h:
            await h.snapshot("t", 3)
            await h.turns("t")
        async with self.client() as h:
            await h.snapshot("t", 3)
        self.assertEqual(
            self.fake.authorization, ["Bearer s3cret", "Bearer first", "Bearer second", None]
        )
        self.assertTrue(all(ua.startswith("historyd-python-client") for ua in self.fake.user_agents))

    async def test_trace_context_without_opentelemetry(self) -> None:
        # opentelemetry-api is optional: blocked, calls carry no trace context.
        saved = {k: v for k, v in sys.modules.items() if k == "opentelemetry" or k.startswith("opentelemetry.")}
        try:
            sys.modules["opentelemetry"] = None  # import fails
            async with self.client(token="s3cret") as h:
                await h.snapshot("t", 3)
        finally:
            del sys.modules["opentelemetry"]
            sys.modules.update(saved)
        self.assertEqual(self.fake.traceparent, [None])
        self.assertEqual(self.fake.authorization, ["Bearer s3cret"])

    async def test_trace_context_from_the_propagator(self) -> None:
        # What opentelemetry.propagate.inject writes is sent on every call,
        # as it stands when the call is made (the real API is exercised
        # against historyd by test/clients' TestTracePropagation).
        import types

        current = ["00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"]
        api = types.ModuleType("opentelemetry")
        api.propagate = types.ModuleType("opentelemetry.propagate")
        api.propagate.inject = lambda carrier: carrier.update(traceparent=current[0])
        saved = {k: v for k, v in sys.modules.items() if k == "opentelemetry" or k.startswith("opentelemetry.")}
        try:
            sys.modules.update({"opentelemetry": api, "opentelemetry.propagate": api.propagate})
            traced, untraced = self.client(), self.client(trace_context=False)
        finally:
            for k in ("opentelemetry", "opentelemetry.propagate"):
                del sys.modules[k]
            sys.modules.update(saved)
        async with traced as h, untraced as u:
            await h.snapshot("t", 3)
            current[0] = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
            await h.turns("t")
            await u.snapshot("t", 3)
        self.assertEqual(
            self.fake.traceparent,
            [
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
                None,
            ],
        )

    def test_tls_unless_plaintext_is_asked_for(self) -> None:
        # TLS by default, as in the Go and TypeScript clients (nothing is
        # dialled until the first call).
        for client in (HistorydThreadHistory, SyncHistorydThreadHistory):
            self.assertIn("plaintext=False", repr(client("127.0.0.1:1", token="s3cret")))
            client("127.0.0.1:1", token="s3cret", credentials=grpc.ssl_channel_credentials())
            self.assertIn("plaintext=True", repr(client("127.0.0.1:1", token="s3cret", plaintext=True)))
            with self.assertRaisesRegex(ValueError, "contradict"):
                client("127.0.0.1:1", plaintext=True, credentials=grpc.ssl_channel_credentials())
            with self.assertRaises(TypeError):  # the old switch: refused, not read as TLS silently
                client("127.0.0.1:1", secure=False)

    def test_bad_arguments(self) -> None:
        for client in (HistorydThreadHistory, SyncHistorydThreadHistory):
            for kw in ({"timeout": 0}, {"timeout": -1.0}):
                with self.assertRaises(ValueError):
                    client("127.0.0.1:1", **kw)
            with self.assertRaises(ValueError):
                client("")
            with self.assertRaises(ValueError):
                client("127.0.0.1:1", token="", plaintext=True)
            for kw in ({"retries": -1}, {"retries": 1.5}, {"backoff": -0.1}):
                with self.assertRaises(ValueError):
                    client("127.0.0.1:1", **kw)


@also_sync
class ErrorTest(Served):
    async def test_codes(self) -> None:
        async with self.client() as h:
            with self.assertRaises(HistorydError) as denied:
                await h.snapshot("denied", 1)
            with self.assertRaises(HistorydError) as invalid:
                await h.snapshots("")
        self.assertEqual(denied.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(denied.exception.details(), "token may not read thread denied")
        self.assertIn("PERMISSION_DENIED", str(denied.exception))
        self.assertIsInstance(denied.exception, grpc.RpcError)
        self.assertIsInstance(denied.exception.__cause__, CAUSE[self.make])
        self.assertEqual(invalid.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    async def test_deadline(self) -> None:
        async with self.client(timeout=0.2) as h:
            with self.assertRaises(HistorydError) as late:
                await h.snapshot("slow", 1)
        self.assertEqual(late.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)

    async def test_unavailable(self) -> None:
        server = grpc.aio.server()
        port = server.add_insecure_port("127.0.0.1:0")  # bound, then never started
        await server.stop(None)
        async with self.make(f"127.0.0.1:{port}", timeout=2, plaintext=True) as h:
            with self.assertRaises(HistorydError) as down:
                await h.snapshot("t", 1)
        self.assertIn(down.exception.code(), (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED))

    async def test_closed(self) -> None:
        h = self.client()
        await h.snapshot("t", 3)
        await h.close()
        with self.assertRaises(HistorydError) as closed:
            await h.snapshot("t", 3)
        self.assertEqual(closed.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)


@also_sync
class SnapshotsTest(Served):
    async def test_history(self) -> None:
        async with self.client() as h:
            history = await h.snapshots("t")
            projected = await h.snapshots("t", keys=[AREA])
            unknown = await h.snapshots("never-written")
        self.assertEqual(history.total, TOTAL)
        self.assertEqual([t.n for t in history.turns], RETAINED)
        self.assertIsNone(history.find(1))
        three = history.find(3)
        self.assertEqual(three.question, TURN3.question)
        self.assertEqual(three.checkpoint_id, "1f0-three")
        self.assertEqual(three.state[AREA]["value"]["amount"], 14123.456)
        self.assertEqual(history.find(4).state[AREA]["turns_written"], 2)
        self.assertEqual(list(projected.find(3).state), [AREA])
        self.assertEqual((unknown.turns, unknown.total), ([], 0))
        self.assertEqual({name for name, _ in self.fake.requests}, {"StreamSnapshots"})
        if reference_imports():
            from mcp_agent.history import History, Turn

            self.assertIs(type(history), History)
            self.assertIs(type(three), Turn)
        else:
            self.assertIs(type(history), historyd_client.LocalHistory)
            self.assertIs(type(three), historyd_client.LocalTurn)

    async def test_turns(self) -> None:
        async with self.client() as h:
            index = await h.turns("t", include_keys_written=True)
        self.assertEqual(index.total, TOTAL)
        self.assertEqual([t.n for t in index.turns], [1, 2, 3, 4, 5])
        self.assertEqual([t.retained for t in index.turns], [False, False, True, True, True])
        self.assertIsNone(index.turns[0].checkpoint_id)
        self.assertEqual(index.turns[2].checkpoint_id, "1f0-three")
        self.assertEqual(
            index.turns[2].ended_at, dt.datetime(2026, 5, 28, 20, 26, 40, 250000, tzinfo=dt.timezone.utc)
        )
        self.assertIsNone(index.turns[3].ended_at)
        self.assertEqual(index.turns[3].keys_written, (AREA,))
        self.assertEqual(index.turns[3].question, TURN4.question)


@also_sync
class AnsweredWithAndNumberingTest(Served):
    async def test_turn(self) -> None:
        async with self.client() as h:
            four, five, three = await h.turn("t", 4), await h.turn("t", 5), await h.turn("t", 3)
            pruned, beyond = await h.turn("t", 1), await h.turn("t", 9)
            self.fake.numbering = pb.TURN_NUMBERING_ESTIMATED
            estimated = await h.turn("t", 4)
            self.fake.numbering = pb.TURN_NUMBERING_UNSPECIFIED
            unsaid = await h.turn("t", 4)
        self.assertEqual((four.answered_with, five.answered_with, three.answered_with), ((5,), (4,), ()))
        self.assertEqual(four.checkpoint_id, five.checkpoint_id)
        for r in (four, five, three, pruned, beyond):
            self.assertIs(r.numbering, historyd_client.Numbering.COUNTED, r.outcome)
        self.assertEqual((pruned.answered_with, beyond.answered_with), ((), ()))
        self.assertIs(estimated.numbering, historyd_client.Numbering.ESTIMATED)
        self.assertEqual(estimated.numbering, "estimated")
        self.assertIsNone(unsaid.numbering)
        # The fields are last and defaulted: positional construction as before still works.
        self.assertEqual(TurnResult(Outcome.NO_SUCH_TURN, 1, 0, ()).numbering, None)

    async def test_turns(self) -> None:
        async with self.client() as h:
            index = await h.turns("t")
        self.assertIs(index.numbering, historyd_client.Numbering.COUNTED)
        self.assertEqual([t.answered_with for t in index.turns], [(), (), (), (5,), (4,)])

    async def test_stream_turns(self) -> None:
        async with self.client() as h:
            turns = [t async for t in h.stream_turns("t", keys=[AREA], from_turn=4)]
            protocol = [t async for t in h.stream_snapshots("t", from_turn=4)]
        self.assertEqual([t.n for t in turns], [4, 5])
        self.assertIsInstance(turns[0], historyd_client.TurnState)
        self.assertEqual(turns[0].answered_with, (5,))
        self.assertIs(turns[0].numbering, historyd_client.Numbering.COUNTED)
        self.assertEqual(turns[0].state[AREA]["value"], {"amount": 310.5, "unit": "km2"})
        self.assertIsNone(turns[0].ended_at)
        # stream_snapshots keeps the protocol's Turn, fields and all.
        self.assertEqual(protocol[0]._fields, ("n", "question", "checkpoint_id", "state"))

    async def test_channel(self) -> None:
        async with self.client(channel="files") as h:
            await h.turn("t", 3)
            await h.snapshot("t", 3, channel="tool_state")
            await h.snapshots("t")
            [t async for t in h.stream_turns("t", channel="")]
            await h.turns("t", include_keys_written=True, channel="tool_state")
            with self.assertRaises(HistorydError) as err:
                await h.turn("t", 3, channel="nope")
            with self.assertRaises(TypeError):
                await h.turn("t", 3, channel=1)  # type: ignore[arg-type]
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("'nope'", err.exception.details())
        sent = [(name, r.channel) for name, r in self.fake.requests]
        self.assertEqual(
            sent,
            [
                ("Snapshot", "files"),  # the client's channel
                ("Snapshot", "tool_state"),  # one read's own
                ("StreamSnapshots", "files"),
                ("StreamSnapshots", ""),  # "" asks for the server's default
                ("Turns", "tool_state"),
                ("Snapshot", "nope"),
            ],
        )
        self.assertIn("channel='files'", repr(HistorydThreadHistory("h:1", plaintext=True, channel="files")))
        with self.assertRaises(TypeError):
            HistorydThreadHistory("h:1", plaintext=True, channel=None)  # type: ignore[arg-type]


@also_sync
class SnapshotsFallbackTest(Served):
    stream = False

    async def test_unimplemented_stream_falls_back(self) -> None:
        async with self.client() as h:
            history = await h.snapshots("t")
        self.assertEqual([t.n for t in history.turns], RETAINED)
        self.assertEqual(history.total, TOTAL)
        self.assertEqual([name for name, _ in self.fake.requests], ["Snapshots"])


class EventLoopTest(unittest.TestCase):
    def test_two_loops(self) -> None:
        """One client used from two asyncio.run calls, as a synchronous host might."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()

        async def start():
            server = grpc.aio.server()
            pb_grpc.add_ThreadHistoryServicer_to_server(FakeHistory(), server)
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            return server, port

        server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
        try:
            h = HistorydThreadHistory(f"127.0.0.1:{port}", plaintext=True)
            a = asyncio.run(h.snapshot("t", 3))
            b = asyncio.run(h.snapshot("t", 4))
            self.assertEqual(a.total, TOTAL)
            self.assertEqual(b.state[AREA]["seq"], 6)
        finally:
            asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


class WithoutReferenceTest(unittest.TestCase):
    def test_imports_and_works_without_mcp_toolsets_runtime(self) -> None:
        """The package imports and answers in look-alike types without the reference."""
        if os.environ.get(BLOCK_REFERENCE) == "1":
            self.skipTest("already running without the reference")
        here = os.path.dirname(os.path.abspath(__file__))
        # Wherever historyd_client was imported from (PYTHONPATH or installed).
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(historyd_client.__file__)))
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, BLOCK_REFERENCE: "1", "PYTHONPATH": path}
        proc = subprocess.run(
            [sys.executable, "-m", "unittest", "-q", "test_client.SnapshotTest", "test_client.SnapshotsTest"],
            cwd=here,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])

    def test_local_types(self) -> None:
        from historyd_client import LocalHistory, LocalSnapshot, LocalTurn

        snap = LocalSnapshot(state=None, retained=frozenset({3}), total=5)
        self.assertTrue(snap.never_had(0))
        self.assertTrue(snap.never_had(6))
        self.assertFalse(snap.never_had(1))
        history = LocalHistory(turns=[LocalTurn(3, "q", "c", {})], total=5)
        self.assertEqual(history.find(3).question, "q")
        self.assertIsNone(history.find(1))
        if reference_imports():
            from mcp_agent.history import History, Turn
            from mcp_state.history import Snapshot

            self.assertEqual(LocalSnapshot._fields, Snapshot._fields)
            self.assertEqual(LocalTurn._fields, Turn._fields)
            self.assertEqual(LocalHistory._fields, History._fields)


if __name__ == "__main__":
    unittest.main()

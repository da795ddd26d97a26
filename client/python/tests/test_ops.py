"""Unit tests of historyd_client's Threads and Diff methods against an in-process gRPC server.

Plain unittest, as test_client.py; the server serves canned answers and
records the requests, so these pin down what the client sends and how it
converts what comes back.
"""

from __future__ import annotations

import datetime as dt
import json
import unittest

import grpc
import grpc.aio
from google.protobuf import struct_pb2, timestamp_pb2

import historyd_client
from historyd_client import HistorydError, HistorydThreadHistory
from historyd_client.gen.historyd.v1 import history_pb2 as pb
from historyd_client.gen.historyd.v1 import history_pb2_grpc as pb_grpc
from test_client import also_sync

AT = timestamp_pb2.Timestamp(seconds=1_780_000_000)


def value(x) -> struct_pb2.Value:
    v = struct_pb2.Value()
    if isinstance(x, str):
        v.string_value = x
    elif x is None:
        v.null_value = struct_pb2.NULL_VALUE
    else:
        v.number_value = x
    return v


class FakeOps(pb_grpc.ThreadHistoryServicer):
    def __init__(self) -> None:
        self.requests: list[object] = []

    async def Threads(self, request, context):
        self.requests.append(request)
        if request.page_size > 1000:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"page_size: is {request.page_size}; the limit is 1000")
        if request.page_token == "":
            return pb.ThreadsResponse(
                threads=[
                    pb.ThreadInfo(thread_id="a/1", checkpoint_count=7, first_checkpoint_at=AT, last_checkpoint_at=AT, last_checkpoint_id="c7", total_turns=3),
                    pb.ThreadInfo(
                        thread_id="a/2",
                        checkpoint_count=1,
                        last_checkpoint_id="c1",
                        error=pb.ThreadError(code=grpc.StatusCode.DATA_LOSS.value[0], message="checkpoint c1 channel messages: malformed"),
                    ),
                ],
                next_page_token="next",
            )
        return pb.ThreadsResponse(threads=[pb.ThreadInfo(thread_id="a/3", checkpoint_count=2)])

    async def Diff(self, request, context):
        self.requests.append(request)
        if request.thread_id == "pruned":
            return pb.DiffResponse(
                from_turn=pb.DiffTurn(no_longer_retained=pb.NoLongerRetained(turn=1, question="q1")),
                to_turn=pb.DiffTurn(found=pb.TurnInfo(number=2, question="q2", retained=True, checkpoint_id="c2", ended_at=AT)),
                total=2,
                retained_turns=[2],
            )
        as_json = request.value_format == pb.VALUE_FORMAT_JSON

        # As a server answers: values as JSON text only when asked for it.
        def entry(x, **kw):
            if as_json:
                return pb.StateEntry(value_json=json.dumps(x).encode(), **kw)
            return pb.StateEntry(value=value(x), **kw)

        def op(name, path, *x):
            if not x:
                return pb.JsonPatchOperation(op=name, path=path)
            if as_json:
                return pb.JsonPatchOperation(op=name, path=path, value_json=json.dumps(x[0]).encode())
            return pb.JsonPatchOperation(op=name, path=path, value=value(x[0]))

        return pb.DiffResponse(
            from_turn=pb.DiffTurn(found=pb.TurnInfo(number=1, question="q1", retained=True, checkpoint_id="c1")),
            to_turn=pb.DiffTurn(found=pb.TurnInfo(number=2, question="q2", retained=True, checkpoint_id="c2", ended_at=AT)),
            changes=[
                pb.KeyChange(
                    key="area",
                    kind=pb.KEY_CHANGE_KIND_CHANGED,
                    from_entry=entry(11420, seq=1),
                    to_entry=entry(12935, seq=4),
                    patch=[op("replace", "", 12935)],
                ),
                pb.KeyChange(key="gone", kind=pb.KEY_CHANGE_KIND_REMOVED, from_entry=entry("x")),
                pb.KeyChange(
                    key="note",
                    kind=pb.KEY_CHANGE_KIND_CHANGED,
                    from_entry=entry("a"),
                    to_entry=entry(None),
                    patch=[op("replace", "/x", None), op("remove", "/y")],
                ),
            ],
            total=3,
            retained_turns=[1, 2, 3],
        )


class Served(unittest.IsolatedAsyncioTestCase):
    #: Makes the client under test (test_client.also_sync adds a sync twin).
    make = staticmethod(HistorydThreadHistory)

    async def asyncSetUp(self) -> None:
        self.fake = FakeOps()
        self.server = grpc.aio.server()
        pb_grpc.add_ThreadHistoryServicer_to_server(self.fake, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.history = self.make(f"127.0.0.1:{port}", plaintext=True, namespace="sub:1")

    async def asyncTearDown(self) -> None:
        await self.history.close()
        await self.server.stop(None)


@also_sync
class ThreadsTest(Served):
    async def test_page_and_request(self) -> None:
        after = dt.datetime(2026, 11, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))
        page = await self.history.threads(prefix="a/", page_size=2, newest_first=True, active_after=after, include_turns=True)
        self.assertIsInstance(page, historyd_client.ThreadsPage)
        self.assertEqual(page.next_page_token, "next")
        first, second = page.threads
        self.assertEqual(first.thread_id, "a/1")
        self.assertEqual(first.checkpoints, 7)
        self.assertEqual(first.total_turns, 3)
        self.assertEqual(first.last_checkpoint_id, "c7")
        self.assertEqual(first.last_checkpoint_at, dt.datetime.fromtimestamp(1_780_000_000, dt.timezone.utc))
        self.assertIsNone(second.total_turns)
        self.assertIsNone(second.first_checkpoint_at)
        self.assertIsNone(first.error)
        self.assertIsInstance(second.error, HistorydError)
        self.assertEqual(second.error.code(), grpc.StatusCode.DATA_LOSS)
        self.assertEqual(second.error.details(), "checkpoint c1 channel messages: malformed")
        req = self.fake.requests[-1]
        self.assertEqual(req.thread_id_prefix, "a/")
        self.assertEqual(req.checkpoint_ns, "sub:1")
        self.assertEqual(req.page_size, 2)
        self.assertEqual(req.order, pb.THREADS_ORDER_LAST_ACTIVITY)
        self.assertTrue(req.include_turns)
        self.assertEqual(req.last_activity_after.ToDatetime(tzinfo=dt.timezone.utc), after.astimezone(dt.timezone.utc))
        self.assertFalse(req.HasField("last_activity_before"))
        more = await self.history.threads(prefix="a/", page_token=page.next_page_token)
        self.assertEqual([t.thread_id for t in more.threads], ["a/3"])
        self.assertEqual(more.next_page_token, "")
        self.assertEqual(self.fake.requests[-1].order, pb.THREADS_ORDER_UNSPECIFIED)

    async def test_naive_time_refused(self) -> None:
        with self.assertRaises(ValueError):
            await self.history.threads(active_before=dt.datetime(2026, 1, 1))

    async def test_error_code(self) -> None:
        with self.assertRaises(HistorydError) as cm:
            await self.history.threads(page_size=5000)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("page_size", cm.exception.details())


@also_sync
class DiffTest(Served):
    async def test_changes(self) -> None:
        d = await self.history.diff("t", to_turn=2, keys=["area", "gone", "note"], include_unchanged=True)
        self.assertIsInstance(d, historyd_client.Diff)
        req = self.fake.requests[-1]
        self.assertEqual((req.thread_id, req.to_turn, req.from_turn, list(req.keys), req.include_unchanged, req.checkpoint_ns), ("t", 2, 0, ["area", "gone", "note"], True, "sub:1"))
        self.assertEqual(d.from_turn.outcome, historyd_client.Outcome.FOUND.value)
        self.assertEqual((d.from_turn.turn, d.to_turn.turn, d.to_turn.checkpoint_id), (1, 2, "c2"))
        self.assertEqual(d.to_turn.ended_at, dt.datetime.fromtimestamp(1_780_000_000, dt.timezone.utc))
        self.assertEqual((d.total, d.retained), (3, (1, 2, 3)))
        area, gone, note = d.changes
        self.assertEqual(area, historyd_client.KeyChange("area", "changed", {"value": 11420, "seq": 1}, {"value": 12935, "seq": 4}, [{"op": "replace", "path": "", "value": 12935}]))
        self.assertIs(type(area.after["value"]), int)
        self.assertEqual((gone.change, gone.before, gone.after, gone.patch), ("removed", {"value": "x"}, None, []))
        # A null value is sent, and removes carry none, as RFC 6902 writes them.
        self.assertEqual(note.patch, [{"op": "replace", "path": "/x", "value": None}, {"op": "remove", "path": "/y"}])

    async def test_value_formats(self) -> None:
        # JSON text (the default), Values and raw text: the same changes.
        as_json = await self.history.diff("t", to_turn=2)
        self.assertEqual(self.fake.requests[-1].value_format, pb.VALUE_FORMAT_JSON)
        as_proto = await self.history.diff("t", to_turn=2, value_format="proto")
        self.assertEqual(self.fake.requests[-1].value_format, pb.VALUE_FORMAT_PROTO)
        self.assertEqual(as_json.changes, as_proto.changes)
        self.assertIs(type(as_json.changes[0].after["value"]), int)
        raw = await self.history.diff("t", to_turn=2, value_format="raw")
        self.assertEqual(self.fake.requests[-1].value_format, pb.VALUE_FORMAT_JSON)
        self.assertEqual(raw.changes[0].after, {"value_json": b"12935", "seq": 4})
        self.assertEqual(raw.changes[0].patch, as_json.changes[0].patch)

    async def test_a_pruned_end(self) -> None:
        d = await self.history.diff("pruned", to_turn=2)
        self.assertEqual(d.from_turn, historyd_client.DiffTurn(turn=1, outcome="no_longer_retained", question="q1"))
        self.assertEqual(d.changes, [])



class TurnRangeTest(Served):
    """A turn number outside 0..2**31-1 (int32 on the wire) is refused before anything is sent."""

    async def test_refused_before_sending(self) -> None:
        async def stream(from_turn: int) -> None:
            async for _ in self.history.stream_snapshots("t", from_turn=from_turn):
                pass

        cases = [
            ("to_turn 1099511627776", lambda: self.history.diff("t", to_turn=2**40)),
            ("from_turn -7", lambda: self.history.diff("t", to_turn=2, from_turn=-7)),
            ("turn -1", lambda: self.history.turn("t", -1)),
            ("turn 2147483648", lambda: self.history.turn("t", 2**31)),
            ("turn 4294967297", lambda: self.history.turn("t", 2**32 + 1)),
            ("from_turn 2147483648", lambda: stream(2**31)),
            ("from_turn -1", lambda: stream(-1)),
        ]
        for said, call in cases:
            with self.subTest(said), self.assertRaises(ValueError) as caught:
                await call()
            self.assertIn(f"{said}: must be 0 to 2147483647", str(caught.exception))
        self.assertEqual(self.fake.requests, [])
        # The edges are sent.
        await self.history.diff("t", to_turn=2**31 - 1, from_turn=0)
        self.assertEqual((self.fake.requests[-1].to_turn, self.fake.requests[-1].from_turn), (2**31 - 1, 0))


if __name__ == "__main__":
    unittest.main()

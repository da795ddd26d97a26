"""The client's defaults, retries, turn() and stream resumption.

The defaults are held to client/testdata/defaults.json, the file the Go and
TypeScript clients are held to. Retries and resumption run against the
in-process server of test_client.py made to fail with UNAVAILABLE.
"""

from __future__ import annotations

import json
import os
import time
import unittest

import grpc
import grpc.aio

import historyd_client
from historyd_client import HistorydError, HistorydThreadHistory, Outcome
from historyd_client.gen.historyd.v1 import history_pb2 as pb
from historyd_client.gen.historyd.v1 import history_pb2_grpc as pb_grpc
from test_client import AREA, RETAINED, TOTAL, FakeHistory, also_sync

DEFAULTS = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "defaults.json")


class DefaultsTest(unittest.TestCase):
    def test_same_as_every_client(self) -> None:
        with open(DEFAULTS, encoding="utf-8") as f:
            want = json.load(f)
        self.assertTrue(want["tls"])
        self.assertEqual(historyd_client.DEFAULT_TIMEOUT * 1000, want["timeout_ms"])
        self.assertEqual(historyd_client.DEFAULT_RETRIES, want["retries"])
        self.assertEqual(historyd_client.DEFAULT_BACKOFF * 1000, want["backoff_ms"])
        self.assertEqual(historyd_client.MAX_BACKOFF * 1000, want["max_backoff_ms"])
        self.assertEqual(historyd_client.client._BACKOFF_JITTER, want["backoff_jitter"])
        self.assertEqual(historyd_client.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH, want["max_receive_bytes"])
        self.assertEqual(want["retry_codes"], ["UNAVAILABLE"])
        self.assertEqual(historyd_client.client.RESUME_TRAILER, want["resume_trailer"])
        h = HistorydThreadHistory("127.0.0.1:1")
        self.assertEqual(h.value_format, want["value_format"])
        self.assertEqual((h.timeout, h.retries, h.backoff), (10.0, 3, 0.1))
        self.assertIn("plaintext=False", repr(h))
        self.assertIn(("grpc.max_receive_message_length", 64 << 20), h._options)


class Flaky(FakeHistory):
    """FakeHistory whose first ``fail`` calls fail with UNAVAILABLE; streams
    fail after sending ``cut`` messages, as a restarting server's do, or with
    ``resume`` end there as historyd ends a stream at its maximum age."""

    def __init__(self, fail: int = 0, cut: int | None = None, resume: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.cut = cut
        self.resume = resume
        self.calls = 0
        self.from_turns: list[int] = []

    async def _flake(self, context) -> None:
        self.calls += 1
        if self.calls <= self.fail:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "store restarting")

    async def Snapshot(self, request, context):
        await self._flake(context)
        return await super().Snapshot(request, context)

    async def StreamSnapshots(self, request, context):
        self.from_turns.append(request.from_turn)
        self.calls += 1
        failing = self.calls <= self.fail
        sent = 0
        turns, total = self._turns(request)
        for n in sorted(turns):
            if n < request.from_turn:
                continue
            if failing and self.cut is not None and sent == self.cut:
                if self.resume:
                    context.set_trailing_metadata(((historyd_client.client.RESUME_TRAILER, "max-age"),))
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "the stream reached this server's maximum age")
                await context.abort(grpc.StatusCode.UNAVAILABLE, "server going away")
            yield pb.StreamSnapshotsResponse(turn=turns[n], total=total)
            sent += 1
        if failing and self.cut is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "down")


@also_sync
class RetryTest(unittest.IsolatedAsyncioTestCase):
    #: Makes the client under test (also_sync adds a sync twin).
    make = staticmethod(HistorydThreadHistory)

    async def serve(self, fake: FakeHistory) -> str:
        self.server = grpc.aio.server()
        pb_grpc.add_ThreadHistoryServicer_to_server(fake, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.addAsyncCleanup(self.server.stop, None)
        return f"127.0.0.1:{port}"

    async def test_unary_recovers(self) -> None:
        fake = Flaky(fail=2)
        async with self.make(await self.serve(fake), plaintext=True, backoff=0.001) as h:
            result = await h.turn("t", 3)
        self.assertIs(result.outcome, Outcome.FOUND)
        self.assertEqual(fake.calls, 3)

    async def test_unary_gives_up(self) -> None:
        fake = Flaky(fail=100)
        async with self.make(await self.serve(fake), plaintext=True, retries=2, backoff=0.001) as h:
            with self.assertRaises(HistorydError) as err:
                await h.turn("t", 3)
        self.assertEqual(err.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(fake.calls, 3)  # one try, two retries

    async def test_other_codes_not_retried(self) -> None:
        fake = Flaky()
        async with self.make(await self.serve(fake), plaintext=True, backoff=0.001) as h:
            with self.assertRaises(HistorydError) as err:
                await h.turn("denied", 1)
        self.assertEqual(err.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(len(fake.requests), 1)

    async def test_timeout_bounds_retries(self) -> None:
        fake = Flaky(fail=10_000)
        start = time.monotonic()
        async with self.make(
            await self.serve(fake), plaintext=True, timeout=0.3, retries=1000, backoff=0.05
        ) as h:
            with self.assertRaises(HistorydError) as err:
                await h.turn("t", 3)
        self.assertIn(err.exception.code(), (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE))
        self.assertLess(time.monotonic() - start, 2.0)

    async def test_stream_resumes_after_the_last_turn(self) -> None:
        fake = Flaky(fail=2, cut=1)
        async with self.make(await self.serve(fake), plaintext=True, backoff=0.001) as h:
            turns = [t.n async for t in h.stream_snapshots("t")]
            history = await h.snapshots("t")
        self.assertEqual(turns, RETAINED)
        self.assertEqual(fake.from_turns[:3], [0, 4, 5])
        self.assertEqual([t.n for t in history.turns], RETAINED)
        self.assertEqual(history.total, TOTAL)

    async def test_stream_resumes_at_max_age_as_no_failure(self) -> None:
        # Every call ends after one turn, asking to be resumed: with no
        # retries allowed, the read still yields every turn once.
        fake = Flaky(fail=100, cut=1, resume=True)
        async with self.make(await self.serve(fake), plaintext=True, retries=0, backoff=5) as h:
            start = time.monotonic()
            turns = [t.n async for t in h.stream_snapshots("t")]
        self.assertEqual(turns, RETAINED)
        self.assertEqual(fake.from_turns, [0, 4, 5])
        self.assertLess(time.monotonic() - start, 2.0)  # resumed at once, not after a backoff

    async def test_stream_gives_up_after_failures_in_a_row(self) -> None:
        fake = Flaky(fail=100)
        async with self.make(await self.serve(fake), plaintext=True, retries=2, backoff=0.001) as h:
            with self.assertRaises(HistorydError) as err:
                [t async for t in h.stream_snapshots("t")]
        self.assertEqual(err.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(fake.calls, 3)

    async def test_stream_from_turn_and_keys(self) -> None:
        fake = Flaky()
        async with self.make(await self.serve(fake), plaintext=True) as h:
            turns = [t async for t in h.stream_snapshots("t", keys=[AREA], from_turn=4)]
        self.assertEqual([t.n for t in turns], [4, 5])
        self.assertEqual(list(turns[0].state), [AREA])


@also_sync
class TurnTest(unittest.IsolatedAsyncioTestCase):
    make = staticmethod(HistorydThreadHistory)

    async def asyncSetUp(self) -> None:
        self.server = grpc.aio.server()
        pb_grpc.add_ThreadHistoryServicer_to_server(FakeHistory(), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.history = self.make(f"127.0.0.1:{port}", plaintext=True)

    async def asyncTearDown(self) -> None:
        await self.history.close()
        await self.server.stop(None)

    async def test_three_answers(self) -> None:
        found = await self.history.turn("t", 3)
        self.assertIs(found.outcome, Outcome.FOUND)
        self.assertTrue(found.found)
        self.assertEqual(found.state[AREA]["seq"], 3)
        self.assertEqual((found.turn, found.total, found.retained), (3, TOTAL, tuple(RETAINED)))
        self.assertEqual(found.checkpoint_id, "1f0-three")
        self.assertEqual(found.ended_at.year, 2026)

        pruned = await self.history.turn("t", 1)
        self.assertIs(pruned.outcome, Outcome.NO_LONGER_RETAINED)
        self.assertEqual((pruned.question, pruned.state, pruned.checkpoint_id), ("q1", None, None))
        self.assertEqual(pruned.retained, tuple(RETAINED))

        for n in (0, TOTAL + 1, 2**31 - 1):
            never = await self.history.turn("t", n)
            self.assertIs(never.outcome, Outcome.NO_SUCH_TURN)
            self.assertEqual((never.turn, never.total, never.state), (n, TOTAL, None))
        # Beyond the protocol, a turn the wire cannot carry is refused.
        for n in (-1, 2**31, 2**40):
            with self.assertRaisesRegex(ValueError, f"turn {n}: must be 0 to 2147483647"):
                await self.history.turn("t", n)
        self.assertEqual(Outcome.NO_SUCH_TURN.value, "no_such_turn")

    async def test_snapshot_keeps_the_protocol_shape(self) -> None:
        snap = await self.history.snapshot("t", 1)
        self.assertEqual(tuple(snap._fields), ("state", "retained", "total"))
        self.assertIsNone(snap.state)
        self.assertFalse(snap.never_had(1))

    async def test_keys(self) -> None:
        found = await self.history.turn("t", 3, keys=[AREA])
        self.assertEqual(list(found.state), [AREA])
        with self.assertRaises(TypeError):
            await self.history.turn("t", 3, keys=AREA)
        with self.assertRaises(TypeError):
            await self.history.turn("t", True)


if __name__ == "__main__":
    unittest.main()

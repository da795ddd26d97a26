"""What only the sync client has: plain iterators, threads, and the async client's sync twin.

Everything both clients do is tested against both in test_client.py,
test_behaviour.py, test_ops.py and test_values.py (``also_sync``).
"""

from __future__ import annotations

import asyncio
import threading
import unittest
from concurrent.futures import ThreadPoolExecutor

import grpc
import grpc.aio

from historyd_client import HistorydError, HistorydThreadHistory, Outcome, SyncHistorydThreadHistory
from historyd_client.gen.historyd.v1 import history_pb2_grpc as pb_grpc
from test_client import AREA, RETAINED, TOTAL, FakeHistory


class ServedInThread(unittest.TestCase):
    """The in-process server on an event loop of its own thread, so the test body is plain sync code."""

    def setUp(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.fake = FakeHistory()

        async def start():
            server = grpc.aio.server()
            pb_grpc.add_ThreadHistoryServicer_to_server(self.fake, server)
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            return server, port

        self.server, port = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        self.target = f"127.0.0.1:{port}"

    def tearDown(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(None), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class SyncClientTest(ServedInThread):
    def test_plain_calls(self) -> None:
        with SyncHistorydThreadHistory(self.target, plaintext=True) as h:
            found = h.turn("t", 3, keys=[AREA])
            turns = [t.n for t in h.stream_snapshots("t")]
            history = h.snapshots("t")
        self.assertIs(found.outcome, Outcome.FOUND)
        self.assertEqual(list(found.state), [AREA])
        self.assertEqual(turns, RETAINED)
        self.assertEqual(history.total, TOTAL)

    def test_a_stream_left_early_leaves_the_client_usable(self) -> None:
        with SyncHistorydThreadHistory(self.target, plaintext=True) as h:
            stream = h.stream_turns("t")
            first = next(stream)
            stream.close()
            # The channel still serves.
            again = h.turn("t", 4)
        self.assertEqual(first.n, RETAINED[0])
        self.assertIs(again.outcome, Outcome.FOUND)

    def test_threads_share_one_client(self) -> None:
        with SyncHistorydThreadHistory(self.target, plaintext=True) as h, ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda n: h.turn("t", n).outcome, [1, 3, 4, 5, 9] * 4))
        self.assertEqual(results, [Outcome.NO_LONGER_RETAINED, Outcome.FOUND, Outcome.FOUND, Outcome.FOUND, Outcome.NO_SUCH_TURN] * 4)

    def test_closed(self) -> None:
        h = SyncHistorydThreadHistory(self.target, plaintext=True)
        h.turn("t", 3)
        h.close()
        with self.assertRaises(HistorydError) as closed:
            h.turn("t", 3)
        self.assertEqual(closed.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)


class TwinTest(ServedInThread):
    def test_sync_twin_has_the_settings_and_closes_with_it(self) -> None:
        h = HistorydThreadHistory(self.target, plaintext=True, token="s3cret", channel="files", namespace="sub:1")
        twin = h.sync()
        self.assertIs(twin, h.sync())  # made once
        self.assertIsInstance(twin, SyncHistorydThreadHistory)
        self.assertEqual(repr(twin), repr(h).replace("HistorydThreadHistory", "SyncHistorydThreadHistory", 1))
        twin.turn("t", 3)
        _, request = self.fake.requests[-1]
        self.assertEqual((request.channel, request.checkpoint_ns), ("files", "sub:1"))
        self.assertEqual(self.fake.authorization[-1], "Bearer s3cret")
        asyncio.run(h.close())
        with self.assertRaises(HistorydError) as closed:
            twin.turn("t", 3)
        self.assertEqual(closed.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        with self.assertRaises(HistorydError):
            h.sync()


if __name__ == "__main__":
    unittest.main()

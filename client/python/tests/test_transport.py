"""Telling a TLS/plaintext mismatch from other failures to connect (historyd_client._transport).

Against real historyd servers, one in TLS and one in plaintext, every
client and the CLI are held to the same line by test/clients'
TestTransportMismatch; these cover the parts on their own.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import unittest

import grpc
import grpc.aio

from historyd_client import HistorydThreadHistory, SyncHistorydThreadHistory, _transport
from historyd_client.gen.historyd.v1 import history_pb2_grpc as pb_grpc
from test_client import FakeHistory


class HostPortTest(unittest.TestCase):
    def test_targets(self) -> None:
        for target, want in {
            "historyd:8443": ("historyd", 8443),
            "dns:///historyd:8443": ("historyd", 8443),
            "dns://8.8.8.8/historyd:8443": ("historyd", 8443),
            "dns:historyd:8443": ("historyd", 8443),
            "ipv4:127.0.0.1:50051,127.0.0.2:50051": ("127.0.0.1", 50051),
            "ipv6:[::1]:50051": ("::1", 50051),
            "[::1]:50051": ("::1", 50051),
            "historyd": ("historyd", 443),
            "unix:/run/historyd.sock": None,
            "unix-abstract:historyd": None,
            "::1": None,
            "historyd:http": None,
            "historyd:0": None,
        }.items():
            with self.subTest(target):
                self.assertEqual(_transport.host_port(target), want)


class ProbeTest(unittest.IsolatedAsyncioTestCase):
    async def test_a_grpc_server_in_plaintext(self) -> None:
        server = grpc.aio.server()
        pb_grpc.add_ThreadHistoryServicer_to_server(FakeHistory(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self.addAsyncCleanup(server.stop, None)
        self.assertEqual(await asyncio.to_thread(_transport.probe, "127.0.0.1", port), _transport.PLAINTEXT)
        # A client asking for TLS there is told so, in one line, by both clients.
        target = f"127.0.0.1:{port}"
        want = f"historyd Snapshot: UNAVAILABLE: historyd at {target} speaks plaintext, not TLS: pass plaintext=True"
        async with HistorydThreadHistory(target, retries=0) as h:
            with self.assertRaises(grpc.RpcError) as err:
                await h.turn("t", 3)
        self.assertEqual((err.exception.code(), str(err.exception)), (grpc.StatusCode.UNAVAILABLE, want))
        with SyncHistorydThreadHistory(target, retries=0) as s:
            with self.assertRaises(grpc.RpcError) as err:
                await asyncio.to_thread(s.turn, "t", 3)
        self.assertEqual((err.exception.code(), str(err.exception)), (grpc.StatusCode.UNAVAILABLE, want))

    def test_nothing_to_tell(self) -> None:
        # Nothing listening, and a server that hangs up at once: neither says which.
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()
        self.assertIsNone(_transport.probe("127.0.0.1", port))
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        self.addCleanup(listener.close)

        def hang_up() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                conn.close()

        threading.Thread(target=hang_up, daemon=True).start()
        self.assertIsNone(_transport.probe("127.0.0.1", listener.getsockname()[1]))

    def test_only_failures_to_connect_are_looked_into(self) -> None:
        # A status the server sent is its own; no probe is made (the port is closed either way).
        for code, details in (
            (grpc.StatusCode.UNAVAILABLE, "checkpoint store unavailable; retry"),
            (grpc.StatusCode.INTERNAL, "failed to connect to all addresses"),
        ):
            self.assertIsNone(_transport.mismatch("127.0.0.1:1", code, details, plaintext=False))


if __name__ == "__main__":
    unittest.main()

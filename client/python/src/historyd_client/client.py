"""``HistorydThreadHistory``: a thread's turn history, read from historyd over gRPC.

It is the host side of ``mcp_state.history.ThreadHistory`` (mcp-toolsets-runtime):
hand one to ``mcp_state.inspect.make_inspect_state(history=...)`` and the
model's ``inspect_state(key, turn=N)`` reads the key as it stood at the end of
turn N from historyd, instead of walking the checkpointer in the agent's own
process.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import grpc
import grpc.aio

from historyd_client import _compat, _convert
from historyd_client.gen.historyd.v1 import history_pb2, history_pb2_grpc

#: The largest turn number the API can carry (``int32``).
_MAX_TURN = 2**31 - 1

#: Default cap on one response. Session state holds exactly the values too big
#: for a transcript (a turn of the conformance thread carries a 1 MB
#: geometry), and gRPC's own default of 4 MiB is less than a few such turns.
DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH = 256 * 1024 * 1024

_USER_AGENT = "historyd-python-client"


class HistorydError(grpc.RpcError):
    """A call to historyd failed; :meth:`code` is its gRPC status code.

    Raised for every failed call, chained to the underlying
    ``grpc.aio.AioRpcError``. historyd's codes mean: ``INVALID_ARGUMENT`` a
    malformed request (the details name the field and the limit),
    ``UNAUTHENTICATED``/``PERMISSION_DENIED`` the token, ``UNAVAILABLE`` the
    server or its checkpoint store cannot be reached, ``DEADLINE_EXCEEDED``
    the client's ``timeout`` passed, ``RESOURCE_EXHAUSTED`` a size or rate
    limit, ``DATA_LOSS`` a stored value that cannot be decoded,
    ``FAILED_PRECONDITION`` a storage feature historyd does not read.
    """

    def __init__(self, method: str, code: grpc.StatusCode, details: str | None) -> None:
        self.method = method
        self._code = code
        self._details = details or ""
        super().__init__(f"historyd {method}: {code.name}: {self._details}")

    def code(self) -> grpc.StatusCode:
        """The gRPC status code."""
        return self._code

    def details(self) -> str:
        """The server's (or the gRPC runtime's) message."""
        return self._details


class TurnInfo(NamedTuple):
    """One turn without its state, as ``Turns`` lists it."""

    n: int
    question: str
    retained: bool
    #: The checkpoint the turn ended on; ``None`` when it is not retained.
    checkpoint_id: str | None
    #: When that checkpoint was written (UTC), when known.
    ended_at: _dt.datetime | None
    #: Keys whose entry records this turn as its last write, sorted; empty
    #: unless asked for with ``include_keys_written``.
    keys_written: tuple[str, ...]


class TurnIndex(NamedTuple):
    """Every turn of a thread from 1 to ``total``, retained or not."""

    turns: list[TurnInfo]
    total: int


Token = str | Callable[[], str]


class HistorydThreadHistory:
    """``mcp_state.history.ThreadHistory`` backed by a historyd server.

    ``target`` is a gRPC target (``"historyd.internal:8443"``,
    ``"dns:///historyd:8443"``). The connection is plaintext unless
    ``secure`` is set (TLS verified against the system roots) or
    ``credentials`` are given (``grpc.ssl_channel_credentials(...)`` for a
    private CA or client certificates).

    ``token`` is sent on every call as ``authorization: Bearer <token>``; a
    callable is called once per call, for tokens that rotate. On a plaintext
    connection a token is refused unless ``allow_plaintext_token`` says a
    trusted network or proxy makes that safe, so a misconfigured deployment
    fails at construction instead of sending its credential in the clear.

    ``timeout`` bounds each call in seconds (``None``: no deadline).
    ``namespace`` is the checkpoint namespace read, ``""`` being the root
    graph. ``options`` are extra gRPC channel options.

    The channel is opened on first use, in the event loop of that call, and
    opened again if a later call runs in another loop (``grpc.aio`` channels
    belong to one loop). Use ``async with`` or :meth:`close` to release it.
    Failed calls raise :class:`HistorydError`, carrying the gRPC code.
    """

    def __init__(
        self,
        target: str,
        *,
        token: Token | None = None,
        timeout: float | None = 10.0,
        credentials: grpc.ChannelCredentials | None = None,
        secure: bool = False,
        namespace: str = "",
        allow_plaintext_token: bool = False,
        max_receive_message_length: int = DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        if not isinstance(target, str) or not target:
            raise ValueError("historyd: target must be a non-empty gRPC target, such as 'host:port'")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"historyd: timeout must be positive seconds or None, not {timeout!r}")
        if not isinstance(namespace, str):
            raise TypeError("historyd: namespace must be a string")
        if token is not None and not (isinstance(token, str) or callable(token)):
            raise TypeError("historyd: token must be a string or a callable returning one")
        if isinstance(token, str) and not token:
            raise ValueError("historyd: token is empty; pass None to send none")
        if secure and credentials is None:
            credentials = grpc.ssl_channel_credentials()
        if token is not None and credentials is None and not allow_plaintext_token:
            raise ValueError(
                "historyd: a token would be sent over a plaintext connection; pass secure=True or "
                "credentials=..., or allow_plaintext_token=True when a trusted network or proxy "
                "provides transport security"
            )
        self.target = target
        self.namespace = namespace
        self.timeout = timeout
        self._token = token
        self._credentials = credentials
        self._options = [
            ("grpc.primary_user_agent", _USER_AGENT),
            ("grpc.max_receive_message_length", max_receive_message_length),
            *options,
        ]
        self._channel: grpc.aio.Channel | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rpc: history_pb2_grpc.ThreadHistoryStub | None = None
        self._closed = False
        # Resolved here rather than on the first call: looking for
        # mcp-toolsets-runtime imports LangChain, which would stall a running
        # event loop.
        self._snapshot_type = _compat.snapshot_type()
        self._history_type, self._turn_type = _compat.history_types()

    def __repr__(self) -> str:
        return (
            f"HistorydThreadHistory({self.target!r}, namespace={self.namespace!r}, "
            f"secure={self._credentials is not None}, token={'set' if self._token else 'none'})"
        )

    # -- the host protocol -------------------------------------------------

    async def snapshot(
        self, thread_id: str, turn: int, *, keys: Sequence[str] | None = None
    ) -> Any:
        """``turn``'s state, which turns are retained, and how many there were.

        Returns ``mcp_state.history.Snapshot(state, retained, total)`` (or
        :class:`~historyd_client.LocalSnapshot`, the same fields, when
        mcp-toolsets-runtime does not import). ``state`` maps each key to its
        entry dict as the turn ended, or is ``None`` when the thread never had
        the turn or no longer retains it; ``snapshot.never_had(turn)`` says
        which. ``keys`` restricts the state to those keys.

        A turn below 1 or beyond what the API can number is answered, like any
        turn past the total, with ``state`` ``None`` and the thread's real
        ``total`` and ``retained``, as the protocol expects, not an error.
        """
        if isinstance(turn, bool) or not isinstance(turn, int):
            raise TypeError(f"historyd: turn must be an int, not {type(turn).__name__}")
        asked = turn if 1 <= turn <= _MAX_TURN else 0  # 0 is answered no_such_turn
        request = history_pb2.SnapshotRequest(
            thread_id=thread_id, turn=asked, checkpoint_ns=self.namespace, keys=_keys(keys)
        )
        response = await self._unary("Snapshot", request)
        result = response.WhichOneof("result")
        if result is None:
            raise HistorydError(
                "Snapshot", grpc.StatusCode.INTERNAL, "the response has none of state, no_such_turn, no_longer_retained"
            )
        state = _convert.entries_to_python(response.state) if result == "state" else None
        return self._snapshot_type(
            state=state,
            retained=frozenset(response.retained_turns),
            total=response.total,
        )

    # -- beyond the protocol -----------------------------------------------

    async def snapshots(self, thread_id: str, *, keys: Sequence[str] | None = None) -> Any:
        """Every retained turn's state, and how many turns the thread has had.

        ``mcp_state``'s host protocol has no whole-thread read; this returns
        what its own whole-thread reader (``mcp_agent.history.turns_from``)
        does: ``mcp_agent.history.History(turns=[Turn(n, question,
        checkpoint_id, state), ...], total)``, turns ascending, only retained
        ones present (or :class:`~historyd_client.LocalHistory` and
        :class:`~historyd_client.LocalTurn`, the same fields, when
        mcp-toolsets-runtime does not import).

        Read with ``StreamSnapshots``, one turn per message, so no response
        has to hold the whole thread; a server without it is read with
        ``Snapshots``.
        """
        history_type, turn_type = self._history_type, self._turn_type
        turns: dict[int, Any] = {}
        total = 0
        try:
            request = history_pb2.StreamSnapshotsRequest(
                thread_id=thread_id, checkpoint_ns=self.namespace, keys=_keys(keys)
            )
            async for message in self._stream("StreamSnapshots", request):
                total = max(total, message.total)
                if message.HasField("turn"):
                    turns[message.turn.turn] = _turn(turn_type, message.turn)
        except HistorydError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            request = history_pb2.SnapshotsRequest(
                thread_id=thread_id, checkpoint_ns=self.namespace, keys=_keys(keys)
            )
            response = await self._unary("Snapshots", request)
            total = response.total
            turns = {n: _turn(turn_type, state) for n, state in response.turns.items()}
        return history_type(turns=[turns[n] for n in sorted(turns)], total=total)

    async def turns(self, thread_id: str, *, include_keys_written: bool = False) -> TurnIndex:
        """Every turn from 1 to the total, retained or not, without state."""
        request = history_pb2.TurnsRequest(
            thread_id=thread_id,
            checkpoint_ns=self.namespace,
            include_keys_written=include_keys_written,
        )
        response = await self._unary("Turns", request)
        return TurnIndex(
            turns=[
                TurnInfo(
                    n=info.number,
                    question=info.question,
                    retained=info.retained,
                    checkpoint_id=info.checkpoint_id or None,
                    ended_at=_convert.timestamp_to_datetime(info, "ended_at"),
                    keys_written=tuple(info.keys_written),
                )
                for info in response.turns
            ],
            total=response.total,
        )

    # -- lifecycle -----------------------------------------------------------

    async def close(self) -> None:
        """Close the channel. Later calls fail with ``FAILED_PRECONDITION``."""
        self._closed = True
        channel, loop = self._channel, self._loop
        self._channel = self._loop = self._rpc = None
        if channel is not None and loop is asyncio.get_running_loop():
            await channel.close()

    async def __aenter__(self) -> HistorydThreadHistory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing ------------------------------------------------------------

    def _stub(self, method: str) -> history_pb2_grpc.ThreadHistoryStub:
        if self._closed:
            raise HistorydError(method, grpc.StatusCode.FAILED_PRECONDITION, "the client is closed")
        loop = asyncio.get_running_loop()
        if self._rpc is None or self._loop is not loop:
            # A channel made in another loop cannot be used (or awaited
            # closed) from this one; it is released with that loop.
            if self._credentials is None:
                channel = grpc.aio.insecure_channel(self.target, options=self._options)
            else:
                channel = grpc.aio.secure_channel(self.target, self._credentials, options=self._options)
            self._channel, self._loop = channel, loop
            self._rpc = history_pb2_grpc.ThreadHistoryStub(channel)
        return self._rpc

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        if self._token is None:
            return ()
        token = self._token() if callable(self._token) else self._token
        if not isinstance(token, str) or not token:
            raise ValueError("historyd: the token callable returned no token")
        return (("authorization", f"Bearer {token}"),)

    async def _unary(self, method: str, request: Any) -> Any:
        call = getattr(self._stub(method), method)
        try:
            return await call(request, timeout=self.timeout, metadata=self._metadata())
        except grpc.aio.AioRpcError as exc:
            raise HistorydError(method, exc.code(), exc.details()) from exc

    async def _stream(self, method: str, request: Any) -> Any:
        call = getattr(self._stub(method), method)(
            request, timeout=self.timeout, metadata=self._metadata()
        )
        try:
            async for message in call:
                yield message
        except grpc.aio.AioRpcError as exc:
            raise HistorydError(method, exc.code(), exc.details()) from exc
        finally:
            call.cancel()  # a no-op once the stream has ended


def _keys(keys: Sequence[str] | None) -> list[str]:
    if keys is None:
        return []
    if isinstance(keys, (str, bytes)):
        raise TypeError("historyd: keys must be a sequence of keys, not one string")
    return list(keys)


def _turn(turn_type: type, state: history_pb2.TurnState) -> Any:
    return turn_type(
        n=state.turn,
        question=state.question,
        checkpoint_id=state.checkpoint_id or None,
        state=_convert.entries_to_python(state),
    )

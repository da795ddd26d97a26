"""``HistorydThreadHistory``: a thread's turn history, read from historyd over gRPC.

It is the host side of ``mcp_state.history.ThreadHistory`` (mcp-toolsets-runtime):
hand one to ``mcp_state.inspect.make_inspect_state(history=...)`` and the
model's ``inspect_state(key, turn=N)`` reads the key as it stood at the end of
turn N from historyd, instead of walking the checkpointer in the agent's own
process. Without that package, :meth:`HistorydThreadHistory.turn` answers one
turn in a type that names which of the three answers it is, and
``historyd_client.langchain`` builds the ``inspect_state`` tool on it for any
LangChain host.

:class:`HistorydThreadHistory` is the ``grpc.aio`` client;
:class:`~historyd_client.sync.SyncHistorydThreadHistory` is the same client
for synchronous code, over a plain ``grpc`` channel. Both are built on
``_ClientBase`` (``historyd_client._base``), which holds everything but the
transport: the settings, the requests, what a response is read as, the retry
policy and what a failure says. Each client only sends, waits and retries.
The errors and result types are defined there too and re-exported here.

The defaults are the Go and TypeScript clients' (client/testdata/defaults.json
records them): TLS unless ``plaintext=True``, a 10 s deadline per call,
UNAVAILABLE retried 3 times after 0.1 s, 0.2 s and 0.4 s (each ±20%, at most
2 s), responses up to 64 MiB, and values sent as JSON text
(:class:`ValueFormat`).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import threading
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from historyd_client import _ops
from historyd_client._base import (
    _BACKOFF_JITTER,
    _MAX_TURN,
    _NUMBERING,
    _USER_AGENT,
    _WIRE_FORMAT,
    DEFAULT_BACKOFF,
    DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    MAX_BACKOFF,
    RESUME_TRAILER,
    HistorydError,
    Numbering,
    Outcome,
    Token,
    TurnIndex,
    TurnInfo,
    TurnResult,
    TurnState,
    ValueFormat,
    _ClientBase,
    _entries,
    _keys,
    _numbering,
    _resume_asked,
    _Resumption,
    _turn,
    _utc,
    _value_format,
    _wire_turn,
)
from historyd_client.gen.historyd.v1 import history_pb2, history_pb2_grpc

if TYPE_CHECKING:
    from historyd_client.sync import SyncHistorydThreadHistory



class HistorydThreadHistory(_ClientBase):
    """``mcp_state.history.ThreadHistory`` backed by a historyd server, over ``grpc.aio``.

    ``target`` is a gRPC target (``"historyd.internal:8443"``,
    ``"dns:///historyd:8443"``). The connection uses TLS, verified against the
    system roots, unless ``plaintext=True`` asks for none (local development,
    or a trusted proxy or mesh that provides transport security);
    ``credentials`` (``grpc.ssl_channel_credentials(...)``) sets up TLS with a
    private CA or client certificates instead. When the server speaks the
    other (plaintext to a TLS client, TLS to ``plaintext=True``), a call fails
    with UNAVAILABLE saying so and which argument to change.

    ``token`` is sent on every call as ``authorization: Bearer <token>``; a
    callable is called once per call, for tokens that rotate. Over plaintext
    it is sent only because ``plaintext=True`` said that connection is
    intended, as Go's ``WithInsecure`` does.

    ``timeout`` bounds each call in seconds, retries and backoff included, and
    a stream as a whole (``None``: no deadline). ``retries`` is how many times
    a call that failed with UNAVAILABLE is tried again (0: never), the first
    after ``backoff`` seconds and each later one after twice as long (±20%,
    at most 2 s); only UNAVAILABLE is retried, as every other code would fail
    the same way again. A stream cut with UNAVAILABLE resumes after the last
    turn it delivered, and only failures in a row count against ``retries``.
    ``namespace`` is the checkpoint namespace read, ``""`` being the root
    graph. ``channel`` is the state channel read, ``""`` being the server's
    default (the first of its ``--state-channels``), e.g. deepagents'
    ``"files"``; every call also takes ``channel=`` for one read. A channel the
    server does not serve fails with ``INVALID_ARGUMENT`` naming the ones it
    does. ``value_format`` is how values travel (:class:`ValueFormat`: JSON
    text by default, ``"proto"`` for ``google.protobuf.Value``, ``"raw"`` for
    JSON text left unparsed); every read also takes ``value_format=``. The
    first two give the same values. ``options`` are extra gRPC channel
    options. ``trace_context`` sends the caller's OpenTelemetry trace
    context on every call when ``opentelemetry-api`` is installed (the
    ``[tracing]`` extra), so that historyd's spans join the host's traces;
    turn it off when something else already injects it into this channel's
    calls.

    The channel is opened on first use, in the event loop of that call, and
    opened again if a later call runs in another loop (``grpc.aio`` channels
    belong to one loop). Use ``async with`` or :meth:`close` to release it.
    Failed calls raise :class:`HistorydError`, carrying the gRPC code.
    :meth:`sync` is the same client for synchronous code.
    """

    def _init_transport(self) -> None:
        self._channel: grpc.aio.Channel | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rpc: history_pb2_grpc.ThreadHistoryStub | None = None
        self._twin: SyncHistorydThreadHistory | None = None
        self._twin_lock = threading.Lock()

    # -- the host protocol -------------------------------------------------

    async def snapshot(
        self,
        thread_id: str,
        turn: int,
        *,
        keys: Sequence[str] | None = None,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> Any:
        """``turn``'s state, which turns are retained, and how many there were.

        Returns ``mcp_state.history.Snapshot(state, retained, total)`` (or
        :class:`~historyd_client.LocalSnapshot`, the same fields, when
        mcp-toolsets-runtime does not import). ``state`` maps each key to its
        entry dict as the turn ended, or is ``None`` when the thread never had
        the turn or no longer retains it; ``snapshot.never_had(turn)`` says
        which. ``keys`` restricts the state to those keys; ``channel`` reads
        that state channel instead of the client's; ``value_format`` overrides
        the client's (:class:`ValueFormat`). :meth:`turn` reads the
        same and says which of the three answers it got, which other turns
        share the state, and how sure the numbering is: the protocol's
        ``Snapshot`` has no field for them.

        A turn below 1 or beyond what the API can number (turn fields are
        int32 on the wire) is answered, like any turn past the total, with
        ``state`` ``None`` and the thread's real ``total`` and ``retained``, as
        the protocol expects, not an error: it is asked as turn 0, never as
        some other number. :meth:`turn` refuses it instead.
        """
        fmt = self._format_of(value_format)
        request = self._snapshot_request(thread_id, turn, keys, channel, fmt, protocol=True)
        return self._protocol_snapshot(self._turn_result(await self._unary("Snapshot", request), turn, fmt))

    # -- beyond the protocol -----------------------------------------------

    async def turn(
        self,
        thread_id: str,
        turn: int,
        *,
        keys: Sequence[str] | None = None,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> TurnResult:
        """The state at the end of ``turn``, or which of the two misses it is.

        Only that turn's state is read. ``keys`` restricts it to those keys;
        ``channel`` reads that state channel instead of the client's;
        ``value_format`` overrides the client's (:class:`ValueFormat`). Turn 0,
        which no thread has, and a turn past the total are answered
        :attr:`Outcome.NO_SUCH_TURN` with the thread's total and retained turns;
        a negative turn, or one past 2**31-1 (turn fields are int32 on the
        wire), raises :class:`ValueError` before anything is sent.
        """
        fmt = self._format_of(value_format)
        request = self._snapshot_request(thread_id, turn, keys, channel, fmt)
        return self._turn_result(await self._unary("Snapshot", request), turn, fmt)

    async def stream_snapshots(
        self,
        thread_id: str,
        *,
        keys: Sequence[str] | None = None,
        from_turn: int = 0,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> AsyncIterator[Any]:
        """Every retained turn from ``from_turn`` on, one at a time, ascending.

        Yields the same ``Turn(n, question, checkpoint_id, state)`` items as
        :meth:`snapshots` (``mcp_agent.history.Turn`` or
        :class:`~historyd_client.LocalTurn`), read with ``StreamSnapshots``, so
        a long history never has to fit in one response nor in memory. A
        stream cut with UNAVAILABLE is resumed after the last turn yielded,
        so no turn comes twice; one the server ends at its maximum age (the
        ``historyd-resume`` trailer) is resumed at once, counting as no
        failure. :meth:`stream_turns` reads the same as
        :class:`TurnState` items, with ``answered_with`` and ``numbering``,
        which ``Turn`` has no field for.
        """
        fmt = self._format_of(value_format)
        async for message in self._resumed(thread_id, keys, from_turn, channel, fmt):
            if message.HasField("turn"):
                yield self._stream_turn(message, fmt)

    async def stream_turns(
        self,
        thread_id: str,
        *,
        keys: Sequence[str] | None = None,
        from_turn: int = 0,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> AsyncIterator[TurnState]:
        """What :meth:`stream_snapshots` reads, as :class:`TurnState` items.

        Each carries its end time, the turns answered with it, and the
        numbering the message was sent with.
        """
        fmt = self._format_of(value_format)
        async for message in self._resumed(thread_id, keys, from_turn, channel, fmt):
            if message.HasField("turn"):
                yield self._stream_turn_state(message, fmt)

    async def snapshots(
        self,
        thread_id: str,
        *,
        keys: Sequence[str] | None = None,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> Any:
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
        ``Snapshots``. ``value_format`` overrides the client's
        (:class:`ValueFormat`), as in every read.
        """
        fmt = self._format_of(value_format)
        turns: dict[int, Any] = {}
        total = 0
        try:
            async for message in self._resumed(thread_id, keys, 0, channel, fmt):
                total = max(total, message.total)
                if message.HasField("turn"):
                    turns[message.turn.turn] = self._stream_turn(message, fmt)
        except HistorydError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            request = self._snapshots_request(thread_id, keys, channel, fmt)
            return self._history_of_snapshots(await self._unary("Snapshots", request), fmt)
        return self._history(turns, total)

    async def turns(
        self, thread_id: str, *, include_keys_written: bool = False, channel: str | None = None
    ) -> TurnIndex:
        """Every turn from 1 to the total, retained or not, without state, and how sure their numbers are.

        ``channel`` is the state channel ``include_keys_written`` reads.
        """
        request = self._turns_request(thread_id, include_keys_written, channel)
        return self._turn_index(await self._unary("Turns", request))

    # -- operators -----------------------------------------------------------

    async def threads(
        self,
        *,
        prefix: str = "",
        page_size: int = 0,
        page_token: str = "",
        newest_first: bool = False,
        active_after: _dt.datetime | None = None,
        active_before: _dt.datetime | None = None,
        include_turns: bool = False,
    ) -> _ops.ThreadsPage:
        """One page of the threads the caller may read, in ``self.namespace``.

        By thread id, or with ``newest_first`` by last activity (the server
        refuses that past 10,000 threads under the prefix). ``page_size`` 0 is
        the server's default, 100; pass the page's ``next_page_token`` as
        ``page_token``, every other argument unchanged, for the next page.
        ``active_after``/``active_before`` (aware datetimes) keep only threads
        whose last checkpoint was written after/before them.
        """
        request = self._threads_request(
            prefix, page_size, page_token, newest_first, active_after, active_before, include_turns
        )
        return _ops.threads_page(await self._unary("Threads", request))

    async def diff(
        self,
        thread_id: str,
        *,
        to_turn: int = 0,
        from_turn: int = 0,
        keys: Sequence[str] | None = None,
        include_unchanged: bool = False,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> _ops.Diff:
        """What changed in the thread's state between the ends of two turns.

        ``to_turn`` 0 is the newest turn, ``from_turn`` 0 the one before
        ``to_turn``. Either end may be a miss, which its ``outcome`` says;
        nothing is compared then. ``channel`` is the state channel compared;
        ``value_format`` overrides the client's for the entries (patch
        values are always parsed).
        """
        fmt = self._format_of(value_format)
        request = self._diff_request(thread_id, to_turn, from_turn, keys, include_unchanged, channel, fmt)
        return _ops.diff(await self._unary("Diff", request), raw=fmt is ValueFormat.RAW)

    # -- lifecycle -----------------------------------------------------------

    def sync(self) -> SyncHistorydThreadHistory:
        """This client for synchronous code: a :class:`~historyd_client.sync.SyncHistorydThreadHistory`
        with the same settings and a channel of its own, made on first use and
        closed with this client.

        ``historyd_client.langchain``'s tool reads through it when a host
        calls the tool synchronously (``invoke``), so one client serves both.
        """
        with self._twin_lock:
            if self._twin is None:
                if self._closed:
                    raise HistorydError("sync", grpc.StatusCode.FAILED_PRECONDITION, "the client is closed")
                from historyd_client.sync import SyncHistorydThreadHistory

                self._twin = SyncHistorydThreadHistory(self.target, **self._settings)
            return self._twin

    async def close(self) -> None:
        """Close the channel. Later calls fail with ``FAILED_PRECONDITION``."""
        self._closed = True
        channel, loop = self._channel, self._loop
        self._channel = self._loop = self._rpc = None
        with self._twin_lock:
            twin, self._twin = self._twin, None
        if twin is not None:
            twin.close()
        if channel is not None and loop is asyncio.get_running_loop():
            await channel.close()

    async def __aenter__(self) -> HistorydThreadHistory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing ------------------------------------------------------------

    def _stub(self, method: str) -> history_pb2_grpc.ThreadHistoryStub:
        self._check_open(method)
        loop = asyncio.get_running_loop()
        if self._rpc is None or self._loop is not loop:
            # A channel made in another loop cannot be used (or awaited
            # closed) from this one; it is released with that loop.
            self._channel, self._loop = self._new_channel(aio=True), loop
            self._rpc = history_pb2_grpc.ThreadHistoryStub(self._channel)
        return self._rpc

    async def _raise(self, method: str, exc: grpc.aio.AioRpcError) -> HistorydError:
        # _failure may connect to the target to tell a TLS mismatch apart:
        # not on the event loop.
        return await asyncio.to_thread(self._failure, method, exc)

    async def _wait(self, method: str, retry: int, deadline: float | None) -> None:
        """Sleep before retry number ``retry`` (from 1), or fail if the deadline comes first."""
        wait, late = self._pause(method, retry, deadline)
        await asyncio.sleep(wait)
        if late is not None:
            raise late

    async def _unary(self, method: str, request: Any) -> Any:
        deadline = self._deadline()
        failures = 0
        while True:
            call = getattr(self._stub(method), method)
            try:
                return await call(request, timeout=self._remaining(method, deadline), metadata=self._metadata())
            except grpc.aio.AioRpcError as exc:
                if not self._retries(exc, failures):
                    raise await self._raise(method, exc) from exc
            failures += 1
            await self._wait(method, failures, deadline)

    async def _resumed(
        self,
        thread_id: str,
        keys: Sequence[str] | None,
        from_turn: int,
        channel: str | None,
        value_format: ValueFormat,
    ) -> AsyncIterator[Any]:
        """``StreamSnapshots`` messages, the stream resumed after the last turn on UNAVAILABLE."""
        method = "StreamSnapshots"
        deadline = self._deadline()
        at = _Resumption(_wire_turn("from_turn", from_turn))
        keys, wanted = _keys(keys), self._channel_of(channel)
        while True:
            request = self._stream_request(thread_id, keys, at.from_turn, wanted, value_format)
            call = self._stub(method).StreamSnapshots(
                request, timeout=self._remaining(method, deadline), metadata=self._metadata()
            )
            try:
                async for message in call:
                    at.delivered(message)
                    yield message
                return
            except grpc.aio.AioRpcError as exc:
                if _resume_asked(exc):
                    continue
                if not self._retries(exc, at.failures):
                    raise await self._raise(method, exc) from exc
            finally:
                call.cancel()  # a no-op once the stream has ended
            at.failures += 1
            await self._wait(method, at.failures, deadline)

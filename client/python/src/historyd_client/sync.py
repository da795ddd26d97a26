"""``SyncHistorydThreadHistory``: the client for synchronous code, over a plain ``grpc`` channel.

The same client as :class:`~historyd_client.HistorydThreadHistory`, with the
same arguments, defaults, methods and results, called without ``await``:
for hosts that run their agents with ``invoke`` rather than ``ainvoke``,
scripts, and notebooks. What the two share (the settings, every request,
what each response is read as, the retry policy, the errors) is
``historyd_client._base._ClientBase``; this module only sends, waits and
retries, with ``time.sleep`` where the async client awaits.

The channel is opened on the first call and is safe to use from several
threads at once, as a ``grpc`` channel is. ``with`` or :meth:`close`
releases it.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import grpc

from historyd_client import _ops
from historyd_client._base import (
    HistorydError,
    TurnIndex,
    TurnResult,
    TurnState,
    ValueFormat,
    _ClientBase,
    _keys,
    _Resumption,
    _resume_asked,
)
from historyd_client.gen.historyd.v1 import history_pb2_grpc

__all__ = ["SyncHistorydThreadHistory"]


class SyncHistorydThreadHistory(_ClientBase):
    """``HistorydThreadHistory`` for synchronous code: the same arguments and methods, without ``await``.

    ``stream_snapshots`` and ``stream_turns`` are plain iterators; leaving
    one early (``break``, or closing it) cancels the call. Failed calls raise
    :class:`~historyd_client.HistorydError`, chained to the ``grpc.RpcError``.
    See :class:`~historyd_client.HistorydThreadHistory` for every argument.
    """

    def _init_transport(self) -> None:
        self._channel: grpc.Channel | None = None
        self._rpc: history_pb2_grpc.ThreadHistoryStub | None = None
        self._lock = threading.Lock()

    # -- the host protocol's shape ------------------------------------------

    def snapshot(
        self,
        thread_id: str,
        turn: int,
        *,
        keys: Sequence[str] | None = None,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> Any:
        """``turn``'s state, which turns are retained, and how many there were, as
        :meth:`HistorydThreadHistory.snapshot <historyd_client.HistorydThreadHistory.snapshot>` reads them."""
        fmt = self._format_of(value_format)
        request = self._snapshot_request(thread_id, turn, keys, channel, fmt, protocol=True)
        return self._protocol_snapshot(self._turn_result(self._unary("Snapshot", request), turn, fmt))

    def turn(
        self,
        thread_id: str,
        turn: int,
        *,
        keys: Sequence[str] | None = None,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> TurnResult:
        """The state at the end of ``turn``, or which of the two misses it is (see
        :meth:`HistorydThreadHistory.turn <historyd_client.HistorydThreadHistory.turn>`)."""
        fmt = self._format_of(value_format)
        request = self._snapshot_request(thread_id, turn, keys, channel, fmt)
        return self._turn_result(self._unary("Snapshot", request), turn, fmt)

    def stream_snapshots(
        self,
        thread_id: str,
        *,
        keys: Sequence[str] | None = None,
        from_turn: int = 0,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> Iterator[Any]:
        """Every retained turn from ``from_turn`` on, one at a time, ascending, as ``Turn`` items
        (see :meth:`HistorydThreadHistory.stream_snapshots <historyd_client.HistorydThreadHistory.stream_snapshots>`)."""
        fmt = self._format_of(value_format)
        for message in self._resumed(thread_id, keys, from_turn, channel, fmt):
            if message.HasField("turn"):
                yield self._stream_turn(message, fmt)

    def stream_turns(
        self,
        thread_id: str,
        *,
        keys: Sequence[str] | None = None,
        from_turn: int = 0,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> Iterator[TurnState]:
        """What :meth:`stream_snapshots` reads, as :class:`~historyd_client.TurnState` items."""
        fmt = self._format_of(value_format)
        for message in self._resumed(thread_id, keys, from_turn, channel, fmt):
            if message.HasField("turn"):
                yield self._stream_turn_state(message, fmt)

    def snapshots(
        self,
        thread_id: str,
        *,
        keys: Sequence[str] | None = None,
        channel: str | None = None,
        value_format: ValueFormat | str | None = None,
    ) -> Any:
        """Every retained turn's state and the thread's total, as a ``History`` (see
        :meth:`HistorydThreadHistory.snapshots <historyd_client.HistorydThreadHistory.snapshots>`)."""
        fmt = self._format_of(value_format)
        turns: dict[int, Any] = {}
        total = 0
        try:
            for message in self._resumed(thread_id, keys, 0, channel, fmt):
                total = max(total, message.total)
                if message.HasField("turn"):
                    turns[message.turn.turn] = self._stream_turn(message, fmt)
        except HistorydError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            request = self._snapshots_request(thread_id, keys, channel, fmt)
            return self._history_of_snapshots(self._unary("Snapshots", request), fmt)
        return self._history(turns, total)

    def turns(self, thread_id: str, *, include_keys_written: bool = False, channel: str | None = None) -> TurnIndex:
        """Every turn from 1 to the total, retained or not, without state, and how sure their numbers are."""
        return self._turn_index(self._unary("Turns", self._turns_request(thread_id, include_keys_written, channel)))

    def threads(
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
        """One page of the threads the caller may read (see
        :meth:`HistorydThreadHistory.threads <historyd_client.HistorydThreadHistory.threads>`)."""
        request = self._threads_request(
            prefix, page_size, page_token, newest_first, active_after, active_before, include_turns
        )
        return _ops.threads_page(self._unary("Threads", request))

    def diff(
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
        """What changed in the thread's state between the ends of two turns (see
        :meth:`HistorydThreadHistory.diff <historyd_client.HistorydThreadHistory.diff>`)."""
        fmt = self._format_of(value_format)
        request = self._diff_request(thread_id, to_turn, from_turn, keys, include_unchanged, channel, fmt)
        return _ops.diff(self._unary("Diff", request), raw=fmt is ValueFormat.RAW)

    # -- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Close the channel. Later calls fail with ``FAILED_PRECONDITION``."""
        with self._lock:
            self._closed = True
            channel, self._channel, self._rpc = self._channel, None, None
        if channel is not None:
            channel.close()

    def __enter__(self) -> SyncHistorydThreadHistory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------

    def _stub(self, method: str) -> history_pb2_grpc.ThreadHistoryStub:
        with self._lock:
            self._check_open(method)
            if self._rpc is None:
                self._channel = self._new_channel(aio=False)
                self._rpc = history_pb2_grpc.ThreadHistoryStub(self._channel)
            return self._rpc

    def _wait(self, method: str, retry: int, deadline: float | None) -> None:
        wait, late = self._pause(method, retry, deadline)
        time.sleep(wait)
        if late is not None:
            raise late

    def _unary(self, method: str, request: Any) -> Any:
        deadline = self._deadline()
        failures = 0
        while True:
            call = getattr(self._stub(method), method)
            timeout, metadata = self._remaining(method, deadline), self._metadata()
            try:
                return call(request, timeout=timeout, metadata=metadata)
            except grpc.RpcError as exc:
                if not self._retries(exc, failures):
                    raise self._failure(method, exc) from exc
            failures += 1
            self._wait(method, failures, deadline)

    def _resumed(
        self,
        thread_id: str,
        keys: Sequence[str] | None,
        from_turn: int,
        channel: str | None,
        value_format: ValueFormat,
    ) -> Iterator[Any]:
        """``StreamSnapshots`` messages, the stream resumed after the last turn on UNAVAILABLE."""
        method = "StreamSnapshots"
        deadline = self._deadline()
        at = _Resumption(from_turn)
        keys, wanted = _keys(keys), self._channel_of(channel)
        while True:
            request = self._stream_request(thread_id, keys, at.from_turn, wanted, value_format)
            call = self._stub(method).StreamSnapshots(
                request, timeout=self._remaining(method, deadline), metadata=self._metadata()
            )
            try:
                for message in call:
                    at.delivered(message)
                    yield message
                return
            except grpc.RpcError as exc:
                if _resume_asked(exc):
                    continue
                if not self._retries(exc, at.failures):
                    raise self._failure(method, exc) from exc
            finally:
                call.cancel()  # a no-op once the stream has ended
            at.failures += 1
            self._wait(method, at.failures, deadline)

"""What the async and the sync client share: the errors, the results, and ``_ClientBase``.

:class:`~historyd_client.client.HistorydThreadHistory` (``grpc.aio``) and
:class:`~historyd_client.sync.SyncHistorydThreadHistory` (plain ``grpc``) are
both built on ``_ClientBase`` here, which holds everything but the transport:
the settings, the requests, what a response is read as, the retry policy and
what a failure says. Each client only sends, waits and retries.

This module imports neither client: ``historyd_client.client``,
``historyd_client.sync`` and ``historyd_client._ops`` import from it, and
``historyd_client.client`` re-exports its public names, so that
``historyd_client.client.HistorydError`` and the rest are where they were.
"""

from __future__ import annotations

import datetime as _dt
import enum
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import grpc
import grpc.aio

from historyd_client import _compat, _convert, _tracing, _transport
from historyd_client.gen.historyd.v1 import history_pb2


_MAX_TURN = 2**31 - 1

#: Default cap on one response: historyd's default ``--max-response-bytes``, as
#: in the Go and TypeScript clients. Session state holds exactly the values too
#: big for a transcript (a turn of the conformance thread carries a 1 MB
#: geometry), and gRPC's own default of 4 MiB is less than a few such turns.
DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH = 64 * 1024 * 1024

#: Default deadline of each call in seconds, retries and backoff included (a
#: stream's as a whole). A call that hangs then fails with DEADLINE_EXCEEDED
#: instead of stalling the agent turn; the server caps every call at its own
#: ``--max-call-duration`` (30 s by default) in any case.
DEFAULT_TIMEOUT = 10.0

#: How many times a call that failed with UNAVAILABLE is tried again.
DEFAULT_RETRIES = 3

#: The wait before the first retry in seconds; each later one waits twice as
#: long, spread by up to ±20% (so clients that failed together do not retry
#: together) and at most :data:`MAX_BACKOFF`.
DEFAULT_BACKOFF = 0.1

#: The longest single wait between two tries, in seconds.
MAX_BACKOFF = 2.0

_BACKOFF_JITTER = 0.2

#: The trailer with which historyd ends a stream the client is to make again
#: from where it got to (the stream reached the server's maximum age, or a
#: reload of its token file changed what the call reads), with UNAVAILABLE:
#: it is resumed at once and counts as no failure.
RESUME_TRAILER = "historyd-resume"

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


class Numbering(str, enum.Enum):
    """How sure a thread's turn numbers are, which depends on what the checkpointer still retains.

    The values are the Go and TypeScript clients' spelling. A result from a
    server that does not say (one older than the field) has ``None``.
    """

    #: The thread's first checkpoint is retained: every turn number is exact.
    COMPLETE = "complete"
    #: The oldest checkpoints were pruned, and the questions before the oldest
    #: one left were counted from the messages it holds: exact unless messages
    #: were removed before it without a trace.
    COUNTED = "counted"
    #: The oldest checkpoints were pruned and no checkpoint left shows how many
    #: questions came before (the oldest holds a summary, or a DeltaChannel's
    #: messages were rebuilt past a pruned checkpoint): numbers may be too low.
    #: A turn's question says which question it was.
    ESTIMATED = "estimated"


_NUMBERING = {
    history_pb2.TURN_NUMBERING_COMPLETE: Numbering.COMPLETE,
    history_pb2.TURN_NUMBERING_COUNTED: Numbering.COUNTED,
    history_pb2.TURN_NUMBERING_ESTIMATED: Numbering.ESTIMATED,
}


def _numbering(wire: int) -> Numbering | None:
    # A value this client does not know (a newer server's) reads as unsaid,
    # not as a certainty it was not given.
    return _NUMBERING.get(wire)


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
    #: The other turns whose questions came in the same input as this one's
    #: and were answered by the same run, ascending; empty for a turn asked
    #: on its own.
    answered_with: tuple[int, ...] = ()


class TurnIndex(NamedTuple):
    """Every turn of a thread from 1 to ``total``, retained or not, and how sure their numbers are."""

    turns: list[TurnInfo]
    total: int
    numbering: Numbering | None = None


class TurnState(NamedTuple):
    """One retained turn's state, as :meth:`HistorydThreadHistory.stream_turns` yields it.

    ``state`` maps each key to its entry dict as the turn ended. Unlike
    ``Turn`` (the host protocol's shape, which :meth:`~HistorydThreadHistory.stream_snapshots`
    keeps), it carries everything historyd says about the turn.
    """

    n: int
    question: str
    checkpoint_id: str | None
    state: dict[str, Any]
    #: When the turn's last checkpoint was written (UTC), when known.
    ended_at: _dt.datetime | None = None
    #: The other turns whose questions came in the same input as this one's
    #: and were answered by the same run, whose end state this one shares.
    answered_with: tuple[int, ...] = ()
    #: How sure the thread's turn numbers were when the turn was read.
    numbering: Numbering | None = None


class Outcome(str, enum.Enum):
    """Which of the three answers to "what did turn n hold" a :class:`TurnResult` is.

    The values are the wire's and the Go client's spelling.
    """

    #: The turn is retained and ``TurnResult.state`` holds its state.
    FOUND = "found"
    #: The thread never had the turn: below 1, or past the total. Nothing was lost.
    NO_SUCH_TURN = "no_such_turn"
    #: The turn happened, but none of its checkpoints are retained any more.
    NO_LONGER_RETAINED = "no_longer_retained"


class TurnResult(NamedTuple):
    """One turn's answer, saying which of the three it is.

    ``state`` (key → entry dict), ``checkpoint_id``, ``ended_at`` and
    ``answered_with`` are set only when ``outcome`` is :attr:`Outcome.FOUND`,
    so a missing turn never carries another turn's state. ``question`` is the
    turn's question when found, and when no longer retained if the thread's
    newest messages still hold it (else ``""``). ``total``, ``retained`` and
    ``numbering`` describe the thread: with :attr:`Numbering.ESTIMATED`,
    ``turn`` may name a later question than the caller counted.
    """

    outcome: Outcome
    #: The turn that was asked for.
    turn: int
    #: How many turns the thread has had.
    total: int
    #: The turns whose state can still be read, ascending.
    retained: tuple[int, ...]
    question: str = ""
    state: Mapping[str, dict[str, Any]] | None = None
    checkpoint_id: str | None = None
    ended_at: _dt.datetime | None = None
    #: The other turns whose questions came in the same input as this one's
    #: and were answered by the same run, ascending.
    answered_with: tuple[int, ...] = ()
    #: How sure the thread's turn numbers are; ``None`` when the server does not say.
    numbering: Numbering | None = None

    @property
    def found(self) -> bool:
        """Whether the turn's state was read."""
        return self.outcome is Outcome.FOUND


class ValueFormat(str, enum.Enum):
    """How state values travel from historyd, and what an entry holds.

    The values are the Go and TypeScript clients' spelling; a plain string
    (``"proto"``) is taken wherever a ``ValueFormat`` is.
    """

    #: The default: historyd sends each value as JSON text
    #: (``StateEntry.value_json``), written on the server straight from the
    #: stored bytes, which the client reads with orjson. Several times cheaper
    #: for both sides than a ``google.protobuf.Value`` tree, and the same
    #: values, ``int`` and ``float`` and key order alike.
    JSON = "json"
    #: historyd sends each value as a ``google.protobuf.Value``
    #: (``StateEntry.value``), as servers that predate ``value_json`` do.
    PROTO = "proto"
    #: JSON text on the wire, left unparsed: each entry holds ``value_json``,
    #: the value's JSON text as ``bytes`` (UTF-8, keys in stored order),
    #: instead of ``value``. For a host that hands values on as text or parses
    #: them itself; the cheapest way to read a large state. A server that sent
    #: a Value instead has it written as JSON text by the client.
    RAW = "raw"


_WIRE_FORMAT = {
    ValueFormat.JSON: history_pb2.VALUE_FORMAT_JSON,
    ValueFormat.PROTO: history_pb2.VALUE_FORMAT_PROTO,
    ValueFormat.RAW: history_pb2.VALUE_FORMAT_JSON,
}


def _value_format(value: ValueFormat | str) -> ValueFormat:
    try:
        return ValueFormat(value)
    except ValueError:
        names = ", ".join(repr(f.value) for f in ValueFormat)
        raise ValueError(f"historyd: value_format must be one of {names}, not {value!r}") from None


Token = str | Callable[[], str]


class _ClientBase:
    """What the async and the sync client share: everything but the transport.

    The settings and their validation, each RPC's request, what each
    response is read as, the retry policy, the metadata of a call and what a
    failed call raises are here, once; a client adds only how a call is sent
    and how it waits, so the two cannot drift apart.
    """

    def __init__(
        self,
        target: str,
        *,
        token: Token | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        credentials: grpc.ChannelCredentials | None = None,
        plaintext: bool = False,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        namespace: str = "",
        max_receive_message_length: int = DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
        options: Sequence[tuple[str, Any]] = (),
        channel: str = "",
        value_format: ValueFormat | str = ValueFormat.JSON,
        trace_context: bool = True,
    ) -> None:
        if not isinstance(target, str) or not target:
            raise ValueError("historyd: target must be a non-empty gRPC target, such as 'host:port'")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"historyd: timeout must be positive seconds or None, not {timeout!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"historyd: retries must be a whole number 0 or more, not {retries!r}")
        if not isinstance(backoff, (int, float)) or isinstance(backoff, bool) or backoff < 0:
            raise ValueError(f"historyd: backoff must be seconds 0 or more, not {backoff!r}")
        if not isinstance(namespace, str):
            raise TypeError("historyd: namespace must be a string")
        if not isinstance(channel, str):
            raise TypeError("historyd: channel must be a string")
        if token is not None and not (isinstance(token, str) or callable(token)):
            raise TypeError("historyd: token must be a string or a callable returning one")
        if isinstance(token, str) and not token:
            raise ValueError("historyd: token is empty; pass None to send none")
        if plaintext and credentials is not None:
            raise ValueError("historyd: plaintext=True and credentials contradict each other")
        # What the constructor was given, for a twin of the other kind
        # (HistorydThreadHistory.sync) with the same settings.
        self._settings: dict[str, Any] = {
            "token": token,
            "timeout": timeout,
            "credentials": credentials,
            "plaintext": plaintext,
            "retries": retries,
            "backoff": backoff,
            "namespace": namespace,
            "max_receive_message_length": max_receive_message_length,
            "options": tuple(options),
            "channel": channel,
            "value_format": value_format,
            "trace_context": trace_context,
        }
        if not plaintext and credentials is None:
            credentials = grpc.ssl_channel_credentials()
        self.value_format = _value_format(value_format)
        self.target = target
        self.namespace = namespace
        self.channel = channel
        self.timeout = timeout
        self.retries = retries
        self.backoff = float(backoff)
        self._token = token
        self._credentials = credentials
        self._options = [
            ("grpc.primary_user_agent", _USER_AGENT),
            ("grpc.max_receive_message_length", max_receive_message_length),
            *options,
        ]
        self._closed = False
        # Resolved here rather than on the first call: looking for
        # mcp-toolsets-runtime imports LangChain, which would stall a running
        # event loop.
        self._snapshot_type = _compat.snapshot_type()
        self._history_type, self._turn_type = _compat.history_types()
        self._trace = _tracing.injector() if trace_context else None
        self._init_transport()

    def _init_transport(self) -> None:
        """Set up what the client's transport keeps (its channel, made on first use)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.target!r}, namespace={self.namespace!r}, channel={self.channel!r}, "
            f"value_format={self.value_format.value!r}, plaintext={self._credentials is None}, "
            f"token={'set' if self._token else 'none'})"
        )

    # -- requests and what their responses are read as ------------------------

    def _snapshot_request(
        self,
        thread_id: str,
        turn: int,
        keys: Sequence[str] | None,
        channel: str | None,
        fmt: ValueFormat,
        protocol: bool = False,
    ) -> history_pb2.SnapshotRequest:
        if protocol and isinstance(turn, int) and not isinstance(turn, bool) and not 0 <= turn <= _MAX_TURN:
            # The protocol answers every turn: one the wire cannot carry is
            # asked as turn 0, which no thread has, never as another number.
            turn = 0
        return history_pb2.SnapshotRequest(
            thread_id=thread_id,
            turn=_wire_turn("turn", turn),
            checkpoint_ns=self.namespace,
            keys=_keys(keys),
            channel=self._channel_of(channel),
            value_format=_WIRE_FORMAT[fmt],
        )

    @staticmethod
    def _turn_result(response: history_pb2.SnapshotResponse, turn: int, fmt: ValueFormat) -> TurnResult:
        result = response.WhichOneof("result")
        common = {
            "turn": turn,
            "total": response.total,
            "retained": tuple(response.retained_turns),
            "numbering": _numbering(response.numbering),
        }
        if result == "state":
            return TurnResult(
                outcome=Outcome.FOUND,
                question=response.state.question,
                state=_entries("Snapshot", response.state, fmt),
                checkpoint_id=response.state.checkpoint_id or None,
                ended_at=_convert.timestamp_to_datetime(response.state, "ended_at"),
                answered_with=tuple(response.state.answered_with),
                **common,
            )
        if result == "no_such_turn":
            return TurnResult(outcome=Outcome.NO_SUCH_TURN, **common)
        if result == "no_longer_retained":
            return TurnResult(
                outcome=Outcome.NO_LONGER_RETAINED, question=response.no_longer_retained.question, **common
            )
        # Guessing would be the one wrong answer: an empty state reads as
        # "the key was not there", which the server never said.
        raise HistorydError(
            "Snapshot", grpc.StatusCode.INTERNAL, "the response has none of state, no_such_turn, no_longer_retained"
        )

    def _protocol_snapshot(self, result: TurnResult) -> Any:
        """A :class:`TurnResult` as the host protocol's ``Snapshot``."""
        return self._snapshot_type(
            state=result.state if result.found else None,
            retained=frozenset(result.retained),
            total=result.total,
        )

    def _stream_request(
        self, thread_id: str, keys: list[str], from_turn: int, channel: str, fmt: ValueFormat
    ) -> history_pb2.StreamSnapshotsRequest:
        return history_pb2.StreamSnapshotsRequest(
            thread_id=thread_id,
            checkpoint_ns=self.namespace,
            keys=keys,
            # A resumed stream's next turn after the last one the wire
            # carries is past every turn: the last one again.
            from_turn=min(from_turn, _MAX_TURN),
            channel=channel,
            value_format=_WIRE_FORMAT[fmt],
        )

    def _stream_turn(self, message: history_pb2.StreamSnapshotsResponse, fmt: ValueFormat) -> Any:
        return _turn(self._turn_type, "StreamSnapshots", message.turn, fmt)

    @staticmethod
    def _stream_turn_state(message: history_pb2.StreamSnapshotsResponse, fmt: ValueFormat) -> TurnState:
        t = message.turn
        return TurnState(
            n=t.turn,
            question=t.question,
            checkpoint_id=t.checkpoint_id or None,
            state=_entries("StreamSnapshots", t, fmt),
            ended_at=_convert.timestamp_to_datetime(t, "ended_at"),
            answered_with=tuple(t.answered_with),
            numbering=_numbering(message.numbering),
        )

    def _snapshots_request(
        self, thread_id: str, keys: Sequence[str] | None, channel: str | None, fmt: ValueFormat
    ) -> history_pb2.SnapshotsRequest:
        return history_pb2.SnapshotsRequest(
            thread_id=thread_id,
            checkpoint_ns=self.namespace,
            keys=_keys(keys),
            channel=self._channel_of(channel),
            value_format=_WIRE_FORMAT[fmt],
        )

    def _history(self, turns: dict[int, Any], total: int) -> Any:
        return self._history_type(turns=[turns[n] for n in sorted(turns)], total=total)

    def _history_of_snapshots(self, response: history_pb2.SnapshotsResponse, fmt: ValueFormat) -> Any:
        turns = {n: _turn(self._turn_type, "Snapshots", state, fmt) for n, state in response.turns.items()}
        return self._history(turns, response.total)

    def _turns_request(self, thread_id: str, include_keys_written: bool, channel: str | None) -> history_pb2.TurnsRequest:
        return history_pb2.TurnsRequest(
            thread_id=thread_id,
            checkpoint_ns=self.namespace,
            include_keys_written=include_keys_written,
            channel=self._channel_of(channel),
        )

    @staticmethod
    def _turn_index(response: history_pb2.TurnsResponse) -> TurnIndex:
        return TurnIndex(
            turns=[
                TurnInfo(
                    n=info.number,
                    question=info.question,
                    retained=info.retained,
                    checkpoint_id=info.checkpoint_id or None,
                    ended_at=_convert.timestamp_to_datetime(info, "ended_at"),
                    keys_written=tuple(info.keys_written),
                    answered_with=tuple(info.answered_with),
                )
                for info in response.turns
            ],
            total=response.total,
            numbering=_numbering(response.numbering),
        )

    def _threads_request(
        self,
        prefix: str,
        page_size: int,
        page_token: str,
        newest_first: bool,
        active_after: _dt.datetime | None,
        active_before: _dt.datetime | None,
        include_turns: bool,
    ) -> history_pb2.ThreadsRequest:
        request = history_pb2.ThreadsRequest(
            thread_id_prefix=prefix,
            checkpoint_ns=self.namespace,
            page_size=page_size,
            page_token=page_token,
            include_turns=include_turns,
        )
        if newest_first:
            request.order = history_pb2.THREADS_ORDER_LAST_ACTIVITY
        if active_after is not None:
            request.last_activity_after.FromDatetime(_utc(active_after))
        if active_before is not None:
            request.last_activity_before.FromDatetime(_utc(active_before))
        return request

    def _diff_request(
        self,
        thread_id: str,
        to_turn: int,
        from_turn: int,
        keys: Sequence[str] | None,
        include_unchanged: bool,
        channel: str | None,
        fmt: ValueFormat,
    ) -> history_pb2.DiffRequest:
        return history_pb2.DiffRequest(
            thread_id=thread_id,
            checkpoint_ns=self.namespace,
            to_turn=_wire_turn("to_turn", to_turn),
            from_turn=_wire_turn("from_turn", from_turn),
            keys=_keys(keys),
            include_unchanged=include_unchanged,
            channel=self._channel_of(channel),
            value_format=_WIRE_FORMAT[fmt],
        )

    def _channel_of(self, channel: str | None) -> str:
        """The channel a read asks for: its own, else the client's."""
        if channel is None:
            return self.channel
        if not isinstance(channel, str):
            raise TypeError("historyd: channel must be a string")
        return channel

    def _format_of(self, value_format: ValueFormat | str | None) -> ValueFormat:
        """The value format a read asks for: its own, else the client's."""
        return self.value_format if value_format is None else _value_format(value_format)

    # -- calls ----------------------------------------------------------------

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise HistorydError(method, grpc.StatusCode.FAILED_PRECONDITION, "the client is closed")

    def _new_channel(self, aio: bool) -> Any:
        """A new gRPC channel to the target: a ``grpc.aio`` one, or a plain one."""
        module = grpc.aio if aio else grpc
        if self._credentials is None:
            return module.insecure_channel(self.target, options=self._options)
        return module.secure_channel(self.target, self._credentials, options=self._options)

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        # Each attempt carries the context current when it is made.
        trace = self._trace() if self._trace is not None else ()
        if self._token is None:
            return trace
        token = self._token() if callable(self._token) else self._token
        if not isinstance(token, str) or not token:
            raise ValueError("historyd: the token callable returned no token")
        return (("authorization", f"Bearer {token}"), *trace)

    def _deadline(self) -> float | None:
        return None if self.timeout is None else time.monotonic() + self.timeout

    @staticmethod
    def _remaining(method: str, deadline: float | None) -> float | None:
        if deadline is None:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            raise HistorydError(method, grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded")
        return left

    def _retries(self, exc: grpc.RpcError, failures: int) -> bool:
        """Whether a call that failed with ``exc``, after ``failures`` failed tries before it, is tried again."""
        return exc.code() == grpc.StatusCode.UNAVAILABLE and failures < self.retries

    def _pause(self, method: str, retry: int, deadline: float | None) -> tuple[float, HistorydError | None]:
        """How long to wait before retry number ``retry`` (from 1), and the error to raise
        after waiting when the deadline comes first."""
        wait = min(self.backoff * 2 ** (retry - 1) * (1 + _BACKOFF_JITTER * (2 * random.random() - 1)), MAX_BACKOFF)
        if deadline is not None and time.monotonic() + wait >= deadline:
            late = HistorydError(method, grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded while waiting to retry")
            return max(0.0, deadline - time.monotonic()), late
        return wait, None

    def _failure(self, method: str, exc: grpc.RpcError) -> HistorydError:
        """The error a call that failed with ``exc`` raises.

        A call that failed before reaching historyd because one side speaks
        TLS and the other does not says so in one line, with the argument to
        change; finding that out makes a connection to the target
        (:mod:`historyd_client._transport`), so the async client runs this in
        a thread.
        """
        mismatch = _transport.mismatch(
            self.target, exc.code(), exc.details() or "", plaintext=self._credentials is None
        )
        if mismatch is not None:
            return HistorydError(method, grpc.StatusCode.UNAVAILABLE, mismatch)
        return HistorydError(method, exc.code(), exc.details())


class _Resumption:
    """Where a resumed ``StreamSnapshots`` read goes on from, and how many tries in a row failed."""

    def __init__(self, from_turn: int) -> None:
        self.from_turn = from_turn
        self.failures = 0

    def delivered(self, message: history_pb2.StreamSnapshotsResponse) -> None:
        if message.HasField("turn"):
            self.failures = 0
            self.from_turn = message.turn.turn + 1


def _resume_asked(exc: Any) -> bool:
    """Whether the server ended the stream for the client to make it again at once.

    ``exc`` is a ``grpc.aio.AioRpcError`` or a sync ``grpc.RpcError`` that is also a
    ``grpc.Call``; both carry the code and the trailers.
    """
    if exc.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    return any(key == RESUME_TRAILER for key, _ in exc.trailing_metadata() or ())


def _utc(t: _dt.datetime) -> _dt.datetime:
    if t.tzinfo is None:
        raise ValueError("historyd: times must be aware datetimes (give a tzinfo)")
    return t.astimezone(_dt.timezone.utc)


def _wire_turn(field: str, n: int) -> int:
    """The turn number ``n`` a request carries in ``field``, checked before sending.

    Turn fields are int32 on the wire, and the server refuses a larger value
    (INVALID_ARGUMENT) rather than truncate it; 0 is each field's default
    (for a snapshot, a turn no thread has, answered NO_SUCH_TURN).
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"historyd: {field} must be an int, not {type(n).__name__}")
    if not 0 <= n <= _MAX_TURN:
        raise ValueError(
            f"historyd: {field} {n}: must be 0 to {_MAX_TURN} "
            "(turn numbers count from 1, 0 is the field's default; the wire carries them as int32)"
        )
    return n


def _keys(keys: Sequence[str] | None) -> list[str]:
    if keys is None:
        return []
    if isinstance(keys, (str, bytes)):
        raise TypeError("historyd: keys must be a sequence of keys, not one string")
    return list(keys)


def _turn(turn_type: type, method: str, state: history_pb2.TurnState, value_format: ValueFormat) -> Any:
    return turn_type(
        n=state.turn,
        question=state.question,
        checkpoint_id=state.checkpoint_id or None,
        state=_entries(method, state, value_format),
    )


def _entries(method: str, state: history_pb2.TurnState, value_format: ValueFormat) -> dict[str, dict[str, Any]]:
    """A turn's entries as dicts; a value whose JSON text does not parse fails the call."""
    try:
        return _convert.entries_to_python(state, raw=value_format is ValueFormat.RAW)
    except ValueError as exc:
        # The server's fault, not the caller's: nothing the call could change.
        raise HistorydError(method, grpc.StatusCode.INTERNAL, f"turn {state.turn}: {exc}") from exc

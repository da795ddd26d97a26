"""The answers of historyd's operator RPCs, Threads and Diff, as Python values.

:meth:`HistorydThreadHistory.threads <historyd_client.HistorydThreadHistory.threads>`
and :meth:`~historyd_client.HistorydThreadHistory.diff` return these; the
conversion from the wire lives here, next to the types.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, NamedTuple

import grpc

from historyd_client import _convert
from historyd_client._base import HistorydError
from historyd_client.gen.historyd.v1 import history_pb2


class ThreadInfo(NamedTuple):
    """One thread of a listing, without its turns."""

    thread_id: str
    #: How many checkpoints it has in the namespace.
    checkpoints: int
    #: When its oldest and newest checkpoints were written (UTC), when known.
    first_checkpoint_at: _dt.datetime | None
    last_checkpoint_at: _dt.datetime | None
    last_checkpoint_id: str
    #: How many turns it has had; ``None`` unless asked for with ``include_turns``.
    total_turns: int | None
    #: Why the thread could not be read in full (a value of its own that does not
    #: decode, say): the error a call reading it alone would raise. The fields it
    #: kept from being read are ``None``; the page's other threads are unaffected.
    error: HistorydError | None = None


class ThreadsPage(NamedTuple):
    """One page of :meth:`~historyd_client.HistorydThreadHistory.threads`."""

    threads: list[ThreadInfo]
    #: Continues the listing (pass it as ``page_token``); ``""`` when it is complete.
    #: A page may hold fewer threads than asked for, even none, and still have one.
    next_page_token: str


class DiffTurn(NamedTuple):
    """One end of a diff and what became of it: ``outcome`` is an
    :class:`~historyd_client.Outcome` value ("found", "no_such_turn",
    "no_longer_retained")."""

    turn: int
    outcome: str
    question: str = ""
    #: The checkpoint the turn ended on, and when (found only).
    checkpoint_id: str | None = None
    ended_at: _dt.datetime | None = None


class KeyChange(NamedTuple):
    """What became of one key: ``change`` is "added", "removed", "changed" or
    "unchanged"; ``before`` and ``after`` are its entries (dicts, as the host's
    tool_state holds them) or ``None`` where absent; ``patch`` is the RFC 6902
    JSON Patch from ``before``'s value to ``after``'s, as dicts."""

    key: str
    change: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    patch: list[dict[str, Any]]


class Diff(NamedTuple):
    """What changed between the ends of two turns; ``changes`` is empty unless
    both ends were found."""

    from_turn: DiffTurn
    to_turn: DiffTurn
    changes: list[KeyChange]
    total: int
    retained: tuple[int, ...]


_KINDS = {
    history_pb2.KEY_CHANGE_KIND_ADDED: "added",
    history_pb2.KEY_CHANGE_KIND_REMOVED: "removed",
    history_pb2.KEY_CHANGE_KIND_CHANGED: "changed",
    history_pb2.KEY_CHANGE_KIND_UNCHANGED: "unchanged",
}


_STATUS_CODES = {c.value[0]: c for c in grpc.StatusCode}


def _thread_error(t: history_pb2.ThreadInfo) -> HistorydError | None:
    if not t.HasField("error"):
        return None
    code = _STATUS_CODES.get(t.error.code, grpc.StatusCode.UNKNOWN)
    return HistorydError("Threads", code, t.error.message)


def threads_page(response: history_pb2.ThreadsResponse) -> ThreadsPage:
    return ThreadsPage(
        threads=[
            ThreadInfo(
                thread_id=t.thread_id,
                checkpoints=t.checkpoint_count,
                first_checkpoint_at=_convert.timestamp_to_datetime(t, "first_checkpoint_at"),
                last_checkpoint_at=_convert.timestamp_to_datetime(t, "last_checkpoint_at"),
                last_checkpoint_id=t.last_checkpoint_id,
                total_turns=t.total_turns if t.HasField("total_turns") else None,
                error=_thread_error(t),
            )
            for t in response.threads
        ],
        next_page_token=response.next_page_token,
    )


def _diff_turn(end: history_pb2.DiffTurn) -> DiffTurn:
    which = end.WhichOneof("result")
    if which == "found":
        f = end.found
        return DiffTurn(
            turn=f.number,
            outcome="found",
            question=f.question,
            checkpoint_id=f.checkpoint_id or None,
            ended_at=_convert.timestamp_to_datetime(f, "ended_at"),
        )
    if which == "no_such_turn":
        return DiffTurn(turn=end.no_such_turn.turn, outcome="no_such_turn")
    if which == "no_longer_retained":
        return DiffTurn(turn=end.no_longer_retained.turn, outcome="no_longer_retained", question=end.no_longer_retained.question)
    # Guessing would be the one wrong answer, as for Snapshot.
    raise ValueError("historyd: a turn of the diff carries none of found, no_such_turn or no_longer_retained")


def _op(op: history_pb2.JsonPatchOperation) -> dict[str, Any]:
    out: dict[str, Any] = {"op": op.op, "path": op.path}
    if op.op != "remove":
        if op.value_json:
            out["value"] = _convert.json_to_python(op.value_json)
        else:
            out["value"] = _convert.value_to_python(op.value)
    return out


def diff(response: history_pb2.DiffResponse, *, raw: bool = False) -> Diff:
    changes = []
    for ch in response.changes:
        if ch.kind not in _KINDS:
            raise ValueError(f"historyd: key {ch.key!r}: unknown change kind {ch.kind}")
        changes.append(
            KeyChange(
                key=ch.key,
                change=_KINDS[ch.kind],
                before=_convert.entry_to_python(ch.from_entry, raw=raw) if ch.HasField("from_entry") else None,
                after=_convert.entry_to_python(ch.to_entry, raw=raw) if ch.HasField("to_entry") else None,
                patch=[_op(op) for op in ch.patch],
            )
        )
    return Diff(
        from_turn=_diff_turn(response.from_turn),
        to_turn=_diff_turn(response.to_turn),
        changes=changes,
        total=response.total,
        retained=tuple(response.retained_turns),
    )

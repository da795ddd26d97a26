"""The model-facing ``inspect_state`` tool's answers, as the Go client gives them.

A port of the Go package ``client/inspect`` (its answers and wording are the
reference): an :class:`Inspector` reads a session-state key now, or as it
stood at the end of an earlier turn through a history that has
:meth:`~historyd_client.HistorydThreadHistory.turn`, and answers in text meant
for the model. A turn read answers in exactly one of three ways and never
with another turn's value in place of the one asked for:

- the value, followed by a line naming the turn it belongs to;
- ``no_such_turn``, with how many turns the conversation has had;
- ``turn_no_longer_retained``, with the turns still retained and a reason
  telling the model not to answer from the current value.

A turn whose question came in one message with others says which turns share
its state (one run answered them all), and when the service says the turn
numbers are estimated, a turn read says they may be too low and, for a found
turn, quotes its question; counted numbering is not mentioned (see Go's
package documentation for why).

Without a history the present can still be read (from ``present``), and a
turn read answers ``no_turn_history``. A value whose JSON is longer than
``max_value_chars`` comes back as an outline of its structure, with a hint to
narrow the read with ``pattern`` (a case-insensitive RE2 expression matched
against flattened ``path = value`` lines) or ``path`` (one sub-value, such as
``features[0].properties.name``). ``data:`` URIs are replaced by a short
marker naming their media type and size before anything else looks at a
value.

For the same state and arguments the text is the Go tool's byte for byte
(``client/testdata/cases.json`` holds the clients to it): JSON as Go's
``encoding/json`` writes it (keys sorted, ``<>&`` unescaped, U+2028 and
U+2029 escaped, numbers in Go's shortest form), sizes in characters, and
patterns read as RE2 reads them (see ``historyd_client._re2``).

Without a thread id (a host that did not pass the run's thread) but with a
history, a read answers ``no_thread_id``, saying the host named no thread,
and logs a warning for the host's author on the ``historyd_client.inspect``
logger.

:meth:`Inspector.read` is async and :meth:`Inspector.read_sync` is the same
for synchronous code: both drive one generator that works out the answer
and yields each read it needs, so the two cannot answer differently. Either
reads through either client.

This module needs nothing beyond the client; ``historyd_client.langchain``
wraps it as a LangChain tool.
"""

from __future__ import annotations

import asyncio
import inspect as _pyinspect
import json
import logging
import math
import unicodedata
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import grpc

from historyd_client._re2 import compile_re2
from historyd_client.client import HistorydError, HistorydThreadHistory, Numbering, Outcome, TurnResult

#: The name the tool is registered under.
TOOL_NAME = "inspect_state"

#: What the tool tells the model; Go's ``inspect.ToolDescription``.
TOOL_DESCRIPTION = """Read or search a session-state key, such as one named in a "[state updated: ...]" note.

With key alone, returns the key's value as JSON, or an outline of its structure when it is large; then narrow the read with pattern or path. key="*" lists every stored key, or searches all of them with pattern.

Pass turn=<n> to read the key as it stood at the end of turn n instead of now; turns are the user's questions, counted from 1. A key holds only its latest value, so a comparison with an earlier result made without turn compares the current value with itself. An earlier value exists when a read says several turns wrote the key, when a listing marks a key "written in N turns", or when a note says a write replaced what a key held at some turn: read it with turn.

Answer from what a turn read returns. If the turn is no longer retained, say that the earlier value is no longer available; do not use the current value in its place."""

#: Each parameter's description; Go's ``inspect.ParametersSchema``.
PARAMETER_DESCRIPTIONS = {
    "key": 'State key to read, or "*" for every stored key.',
    "pattern": (
        "Case-insensitive regular expression matched against the value's flattened \"path = value\" lines; "
        "only matching lines are returned. An invalid expression is matched as plain text."
    ),
    "path": (
        'Part of the value to return, e.g. "features[0].properties.name". '
        "The paths printed by pattern matches work here."
    ),
    "turn": (
        "Read the key as it stood at the end of this turn instead of now. "
        "Turns are the user's questions, counted from 1."
    ),
}

#: The key that lists every stored key, or with a pattern, searches all.
ALL_KEYS = "*"

#: Where an Inspector logs what the host's author must fix.
_LOG = logging.getLogger("historyd_client.inspect")

DEFAULT_MAX_VALUE_CHARS = 4000
DEFAULT_MAX_MATCHES = 50
DEFAULT_MAX_LINE_CHARS = 160

_HANDLE_PREFIX = "@state:"
_SHAPE_KEYS = 8
_SHAPE_STRING_CHARS = 40
_OUTLINE_KEYS = 50
_OUTLINE_FIRST_CHARS = 500
_MARKER_HEADER_CHARS = 40

_NO_HISTORY_REASON = (
    "This deployment keeps no per-turn history, so only the current value of a key can be read. "
    "Call again without turn."
)
_NO_THREAD_REASON = (
    "The host running this tool did not name this conversation's thread, so its saved state cannot be read, "
    "now or at any turn. Calling again will not change that: say that the state could not be read."
)
_PRUNED_REASON = (
    "That turn happened, but its state has since been pruned and cannot be read. "
    "Say that the value it held is no longer available; do not answer from the current value, "
    "which may be a different one."
)
_DECLARED_HINT = (
    "A tool declares this key but has not published it in this conversation yet. "
    "Run the tool that produces it, then read it again."
)
_PATH_SYNTAX = (
    "The path cannot be read from here on. Write object keys as name or [\"quoted name\"] "
    "and array items as [index], joined by dots."
)
_ESTIMATED_NUMBERS = (
    "Turn numbers here are estimated and may be too low: the oldest part of this conversation's saved history "
    "was pruned, and what is left does not show how many questions came before it."
)
_OUTLINE_HINT = (
    "Too large to return whole. Pass pattern=<regex> to search it, or path=<path> (e.g. a.b[0].c) to read one part."
)


class NoStateError(RuntimeError):
    """A read of the present with no way to see it: no ``present``, and no history and thread.

    A host misconfiguration, not something to tell the model.
    """

    def __init__(self) -> None:
        super().__init__(
            "inspect: no source of current session state: set present, or history with a thread id"
        )


class TurnHistory(Protocol):
    """What an :class:`Inspector` reads turns through: ``HistorydThreadHistory``,
    ``SyncHistorydThreadHistory``, or anything with a ``turn`` like theirs,
    plain or async.

    ``channel`` is passed only by an Inspector given one, so a history that
    serves one channel need not take it.
    """

    def turn(
        self, thread_id: str, turn: int, *, keys: Sequence[str] | None = None, channel: str | None = None
    ) -> TurnResult | Awaitable[TurnResult]: ...


Present = Callable[[str], "Mapping[str, Any] | Awaitable[Mapping[str, Any]]"]


class _TurnRead(NamedTuple):
    """One turn an answer needs read: ``history.turn(thread_id, turn, keys=..., channel=...)``."""

    thread_id: str
    turn: int
    keys: Sequence[str] | None
    channel: str | None


class _PresentRead(NamedTuple):
    """The host's present state an answer needs: ``present(thread_id)``."""

    thread_id: str


#: How an answer is worked out: a generator that yields each read it needs,
#: is sent what the read returned, and returns the answer. One generator
#: serves both :meth:`Inspector.read` and :meth:`Inspector.read_sync`; only
#: the loop driving it awaits or calls.
_Steps = Generator["_TurnRead | _PresentRead", Any, Any]


class Inspector:
    """Answers ``inspect_state`` reads, as Go's ``inspect.Inspector`` does.

    ``history`` answers turn reads, and reads of the present when ``present``
    is ``None`` (the present is then the state the newest turn ended on);
    ``None`` means the deployment keeps no history. It may be the async
    client or the sync one (or any :class:`TurnHistory`, plain or async):
    :meth:`read` (async) and :meth:`read_sync` give the same answers over
    either. ``present(thread_id)`` (plain or async) returns the live state,
    key → entry dict (``value``, ``turns_written``, ...), for hosts holding
    fresher state than the checkpointer has written. ``declared_keys`` are
    keys some tool declares: a present read of one not stored yet tells the
    model to run that tool. ``channel`` is the state channel read (``""``:
    the history's own), such as deepagents' ``"files"``: the host's choice,
    not the model's, so the tool has no argument for it. ``logger`` gets what
    the host's author must fix, such as a call without a thread id (default:
    the ``historyd_client.inspect`` logger).
    """

    def __init__(
        self,
        history: TurnHistory | None = None,
        *,
        present: Present | None = None,
        declared_keys: Sequence[str] = (),
        max_value_chars: int = DEFAULT_MAX_VALUE_CHARS,
        max_matches: int = DEFAULT_MAX_MATCHES,
        max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
        channel: str = "",
        logger: logging.Logger | None = None,
    ) -> None:
        if not isinstance(channel, str):
            raise TypeError("inspect: channel must be a string")
        if getattr(history, "value_format", None) == "raw":
            # Entries would come without their value, which every answer reads.
            raise ValueError(
                "inspect: the history's value_format is 'raw', which leaves values unparsed; "
                "inspect_state reads them: use 'json' (the default) or 'proto'"
            )
        self.history = history
        self.channel = channel
        self.present = present
        self.declared_keys = tuple(declared_keys)
        self.max_value_chars = max_value_chars if max_value_chars > 0 else DEFAULT_MAX_VALUE_CHARS
        self.max_matches = max_matches if max_matches > 0 else DEFAULT_MAX_MATCHES
        self.max_line_chars = max_line_chars if max_line_chars > 0 else DEFAULT_MAX_LINE_CHARS
        self.logger = logger if logger is not None else _LOG

    async def read(
        self, thread_id: str, key: str, *, turn: int | None = None, pattern: str = "", path: str = ""
    ) -> str:
        """The answer to one ``inspect_state`` call, for the model.

        Misses are answers; errors (the history unreachable, :class:`NoStateError`)
        are raised for the host to handle. A plain (sync) history is called in
        a worker thread, so the event loop is not blocked.
        """
        return await self._run(self._answer(thread_id, key, turn, pattern or "", path or ""))

    def read_sync(
        self, thread_id: str, key: str, *, turn: int | None = None, pattern: str = "", path: str = ""
    ) -> str:
        """:meth:`read` for synchronous code: the same answer, without an event loop.

        An async ``HistorydThreadHistory`` is read through its sync twin
        (:meth:`~historyd_client.HistorydThreadHistory.sync`); another async
        history, or an async ``present``, is run to completion with
        ``asyncio.run``, which needs a thread that is not running an event
        loop (a ``RuntimeError`` says so otherwise).
        """
        return self._run_sync(self._answer(thread_id, key, turn, pattern or "", path or ""))

    # -- the answer, worked out once for both kinds of call --------------------

    def _answer(self, thread_id: str, key: str, turn: int | None, pattern: str, path: str) -> _Steps:
        key = key[len(_HANDLE_PREFIX) :] if key.startswith(_HANDLE_PREFIX) else key
        if key == "":
            key = ALL_KEYS
        project = None if key == ALL_KEYS else [key]
        if turn is not None:
            return (yield from self._read_at(thread_id, key, turn, project, pattern, path))
        if self.present is None and self.history is not None and not thread_id:
            return self._no_thread(None)
        state, newest = yield from self._present_state(thread_id, project)
        if newest > 0 and project is not None and not _populated(state, key):
            # The projection came back without the key; the listing the miss
            # answers with needs every key of the same turn.
            full = yield self._turn_read(thread_id, newest, None)
            if full is None or full.outcome is not Outcome.FOUND:
                raise _changed(thread_id)
            state = full.state or {}
        return self._render(key, state, None, "", pattern, path)

    def _turn_read(self, thread_id: str, turn: int, keys: Sequence[str] | None) -> _TurnRead:
        return _TurnRead(thread_id, turn, keys, self.channel or None)

    def _no_thread(self, turn: int | None) -> str:
        """The answer to a read the host gave no thread id for, logged for the host's author."""
        self.logger.warning(
            "inspect_state: called without a thread id, so the history cannot be read; the host must pass the "
            "conversation's thread id to Inspector.read (LangChain: the run's configurable.thread_id)"
        )
        out: dict[str, Any] = {"no_thread_id": True}
        if turn is not None:
            out["turn"] = turn
        out["reason"] = _NO_THREAD_REASON
        return _dumps(out)

    def _turn_note(self, turn: int, snap: TurnResult) -> str:
        """What a turn read adds about the turn itself, as Go's ``Inspector.turnNote``, or ``""``."""
        parts = []
        if snap.outcome is Outcome.FOUND and snap.answered_with:
            together = sorted([*snap.answered_with, turn])
            parts.append(
                f"Turns {_and(together)} were asked in one message and answered by one run, "
                "so each of them shows the state that run ended on."
            )
        if snap.numbering is Numbering.ESTIMATED:
            parts.append(_ESTIMATED_NUMBERS)
            if snap.outcome is Outcome.FOUND and snap.question:
                quoted = _dumps(_excerpt(snap.question, -1, 0, self.max_line_chars))
                parts.append(f"Turn {turn} is the question {quoted}.")
        return " ".join(parts)

    def _read_at(
        self, thread_id: str, key: str, turn: int, project: list[str] | None, pattern: str, path: str
    ) -> _Steps:
        if self.history is None:
            return _dumps({"no_turn_history": turn, "reason": _NO_HISTORY_REASON})
        if not thread_id:
            return self._no_thread(turn)
        snap = yield self._turn_read(thread_id, turn, project)
        if snap is not None and snap.outcome is Outcome.FOUND and key != ALL_KEYS and not _populated(snap.state, key):
            snap = yield self._turn_read(thread_id, turn, None)
        if snap is None:
            raise HistorydError("inspect", grpc.StatusCode.INTERNAL, f"history returned no snapshot of turn {turn}")
        note = self._turn_note(turn, snap)
        if snap.outcome is Outcome.FOUND:
            return self._render(key, snap.state or {}, turn, note, pattern, path)
        if snap.outcome is Outcome.NO_SUCH_TURN:
            if snap.total == 0:
                reason = "Turns are the user's questions, counted from 1; this conversation has had none yet."
            else:
                reason = f"Turns are the user's questions, counted from 1; this conversation has had {snap.total} so far."
            return _dumps(_noted({"no_such_turn": turn, "turns_so_far": snap.total, "reason": reason}, note))
        out: dict[str, Any] = {"turn_no_longer_retained": turn}
        if snap.question:
            out["question"] = snap.question
        out["retained_turns"] = list(snap.retained)
        out["reason"] = _PRUNED_REASON
        return _dumps(_noted(out, note))

    def _present_state(self, thread_id: str, keys: list[str] | None) -> _Steps:
        if self.present is not None:
            state = yield _PresentRead(thread_id)
            return state or {}, 0
        if self.history is None or not thread_id:
            raise NoStateError()
        snap = yield from _current(thread_id, keys, self.channel or None)
        if snap.outcome is Outcome.FOUND:
            return snap.state or {}, snap.turn
        if snap.outcome is Outcome.NO_SUCH_TURN:
            return {}, 0  # no turns yet: nothing stored
        raise _changed(thread_id)

    # -- the two ways of driving it -------------------------------------------

    async def _run(self, steps: _Steps) -> Any:
        result = None
        try:
            while True:
                step = steps.send(result)
                if isinstance(step, _PresentRead):
                    result = await _awaited(self.present(step.thread_id))  # type: ignore[misc]
                    continue
                turn = self.history.turn  # type: ignore[union-attr]
                args, kwargs = _turn_call(step)
                if _pyinspect.iscoroutinefunction(turn):
                    result = await turn(*args, **kwargs)
                else:
                    # A sync history (SyncHistorydThreadHistory) blocks: not on the loop.
                    result = await _awaited(await asyncio.to_thread(turn, *args, **kwargs))
        except StopIteration as done:
            return done.value
        finally:
            steps.close()

    def _run_sync(self, steps: _Steps) -> Any:
        history = self.history
        if isinstance(history, HistorydThreadHistory):
            history = history.sync()
        result = None
        try:
            while True:
                step = steps.send(result)
                if isinstance(step, _PresentRead):
                    result = _completed(self.present(step.thread_id), "present")  # type: ignore[misc]
                    continue
                args, kwargs = _turn_call(step)
                result = _completed(history.turn(*args, **kwargs), "history.turn")  # type: ignore[union-attr]
        except StopIteration as done:
            return done.value
        finally:
            steps.close()

    def _render(
        self, key: str, stored: Mapping[str, Any], as_of: int | None, turn_note: str, pattern: str, path: str
    ) -> str:
        # The model reads values, not the bookkeeping around them; a key whose
        # value is null holds nothing to read.
        values: dict[str, Any] = {}
        for k in sorted(stored):
            v = _value(stored[k])
            if v is not None:
                values[k] = _prepare(v)

        if key == ALL_KEYS:
            if path:
                return _dumps(_noted(_listing(values, stored, as_of, error="path needs a specific key"), turn_note))
            if pattern:
                where = "all keys" if as_of is None else f"all keys at the end of turn {as_of}"

                def every() -> Iterator[tuple[str, Any]]:
                    for k, v in values.items():
                        yield from _walk(v, _path_key(k))

                out = self._grep(pattern, where, values, every())
                return out + f"\n[{turn_note}]" if turn_note else out
            return _dumps(_noted(_listing(values, stored, as_of), turn_note))

        if key not in values:
            miss: dict[str, Any] = {"unknown_or_empty_key": key}
            if as_of is not None:
                miss["at_turn"] = as_of
            miss["available_keys"] = _summaries(values, stored)
            if as_of is not None:
                # Absent then is not absent now: the key may have been written
                # later, and advice to produce it would have the model refill
                # a key that is already full.
                miss["reason"] = (
                    f"Nothing was stored under this key at the end of turn {as_of}. "
                    "A later turn may have written it; read it without turn for its current value."
                )
            elif key in self.declared_keys:
                miss["hint"] = _DECLARED_HINT
            return _dumps(_noted(miss, turn_note))

        target = values[key]
        sub = ""
        if path:
            sub = _strip_key(path, key)
            if sub:
                segs, bad = _parse_path(sub)
                if bad:
                    return _dumps(_noted(_path_miss(path, key, as_of, bad, reason=_PATH_SYNTAX), turn_note))
                found, failed, ok = _resolve(target, segs)
                if not ok:
                    return _dumps(_noted(_describe_miss(path, key, as_of, failed, found), turn_note))
                target = found

        where = _join(key, sub) if sub else key
        note = ""
        written = _written_in_turns(stored[key])
        if as_of is not None:
            # Not the "newest" note: the value above is not the newest, and the
            # count an old entry carries is the count as of that turn.
            note = f"\n[This is {where} as it stood at the end of turn {as_of}."
            if turn_note:
                note += " " + turn_note
            note += "]"
        elif written > 1:
            note = (
                f"\n[{written} turns of this conversation wrote this key; the value above is the newest, "
                "and an earlier turn may have held a different one. "
                "Pass turn=<n> (the user's questions, counted from 1) to read the value a turn ended with.]"
            )

        if pattern:
            return self._grep(pattern, where, target, _walk(target, sub)) + note
        text = _dumps(target)
        if len(text) > self.max_value_chars:
            return _dumps(_outline(where, target, len(text))) + note
        return text + note

    def _grep(self, pattern: str, where: str, v: Any, leaves: Iterator[tuple[str, Any]]) -> str:
        """Flattened leaves matching ``pattern``: a header and one ``path = value`` line per match."""
        rx, literal = compile_re2(pattern)
        note = " (not a valid regular expression, so matched as plain text)" if literal else ""
        lines: list[str] = []
        scanned = matches = 0
        for p, value in leaves:
            scanned += 1
            rendered = _dumps(value)
            line = p + " = " + rendered
            m = rx.search(line)
            if m is None:
                continue
            matches += 1
            if len(lines) >= self.max_matches:
                continue
            off = len(p) + 3
            start = m.start() - off
            if start < 0:
                start = -1  # the match is in the path; show the value from its start
            lines.append(p + " = " + _excerpt(rendered, start, m.end() - off, self.max_line_chars))
        if matches == 0:
            return f"No match for {_go_quote(pattern)} in {where} ({scanned} values searched){note}. Its structure: {_structure(v)}"
        noun = "match" if matches == 1 else "matches"
        header = f"{matches} {noun} for {_go_quote(pattern)} in {where}"
        if matches > len(lines):
            header += f" (first {len(lines)} shown)"
        return header + note + ":\n" + "\n".join(lines)


async def current(
    history: TurnHistory, thread_id: str, *, keys: Sequence[str] | None = None, channel: str | None = None
) -> TurnResult:
    """The thread's current state: the turn it ended on last, as Go's ``client.Current``.

    Two reads, the first of which reads no state: turn 0, whose
    ``no_such_turn`` answer carries the total, then the total. A thread with
    no turns answers ``NO_SUCH_TURN`` with turn and total 0. ``channel`` is
    passed on to ``history.turn`` when given.
    """
    return await Inspector(history)._run(_current(thread_id, keys, channel))


def _current(thread_id: str, keys: Sequence[str] | None, channel: str | None) -> _Steps:
    probe = yield _TurnRead(thread_id, 0, keys, channel)
    if probe.total == 0:
        return probe
    return (yield _TurnRead(thread_id, probe.total, keys, channel))


def _turn_call(step: _TurnRead) -> tuple[tuple[str, int], dict[str, Any]]:
    """``history.turn``'s arguments for one read; ``channel`` only when there is one to pass."""
    kwargs: dict[str, Any] = {"keys": step.keys}
    if step.channel is not None:
        kwargs["channel"] = step.channel
    # A turn no request can carry (negative, past 2**31-1) is asked as turn
    # 0, which no thread has: the model's miscount is answered as one, with
    # the total, not refused.
    turn = step.turn if 0 <= step.turn <= 2**31 - 1 else 0
    return (step.thread_id, turn), kwargs


async def _awaited(value: Any) -> Any:
    return await value if _pyinspect.isawaitable(value) else value


def _completed(value: Any, what: str) -> Any:
    """``value``, or what it comes to when it is awaitable, for a synchronous read."""
    if not _pyinspect.isawaitable(value):
        return value
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(value))
    if _pyinspect.iscoroutine(value):
        value.close()
    raise RuntimeError(
        f"inspect: {what} is async, and a synchronous read cannot run it in a thread that runs an event loop; "
        "await Inspector.read there (the tool's ainvoke), or give a synchronous one"
    )


def _and(ns: list[int]) -> str:
    """Numbers as prose: ``2 and 3``, ``2, 3 and 4``."""
    words = [str(n) for n in ns]
    if len(words) < 2:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def _noted(answer: dict[str, Any], note: str) -> dict[str, Any]:
    """``answer`` with its ``note`` field last, as Go's answers end with it, when there is one."""
    if note:
        answer["note"] = note
    return answer


def _changed(thread_id: str) -> HistorydError:
    return HistorydError(
        "inspect", grpc.StatusCode.ABORTED, f"inspect: thread {_go_quote(thread_id)} changed while its current state was read"
    )


def _value(entry: Any) -> Any:
    return entry.get("value") if isinstance(entry, Mapping) else entry


def _populated(state: Mapping[str, Any] | None, key: str) -> bool:
    return state is not None and key in state and _value(state[key]) is not None


def _written_in_turns(entry: Any) -> int:
    n = entry.get("turns_written") if isinstance(entry, Mapping) else None
    return max(n, 1) if isinstance(n, int) and not isinstance(n, bool) else 1


def _listing(values: dict[str, Any], stored: Mapping[str, Any], as_of: int | None, *, error: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if error:
        out["error"] = error
    if as_of is not None:
        out["at_turn"] = as_of
    out["available_keys"] = _summaries(values, stored)
    return out


def _summaries(values: dict[str, Any], stored: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for k, v in values.items():
        s = _shape(v)
        n = _written_in_turns(stored[k])
        if n > 1:
            s += f"; written in {n} turns"
        out[k] = s
    return out


def _path_miss(path: str, key: str, as_of: int | None, failed_at: str, **rest: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"path_not_found": path, "key": key}
    if as_of is not None:
        out["at_turn"] = as_of
    out["failed_at"] = failed_at
    for name in ("found", "available_keys", "reason"):
        if rest.get(name):
            out[name] = rest[name]
    return out


def _describe_miss(path: str, key: str, as_of: int | None, failed: str, at: Any) -> dict[str, Any]:
    """Where a path stopped and what could follow there."""
    available = None
    reason = ""
    if isinstance(at, dict):
        keys = list(at)
        if not keys:
            reason = "The object is empty."
        if len(keys) > _OUTLINE_KEYS:
            keys = keys[:_OUTLINE_KEYS] + [f"… {len(keys) - _OUTLINE_KEYS} more"]
        available = keys
    elif isinstance(at, list):
        reason = "The array is empty." if not at else f"Array indexes run from 0 to {len(at) - 1}."
    else:
        reason = f"A {_json_type(at)} has no parts to read."
    return _path_miss(path, key, as_of, failed, found=_shape(at), available_keys=available, reason=reason)


# -- values -------------------------------------------------------------------


def _prepare(v: Any) -> Any:
    """``v`` as plain JSON data, maps in sorted key order, every data: URI a marker."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        return _data_marker(v) if v.startswith("data:") else v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if isinstance(v, Mapping):
        return {str(k): _prepare(v[k]) for k in sorted(v, key=str)}
    if isinstance(v, (list, tuple)):
        return [_prepare(x) for x in v]
    # Some other value from a host's present function: as JSON would show it.
    try:
        return _prepare(json.loads(json.dumps(v, default=str)))
    except (TypeError, ValueError):
        return str(v)


def _data_marker(uri: str) -> str:
    """The stand-in for a data: URI: its media type and payload size."""
    header, comma, payload = uri[len("data:") :].partition(",")
    if not comma:
        header, payload = "", uri[len("data:") :]
    size = len(payload.encode("utf-8", "surrogatepass"))
    if header.lower().endswith(";base64"):
        size = len(payload.rstrip("=").encode("utf-8", "surrogatepass")) * 3 // 4
    if len(header) > _MARKER_HEADER_CHARS:
        header = header[:_MARKER_HEADER_CHARS] + "…"
    return f"<data:{header}, {size} bytes>"


def _is_marker(s: str) -> bool:
    return s.startswith("<data:") and s.endswith(" bytes>") and len(s) <= _MARKER_HEADER_CHARS + 40


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _shape(v: Any) -> str:
    """``v``'s structure in one line."""
    if isinstance(v, dict):
        if not v:
            return "object(empty)"
        keys = list(v)
        shown = ", ".join(keys[:_SHAPE_KEYS])
        if len(keys) > _SHAPE_KEYS:
            shown += ", …"
        return f"object({len(keys)} keys: {shown})"
    if isinstance(v, list):
        return "array[0]" if not v else f"array[{len(v)}] of {_shape(v[0])}"
    if isinstance(v, str) and len(v) > _SHAPE_STRING_CHARS and not _is_marker(v):
        return f"string({len(v)} chars)"
    return _dumps(v)


def _structure(v: Any) -> str:
    """The top level of ``v``, for a search that matched nothing."""
    if not isinstance(v, dict) or not v:
        return _shape(v)
    return ", ".join(f"{k}: {_shape(x)}" for k, x in v.items())


def _outline(where: str, v: Any, size: int) -> dict[str, Any]:
    out: dict[str, Any] = {"key": where, "size_chars": size, "type": _json_type(v)}
    if isinstance(v, list):
        a: dict[str, Any] = {"length": len(v), "items": "empty"}
        if v:
            a["items"] = _shape(v[0])
            first = v[0]
            if len(_dumps(first)) > _OUTLINE_FIRST_CHARS:
                first = _shape(first)
            if first is not None:  # Go's omitempty leaves a null first item out
                a["first"] = first
        out["outline"] = a
    elif isinstance(v, dict):
        keys = list(v)
        fields = {k: _shape(v[k]) for k in keys[:_OUTLINE_KEYS]}
        if len(keys) > _OUTLINE_KEYS:
            fields["…"] = f"{len(keys) - _OUTLINE_KEYS} more keys not shown; pattern=<regex> finds them"
            fields = dict(sorted(fields.items()))  # Go writes a map's keys sorted, "…" among them
        out["outline"] = fields
    else:
        out["outline"] = _shape(v)
    out["hint"] = _OUTLINE_HINT
    return out


# -- paths --------------------------------------------------------------------


def _is_path_char(c: str) -> bool:
    if c in "_-":
        return True
    cat = unicodedata.category(c)
    return cat[0] == "L" or cat in ("Nd", "Mn")


def _path_key(k: str) -> str:
    """One object key as a path segment: bare when a word, else bracketed and quoted."""
    if k and all(_is_path_char(c) for c in k):
        return k
    return "[" + _dumps(k) + "]"


def _join(prefix: str, segment: str) -> str:
    if prefix == "":
        return segment
    if segment.startswith("["):
        return prefix + segment
    return prefix + "." + segment


def _walk(v: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """Leaves of ``v`` depth first, objects in key order; empty containers are leaves."""
    if isinstance(v, dict) and v:
        for k, x in v.items():
            yield from _walk(x, _join(prefix, _path_key(k)))
        return
    if isinstance(v, list) and v:
        for i, x in enumerate(v):
            yield from _walk(x, f"{prefix}[{i}]")
        return
    yield (prefix or ".", v)


def _parse_path(path: str) -> tuple[list[tuple[str, bool]], str]:
    """``path`` as (text, is_index) segments, and the unparsable rest if malformed."""
    segs: list[tuple[str, bool]] = []
    i = 0
    while i < len(path):
        c = path[i]
        if c == ".":
            i += 1
        elif c == "[":
            rest = path[i + 1 :]
            j = rest.find("]")
            if j > 0 and _is_digits(rest[:j]):
                segs.append((rest[:j], True))
                i += j + 2
                continue
            if rest.startswith('"'):
                parsed = _decode_json_string(rest)
                if parsed is not None:
                    text, used = parsed
                    if rest[used:].startswith("]"):
                        segs.append((text, False))
                        i += 1 + used + 1
                        continue
            return segs, path[i:]
        elif c == "]":
            return segs, path[i:]
        else:
            j = i
            while j < len(path) and path[j] not in ".[]":
                j += 1
            segs.append((path[i:j], False))
            i = j
    return segs, ""


def _decode_json_string(text: str) -> tuple[str, int] | None:
    """The JSON string at the start of ``text`` and its length, as Go's decoder reads one."""
    try:
        value, end = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return None
    return (value, end) if isinstance(value, str) else None


def _is_digits(s: str) -> bool:
    return s != "" and all("0" <= c <= "9" for c in s)


def _resolve(v: Any, segs: list[tuple[str, bool]]) -> tuple[Any, str, bool]:
    cur = v
    for text, _ in segs:
        if isinstance(cur, list):
            if _is_digits(text) and int(text) < len(cur):
                cur = cur[int(text)]
                continue
        elif isinstance(cur, dict):
            if text in cur:
                cur = cur[text]
                continue
        return cur, text, False
    return cur, "", True


def _strip_key(path: str, key: str) -> str:
    path = path.lstrip(".")
    if path == key:
        return ""
    if path.startswith(key + "."):
        return path[len(key) + 1 :]
    if path.startswith(key + "["):
        return path[len(key) :]
    return path


# -- text ---------------------------------------------------------------------


def _excerpt(text: str, start: int, end: int, limit: int) -> str:
    """``text`` capped at ``limit`` characters, centred on a match when ``start`` >= 0."""
    n = len(text)
    if n <= limit:
        return text
    if start < 0:
        return text[:limit] + f"…(+{n - limit} chars)"
    frm = start - max(0, limit - (end - start)) // 2
    frm = max(0, min(frm, n - limit))
    to = frm + limit
    return ("…" if frm > 0 else "") + text[frm:to] + ("…" if to < n else "")


def _go_quote(s: str) -> str:
    """``s`` as Go's ``%q`` writes it."""
    out = ['"']
    for c in s:
        cp = ord(c)
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c in _GO_ESCAPES:
            out.append(_GO_ESCAPES[c])
        elif 0xD800 <= cp <= 0xDFFF:
            out.append("\\ufffd")
        elif c.isprintable() or c == " ":
            out.append(c)
        elif cp < 0x80:
            out.append(f"\\x{cp:02x}")
        elif cp <= 0xFFFF:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(f"\\U{cp:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _dumps(v: Any) -> str:
    """``v`` as compact JSON, as Go's ``encoding/json`` writes it with HTML escaping off."""
    parts: list[str] = []
    _encode(v, parts)
    return "".join(parts)


def _encode(v: Any, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(_json_string(v))
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append(_go_float(v))
    elif isinstance(v, dict):
        out.append("{")
        for i, (k, x) in enumerate(v.items()):
            if i:
                out.append(",")
            out.append(_json_string(k))
            out.append(":")
            _encode(x, out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(",")
            _encode(x, out)
        out.append("]")
    else:
        out.append(_json_string(str(v)))


def _json_string(s: str) -> str:
    # json.dumps escapes what Go escapes, but for U+2028 and U+2029, which Go
    # escapes so the text is also valid JavaScript.
    return json.dumps(s, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _go_float(f: float) -> str:
    """A float as Go's ``encoding/json`` writes a float64: shortest digits, exponent below 1e-6 or from 1e21."""
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    # repr gives the shortest digits that read back as f; only their layout
    # differs from Go's. The value is int(digits) × 10^exp.
    text, _, exp_text = repr(abs(f)).partition("e")
    exp = int(exp_text) if exp_text else 0
    whole, _, frac = text.partition(".")
    digits = (whole + frac).lstrip("0")
    exp -= len(frac)
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped
    point = len(digits) + exp  # where the decimal point falls, counted in digits
    sign = "-" if f < 0 else ""
    if abs(f) < 1e-6 or abs(f) >= 1e21:
        e = point - 1
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if e < 0 else '+'}{abs(e)}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"

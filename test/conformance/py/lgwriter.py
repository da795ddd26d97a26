"""What the conformance writers share: savers, the tool_state convention,
the scripted chat model, historyd's JSON mapping and the truth about a thread.

write_thread.py (expected.json) and write_scenario.py (truth.json) import
this module; nothing here is written twice. The truth.json shape is defined
in ../README.md ("The truth a scenario writer records").
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime as dt
import decimal
import enum
import json
import math
import re
import sqlite3
import sys
import traceback
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Optional

import psycopg
from psycopg.rows import dict_row

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from pydantic_core import to_jsonable_python

STATE = "tool_state"
MODEL = "model"
HANDLE = "@state:"

# ---------------------------------------------------------------------------
# The session-state reducer (tool_state convention).


def merge_tool_state(
    old: Optional[dict[str, Any]], new: Optional[dict[str, Any]]
) -> dict[str, Any]:
    """Merge key by key; a later write of a key replaces the earlier entry.

    Entries without a seq get the next one after the highest held. An entry
    written in a later turn than the one it replaces counts one more turn
    in turns_written; rewriting it within the same turn counts nothing; a
    key's first entry carries none (as mcp-toolsets-runtime's
    merge_tool_state does). Entries that are not maps are stored as they are.
    """
    out = dict(old or {})
    if not new:
        return out
    seqs = [e.get("seq", 0) for e in out.values() if isinstance(e, dict)]
    following = max(seqs, default=0) + 1
    for key, entry in new.items():
        if not isinstance(entry, dict):
            out[key] = entry
            continue
        entry = dict(entry)
        if entry.get("seq") is None:
            entry["seq"] = following
            following += 1
        before = out.get(key)
        if isinstance(before, dict) and entry.get("turns_written") is None:
            held = before.get("turns_written", 1)
            b, a = before.get("turn"), entry.get("turn")
            later = b is None or a is None or a > b
            entry["turns_written"] = held + 1 if later else held
        out[key] = entry
    return out


def batch(binary: Callable[[Any, Any], Any]) -> Callable[[Any, Sequence[Any]], Any]:
    """A DeltaChannel batch reducer from a binary one: a left fold.

    A fold is batching-invariant by construction, as DeltaChannel requires:
    reducer(reducer(s, xs), ys) == reducer(s, xs + ys).
    """

    def reduce_batch(state: Any, writes: Sequence[Any]) -> Any:
        for w in writes:
            state = binary(state, w)
        return state

    reduce_batch.__name__ = f"batch_{getattr(binary, '__name__', 'reducer')}"
    reduce_batch.__qualname__ = reduce_batch.__name__
    return reduce_batch


def humans(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if getattr(m, "type", None) == "human"]


def publish(
    state: dict,
    call_id: str,
    tool_name: str,
    values: dict[str, Any],
    inputs: dict[str, str],
    extra: Optional[dict[str, Any]] = None,
    turn: Optional[int] = None,
) -> Command:
    """A tool's answer: entries for tool_state and a short ToolMessage, as a
    capture middleware would write them. `turn` is the number of human
    messages unless the caller knows better (threads whose messages are
    removed count questions otherwise)."""
    if turn is None:
        turn = len(humans(state.get("messages", [])))
    update = {}
    for key, value in values.items():
        entry = {"value": value, "tool": tool_name, "turn": turn}
        if inputs:
            entry["inputs"] = dict(inputs)
        if extra:
            entry.update(extra)
        update[key] = entry
    keys = ", ".join(sorted(values))
    return Command(
        update={
            STATE: update,
            "messages": [
                ToolMessage(
                    content=f"[state updated: {keys}]",
                    tool_call_id=call_id,
                    name=tool_name,
                    id=f"tool-{call_id}",
                )
            ],
        }
    )


# ---------------------------------------------------------------------------
# The scripted chat model.

# Ids of the questions a scenario asks: q-<n>, n counting from 1.
QUESTION_ID = re.compile(r"^q-(\d+)$")
ANSWER_ID = re.compile(r"^ai-(\d+)-(\d+)$")


class ScriptedChatModel(BaseChatModel):
    """A chat model that plays a script back, chosen by where the thread is.

    `turns[n-1]` is question n's script: per model step, the tool calls the
    model makes (an empty list ends the turn with a plain answer). With
    by="count" (write_thread.py) question n is the number of human messages;
    with by="id" it is the highest n among the human messages with id q-<n>
    and the model's own answers (ai-<n>-<step>), so removed or summarized
    messages do not move it. The step is the number of AI messages after
    question n's (by="count"), or one past the latest answer to it (by="id"). Nothing depends on call order, so a
    re-run step answers the same. bind_tools returns the model itself, as
    agents built by create_agent and create_deep_agent bind their tools.
    """

    turns: list = []
    by: str = "count"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
        return self

    def locate(self, messages: list[BaseMessage]) -> tuple[int, int]:
        if self.by == "count":
            turn = len(humans(messages))
            last = max(i for i, m in enumerate(messages) if m.type == "human")
            return turn, sum(1 for m in messages[last:] if m.type == "ai")
        # By id: question n's message is q-<n>, its answers ai-<n>-<step>.
        # A summarized thread may have lost the question's message but kept
        # the model's last answer to it, and the reverse.
        at = (0, 0)
        for m in messages:
            mid = m.id or ""
            if m.type == "human" and (q := QUESTION_ID.match(mid)):
                at = max(at, (int(q.group(1)), 0))
            elif m.type == "ai" and (a := ANSWER_ID.match(mid)):
                at = max(at, (int(a.group(1)), int(a.group(2)) + 1))
        if at[0] == 0:
            raise ValueError("no question (q-<n>) nor answer (ai-<n>-<step>) among the messages")
        return at

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: Optional[list[str]] = None,
        run_manager: Optional[CallbackManagerForLLMRun] = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn, step = self.locate(messages)
        steps = self.turns[turn - 1][1]
        calls = steps[step] if step < len(steps) else []
        mid = f"ai-{turn}-{step}"
        if calls:
            msg = AIMessage(
                content="",
                id=mid,
                tool_calls=[
                    {"name": n, "args": a, "id": f"call-{turn}-{step}-{i}", "type": "tool_call"}
                    for i, (n, a) in enumerate(calls)
                ],
            )
        else:
            msg = AIMessage(content=f"Answer to turn {turn}.", id=mid)
        return ChatResult(generations=[ChatGeneration(message=msg)])


# ---------------------------------------------------------------------------
# historyd's JSON mapping (history.proto, StateEntry).

LIMIT = 2**53


def key_text(k: Any) -> str:
    if isinstance(k, str):
        return k
    return json.dumps(wire(k), separators=(",", ":"))


def wire(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if -LIMIT <= v <= LIMIT else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, (dt.datetime, dt.date, dt.time, dt.timedelta, uuid.UUID)):
        # As a Python host's own JSON tools render them, which is what
        # historyd serves.
        return to_jsonable_python(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, enum.Enum):
        return wire(v.value)
    if isinstance(v, (list, tuple)):
        return [wire(x) for x in v]
    if isinstance(v, dict):
        return {key_text(k): wire(x) for k, x in v.items()}
    raise TypeError(f"no JSON mapping for {type(v).__name__} in the test data")


def entry_json(entry: Any) -> dict[str, Any]:
    """A tool_state entry as historyd's StateEntry, in its JSON dict form."""
    if isinstance(entry, dict):
        return wire(entry)
    return {"value": wire(entry)}


def state_json(state: Optional[dict]) -> dict[str, Any]:
    return {k: entry_json(e) for k, e in (state or {}).items()}


def channel_json(channel: str, value: Any) -> Any:
    """A served channel's value: tool_state as StateEntry maps, anything else
    (deepagents' files and todos) in the plain mapping."""
    if channel == STATE:
        return state_json(value)
    return wire(value)


# ---------------------------------------------------------------------------
# Messages: which human messages are not questions.


def message_text(m: Any) -> str:
    return str(getattr(m, "text", ""))


def synthetic_marker(m: Any) -> Optional[str]:
    """Why a human message is not a question somebody asked, or None.

    The markers LangChain and deepagents set on the human messages they add
    (README.md, "Synthetic messages"): a string additional_kwargs.lc_source
    (langchain's SummarizationMiddleware and deepagents' own: "summarization";
    deepagents: "pinned_skill", "rubric_grader"; anything marked with
    langchain_core's add_notification_metadata), a dict
    additional_kwargs.deepagents_notification (async subagent task
    notifications), and additional_kwargs.read_file_media_result true
    (deepagents' read_file handing a file's media to the model).
    """
    if getattr(m, "type", None) != "human":
        return None
    kw = getattr(m, "additional_kwargs", None) or {}
    if isinstance(kw.get("lc_source"), str):
        return "lc_source=" + kw["lc_source"]
    if isinstance(kw.get("deepagents_notification"), dict):
        return "deepagents_notification"
    if kw.get("read_file_media_result") is True:
        return "read_file_media_result"
    return None


def messages_json(messages: Optional[list]) -> list[dict[str, Any]]:
    out = []
    for m in messages or []:
        marker = synthetic_marker(m)
        item = {
            "id": getattr(m, "id", None),
            "type": getattr(m, "type", None),
            "synthetic": marker is not None,
            "text": message_text(m),
        }
        if marker:
            item["marker"] = marker
        out.append(item)
    return out


# ---------------------------------------------------------------------------
# Savers.


def connect_kwargs(schema: Optional[str]) -> dict[str, Any]:
    kw: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    if schema:
        kw["options"] = f"-c search_path={schema}"
    return kw


@contextlib.contextmanager
def open_saver(args: argparse.Namespace) -> Any:
    """The saver the graph is compiled with, its tables set up."""
    if args.sqlite:
        # As SqliteSaver.from_conn_string opens it; setup() switches the
        # file to WAL.
        conn = sqlite3.connect(args.sqlite, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            yield saver
        finally:
            conn.close()
        return
    if args.schema:
        with psycopg.connect(args.dsn, autocommit=True) as c:
            c.execute(f'CREATE SCHEMA IF NOT EXISTS "{args.schema}"')
    with psycopg.connect(args.dsn, **connect_kwargs(args.schema)) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        yield saver


def versions(sqlite: bool, extra: Sequence[str] = ()) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    names = ["langgraph", "langgraph-checkpoint"]
    if sqlite:
        names += ["langgraph-checkpoint-sqlite", "aiosqlite"]
        out["sqlite"] = sqlite3.sqlite_version
    else:
        names += ["langgraph-checkpoint-postgres", "psycopg"]
    names += ["langchain-core", *extra, "mcp-toolsets-runtime"]
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def add_store_args(ap: argparse.ArgumentParser) -> None:
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--dsn", help="PostgreSQL: PostgresSaver")
    where.add_argument("--sqlite", metavar="PATH", help="an SQLite file: SqliteSaver")
    ap.add_argument("--schema", default=None, help="PostgreSQL schema for the saver's tables")


# ---------------------------------------------------------------------------
# What is physically stored at a checkpoint, read from the saver's tables.


class RawReader:
    """Reads a thread's root checkpoints as the saver stored them.

    stored(checkpoint_id) says, per channel of interest, how its value is
    held at that checkpoint: "snapshot" (a _DeltaSnapshot), "value" (a plain
    value) or "inline" (PostgreSQL: a primitive kept in the checkpoint's
    JSONB). In SQLite that is what the checkpoint's own serialized
    channel_values hold; in PostgreSQL, the blob of the channel's version at
    the checkpoint, which every checkpoint at that version shares, as
    PostgresSaver's own reads do. A channel with nothing stored is left out. writes(checkpoint_id) counts the writes per
    channel attached to the checkpoint.
    """

    def __init__(self, saver: Any, thread: str, channels: Sequence[str]) -> None:
        self.saver = saver
        self.thread = thread
        self.channels = list(channels)
        self.sqlite = isinstance(saver, SqliteSaver)

    def stored(self, checkpoint_id: str) -> dict[str, str]:
        if self.sqlite:
            row = self.saver.conn.execute(
                "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
                (self.thread, checkpoint_id),
            ).fetchone()
            if row is None:
                return {}
            cp = self.saver.serde.loads_typed((row[0], row[1]))
            values = cp.get("channel_values") or {}
            return {
                ch: "snapshot" if isinstance(values[ch], _DeltaSnapshot) else "value"
                for ch in self.channels
                if ch in values
            }
        with self.saver._cursor() as cur:
            cur.execute(
                "SELECT checkpoint -> 'channel_values' AS inline, checkpoint -> 'channel_versions' AS versions "
                "FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s",
                (self.thread, checkpoint_id),
            )
            row = cur.fetchone()
            if row is None:
                return {}
            inline, vers = row["inline"] or {}, row["versions"] or {}
            out: dict[str, str] = {}
            for ch in self.channels:
                if ch not in vers:
                    continue
                cur.execute(
                    "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = '' "
                    "AND channel = %s AND version = %s",
                    (self.thread, ch, str(vers[ch])),
                )
                blob = cur.fetchone()
                if blob is not None and blob["type"] != "empty":
                    # The blob of this checkpoint's version, which an earlier
                    # checkpoint may have written: PostgresSaver shares one
                    # blob among all checkpoints at that version.
                    value = self.saver.serde.loads_typed((blob["type"], blob["blob"]))
                    out[ch] = "snapshot" if isinstance(value, _DeltaSnapshot) else "value"
                elif ch in inline:
                    out[ch] = "inline"
            return out

    def markers(self, checkpoint_id: str) -> list[str]:
        """PostgreSQL: the channels whose channel_values hold the inline
        `true` PostgresSaver leaves where it stored a _DeltaSnapshot."""
        if self.sqlite:
            return []
        with self.saver._cursor() as cur:
            cur.execute(
                "SELECT checkpoint -> 'channel_values' AS inline FROM checkpoints "
                "WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s",
                (self.thread, checkpoint_id),
            )
            row = cur.fetchone()
        inline = (row or {}).get("inline") or {}
        return [ch for ch in self.channels if inline.get(ch) is True]

    def writes(self, checkpoint_id: str) -> dict[str, int]:
        if self.sqlite:
            rows = self.saver.conn.execute(
                "SELECT channel, count(*) FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ? GROUP BY channel",
                (self.thread, checkpoint_id),
            ).fetchall()
            return {ch: n for ch, n in rows if ch in self.channels}
        with self.saver._cursor() as cur:
            cur.execute(
                "SELECT channel, count(*) AS n FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = '' "
                "AND checkpoint_id = %s GROUP BY channel",
                (self.thread, checkpoint_id),
            )
            return {r["channel"]: r["n"] for r in cur.fetchall() if r["channel"] in self.channels}


# ---------------------------------------------------------------------------
# The truth about a thread.


def snapshot_values(snap: Any, served: Sequence[str]) -> dict[str, Any]:
    values = snap.values or {}
    out = {ch: channel_json(ch, values.get(ch)) for ch in served}
    out["messages"] = messages_json(values.get("messages"))
    return out


class Recorder:
    """Runs a scenario's inputs against a compiled graph and records the
    truth: what each run added (runs), the turns as the host saw them, and
    every root checkpoint as LangGraph reconstructs it.

    Question numbers count the questions in the order they were asked. The
    turns are those of the lineage, the questions whose runs the thread's
    head descends from: a run started from an older checkpoint (`start`:
    time travel, a replay, update_state on it) rewinds the lineage to the
    turn that checkpoint belongs to, and the branch it leaves is recorded as
    a fork with its own turns as they were. A run works on the last
    question of the lineage before it (an update_state or a replay too),
    or on the questions it asks.

    With runs=True (a graph without messages) every run that brings input
    is a question: its text is the input as JSON.
    """

    def __init__(self, graph: Any, saver: Any, thread: str, served: Sequence[str]) -> None:
        self.graph = graph
        self.saver = saver
        self.thread = thread
        self.config = {"configurable": {"thread_id": thread}}
        self.served = list(served)
        self.runs: list[dict[str, Any]] = []
        self.questions: list[str] = []
        self.inputs: dict[int, Any] = {}  # question -> the run's input, runs numbering
        self.turn_runs: dict[int, int] = {}  # question -> index of the last run on it
        self.asked_with: dict[int, list[int]] = {}
        self.lineage: list[int] = []  # the questions on the lineage, in order
        self.cp_question: dict[str, int] = {}  # checkpoint -> the question it was written for (0: none yet)
        self.head: Optional[str] = None
        self.forks: list[dict[str, Any]] = []

    def history_ids(self) -> set[str]:
        # The saver's own listing: the same checkpoints as get_state_history,
        # without rebuilding every DeltaChannel value on the way.
        return {
            t.config["configurable"]["checkpoint_id"]
            for t in self.saver.list(self.config)
            if t.config["configurable"].get("checkpoint_ns", "") == ""
        }

    def at(self, checkpoint_id: str) -> dict[str, Any]:
        """The config that reads (or runs from) one root checkpoint."""
        return {"configurable": {"thread_id": self.thread, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}

    def state_after(self, config: Optional[dict] = None) -> dict[str, Any]:
        snap = self.graph.get_state(config or self.config)
        return {"checkpoint_id": snap.config["configurable"]["checkpoint_id"], **snapshot_values(snap, self.served)}

    def run(
        self,
        kind: str,
        call: Callable[[], Any],
        questions: Sequence[str] = (),
        start: Optional[str] = None,
        inputs: Sequence[Any] = (),
        fails: bool = False,
    ) -> Any:
        """Record one invoke/stream/update_state call.

        kind: question, questions, resume, replay, update_state or fork.
        start: the checkpoint the call starts from, when not the head (a
        fork). fails: the call is meant to raise (a run that fails, resumed
        later); its exception is recorded and swallowed.
        """
        if start is not None and start != self.head:
            self.rewind(start)
        before = self.history_ids()
        result, error = None, None
        try:
            result = call()
        except Exception as exc:
            if not fails:
                raise
            error = f"{type(exc).__name__}: {exc}"
        if fails and error is None:
            raise RuntimeError(f"run {len(self.runs)} ({kind}) was meant to fail and did not")
        after = self.history_ids()
        numbers = []
        for i, q in enumerate(questions):
            self.questions.append(q)
            numbers.append(len(self.questions))
            if i < len(inputs):
                self.inputs[numbers[-1]] = inputs[i]
        if numbers:
            self.lineage.extend(numbers)
            for n in numbers:
                self.asked_with[n] = numbers
        current = self.asked_with[self.lineage[-1]] if self.lineage else []
        created = sorted(after - before)
        for cid in created:
            # A run's input checkpoint holds the state before its questions:
            # rewinding to it rewinds to the turn before them.
            at = self.lineage[: len(self.lineage) - len(numbers)] if self.is_input(cid) else self.lineage
            self.cp_question[cid] = at[-1] if at else 0
        entry = {
            "kind": kind,
            "questions": list(questions),
            "question_numbers": numbers,
            "start": start,
            "checkpoints": created,
            "state_after": self.state_after(),
        }
        if error is not None:
            entry["error"] = error
        self.runs.append(entry)
        self.head = entry["state_after"]["checkpoint_id"]
        for n in current:
            self.turn_runs[n] = len(self.runs) - 1
        return result

    def is_input(self, checkpoint_id: str) -> bool:
        t = self.saver.get_tuple(self.at(checkpoint_id))
        return (t.metadata or {}).get("source") == "input"

    def rewind(self, start: str) -> None:
        """A run from an older checkpoint: the branch from there on is
        abandoned, and recorded as a fork with its turns as they stand."""
        if start not in self.cp_question:
            raise RuntimeError(f"fork from {start}, a checkpoint no recorded run wrote")
        q = self.cp_question[start]
        keep = self.lineage.index(q) + 1 if q else 0
        self.forks.append(
            {
                "from_checkpoint_id": start,
                "turn": keep,
                "questions": len(self.lineage),
                "newest_checkpoint_id": self.head,
                "turns": self.turns(),
            }
        )
        self.lineage = self.lineage[:keep]

    def turns(self) -> list[dict[str, Any]]:
        """The lineage's turns, numbered along it."""
        number = {q: i for i, q in enumerate(self.lineage, start=1)}
        out = []
        for n in self.lineage:
            st = self.runs[self.turn_runs[n]]["state_after"]
            t = {
                "turn": number[n],
                "question": self.questions[n - 1],
                "asked": n,
                "checkpoint_id": st["checkpoint_id"],
                "answered_with": [number[m] for m in self.asked_with[n] if m in number],
                "retained": True,
                "state": {ch: st[ch] for ch in self.served},
                "messages": st["messages"],
            }
            if n in self.inputs:
                t["input"] = self.inputs[n]
            out.append(t)
        return out

    def read_back_forks(self) -> list[dict[str, Any]]:
        """The forks, each abandoned turn's state read back with get_state
        at its checkpoint now that the thread has moved on (`read_back`),
        beside the state recorded as the turn ended."""
        out = []
        for f in self.forks:
            f = dict(f)
            back = []
            for t in f["turns"]:
                st = self.state_after(self.at(t["checkpoint_id"]))
                back.append({"turn": t["turn"], "checkpoint_id": st["checkpoint_id"], "state": {ch: st[ch] for ch in self.served}, "messages": st["messages"]})
            f["read_back"] = back
            out.append(f)
        return out


def describe_checkpoints(graph: Any, saver: Any, thread: str, served: Sequence[str], channels: Sequence[str]) -> tuple[list, list]:
    """Every root checkpoint from get_state_history, oldest first, with what
    is stored at it, and the thread's branches (root to each leaf)."""
    config = {"configurable": {"thread_id": thread}}
    raw = RawReader(saver, thread, channels)
    out = []
    for snap in graph.get_state_history(config):
        cid = snap.config["configurable"]["checkpoint_id"]
        parent = (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        md = snap.metadata or {}
        meta = {"step": md.get("step"), "source": md.get("source")}
        if "counters_since_delta_snapshot" in md:
            meta["counters_since_delta_snapshot"] = wire(md["counters_since_delta_snapshot"])
        out.append(
            {
                "checkpoint_id": cid,
                "parent_checkpoint_id": parent,
                "metadata": meta,
                "created_at": snap.created_at,
                "stored": raw.stored(cid),
                "inline_true_marker": raw.markers(cid),
                "writes": raw.writes(cid),
                "values": snapshot_values(snap, served),
            }
        )
    out.sort(key=lambda c: c["checkpoint_id"])
    return out, branches(out)


def branches(checkpoints: list[dict]) -> list[dict[str, Any]]:
    """Each leaf's chain of ancestors, root first, as far as it is stored."""
    by_id = {c["checkpoint_id"]: c for c in checkpoints}
    parents = {c["parent_checkpoint_id"] for c in checkpoints}
    out = []
    for c in checkpoints:
        if c["checkpoint_id"] in parents:
            continue
        chain, cur = [], c
        while cur is not None:
            chain.append(cur["checkpoint_id"])
            cur = by_id.get(cur["parent_checkpoint_id"])
        out.append({"head": c["checkpoint_id"], "checkpoints": chain[::-1]})
    return out


def carried_turns(previous: dict[str, Any], checkpoints: list[dict], served: Sequence[str]) -> list[dict]:
    """A --read-only truth's turns: the earlier truth's, each retained while
    its checkpoint is, with the state LangGraph now reconstructs there."""
    by_id = {c["checkpoint_id"]: c for c in checkpoints}
    out = []
    for t in previous.get("turns") or []:
        t = dict(t)
        c = by_id.get(t["checkpoint_id"])
        t["retained"] = c is not None
        if c is None:
            t["state"], t["messages"] = None, None
        else:
            t["state"] = {ch: c["values"][ch] for ch in served}
            t["messages"] = c["values"]["messages"]
        out.append(t)
    return out


# ---------------------------------------------------------------------------
# The reference implementation, when it imports.


class RootNamespace:
    """A saver as seen from the root graph: alist pinned to checkpoint_ns "".

    turns_from asks its saver for the thread's checkpoints without naming a
    namespace, so the saver hands it subgraph checkpoints too. historyd
    reads one namespace (the root by default); comparing like with like means
    giving the reference the root's checkpoints only. What the unscoped read
    would have said differently is reported beside it.
    """

    def __init__(self, saver: Any) -> None:
        self._saver = saver

    def alist(self, config: Any, **kwargs: Any) -> Any:
        configurable = {**(config.get("configurable") or {}), "checkpoint_ns": ""}
        return self._saver.alist({**config, "configurable": configurable}, **kwargs)


def history_json(history: Any) -> dict[str, Any]:
    return {
        "total": history.total,
        "retained": [t.n for t in history.turns],
        "turns": {
            str(t.n): {
                "checkpoint_id": t.checkpoint_id,
                "question": str(t.question),
                "state": state_json(t.state),
            }
            for t in history.turns
        },
    }


@contextlib.asynccontextmanager
async def async_saver(args: argparse.Namespace) -> Any:
    """The async flavour of the saver that wrote the thread, as turns_from
    needs one, and a function naming the namespaces a checkpoint id is in."""
    if args.sqlite:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(args.sqlite) as saver:

            async def namespaces(thread: str, checkpoint_id: str) -> list[str]:
                async with saver.conn.execute(
                    "SELECT checkpoint_ns FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
                    (thread, checkpoint_id),
                ) as cur:
                    return [r[0] for r in await cur.fetchall()]

            yield saver, namespaces
        return

    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    kwargs = connect_kwargs(args.schema)
    async with await psycopg.AsyncConnection.connect(args.dsn, **kwargs) as conn:

        async def namespaces(thread: str, checkpoint_id: str) -> list[str]:
            cur = await conn.execute(
                "SELECT checkpoint_ns FROM checkpoints WHERE thread_id = %s AND checkpoint_id = %s",
                (thread, checkpoint_id),
            )
            return [r["checkpoint_ns"] for r in await cur.fetchall()]

        yield AsyncPostgresSaver(conn), namespaces


async def read_reference(args: argparse.Namespace) -> dict[str, Any]:
    from mcp_agent.history import turns_from

    thread = args.thread
    async with async_saver(args) as (saver, namespaces):
        root = history_json(await turns_from(RootNamespace(saver), thread))
        unscoped = history_json(await turns_from(saver, thread))
        notes = []
        for n in sorted(set(root["turns"]) | set(unscoped["turns"]), key=int):
            a, b = root["turns"].get(n), unscoped["turns"].get(n)
            if a == b:
                continue
            where = ""
            if b is not None:
                ns = await namespaces(thread, b["checkpoint_id"])
                where = ", namespace " + ", ".join(repr(x) for x in ns)
            notes.append(
                f"turn {n}: mcp_agent.history.turns_from over all namespaces ends it at checkpoint "
                f"{b and b['checkpoint_id']}{where}"
                f"{' with different state' if a and b and a['state'] != b['state'] else ''}; "
                f"over the root namespace at {a and a['checkpoint_id']}"
            )
        if unscoped["total"] != root["total"] or unscoped["retained"] != root["retained"]:
            notes.append(
                f"over all namespaces: total {unscoped['total']}, retained {unscoped['retained']}; "
                f"over the root: total {root['total']}, retained {root['retained']}"
            )
    root["unscoped_differences"] = notes
    return root


def reference_or_reason(args: argparse.Namespace) -> tuple[Optional[dict], Optional[str]]:
    try:
        import mcp_agent.history  # noqa: F401
    except BaseException as exc:  # SyntaxError, ImportError, anything
        where = ""
        if isinstance(exc, SyntaxError):
            where = f" ({exc.filename}:{exc.lineno}: {(exc.text or '').strip()})"
        return None, (
            f"mcp-toolsets-runtime does not import under Python "
            f"{sys.version.split()[0]}: {type(exc).__name__}: {exc}{where}"
        )
    try:
        return asyncio.run(read_reference(args)), None
    except BaseException as exc:
        return None, (
            "mcp_agent.history.turns_from failed: "
            + "".join(traceback.format_exception_only(type(exc), exc)).strip()
        )


def dump(path: str, result: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        f.write("\n")

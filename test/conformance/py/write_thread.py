#!/usr/bin/env python3
"""Write one real LangGraph thread and say what LangGraph sees.

Runs a LangGraph StateGraph through seven scripted turns, checkpointed by
langgraph-checkpoint-postgres's PostgresSaver (--dsn) or by
langgraph-checkpoint-sqlite's SqliteSaver in a file (--sqlite), then writes
expected.json: the thread's turns as LangGraph itself reports them through
get_state_history, derived by historyd's turn rules, with each turn's session
state converted to JSON the way historyd's API documents (StateEntry in
history.proto).

The chat model is a deterministic script; the tools are real LangChain tools
run by LangGraph's ToolNode. They publish into a `tool_state` channel in the
mcp-toolsets-runtime convention: key -> {value, tool, seq, inputs, turn,
turns_written}, merged by a reducer where a later write of a key replaces it,
`seq` numbers writes, `turn` is the number of human messages when the write
happened and `turns_written` counts the turns that wrote the key.

With --read-only nothing is written: the thread as it now stands (for
instance after some of its checkpoints were deleted) is read back and
described the same way.

--turns N writes only the first N turns, --pause S waits S seconds before
each, and --ready prints "ready" on stdout once the saver's tables exist and
before the first turn is written, so that a reader can follow the thread as
it grows. --all-states adds the session state of every root checkpoint, not
only of those that end turns (see all_states).

The last turn ends in a subgraph whose checkpoints share the thread under a
non-empty checkpoint_ns; turns are about the root namespace, and the
subgraph's checkpoints are built so that mixing them in would move that turn's
end.

When mcp-toolsets-runtime imports, expected.json also carries `reference`: the
turns that its mcp_agent.history.turns_from reads off the same checkpointer,
through a view of it pinned to the root namespace (see RootNamespace), with
`unscoped_differences` saying what its own all-namespace read said otherwise.
When it does not import, `reference_error` says why.

Usage:
  write_thread.py (--dsn DSN [--schema S] | --sqlite PATH) --thread ID
                  --out expected.json [--read-only] [--no-reference]
                  [--turns N] [--pause S] [--ready] [--all-states]
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
import sqlite3
import sys
import time
import traceback
import uuid
from typing import Annotated, Any, Optional, TypedDict

import psycopg
from psycopg.rows import dict_row

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState, ToolNode
from langgraph.types import Command

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
    in turns_written; rewriting it within the same turn counts nothing.
    Entries that are not maps are stored as they are.
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
        elif entry.get("turns_written") is None:
            entry["turns_written"] = 1
        out[key] = entry
    return out


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    tool_state: Annotated[dict[str, Any], merge_tool_state]


def humans(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if getattr(m, "type", None) == "human"]


# ---------------------------------------------------------------------------
# Tools. Each publishes entries into tool_state and answers with a short
# ToolMessage, as a capture middleware would.


def publish(
    state: dict,
    call_id: str,
    tool_name: str,
    values: dict[str, Any],
    inputs: dict[str, str],
    extra: Optional[dict[str, Any]] = None,
) -> Command:
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


def origin(argument: Any) -> str:
    if isinstance(argument, str) and argument.startswith(HANDLE):
        return argument[len(HANDLE):]
    return MODEL


def resolve(state: dict, argument: Any) -> Any:
    if isinstance(argument, str) and argument.startswith(HANDLE):
        entry = (state.get(STATE) or {})[argument[len(HANDLE):]]
        return entry["value"] if isinstance(entry, dict) else entry
    return argument


def polygon(region: str, vertices: int) -> dict[str, Any]:
    """A closed GeoJSON ring around the Thames basin, `vertices` points."""
    lon0, lat0 = -0.9, 51.55
    ring = []
    for i in range(vertices):
        a = 2 * math.pi * i / vertices
        wobble = 1 + 0.08 * math.sin(7 * a) + 0.03 * math.cos(23 * a)
        ring.append(
            [
                round(lon0 + 1.6 * wobble * math.cos(a), 7),
                round(lat0 + 0.55 * wobble * math.sin(a), 7),
            ]
        )
    ring.append(list(ring[0]))
    return {
        "type": "Feature",
        "properties": {"name": region, "vertices": vertices},
        "geometry": {"type": "Polygon", "coordinates": [ring]},
    }


def area_km2(feature: dict[str, Any]) -> float:
    ring = feature["geometry"]["coordinates"][0]
    s = 0.0
    for (x1, y1), (x2, y2) in zip(ring, ring[1:]):
        s += x1 * y2 - x2 * y1
    deg2 = abs(s) / 2
    return round(deg2 * 111.32 * 111.32 * math.cos(math.radians(51.55)), 3)


@tool
def sketch_polygon(
    region: str,
    vertices: int,
    state: Annotated[dict, InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Sketch a region's outline as a GeoJSON polygon."""
    feature = polygon(region, vertices)
    ring = feature["geometry"]["coordinates"][0]
    xs = [p[0] for p in ring]
    ys = [p[1] for p in ring]
    return publish(
        state,
        tool_call_id,
        "sketch_polygon",
        {
            "sketch-ops/sketch_polygon/geometry": feature,
            "sketch-ops/sketch_polygon/bbox": [min(xs), min(ys), max(xs), max(ys)],
        },
        {"region": origin(region), "vertices": origin(vertices)},
    )


@tool
def sketch_area(
    geometry: str,
    unit: str,
    state: Annotated[dict, InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Area of a sketched geometry, in km2 or mi2."""
    area = area_km2(resolve(state, geometry))
    if unit == "mi2":
        area = round(area / 2.589988, 3)
    return publish(
        state,
        tool_call_id,
        "sketch_area",
        {"sketch-ops/sketch_area/area": {"amount": area, "unit": unit}},
        {"geometry": origin(geometry), "unit": origin(unit)},
    )


@tool
def catchment_stats(
    river: str,
    state: Annotated[dict, InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Facts about a river's catchment, in every shape a value may take."""
    summary = {
        "river": river,
        "name_local": "Themse – Einzugsgebiet ≈ 🌊",
        "retrieved_at": dt.datetime(2026, 5, 1, 12, 30, 15, 250000, tzinfo=dt.timezone.utc),
        "gauges": 2**60 + 7,  # beyond 2^53: a decimal string on the wire
        "negative_big": -(2**55),
        "u64_max": 2**64 - 1,
        "exactly_2_53": 2**53,
        "dataset_id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "mean_flow_m3s": decimal.Decimal("65.80"),
        "raw_header": b"\x00\x01\xfeTHMS",
        "tidal_limit": ("Teddington", 51.4306, -0.3262),
        "missing": None,
        "ratio": 0.1 + 0.2,
        "nan": float("nan"),
        "inf": float("inf"),
        "neg_inf": float("-inf"),
        "by_year": {2023: 61.2, 2024: 70.4},
        "flags": {True: "yes", False: "no"},
        "nested": {"a": {"b": {"c": [1, [2, [3, {"d": "deep"}]]]}}, "empty": {}, "none": []},
    }
    return publish(
        state,
        tool_call_id,
        "catchment_stats",
        {"hydro/catchment_stats/summary": summary},
        {"river": origin(river)},
        extra={"source": {"provider": "Environment Agency", "licence": "OGL-3.0"}},
    )


@tool
def remember(
    text: str,
    state: Annotated[dict, InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Keep a note. Stored bare, not as an entry map, as some hosts do."""
    return Command(
        update={
            STATE: {"notes/plain": text},
            "messages": [
                ToolMessage(
                    content="[state updated: notes/plain]",
                    tool_call_id=tool_call_id,
                    name="remember",
                    id=f"tool-{tool_call_id}",
                )
            ],
        }
    )


TOOLS = [sketch_polygon, sketch_area, catchment_stats, remember]

GEOMETRY = HANDLE + "sketch-ops/sketch_polygon/geometry"

# The conversation: each turn's question and, per model step, the tool calls
# the model makes (an empty list ends the turn with a plain answer).
TURNS: list[tuple[Any, list[list[tuple[str, dict]]]]] = [
    (
        "Draw the outline of the Thames catchment.",
        [[("sketch_polygon", {"region": "thames", "vertices": 60000})], []],
    ),
    (
        "Wie groß ist das Einzugsgebiet der Themse? 🌊",
        [
            [
                ("sketch_area", {"geometry": GEOMETRY, "unit": "km2"}),
                ("catchment_stats", {"river": "Themse"}),
            ],
            [],
        ],
    ),
    ("Thanks. Just summarise what we have so far.", [[]]),
    (
        [
            "Now redraw it ",
            {"type": "text", "text": "with the tidal reach only"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "text", "text": ", please."},
        ],
        [
            [("sketch_polygon", {"region": "thames-tidal", "vertices": 2000})],
            [("sketch_area", {"geometry": GEOMETRY, "unit": "km2"})],
            [],
        ],
    ),
    (
        "Compare the area with the one you found earlier, in square miles too.",
        [
            [("sketch_area", {"geometry": GEOMETRY, "unit": "km2"})],
            [("sketch_area", {"geometry": GEOMETRY, "unit": "mi2"})],
            [],
        ],
    ),
    (
        "Keep a note: verified against the EA dataset.",
        [[("remember", {"text": "verified against the EA dataset ✓"})], []],
    ),
    ("Danke, das war's. Nothing more for now.", [[]]),
]


class ScriptedChatModel(BaseChatModel):
    """A chat model that plays TURNS back, chosen by where the thread is.

    The turn is the number of human messages; the step is the number of AI
    messages since the last one. Nothing depends on call order, so a
    re-run step answers the same.
    """

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: Optional[list[str]] = None,
        run_manager: Optional[CallbackManagerForLLMRun] = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = len(humans(messages))
        last = max(i for i, m in enumerate(messages) if m.type == "human")
        step = sum(1 for m in messages[last:] if m.type == "ai")
        calls = TURNS[turn - 1][1][step]
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


# Turns that end by running the audit subgraph. Its checkpoints share the
# thread but carry a non-empty checkpoint_ns, and they hold as many questions
# as the root's: a reader that mixed namespaces would derive other turn ends.
AUDIT_TURNS = {7}


def audit_graph():
    """A subgraph with the parent's state schema.

    `check` adds two messages and `stamp` removes one of them again, so the
    subgraph's middle checkpoint holds more messages than any root checkpoint
    of the turn: a reader mixing namespaces would end the turn there.
    """

    def check(state: State) -> dict:
        turn = len(humans(state["messages"]))
        return {
            "messages": [
                AIMessage(content="audit: checking", id=f"audit-{turn}-draft"),
                AIMessage(content="audit: checked", id=f"audit-{turn}"),
            ]
        }

    def stamp(state: State) -> dict:
        turn = len(humans(state["messages"]))
        return {
            "messages": [RemoveMessage(id=f"audit-{turn}-draft")],
            STATE: {
                "audit/log/last": {
                    "value": {"checked_messages": len(state["messages"])},
                    "tool": "audit",
                    "turn": turn,
                }
            }
        }

    g = StateGraph(State)
    g.add_node("check", check)
    g.add_node("stamp", stamp)
    g.add_edge(START, "check")
    g.add_edge("check", "stamp")
    g.add_edge("stamp", END)
    return g.compile()


def build(saver: Any):
    model = ScriptedChatModel()

    def agent(state: State) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        if getattr(last, "tool_calls", None):
            return "tools"
        if len(humans(state["messages"])) in AUDIT_TURNS:
            return "audit"
        return END

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(TOOLS))
    g.add_node("audit", audit_graph())
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", "audit", END])
    g.add_edge("tools", "agent")
    g.add_edge("audit", END)
    return g.compile(checkpointer=saver)


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
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return v.hex
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


# ---------------------------------------------------------------------------
# Turn derivation over what LangGraph reports, by the rules in design.md.


def derive(snapshots: list[Any]) -> dict[str, Any]:
    points = []
    richest: list[BaseMessage] = []
    for snap in snapshots:
        msgs = (snap.values or {}).get("messages") or []
        hs = humans(msgs)
        cid = snap.config["configurable"]["checkpoint_id"]
        points.append(
            {
                "checkpoint_id": cid,
                "humans": len(hs),
                "messages": len(msgs),
                "created_at": snap.created_at,
                "snap": snap,
            }
        )
        if len(hs) > len(richest):
            richest = hs
    ends: dict[int, dict] = {}
    for p in points:
        n = p["humans"]
        if n == 0:
            continue
        held = ends.get(n)
        if held is None or (p["messages"], p["checkpoint_id"]) > (
            held["messages"],
            held["checkpoint_id"],
        ):
            ends[n] = p
    total = len(richest)
    questions = [str(m.text) for m in richest]
    turns = {}
    for n in sorted(ends):
        p = ends[n]
        turns[str(n)] = {
            "turn": n,
            "checkpoint_id": p["checkpoint_id"],
            "question": questions[n - 1],
            "ended_at": p["created_at"],
            "tool_state": state_json(p["snap"].values.get(STATE)),
        }
    return {
        "total": total,
        "questions": questions,
        "turns": turns,
        "retained": sorted(ends),
        "checkpoints": sorted(
            (
                {k: p[k] for k in ("checkpoint_id", "humans", "messages", "created_at")}
                for p in points
            ),
            key=lambda p: p["checkpoint_id"],
        ),
    }


def all_states(snapshots: list[Any]) -> dict[str, Any]:
    """The session state of every checkpoint, not only of those ending turns.

    A reader that follows a thread while it is written sees the unfinished
    turn end, for the moment, at whichever checkpoint is newest; this says
    what LangGraph holds at each of them. Entries are listed once in
    `entries` and each checkpoint maps its keys to their index there, so a
    megabyte value shared by twenty checkpoints is written once.
    """
    entries: list[Any] = []
    index: dict[str, int] = {}
    states: dict[str, dict[str, int]] = {}
    for snap in snapshots:
        state = {}
        for key, entry in state_json((snap.values or {}).get(STATE)).items():
            text = json.dumps(entry, sort_keys=True, ensure_ascii=False, allow_nan=False)
            if text not in index:
                index[text] = len(entries)
                entries.append(entry)
            state[key] = index[text]
        states[snap.config["configurable"]["checkpoint_id"]] = state
    return {"entries": entries, "checkpoint_states": states}


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


# ---------------------------------------------------------------------------


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


def versions(sqlite: bool) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    names = ["langgraph", "langgraph-checkpoint"]
    if sqlite:
        names += ["langgraph-checkpoint-sqlite", "aiosqlite"]
        out["sqlite"] = sqlite3.sqlite_version
    else:
        names += ["langgraph-checkpoint-postgres", "psycopg"]
    names += ["langchain-core", "mcp-toolsets-runtime"]
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--dsn", help="PostgreSQL: PostgresSaver")
    where.add_argument("--sqlite", metavar="PATH", help="an SQLite file: SqliteSaver")
    ap.add_argument("--thread", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--schema", default=None, help="PostgreSQL schema for the saver's tables")
    ap.add_argument("--read-only", action="store_true", help="describe the thread as it stands")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--turns", type=int, default=len(TURNS), help="write only the first N turns")
    ap.add_argument("--pause", type=float, default=0.0, help="seconds to wait before each turn")
    ap.add_argument("--ready", action="store_true", help='print "ready" once the tables exist')
    ap.add_argument("--all-states", action="store_true", help="the state of every checkpoint too")
    args = ap.parse_args()
    if args.sqlite and args.schema:
        ap.error("--schema is for PostgreSQL")
    if not 1 <= args.turns <= len(TURNS):
        ap.error(f"--turns: 1..{len(TURNS)}")

    config = {"configurable": {"thread_id": args.thread}}
    with open_saver(args) as saver:
        graph = build(saver)
        if args.ready:
            print("ready", flush=True)
        if not args.read_only:
            if graph.get_state(config).values:
                raise SystemExit(f"thread {args.thread!r} already has checkpoints")
            for i, (question, _) in enumerate(TURNS[: args.turns], start=1):
                if args.pause:
                    time.sleep(args.pause)
                msg = HumanMessage(content=question, id=f"human-{i}")
                graph.invoke({"messages": [msg]}, config)
        history = list(graph.get_state_history(config))
        result = derive(history)
        if args.all_states:
            result.update(all_states(history))

    result["thread_id"] = args.thread
    result["schema"] = args.schema or ""
    result["sqlite"] = args.sqlite or ""
    result["writer"] = "python"
    result["versions"] = versions(bool(args.sqlite))
    if args.no_reference:
        result["reference"], result["reference_error"] = None, "not asked for (--no-reference)"
    else:
        result["reference"], result["reference_error"] = reference_or_reason(args)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        f.write("\n")
    print(
        f"wrote {args.out}: thread {args.thread}, {result['total']} turns, "
        f"retained {result['retained']}, {len(result['checkpoints'])} checkpoints, "
        f"reference {'yes' if result['reference'] else 'no: ' + str(result['reference_error'])}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

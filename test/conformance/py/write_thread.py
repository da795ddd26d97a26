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
it grows. --vertices N draws turn 1's outline with N points instead of
60000, for a thread whose state is kilobytes rather than over a megabyte. --all-states adds the session state of every root checkpoint, not
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
                  [--turns N] [--pause S] [--ready] [--all-states] [--vertices N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import math
import sys
import time
import uuid
from typing import Annotated, Any, TypedDict

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState, ToolNode
from langgraph.types import Command

from lgwriter import (
    HANDLE,
    MODEL,
    STATE,
    ScriptedChatModel,
    add_store_args,
    dump,
    humans,
    merge_tool_state,
    open_saver,
    publish,
    reference_or_reason,
    state_json,
    versions,
)


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    tool_state: Annotated[dict[str, Any], merge_tool_state]


# ---------------------------------------------------------------------------
# Tools. Each publishes entries into tool_state (lgwriter.publish) and
# answers with a short ToolMessage, as a capture middleware would.


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
    model = ScriptedChatModel(turns=TURNS)

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(ap)
    ap.add_argument("--thread", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--read-only", action="store_true", help="describe the thread as it stands")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--turns", type=int, default=len(TURNS), help="write only the first N turns")
    ap.add_argument("--pause", type=float, default=0.0, help="seconds to wait before each turn")
    ap.add_argument("--ready", action="store_true", help='print "ready" once the tables exist')
    ap.add_argument("--all-states", action="store_true", help="the state of every checkpoint too")
    ap.add_argument(
        "--vertices", type=int, default=None, help="points of turn 1's outline (default 60000: a state over 1 MB)"
    )
    args = ap.parse_args()
    if args.vertices is not None:
        if args.vertices < 3:
            ap.error("--vertices: at least 3")
        for step in TURNS[0][1]:
            for name, arguments in step:
                if name == "sketch_polygon":
                    arguments["vertices"] = args.vertices
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
    dump(args.out, result)
    print(
        f"wrote {args.out}: thread {args.thread}, {result['total']} turns, "
        f"retained {result['retained']}, {len(result['checkpoints'])} checkpoints, "
        f"reference {'yes' if result['reference'] else 'no: ' + str(result['reference_error'])}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Write one real LangGraph thread of a named scenario and record its truth.

Each scenario drives a real graph (LangGraph's StateGraph with DeltaChannel
state, langchain's create_agent with SummarizationMiddleware, deepagents'
create_deep_agent) through scripted questions, checkpointed by
langgraph-checkpoint-postgres's PostgresSaver (--dsn) or
langgraph-checkpoint-sqlite's SqliteSaver (--sqlite), and writes truth.json:
every run, the turns as the host saw them as each ended, and every root
checkpoint as LangGraph reconstructs it (DeltaChannel replay included) with
what is physically stored there. ../README.md defines the file.

The chat models are deterministic scripts (lgwriter.ScriptedChatModel, and
LangChain's GenericFakeChatModel for the summaries); nothing reaches a
network.

Scenarios: delta-messages-1, delta-messages-4, delta-messages-50,
delta-state, delta-exit, delta-interrupt, delta-fork, delta-remove,
deepagents, summarize, remove-node.

--read-only describes the thread as it is stored now (say, after a test
deleted checkpoints), in the same shape without runs; with --truth, the
turns of that earlier truth.json are carried over, each retained while its
checkpoint is, with the state LangGraph now reconstructs there.

--check runs every scenario (or those named with --scenario, repeatable)
against fresh SQLite files in a temporary directory and, with --dsn,
against PostgreSQL too, checks each truth and its --read-only reading, and
prints one line per run; it exits non-zero if any fails.

Usage:
  write_scenario.py --scenario NAME (--dsn DSN [--schema S] | --sqlite PATH)
                    --thread ID --out truth.json [--read-only [--truth T]]
                    [--no-reference]
  write_scenario.py --check [--dsn DSN [--schema S]] [--scenario NAME ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
import traceback
from typing import Annotated, Any, Callable, NotRequired, Optional, TypedDict

from langchain.agents import AgentState
from langchain.agents.middleware import AgentMiddleware

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, _messages_delta_reducer, add_messages
from langgraph.prebuilt import InjectedState, ToolNode
from langgraph.types import Command, interrupt

from lgwriter import (
    STATE,
    Recorder,
    ScriptedChatModel,
    add_store_args,
    batch,
    carried_turns,
    describe_checkpoints,
    dump,
    merge_tool_state,
    open_saver,
    publish,
    reference_or_reason,
    versions,
    wire,
)

# ---------------------------------------------------------------------------
# Tools. Each publishes into tool_state in the mcp-toolsets-runtime
# convention (lgwriter.publish).

AREAS = {  # km², rounded: each catchment writes a different value to one key
    "Severn": 11420,
    "Thames": 12935,
    "Trent": 10452,
    "Wye": 4136,
    "Tay": 4970,
    "Clyde": 4000,
}
AREA_KEY = "sketch-ops/sketch_area/area_km2"


@tool
def sketch_catchment(
    river: str,
    state: Annotated[dict, InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Sketch a river's catchment and measure its area."""
    return publish(
        state,
        tool_call_id,
        "sketch_area",
        {AREA_KEY: AREAS[river], "sketch-ops/sketch_area/name": river},
        {"river": "model"},
    )


@tool
def survey_gauge(
    river: str,
    gauge: int,
    state: Annotated[dict, InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Read one gauge on a river; the same key is rewritten gauge after gauge."""
    return publish(
        state,
        tool_call_id,
        "survey_gauge",
        {f"hydro/survey_gauge/{river.lower()}": {"gauge": gauge, "flow_m3s": round(10 + gauge * 1.5, 1)}},
        {"river": "model", "gauge": "model"},
    )


@tool
def publish_report(
    river: str,
    state: Annotated[dict, InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Publish a catchment report once a person approves it (interrupts)."""
    answer = interrupt({"approve": f"publish the {river} report?"})
    return publish(
        state,
        tool_call_id,
        "publish_report",
        {f"reports/publish_report/{river.lower()}": {"river": river, "status": "published" if answer == "approve" else "held", "answer": answer}},
        {"river": "model"},
    )


FLOW_READINGS = iter(range(101, 10_000))


@tool
def read_flow(
    river: str,
    state: Annotated[dict, InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Read a river's flow now: every call reads a new value, so a replayed
    run writes another one than the run it replaces."""
    return publish(
        state,
        tool_call_id,
        "read_flow",
        {f"hydro/read_flow/{river.lower()}": {"river": river, "reading": next(FLOW_READINGS)}},
        {"river": "model"},
    )


TOOLS = [sketch_catchment, survey_gauge, publish_report, read_flow]


def sketch(river: str) -> list[list[tuple[str, dict]]]:
    return [[("sketch_catchment", {"river": river})], []]


# ---------------------------------------------------------------------------
# One graph for the StateGraph scenarios: agent <-> tools, and after the
# answer, optionally a node that removes messages.


def state_schema(messages: Any, tool_state: Any) -> type:
    return TypedDict(
        "State",
        {"messages": Annotated[list, messages], STATE: Annotated[dict, tool_state]},
        total=False,
    )


def build_graph(
    saver: Any,
    schema: type,
    turns: list,
    after: Optional[dict[int, Callable[[dict], dict]]] = None,
) -> Any:
    """agent -> tools -> agent ..., and after question n's answer the node
    after[n] (if any). The model is keyed by question id (q-<n>)."""
    model = ScriptedChatModel(turns=turns, by="id")
    after = after or {}

    def agent(state: dict) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: dict) -> str:
        msgs = state["messages"]
        if getattr(msgs[-1], "tool_calls", None):
            return "tools"
        n, _ = model.locate(msgs)
        return f"after_{n}" if n in after else END

    g = StateGraph(schema)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(TOOLS))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END, *(f"after_{n}" for n in after)])
    g.add_edge("tools", "agent")
    for n, fn in after.items():
        g.add_node(f"after_{n}", fn)
        g.add_edge(f"after_{n}", END)
    return g.compile(checkpointer=saver)


def ask(rec: Recorder, graph: Any, n: int, text: str, **kw: Any) -> None:
    msg = HumanMessage(content=text, id=f"q-{n}")
    cfg = {**rec.config, "recursion_limit": 200}
    rec.run("question", lambda: graph.invoke({"messages": [msg]}, cfg, **kw), [text])


def resume(rec: Recorder, graph: Any, answer: str, **kw: Any) -> None:
    cfg = {**rec.config, "recursion_limit": 200}
    rec.run("resume", lambda: graph.invoke(Command(resume=answer), cfg, **kw))


def messages_channel(n: int) -> dict:
    return {"delta": True, "snapshot_frequency": n, "reducer": "messages"}


PLAIN_MESSAGES = {"delta": False, "snapshot_frequency": None, "reducer": "messages"}
PLAIN_STATE = {"delta": False, "snapshot_frequency": None, "reducer": "tool_state"}


@dataclasses.dataclass
class Scenario:
    name: str
    # build(saver) compiles the graph; drive(recorder, graph) asks the
    # questions; expect says what check() demands of the truth.
    build: Callable[[Any], Any]
    drive: Callable[[Recorder, Any], None]
    channels: dict[str, dict]
    served: list[str]
    expect: dict[str, Any]
    notes: list[str] = dataclasses.field(default_factory=list)
    extra_versions: list[str] = dataclasses.field(default_factory=list)


# --- delta-messages-N --------------------------------------------------------

DELTA_TURNS = [
    ("Sketch the Severn catchment.", sketch("Severn")),
    ("Now the Thames.", sketch("Thames")),
    ("Which of the two is larger?", [[]]),
    (
        "Sketch the Trent and read its first gauge.",
        [[("sketch_catchment", {"river": "Trent"}), ("survey_gauge", {"river": "Trent", "gauge": 1})], []],
    ),
    (
        "Survey every gauge on the Wye, one at a time.",
        [[("survey_gauge", {"river": "Wye", "gauge": g})] for g in range(1, 21)] + [[]],
    ),
    ("Sketch the Tay.", sketch("Tay")),
    ("Thanks. Nothing for a moment.", [[]]),
    ("Sketch the Clyde.", sketch("Clyde")),
    ("Which catchment was the largest?", [[]]),
]


def drive_questions(turns: list, **kw: Any) -> Callable[[Recorder, Any], None]:
    def drive(rec: Recorder, graph: Any) -> None:
        for n, (text, _) in enumerate(turns, start=1):
            ask(rec, graph, n, text, **kw)

    return drive


def delta_messages(n: int) -> Scenario:
    schema = state_schema(DeltaChannel(_messages_delta_reducer, snapshot_frequency=n), merge_tool_state)
    return Scenario(
        name=f"delta-messages-{n}",
        build=lambda saver: build_graph(saver, schema, DELTA_TURNS),
        drive=drive_questions(DELTA_TURNS),
        channels={"messages": messages_channel(n), STATE: PLAIN_STATE},
        served=[STATE],
        expect={"delta": ["messages"], "min_snapshots": {"messages": 1 if n == 50 else 3}, "replayed": n > 1},
    )


# --- delta-state -------------------------------------------------------------


def tool_state_batch_reducer() -> tuple[Callable, str]:
    """mcp-toolsets-runtime's own merge_tool_state as a batch reducer, where
    it imports: it is a binary (current, update) reducer, so it is folded
    over the batch (lgwriter.batch). Else write_thread.py's equivalent."""
    try:
        from mcp_state.state import merge_tool_state as real
    except BaseException:
        return batch(merge_tool_state), "lgwriter.merge_tool_state folded over the batch (mcp-toolsets-runtime does not import)"
    return batch(real), "mcp_state.state.merge_tool_state (mcp-toolsets-runtime) folded over the batch"


def delta_state() -> Scenario:
    reducer, how = tool_state_batch_reducer()
    schema = state_schema(add_messages, DeltaChannel(reducer, snapshot_frequency=3))
    turns = DELTA_TURNS[:4] + [
        ("Read the first five Wye gauges.", [[("survey_gauge", {"river": "Wye", "gauge": g})] for g in range(1, 6)] + [[]])
    ] + DELTA_TURNS[5:]
    return Scenario(
        name="delta-state",
        build=lambda saver: build_graph(saver, schema, turns),
        drive=drive_questions(turns),
        channels={"messages": PLAIN_MESSAGES, STATE: {"delta": True, "snapshot_frequency": 3, "reducer": "tool_state"}},
        served=[STATE],
        expect={"delta": [STATE], "min_snapshots": {STATE: 2}, "replayed": True},
        notes=[f"tool_state reducer: {how}"],
    )


# --- delta-exit --------------------------------------------------------------


def delta_exit() -> Scenario:
    schema = state_schema(DeltaChannel(_messages_delta_reducer, snapshot_frequency=10), merge_tool_state)
    turns = DELTA_TURNS[:4] + DELTA_TURNS[5:]
    return Scenario(
        name="delta-exit",
        build=lambda saver: build_graph(saver, schema, turns),
        drive=drive_questions(turns, durability="exit"),
        channels={"messages": messages_channel(10), STATE: PLAIN_STATE},
        served=[STATE],
        expect={"delta": ["messages"], "min_snapshots": {"messages": 1}, "replayed": True, "stub": True},
        notes=["every question invoked with durability='exit'"],
    )


# --- delta-interrupt ---------------------------------------------------------

INTERRUPT_TURNS = [
    ("Sketch the Severn catchment.", sketch("Severn")),
    ("Publish the Severn report.", [[("publish_report", {"river": "Severn"})], []]),
    ("Now the Thames.", sketch("Thames")),
    ("Publish the Thames report too.", [[("publish_report", {"river": "Thames"})], []]),
    ("Sketch the Trent.", sketch("Trent")),
    ("Sketch the Wye.", sketch("Wye")),
    ("Publish the Wye report.", [[("publish_report", {"river": "Wye"})], []]),
    ("Which reports went out?", [[]]),
]


def delta_interrupt() -> Scenario:
    schema = state_schema(DeltaChannel(_messages_delta_reducer, snapshot_frequency=4), merge_tool_state)
    answers = {2: "approve", 4: "hold", 7: "approve"}

    def drive(rec: Recorder, graph: Any) -> None:
        for n, (text, _) in enumerate(INTERRUPT_TURNS, start=1):
            ask(rec, graph, n, text)
            if n in answers:
                resume(rec, graph, answers[n])

    return Scenario(
        name="delta-interrupt",
        build=lambda saver: build_graph(saver, schema, INTERRUPT_TURNS),
        drive=drive,
        channels={"messages": messages_channel(4), STATE: PLAIN_STATE},
        served=[STATE],
        expect={"delta": ["messages"], "min_snapshots": {"messages": 2}, "replayed": True, "resumes": 3},
    )


# --- delta-fork --------------------------------------------------------------

FORK_TURNS = [
    ("Sketch the Severn catchment.", sketch("Severn")),
    ("Now the Thames.", sketch("Thames")),
    ("Sketch the Trent.", sketch("Trent")),
    ("Sketch the Wye.", sketch("Wye")),
    ("Sketch the Tay.", sketch("Tay")),
    ("From the Thames on, try the Clyde instead.", sketch("Clyde")),
    ("Which is larger, the Clyde or the Thames?", [[]]),
]


def delta_fork() -> Scenario:
    schema = state_schema(DeltaChannel(_messages_delta_reducer, snapshot_frequency=4), merge_tool_state)

    def drive(rec: Recorder, graph: Any) -> None:
        for n in range(1, 6):
            ask(rec, graph, n, FORK_TURNS[n - 1][0])
        # Back to the end of turn 2, and a correction written there.
        at = {"configurable": {"thread_id": rec.thread, "checkpoint_ns": "", "checkpoint_id": rec.runs[1]["state_after"]["checkpoint_id"]}}
        fork: dict = {}

        def update() -> None:
            fork["config"] = graph.update_state(
                at,
                {
                    "messages": [AIMessage(content="Going back to the Thames.", id="fork-note")],
                    STATE: {"notes/fork": {"value": "branched after turn 2", "tool": "update_state", "turn": 2}},
                },
                as_node="agent",
            )

        rec.run("fork", update, start=at["configurable"]["checkpoint_id"])
        text = FORK_TURNS[5][0]
        msg = HumanMessage(content=text, id="q-6")
        rec.run("question", lambda: graph.invoke({"messages": [msg]}, fork["config"]), [text])
        ask(rec, graph, 7, FORK_TURNS[6][0])

    return Scenario(
        name="delta-fork",
        build=lambda saver: build_graph(saver, schema, FORK_TURNS),
        drive=drive,
        channels={"messages": messages_channel(4), STATE: PLAIN_STATE},
        served=[STATE],
        expect={"delta": ["messages"], "min_snapshots": {"messages": 2}, "replayed": True, "branches": 2, "forks": 1, "min_total": 4},
        notes=["questions 3-5 are on the first branch; the fork run (update_state at turn 2's checkpoint) starts the second, which questions 6-7 are on: the lineage holds questions 1, 2, 6 and 7, and turn 2 ends at the update_state's checkpoint"],
    )


# --- delta-remove ------------------------------------------------------------

REMOVE_TURNS = [
    ("Sketch the Severn catchment.", sketch("Severn")),
    ("Now the Thames.", sketch("Thames")),
    ("Sketch the Trent.", sketch("Trent")),
    ("Forget my first question.", [[]]),
    ("Sketch the Wye.", sketch("Wye")),
    ("Start over, please.", [[]]),
    ("Sketch the Tay.", sketch("Tay")),
    ("Sketch the Clyde.", sketch("Clyde")),
]


def forget_first(state: dict) -> dict:
    return {"messages": [RemoveMessage(id="q-1")]}


def start_over(state: dict) -> dict:
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), AIMessage(content="Starting over.", id="reset-6")]}


def delta_remove() -> Scenario:
    schema = state_schema(DeltaChannel(_messages_delta_reducer, snapshot_frequency=4), merge_tool_state)
    return Scenario(
        name="delta-remove",
        build=lambda saver: build_graph(saver, schema, REMOVE_TURNS, {4: forget_first, 6: start_over}),
        drive=drive_questions(REMOVE_TURNS),
        channels={"messages": messages_channel(4), STATE: PLAIN_STATE},
        served=[STATE],
        expect={"delta": ["messages"], "min_snapshots": {"messages": 2}, "replayed": True, "removed": True},
        notes=["after turn 4's answer a node removes q-1 (RemoveMessage); after turn 6's a node clears the list (REMOVE_ALL_MESSAGES)"],
    )


# --- remove-node (plain channels) ---------------------------------------------

REMOVE_NODE_TURNS = [
    ("Sketch the Severn catchment.", sketch("Severn")),
    ("Now the Thames.", sketch("Thames")),
    ("Which is larger?", [[]]),
    ("And by how much?", [[]]),  # asked together with question 3
    ("Sketch the Trent.", sketch("Trent")),
    ("Publish the Trent report.", [[("publish_report", {"river": "Trent"})], []]),
    ("Start over, please.", [[]]),
    ("Sketch the Wye.", sketch("Wye")),
]


def delete_messages(state: dict) -> dict:
    """LangGraph's documented pattern: keep the last two messages."""
    messages = state["messages"]
    if len(messages) > 2:
        return {"messages": [RemoveMessage(id=m.id) for m in messages[:-2]]}
    return {}


def reset_messages(state: dict) -> dict:
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)]}


def remove_node() -> Scenario:
    schema = state_schema(add_messages, merge_tool_state)

    def drive(rec: Recorder, graph: Any) -> None:
        cfg = {**rec.config, "recursion_limit": 200}
        ask(rec, graph, 1, REMOVE_NODE_TURNS[0][0])
        ask(rec, graph, 2, REMOVE_NODE_TURNS[1][0])
        both = [REMOVE_NODE_TURNS[2][0], REMOVE_NODE_TURNS[3][0]]
        msgs = [HumanMessage(content=both[0], id="q-3"), HumanMessage(content=both[1], id="q-4")]
        rec.run("questions", lambda: graph.invoke({"messages": msgs}, cfg), both)
        ask(rec, graph, 5, REMOVE_NODE_TURNS[4][0])
        ask(rec, graph, 6, REMOVE_NODE_TURNS[5][0])
        resume(rec, graph, "approve")
        ask(rec, graph, 7, REMOVE_NODE_TURNS[6][0])
        ask(rec, graph, 8, REMOVE_NODE_TURNS[7][0])

    return Scenario(
        name="remove-node",
        build=lambda saver: build_graph(saver, schema, REMOVE_NODE_TURNS, {5: delete_messages, 7: reset_messages}),
        drive=drive,
        channels={"messages": PLAIN_MESSAGES, STATE: PLAIN_STATE},
        served=[STATE],
        expect={"removed": True, "resumes": 1},
        notes=[
            "questions 3 and 4 are one input",
            "after turn 5's answer a node removes all but the last two messages (the documented delete-messages pattern); after turn 7's a node clears them (REMOVE_ALL_MESSAGES)",
        ],
    )


# --- summarize (langchain create_agent + SummarizationMiddleware) -----------

SUMMARIZE_TURNS = [(f"Sketch the {r} catchment.", sketch(r)) for r in AREAS]


class SessionState(AgentState):
    """An agent's state with the host's tool_state channel (the
    mcp-toolsets-runtime convention)."""

    tool_state: NotRequired[Annotated[dict, merge_tool_state]]


class SessionStateMiddleware(AgentMiddleware):
    """Adds the host's tool_state channel to a deep agent's state."""

    state_schema = SessionState


def summarize() -> Scenario:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    def build(saver: Any) -> Any:
        summaries = iter([AIMessage(content=f"Summary {i}: catchments sketched so far.") for i in range(1, 100)])
        return create_agent(
            model=ScriptedChatModel(turns=SUMMARIZE_TURNS, by="id"),
            tools=[sketch_catchment],
            state_schema=SessionState,
            middleware=[
                SummarizationMiddleware(
                    model=GenericFakeChatModel(messages=summaries),
                    trigger=("messages", 6),
                    keep=("messages", 2),
                )
            ],
            checkpointer=saver,
        )

    return Scenario(
        name="summarize",
        build=build,
        drive=drive_questions(SUMMARIZE_TURNS),
        channels={"messages": PLAIN_MESSAGES, STATE: PLAIN_STATE},
        served=[STATE],
        expect={"summarized": True, "removed": True},
        notes=["SummarizationMiddleware(trigger=('messages', 6), keep=('messages', 2)); summaries by GenericFakeChatModel"],
        extra_versions=["langchain"],
    )


# --- deepagents ---------------------------------------------------------------

DEEP_TURNS = [
    (
        "Start notes on the Severn catchment and plan the work.",
        [
            [
                ("write_todos", {"todos": [
                    {"content": "Sketch the Severn", "status": "in_progress"},
                    {"content": "Compare with the Thames", "status": "pending"},
                ]}),
                ("write_file", {"file_path": "/notes/severn.md", "content": "# Severn\narea: unknown\n"}),
            ],
            [("sketch_catchment", {"river": "Severn"})],
            [("edit_file", {"file_path": "/notes/severn.md", "old_string": "area: unknown", "new_string": "area: 11420 km2"})],
            [],
        ],
    ),
    (
        "Keep a scratch file for the Thames.",
        [
            [("write_file", {"file_path": "/scratch/thames.txt", "content": "Thames: to do\n"})],
            [("sketch_catchment", {"river": "Thames"})],
            [],
        ],
    ),
    (
        "Replace the Severn notes with a fresh summary.",
        [
            [("write_file", {"file_path": "/notes/severn.md", "content": "# Severn (revised)\narea: 11420 km2\nlargest so far: Thames\n"})],
            [("write_todos", {"todos": [
                {"content": "Sketch the Severn", "status": "completed"},
                {"content": "Compare with the Thames", "status": "in_progress"},
            ]})],
            [],
        ],
    ),
    (
        "Delete the Thames scratch file.",
        [[("delete", {"file_path": "/scratch/thames.txt"})], []],
    ),
    (
        "Edit the notes: the Trent next.",
        [
            [("edit_file", {"file_path": "/notes/severn.md", "old_string": "largest so far: Thames", "new_string": "next: Trent"})],
            [("sketch_catchment", {"river": "Trent"})],
            [("write_todos", {"todos": [
                {"content": "Sketch the Severn", "status": "completed"},
                {"content": "Compare with the Thames", "status": "completed"},
                {"content": "Sketch the Trent", "status": "completed"},
            ]})],
            [],
        ],
    ),
    (
        "Sketch every catchment once more, one at a time.",
        [[("sketch_catchment", {"river": r})] for r in [*AREAS, *AREAS]] + [[]],
    ),
    ("Thanks, that's all.", [[]]),
]


def deepagents() -> Scenario:
    from deepagents import create_deep_agent
    from langchain.agents.middleware import TodoListMiddleware

    def build(saver: Any) -> Any:
        # deepagents 0.7 no longer plans with write_todos by default;
        # langchain's TodoListMiddleware (what it used) brings the todos
        # channel back.
        return create_deep_agent(
            model=ScriptedChatModel(turns=DEEP_TURNS, by="id"),
            tools=[sketch_catchment],
            middleware=[SessionStateMiddleware(), TodoListMiddleware()],
            checkpointer=saver,
        )

    return Scenario(
        name="deepagents",
        build=build,
        drive=drive_questions(DEEP_TURNS),
        channels={
            "messages": messages_channel(50),
            "files": {"delta": True, "snapshot_frequency": 50, "reducer": "files"},
            "todos": {"delta": False, "snapshot_frequency": None, "reducer": "other:last_value"},  # PlanningState.todos: no reducer
            STATE: PLAIN_STATE,
        },
        served=[STATE, "files", "todos"],
        expect={"delta": ["messages", "files"], "min_snapshots": {"messages": 1}, "replayed": True, "files_changed": True},
        notes=["create_deep_agent with its default StateBackend, plus langchain's TodoListMiddleware (deepagents 0.7 has no write_todos of its own); the scripted model calls write_todos, write_file, edit_file and delete"],
        extra_versions=["langchain", "deepagents"],
    )


# --- forks: time travel on plain channels -----------------------------------
#
# Each thread is rewound at least once: a run started from an older
# checkpoint (invoke with its checkpoint_id, a replay with invoke(None),
# update_state on it). The truth's turns are the lineage's, the branch it
# left is in the truth's forks. Plain channels, so that the reference
# (mcp-toolsets-runtime's turns_from, which counts human messages) can read
# every fork shape too.

LINEAGE_TURNS = [
    ("Sketch the Severn catchment.", sketch("Severn")),
    ("Now the Thames.", sketch("Thames")),
    ("Sketch the Trent.", sketch("Trent")),
    ("Sketch the Wye.", sketch("Wye")),
    ("Sketch the Tay.", sketch("Tay")),
    ("Sketch the Clyde.", sketch("Clyde")),
    ("Which is the largest so far?", [[]]),
]

REPLAY_TURNS = [
    LINEAGE_TURNS[0],
    ("Read the Thames flow.", [[("read_flow", {"river": "Thames"})], []]),
    *LINEAGE_TURNS[2:],
]


def turn_end(rec: Recorder, turn: int) -> str:
    """The checkpoint the lineage's turn ended at, as the host saw it."""
    return rec.turns()[turn - 1]["checkpoint_id"]


def ask_from(rec: Recorder, graph: Any, n: int, text: str, start: str) -> None:
    """Question n sent from an older checkpoint: time travel."""
    msg = HumanMessage(content=text, id=f"q-{n}")
    cfg = {**rec.at(start), "recursion_limit": 200}
    rec.run("question", lambda: graph.invoke({"messages": [msg]}, cfg), [text], start=start)


def replay_from(rec: Recorder, graph: Any, start: str) -> None:
    """invoke(None) from an older checkpoint: what is next there runs again
    (nothing: LangGraph writes a fork checkpoint)."""
    cfg = {**rec.at(start), "recursion_limit": 200}
    rec.run("replay", lambda: graph.invoke(None, cfg), start=start)


def tools_checkpoint(rec: Recorder, graph: Any, question: int) -> str:
    """The checkpoint of question n's run whose next node is tools."""
    run = next(r for r in rec.runs if question in r["question_numbers"])
    for cid in run["checkpoints"]:
        if graph.get_state(rec.at(cid)).next == ("tools",):
            return cid
    raise SystemExit(f"question {question}'s run has no checkpoint before its tools")


def fork_scenario(name: str, turns: list, drive: Callable[[Recorder, Any], None], forks: int, notes: str, **expect: Any) -> Scenario:
    schema = state_schema(add_messages, merge_tool_state)
    return Scenario(
        name=name,
        build=lambda saver: build_graph(saver, schema, turns),
        drive=drive,
        channels={"messages": PLAIN_MESSAGES, STATE: PLAIN_STATE},
        served=[STATE],
        expect={"forks": forks, "reference_agrees": True, **expect},
        notes=[notes],
    )


def fork_question() -> Scenario:
    def drive(rec: Recorder, graph: Any) -> None:
        for n in range(1, 5):
            ask(rec, graph, n, LINEAGE_TURNS[n - 1][0])
        ask_from(rec, graph, 5, LINEAGE_TURNS[4][0], turn_end(rec, 2))
        ask(rec, graph, 6, LINEAGE_TURNS[5][0])
        ask(rec, graph, 7, LINEAGE_TURNS[6][0])

    return fork_scenario("fork-question", LINEAGE_TURNS, drive, 1,
                         "four questions, then question 5 (Tay) sent from the checkpoint that ended turn 2, then two more: the lineage holds 5, turn 3 is Tay; the test's pruning deletes the fork point",
                         min_total=5)


def fork_replay_tools() -> Scenario:
    def drive(rec: Recorder, graph: Any) -> None:
        for n in range(1, 5):
            ask(rec, graph, n, REPLAY_TURNS[n - 1][0])
        replay_from(rec, graph, tools_checkpoint(rec, graph, 2))
        ask(rec, graph, 5, REPLAY_TURNS[4][0])
        ask(rec, graph, 6, REPLAY_TURNS[5][0])

    return fork_scenario("fork-replay-tools", REPLAY_TURNS, drive, 1,
                         "four questions, then invoke(None) from turn 2's checkpoint whose next node is tools: read_flow runs again and reads a new value; then two questions: 4 turns, turn 2 the replayed run's",
                         min_total=4, replayed_value=2)


def fork_replay_end() -> Scenario:
    def drive(rec: Recorder, graph: Any) -> None:
        for n in range(1, 5):
            ask(rec, graph, n, LINEAGE_TURNS[n - 1][0])
        replay_from(rec, graph, turn_end(rec, 2))
        ask(rec, graph, 5, LINEAGE_TURNS[4][0])
        ask(rec, graph, 6, LINEAGE_TURNS[5][0])

    return fork_scenario("fork-replay-end", LINEAGE_TURNS, drive, 1,
                         "four questions, then invoke(None) from turn 2's end (LangGraph writes a fork checkpoint there), then two questions: 4 turns",
                         min_total=4)


def fork_update() -> Scenario:
    def drive(rec: Recorder, graph: Any) -> None:
        for n in range(1, 3):
            ask(rec, graph, n, LINEAGE_TURNS[n - 1][0])
        start = turn_end(rec, 1)
        fork: dict = {}

        def update() -> None:
            fork["config"] = graph.update_state(
                rec.at(start),
                {
                    "messages": [AIMessage(content="Going back to the Severn.", id="fork-note")],
                    STATE: {"notes/fork": {"value": "rewound to turn 1", "tool": "update_state", "turn": 1}},
                },
                as_node="agent",
            )

        rec.run("update_state", update, start=start)
        ask(rec, graph, 5, LINEAGE_TURNS[4][0])
        ask(rec, graph, 6, LINEAGE_TURNS[5][0])

    return fork_scenario("fork-update", LINEAGE_TURNS, drive, 1,
                         "two questions, then update_state on turn 1's end (as_node='agent': a message and a tool_state entry), then two questions: 3 turns, turn 2 is Tay; turn 1 ends at the update_state's checkpoint",
                         min_total=3)


def fork_of_fork() -> Scenario:
    def drive(rec: Recorder, graph: Any) -> None:
        for n in range(1, 5):
            ask(rec, graph, n, LINEAGE_TURNS[n - 1][0])
        ask_from(rec, graph, 5, LINEAGE_TURNS[4][0], turn_end(rec, 2))
        ask(rec, graph, 6, LINEAGE_TURNS[5][0])
        ask_from(rec, graph, 7, LINEAGE_TURNS[6][0], turn_end(rec, 3))

    return fork_scenario("fork-of-fork", LINEAGE_TURNS, drive, 2,
                         "four questions; question 5 from turn 2's end, then 6; then question 7 from the fork's own turn 3 (question 5's end): the lineage holds questions 1, 2, 5, 7; two forks",
                         min_total=4)


def fork_first() -> Scenario:
    def drive(rec: Recorder, graph: Any) -> None:
        for n in range(1, 4):
            ask(rec, graph, n, LINEAGE_TURNS[n - 1][0])
        first = rec.runs[0]["checkpoints"][0]  # the input checkpoint before question 1
        ask_from(rec, graph, 4, LINEAGE_TURNS[3][0], first)
        ask(rec, graph, 5, LINEAGE_TURNS[4][0])
        ask(rec, graph, 6, LINEAGE_TURNS[5][0])

    return fork_scenario("fork-first", LINEAGE_TURNS, drive, 1,
                         "three questions, then the first replaced: question 4 (Wye) sent from the thread's first checkpoint, then two more: 3 turns, turn 1 is Wye; the fork is at turn 0",
                         min_total=3)


# --- fork-subgraph: Studio's re-run from a checkpoint inside a subgraph -----


def fork_subgraph() -> Scenario:
    schema = state_schema(add_messages, merge_tool_state)

    def build(saver: Any) -> Any:
        inner = build_graph(None, schema, LINEAGE_TURNS)
        g = StateGraph(schema)
        g.add_node("survey", inner)
        g.add_edge(START, "survey")
        g.add_edge("survey", END)
        return g.compile(checkpointer=saver)

    def drive(rec: Recorder, graph: Any) -> None:
        for n in range(1, 4):
            ask(rec, graph, n, LINEAGE_TURNS[n - 1][0])
        # Turn 2's root checkpoint whose next is the subgraph, and inside it
        # the subgraph's checkpoint before its tools: re-run from there.
        run = next(r for r in rec.runs if 2 in r["question_numbers"])
        parent, sub = None, None
        for cid in run["checkpoints"]:
            snap = graph.get_state(rec.at(cid))
            if snap.next != ("survey",) or not snap.tasks:
                continue
            state = snap.tasks[0].state
            ns_config = state if isinstance(state, dict) else state.config
            for h in graph.get_state_history(ns_config):
                if h.next == ("tools",):
                    parent, sub = cid, h.config
                    break
        if sub is None:
            raise SystemExit("no subgraph checkpoint before its tools in turn 2")
        # The fork point on the root lineage is the root checkpoint the
        # subgraph ran under (next: survey).
        cfg = {**sub, "recursion_limit": 200}
        rec.run("replay", lambda: graph.invoke(None, cfg), start=parent)
        ask(rec, graph, 4, LINEAGE_TURNS[3][0])

    return Scenario(
        name="fork-subgraph",
        build=build,
        drive=drive,
        channels={"messages": PLAIN_MESSAGES, STATE: PLAIN_STATE},
        served=[STATE],
        expect={"forks": 1, "min_total": 3},
        notes=["a root graph whose one node is a compiled subgraph (agent <-> tools); three questions, then a re-run from the subgraph's checkpoint before turn 2's tools (invoke(None) with that subgraph config, as Studio's re-run from here), then one more question: 3 turns"],
    )


# --- runs: graphs without messages ------------------------------------------

RUN_INPUTS = [{"question": f"Sketch the {r} catchment."} for r in ["Severn", "Thames", "Trent"]]


def input_text(value: Any) -> str:
    """A run's input as the question text of a runs-numbered turn."""
    return json.dumps(wire(value), ensure_ascii=False, separators=(",", ":"))


def river_of(question: str) -> str:
    return next(r for r in AREAS if r in question)


def measured(river: str) -> dict:
    return {AREA_KEY: {"value": AREAS[river], "tool": "sketch_area", "inputs": {"river": "model"}},
            "sketch-ops/sketch_area/name": {"value": river, "tool": "sketch_area"}}


def ask_run(rec: Recorder, graph: Any, value: Any, config: Optional[dict] = None, fails: bool = False) -> None:
    cfg = config or rec.config
    rec.run("question", lambda: graph.invoke(value, cfg), [input_text(value)], inputs=[wire(value)], fails=fails)


def runs_graph(failing: bool) -> Scenario:
    schema = TypedDict("RunState", {"question": str, STATE: Annotated[dict, merge_tool_state]}, total=False)

    def build(saver: Any) -> Any:
        failures: dict[str, int] = {}  # the rivers whose run failed once

        def plan(state: dict) -> dict:
            return {}

        def measure(state: dict) -> dict:
            river = river_of(state["question"])
            if failing and river == "Thames" and not failures.get(river):
                failures[river] = 1
                raise RuntimeError("the Thames gauge did not answer")
            return {STATE: measured(river)}

        g = StateGraph(schema)
        g.add_node("plan", plan)
        g.add_node("measure", measure)
        g.add_edge(START, "plan")
        g.add_edge("plan", "measure")
        g.add_edge("measure", END)
        return g.compile(checkpointer=saver)

    def drive(rec: Recorder, graph: Any) -> None:
        for value in RUN_INPUTS:
            fails = failing and "Thames" in value["question"]
            ask_run(rec, graph, value, fails=fails)
            if fails:
                rec.run("resume", lambda: graph.invoke(None, rec.config))

    return Scenario(
        name="runs-resumed" if failing else "runs-graph",
        build=build,
        drive=drive,
        channels={STATE: PLAIN_STATE},
        served=[STATE],
        expect={"numbering": "runs", "min_total": 3, **({"resumes": 1} if failing else {})},
        notes=["a StateGraph without messages (question: str, tool_state), run three times: three runs, each a turn whose question is its input as JSON"
               + ("; the second run fails in its node and is resumed with invoke(None): still one run" if failing else "")],
    )


def runs_functional(with_messages: bool) -> Scenario:
    from langgraph.func import entrypoint, task

    def build(saver: Any) -> Any:
        @task
        def sketch_area(river: str) -> dict:
            return measured(river)

        @entrypoint(checkpointer=saver)
        def surveyor(inputs: dict, *, previous: Optional[dict] = None) -> dict:
            saved = dict(previous or {})
            river = river_of(inputs["question"])
            saved[STATE] = merge_tool_state(saved.get(STATE), sketch_area(river).result())
            if with_messages:
                n = len(saved.get("messages") or []) // 2 + 1
                saved["messages"] = [*(saved.get("messages") or []),
                                     HumanMessage(content=inputs["question"], id=f"q-{n}"),
                                     AIMessage(content=f"Answer to turn {n}.", id=f"ai-{n}-0")]
            return saved

        return surveyor

    def drive(rec: Recorder, graph: Any) -> None:
        for value in RUN_INPUTS:
            if with_messages:
                # The saved messages hold each run's question: turns are
                # numbered by question, as a graph with messages is.
                rec.run("question", lambda: graph.invoke(value, rec.config), [value["question"]])
            else:
                ask_run(rec, graph, value)

    return Scenario(
        name="functional-messages" if with_messages else "functional",
        build=build,
        drive=drive,
        channels={STATE: PLAIN_STATE},
        served=[STATE],
        expect={"numbering": "complete" if with_messages else "runs", "min_total": 3, "functional": True},
        notes=["the functional API: an @entrypoint with a checkpointer calling an @task, run three times; the saved return value (__previous__) holds tool_state"
               + (" and a messages list (a question and an answer per run)" if with_messages else "")],
    )


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "delta-messages-1": lambda: delta_messages(1),
    "delta-messages-4": lambda: delta_messages(4),
    "delta-messages-50": lambda: delta_messages(50),
    "delta-state": delta_state,
    "delta-exit": delta_exit,
    "delta-interrupt": delta_interrupt,
    "delta-fork": delta_fork,
    "delta-remove": delta_remove,
    "deepagents": deepagents,
    "summarize": summarize,
    "remove-node": remove_node,
    "fork-question": fork_question,
    "fork-replay-tools": fork_replay_tools,
    "fork-replay-end": fork_replay_end,
    "fork-update": fork_update,
    "fork-of-fork": fork_of_fork,
    "fork-first": fork_first,
    "fork-subgraph": fork_subgraph,
    "runs-graph": lambda: runs_graph(False),
    "runs-resumed": lambda: runs_graph(True),
    "functional": lambda: runs_functional(False),
    "functional-messages": lambda: runs_functional(True),
}

# ---------------------------------------------------------------------------
# Writing, reading and checking a truth.


def write(args: argparse.Namespace) -> dict[str, Any]:
    sc = SCENARIOS[args.scenario]()
    started = time.monotonic()
    with open_saver(args) as saver:
        graph = sc.build(saver)
        rec = Recorder(graph, saver, args.thread, sc.served)
        if not args.read_only:
            if graph.get_state(rec.config).values:
                raise SystemExit(f"thread {args.thread!r} already has checkpoints")
            sc.drive(rec, graph)
        checkpoints, branches = describe_checkpoints(graph, saver, args.thread, sc.served, list(sc.channels))
        forks = [] if args.read_only else rec.read_back_forks()
    result: dict[str, Any] = {
        "writer": "python",
        "program": "write_scenario.py",
        "scenario": sc.name,
        "thread_id": args.thread,
        "schema": args.schema or "",
        "sqlite": args.sqlite or "",
        "versions": versions(bool(args.sqlite), sc.extra_versions),
        "channels": sc.channels,
        "served": sc.served,
        "notes": sc.notes,
        "read_only": bool(args.read_only),
        "numbering": sc.expect.get("numbering", "complete"),
        "forks": [],
        "head": None,
    }
    if args.read_only:
        previous = json.load(open(args.truth, encoding="utf-8")) if args.truth else {}
        result["runs"] = None
        result["turns"] = carried_turns(previous, checkpoints, sc.served)
        result["total"] = previous.get("total")
    else:
        result["runs"] = rec.runs
        result["turns"] = rec.turns()
        result["total"] = len(result["turns"])
        result["forks"] = forks
        result["head"] = rec.head
    result["checkpoints"] = checkpoints
    result["branches"] = branches
    if args.no_reference:
        result["reference"], result["reference_error"] = None, "not asked for (--no-reference)"
    else:
        result["reference"], result["reference_error"] = reference_or_reason(args)
    result["seconds"] = round(time.monotonic() - started, 2)
    return result


def check(truth: dict[str, Any], expect: dict[str, Any]) -> list[str]:
    """What is inconsistent in a truth; empty when all is well."""
    bad: list[str] = []
    cps = {c["checkpoint_id"]: c for c in truth["checkpoints"]}
    served = truth["served"]

    def same(what: str, cid: str, got: dict) -> None:
        c = cps.get(cid)
        if c is None:
            bad.append(f"{what}: checkpoint {cid} is not in get_state_history")
            return
        for ch in [*served, "messages"]:
            if got.get(ch) != c["values"].get(ch):
                bad.append(f"{what}: {ch} differs from checkpoint {cid}'s reconstructed values")

    for t in truth["turns"] or []:
        if t["retained"]:
            same(f"turn {t['turn']}", t["checkpoint_id"], {**t["state"], "messages": t["messages"]})
    if not truth["read_only"]:
        if truth["total"] != len(truth["turns"]) or truth["total"] < expect.get("min_total", 5):
            bad.append(f"total {truth['total']}, {len(truth['turns'])} turns")
        bad.extend(check_lineage(truth, expect))
        for i, r in enumerate(truth["runs"]):
            same(f"run {i}", r["state_after"]["checkpoint_id"], r["state_after"])
            if not r["checkpoints"]:
                bad.append(f"run {i} ({r['kind']}) created no checkpoint")
        ids = [t["checkpoint_id"] for t in truth["turns"]]
        for a, b in zip(ids, ids[1:]):
            if a == b and len({tuple(t["answered_with"]) for t in truth["turns"] if t["checkpoint_id"] == a}) > 1:
                bad.append(f"two turns asked apart end at one checkpoint {a}")
        if expect.get("resumes") is not None:
            n = sum(1 for r in truth["runs"] if r["kind"] == "resume")
            if n != expect["resumes"]:
                bad.append(f"{n} resume runs, want {expect['resumes']}")
    ordered = truth["checkpoints"]
    first = ordered[0]["checkpoint_id"] if ordered else None
    for ch in expect.get("delta", []):
        snaps = [c for c in ordered if c["stored"].get(ch) == "snapshot" and c["checkpoint_id"] != first]
        bare = [c for c in ordered if ch not in c["stored"]]
        want = expect.get("min_snapshots", {}).get(ch, 0)
        if len(snaps) < want:
            bad.append(f"{ch}: {len(snaps)} snapshots after the first checkpoint, want at least {want}")
        if expect.get("replayed") and len(bare) < len(ordered) // 2:
            bad.append(f"{ch}: only {len(bare)} of {len(ordered)} checkpoints store nothing (replayed)")
        if any(c["stored"].get(ch) == "value" for c in ordered):
            bad.append(f"{ch}: a plain value stored in a DeltaChannel thread")
    if expect.get("stub") and not any(c["metadata"]["step"] == -2 for c in ordered):
        bad.append("durability=exit: no stub checkpoint (step -2)")
    if expect.get("branches") and len(truth["branches"]) != expect["branches"]:
        bad.append(f"{len(truth['branches'])} branches, want {expect['branches']}")
    if expect.get("summarized"):
        if not any(m.get("marker") == "lc_source=summarization" for c in ordered for m in c["values"]["messages"]):
            bad.append("no checkpoint holds a summarization message (lc_source=summarization)")
    if expect.get("removed") and not truth["read_only"]:
        drops = [
            t["turn"] for t in truth["turns"]
            if sum(1 for m in t["messages"] if m["type"] == "human" and not m["synthetic"]) < max(t["answered_with"])
        ]
        if not drops:
            bad.append("no turn ends with fewer human messages than questions asked")
    if expect.get("files_changed") and not truth["read_only"]:
        files = [t["state"].get("files") or {} for t in truth["turns"]]
        severn = [(f.get("/notes/severn.md") or {}).get("content") for f in files]
        if len(set(map(json.dumps, severn))) < 3:
            bad.append(f"/notes/severn.md does not change over the turns: {severn}")
        if not any("/scratch/thames.txt" in f for f in files) or "/scratch/thames.txt" in files[-1]:
            bad.append("/scratch/thames.txt is not written and then deleted")
    return bad


def check_lineage(truth: dict[str, Any], expect: dict[str, Any]) -> list[str]:
    """What is inconsistent in a truth's lineage and forks: every turn ends
    on the head's parent chain (get_state_history's), the head is the
    thread's newest root checkpoint, each fork leaves the lineage at its
    fork point for a branch whose newest checkpoint is a leaf off the
    lineage, and its turns read back with get_state as they were recorded."""
    bad: list[str] = []
    ordered = truth["checkpoints"]
    head = truth["head"]
    if ordered and head != ordered[-1]["checkpoint_id"]:
        bad.append(f"head {head} (get_state) is not the newest root checkpoint {ordered[-1]['checkpoint_id']}")
    chains = {b["head"]: b["checkpoints"] for b in truth["branches"]}
    lineage = set(chains.get(head, []))
    if head not in chains:
        bad.append(f"head {head} is not a leaf of get_state_history")
    for t in truth["turns"]:
        if t["checkpoint_id"] not in lineage:
            bad.append(f"turn {t['turn']} ends at {t['checkpoint_id']}, off the head's lineage")
    if len(truth["forks"]) != expect.get("forks", 0):
        bad.append(f"{len(truth['forks'])} forks, want {expect.get('forks', 0)}")
    for i, f in enumerate(truth["forks"]):
        if f["from_checkpoint_id"] not in lineage:
            bad.append(f"fork {i}: its fork point {f['from_checkpoint_id']} is off the lineage")
        newest = f["newest_checkpoint_id"]
        if newest not in chains or newest in lineage or f["from_checkpoint_id"] not in chains[newest]:
            bad.append(f"fork {i}: {newest} is not a leaf off the lineage that descends from the fork point")
        if len(f["turns"]) != f["questions"]:
            bad.append(f"fork {i}: {len(f['turns'])} turns for {f['questions']} questions")
        for t, b in zip(f["turns"], f["read_back"]):
            if t["state"] != b["state"] or t["messages"] != b["messages"]:
                bad.append(f"fork {i} turn {t['turn']}: get_state at {t['checkpoint_id']} reads back another state than the turn ended with")
        shared = truth["turns"][: f["turn"]]
        if [t["question"] for t in f["turns"][: f["turn"]]] != [t["question"] for t in shared]:
            bad.append(f"fork {i}: the branch's first {f['turn']} turns are not the lineage's")
    if (n := expect.get("replayed_value")) is not None and truth["forks"]:
        was, now = truth["forks"][0]["turns"][n - 1]["state"], truth["turns"][n - 1]["state"]
        if was == now:
            bad.append(f"turn {n}: the replayed run wrote the same state as the run it replaced")
    if expect.get("reference_agrees") and truth["reference"] is not None:
        ref = truth["reference"]
        if ref["total"] != truth["total"]:
            bad.append(f"reference: total {ref['total']}, the host's lineage {truth['total']}")
    return bad


def summary(truth: dict[str, Any], bad: list[str]) -> str:
    ordered = truth["checkpoints"]
    stored = {
        ch: sum(1 for c in ordered if c["stored"].get(ch) == "snapshot")
        for ch, spec in truth["channels"].items()
        if spec["delta"]
    }
    where = f"sqlite {truth['sqlite']}" if truth["sqlite"] else f"postgres schema {truth['schema'] or 'public'}"
    ref = truth["reference"]
    return (
        f"{truth['scenario']} ({where}{', read-only' if truth['read_only'] else ''}): "
        f"{truth['total']} questions, {len(truth['runs'] or [])} runs, {len(ordered)} checkpoints, "
        f"{len(truth['branches'])} branch(es), {len(truth['forks'])} fork(s), numbering {truth['numbering']}, snapshots {stored}, "
        f"reference {'total ' + str(ref['total']) if ref else 'no: ' + str(truth['reference_error'])[:80]}, "
        f"{truth['seconds']}s: {'ok' if not bad else 'INCONSISTENT: ' + '; '.join(bad)}"
    )


def run_check(args: argparse.Namespace) -> int:
    names = args.scenario or list(SCENARIOS)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="write-scenario-") as tmp:
        stores: list[dict[str, Any]] = [{"sqlite": None, "dsn": None, "schema": None}]
        if args.dsn:
            stores.append({"sqlite": None, "dsn": args.dsn, "schema": args.schema})
        for name in names:
            for st in stores:
                thread = f"check-{name}-{time.time_ns()}"
                a = argparse.Namespace(
                    scenario=name, thread=thread, no_reference=args.no_reference, truth=None,
                    sqlite=st["sqlite"] or (None if st["dsn"] else os.path.join(tmp, f"{name}.db")),
                    dsn=st["dsn"], schema=st["schema"], read_only=False,
                )
                try:
                    truth = write(a)
                    bad = check(truth, SCENARIOS[name]().expect)
                    print(summary(truth, bad), flush=True)
                    path = os.path.join(tmp, f"{thread}.json")
                    dump(path, truth)
                    a.read_only, a.truth = True, path
                    again = write(a)
                    bad2 = check(again, SCENARIOS[name]().expect)
                    if [c["values"] for c in again["checkpoints"]] != [c["values"] for c in truth["checkpoints"]]:
                        bad2.append("--read-only reconstructs other values")
                    if again["turns"] != truth["turns"]:
                        bad2.append("--read-only carries other turns")
                    print(summary(again, bad2), flush=True)
                    failed += bool(bad) + bool(bad2)
                except Exception:
                    failed += 1
                    print(f"{name}: FAILED\n{traceback.format_exc()}", flush=True)
    print(f"{len(names) * len(stores) * 2 - failed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="run and check every scenario")
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS))
    ap.add_argument("--dsn", help="PostgreSQL: PostgresSaver")
    ap.add_argument("--sqlite", metavar="PATH", help="an SQLite file: SqliteSaver")
    ap.add_argument("--schema", default=None, help="PostgreSQL schema for the saver's tables")
    ap.add_argument("--thread")
    ap.add_argument("--out")
    ap.add_argument("--read-only", action="store_true", help="describe the thread as it stands")
    ap.add_argument("--truth", help="with --read-only: the truth.json written with the thread")
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args()
    if args.sqlite and args.schema:
        ap.error("--schema is for PostgreSQL")
    if args.check:
        if args.sqlite or args.thread or args.out or args.read_only:
            ap.error("--check takes only --dsn, --schema, --scenario and --no-reference")
        return run_check(args)
    if not args.scenario or len(args.scenario) != 1:
        ap.error("--scenario: exactly one")
    if bool(args.dsn) == bool(args.sqlite):
        ap.error("exactly one of --dsn and --sqlite")
    if not args.thread or not args.out:
        ap.error("--thread and --out are required")
    if args.truth and not args.read_only:
        ap.error("--truth is for --read-only")
    args.scenario = args.scenario[0]
    truth = write(args)
    bad = check(truth, SCENARIOS[args.scenario]().expect)
    dump(args.out, truth)
    print(summary(truth, bad), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

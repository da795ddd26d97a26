#!/usr/bin/env python3
"""A real LangGraph agent whose tools include inspect_state over historyd, run with invoke and ainvoke.

    langgraph_agent.py --target HOST:PORT --db FILE --out results.json

test/clients' TestLangGraphAgent runs this in the conformance virtualenv
(LangGraph, its SQLite savers) against a historyd serving ``--db``, the
SQLite file the agent's own checkpointer writes. The agent is a LangGraph
``StateGraph`` with a ``tool_state`` channel: a model node (the conformance
writers' scripted chat model, ``lgwriter.ScriptedChatModel``, so no model
is called) and a ``ToolNode`` holding a tool that publishes into
``tool_state`` and the ``inspect_state`` tool of
``historyd_client.langchain``. Four questions: two sketches that write the
same keys, then "what was the area at turn 1?" (``inspect_state`` with
``turn=1``, read from historyd) and "and now?" (without a turn).

It runs three times, on three threads: ``graph.invoke`` (the usual sync
call, whose ToolNode runs the tool with ``invoke``) over
``SyncHistorydThreadHistory``; ``graph.invoke`` over the async
``HistorydThreadHistory`` (read through its sync twin); and
``graph.ainvoke`` over ``HistorydThreadHistory``. Writes, per run, the
inspect_state answers the agent got and the area LangGraph's own state held
at the end of each turn (``graph.get_state``), for the test to hold the
answers to.

lgwriter is test/conformance/py's (PYTHONPATH); historyd_client is
client/python/src's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState, ToolNode, tools_condition
from langgraph.types import Command
from lgwriter import ScriptedChatModel, merge_tool_state, publish

from historyd_client import HistorydThreadHistory, SyncHistorydThreadHistory
from historyd_client.langchain import inspect_state_tool

AREA = "sketch-ops/sketch_area/area_km2"
NAME = "sketch-ops/sketch_area/name"

SCRIPT = [
    ("sketch the Severn catchment", [[("sketch_area", {"name": "Severn", "km2": 11420})], []]),
    ("now the Thames", [[("sketch_area", {"name": "Thames", "km2": 12935})], []]),
    ("what was the area at turn 1?", [[("inspect_state", {"key": AREA, "turn": 1})], []]),
    ("and what is it now?", [[("inspect_state", {"key": AREA})], []]),
]


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    tool_state: Annotated[dict[str, Any], merge_tool_state]


@tool
def sketch_area(
    name: str,
    km2: int,
    state: Annotated[dict, InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> Command:
    """Sketch a region and measure its area."""
    return publish(state, tool_call_id, "sketch_area", {AREA: km2, NAME: name}, {"name": "model", "km2": "model"})


def agent(history: Any, checkpointer: Any) -> Any:
    model = ScriptedChatModel(turns=SCRIPT)
    tools = [sketch_area, inspect_state_tool(history)]
    g = StateGraph(State)
    g.add_node("model", lambda state: {"messages": [model.bind_tools(tools).invoke(state["messages"])]})
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    return g.compile(checkpointer=checkpointer)


def answers_of(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolMessage) and m.name == "inspect_state"]


def area(snapshot: Any) -> Any:
    return (snapshot.values.get("tool_state") or {}).get(AREA, {}).get("value")


def run_sync(db: str, history: Any, thread: str) -> dict[str, Any]:
    conn = sqlite3.connect(db, check_same_thread=False, timeout=30)
    try:
        graph = agent(history, SqliteSaver(conn))
        config = {"configurable": {"thread_id": thread}}
        areas = []
        for question, _ in SCRIPT:
            out = graph.invoke({"messages": [HumanMessage(question)]}, config)
            areas.append(area(graph.get_state(config)))
        return {"thread": thread, "answers": answers_of(out["messages"]), "areas": areas}
    finally:
        conn.close()


async def run_async(db: str, history: Any, thread: str) -> dict[str, Any]:
    async with AsyncSqliteSaver.from_conn_string(db) as saver:
        graph = agent(history, saver)
        config = {"configurable": {"thread_id": thread}}
        areas = []
        for question, _ in SCRIPT:
            out = await graph.ainvoke({"messages": [HumanMessage(question)]}, config)
            areas.append(area(await graph.aget_state(config)))
        return {"thread": thread, "answers": answers_of(out["messages"]), "areas": areas}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="historyd's address, plaintext, serving --db")
    ap.add_argument("--db", required=True, help="the SQLite file the agent checkpoints into")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    runs = {}
    with SyncHistorydThreadHistory(args.target, plaintext=True) as history:
        runs["invoke"] = run_sync(args.db, history, "agent-invoke")
    aio = HistorydThreadHistory(args.target, plaintext=True)
    runs["invoke-over-async-client"] = run_sync(args.db, aio, "agent-invoke-over-async-client")
    runs["ainvoke"] = asyncio.run(run_async(args.db, aio, "agent-ainvoke"))
    asyncio.run(aio.close())
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(runs, f)
    print(f"langgraph_agent.py: {len(runs)} runs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Writes python_saver.db: a two-turn thread through Python's SqliteSaver.

Run with langgraph 1.2.x and langgraph-checkpoint-sqlite 3.1.x installed:
    python python_saver.py
"""

import os
import sqlite3
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages


def merge(old, new):
    out = dict(old or {})
    out.update(new or {})
    return out


class State(TypedDict):
    messages: Annotated[list, add_messages]
    tool_state: Annotated[dict, merge]


def agent(state):
    turn = sum(1 for m in state["messages"] if m.type == "human")
    return {
        "messages": [AIMessage(f"answer {turn}")],
        "tool_state": {
            "sketch-ops/sketch_area/area_km2": {"value": 11420.5 * turn, "tool": "sketch_area", "seq": turn, "turn": turn, "turns_written": turn},
        },
    }


graph = StateGraph(State)
graph.add_node("agent", agent)
graph.add_edge(START, "agent")
graph.add_edge("agent", END)

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_saver.db")
if os.path.exists(path):
    os.remove(path)
conn = sqlite3.connect(path, check_same_thread=False)
app = graph.compile(checkpointer=SqliteSaver(conn))
config = {"configurable": {"thread_id": "demo"}}
app.invoke({"messages": [HumanMessage("sketch the Severn")]}, config)
app.invoke({"messages": [HumanMessage("Wie groß ist die Themse? 🌊")]}, config)
conn.close()

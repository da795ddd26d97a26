#!/usr/bin/env python3
"""Check the demo file against real LangGraph.

Run by demo_test.go with the venv of scripts/pyenv.sh (langgraph,
langgraph-checkpoint-sqlite). It does three things and writes one JSON
report:

1. Reads the demo file the way an agent host would: SqliteSaver.list() for
   every checkpoint, and get_state_history() of the demo's graph compiled on
   the file, giving each checkpoint's message counts, tool_state and the
   nodes LangGraph would run next. Then continues thread "demo" with a
   fifth turn, to show LangGraph can resume from the file.

2. Replays the same conversation (the transcript the Go side wrote, in
   msgpack that JsonPlusSerializer loads into real LangChain messages)
   through the same graph with a real SqliteSaver, prunes "demo-pruned" the
   same way, and

3. describes both files in a normalized form: every row of both tables,
   with what only differs between two runs (checkpoint and task ids,
   timestamps, the random part of channel versions) replaced by stable
   stand-ins, so the Go side can require the two to be identical.

Usage: langgraph_check.py DEMO_DB TRANSCRIPT_MSGPACK WORK_DIR OUT_JSON
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
import sys
from datetime import datetime
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
from langchain_core.messages import AnyMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

demo_db, transcript_path, work_dir, out_path = map(Path, sys.argv[1:5])
serde = JsonPlusSerializer()
transcript = serde.loads_typed(("msgpack", transcript_path.read_bytes()))
run_metadata = transcript["metadata"]


def merge_state(old: dict | None, new: dict | None) -> dict:
    """tool_state's reducer: a later write of a key replaces the entry."""
    out = dict(old or {})
    out.update(new or {})
    return out


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    tool_state: Annotated[dict[str, Any], merge_state]


def script_for(thread_id: str) -> list[dict]:
    for t in transcript["threads"]:
        if t["id"] == thread_id:
            return t["turns"]
    raise KeyError(thread_id)


def build(saver: SqliteSaver, thread_id: str):
    """The ReAct graph the demo plays: a scripted model and a real ToolNode."""
    turns = script_for(thread_id)
    replies = {
        step["ai"].tool_calls[0]["id"]: step
        for turn in turns
        for step in turn["steps"]
        if step["ai"].tool_calls
    }

    @tool
    def sketch_area(name: str, region: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Sketch a rough boundary around a region and store it under a name."""
        step = replies[tool_call_id]
        return Command(update={"tool_state": step["update"], "messages": [step["reply"]]})

    def agent(state: State) -> dict:
        msgs = state["messages"]
        turn = sum(1 for m in msgs if m.type == "human")
        last = max(i for i, m in enumerate(msgs) if m.type == "human")
        step = sum(1 for m in msgs[last:] if m.type == "ai")
        return {"messages": [turns[turn - 1]["steps"][step]["ai"]]}

    def route(state: State) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([sketch_area]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


def config(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}, "metadata": dict(run_metadata)}


def plain(v: Any) -> Any:
    """A loaded value as JSON: messages by their fields, floats kept apart from ints."""
    if hasattr(v, "model_dump"):
        return plain(v.model_dump())
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    return v


def humans(messages: list) -> int:
    return sum(1 for m in messages if m.type == "human")


# ---------------------------------------------------------------------------
# 1. Read the demo file with LangGraph.

threads = [t["id"] for t in transcript["threads"]]
reading = work_dir / "reading.db"
shutil.copyfile(demo_db, reading)
read_report: dict[str, Any] = {}
with SqliteSaver.from_conn_string(str(reading)) as saver:
    for tid in threads:
        listed = []
        for tup in saver.list({"configurable": {"thread_id": tid}}):
            cv = tup.checkpoint["channel_values"]
            msgs = cv.get("messages", [])
            listed.append(
                {
                    "id": tup.config["configurable"]["checkpoint_id"],
                    "parent": (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                    "v": tup.checkpoint["v"],
                    "ts": tup.checkpoint["ts"],
                    "metadata": tup.metadata,
                    "messages": len(msgs),
                    "humans": humans(msgs),
                    "message_classes": [type(m).__name__ for m in msgs],
                    "tool_state": plain(cv.get("tool_state")),
                    "pending_writes": len(tup.pending_writes or []),
                }
            )
        app = build(saver, tid)
        history = []
        for snap in app.get_state_history({"configurable": {"thread_id": tid}}):
            msgs = snap.values.get("messages", [])
            history.append(
                {
                    "id": snap.config["configurable"]["checkpoint_id"],
                    "messages": len(msgs),
                    "humans": humans(msgs),
                    "tool_state": plain(snap.values.get("tool_state")),
                    "next": list(snap.next),
                    "step": snap.metadata.get("step"),
                }
            )
        read_report[tid] = {"list": listed, "history": history}

    # Resume "demo" with a fifth turn: LangGraph must run exactly the input,
    # __start__ and agent steps from the file's last checkpoint.
    from langchain_core.messages import AIMessage, HumanMessage

    app = build(saver, "demo")
    before = len(list(saver.list({"configurable": {"thread_id": "demo"}})))
    extra_turn = {"human": HumanMessage("thanks, that's all", id="resume-human"),
                  "steps": [{"ai": AIMessage("You're welcome.", id="resume-ai")}]}
    script_for("demo").append(extra_turn)
    final = app.invoke({"messages": [extra_turn["human"]]}, config("demo"))
    after = list(saver.list({"configurable": {"thread_id": "demo"}}))
    read_report["resume"] = {
        "new_checkpoints": len(after) - before,
        "humans": humans(final["messages"]),
        "messages": len(final["messages"]),
        "tool_state": plain(final.get("tool_state")),
        "next": list(app.get_state({"configurable": {"thread_id": "demo"}}).next),
        "new_steps": sorted(t.metadata["step"] for t in after[: len(after) - before]),
    }
    script_for("demo").pop()

# ---------------------------------------------------------------------------
# 2. Replay the conversation through LangGraph with a real SqliteSaver.

replayed = work_dir / "replayed.db"
with SqliteSaver.from_conn_string(str(replayed)) as saver:
    for t in transcript["threads"]:
        app = build(saver, t["id"])
        for turn in t["turns"]:
            app.invoke({"messages": [turn["human"]]}, config(t["id"]))
        through = t["prune_through"]
        if through:
            doomed = [
                tup.config["configurable"]["checkpoint_id"]
                for tup in saver.list({"configurable": {"thread_id": t["id"]}})
                if humans(tup.checkpoint["channel_values"].get("messages", [])) <= through
            ]
            with saver.cursor() as cur:
                cur.executemany(
                    "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
                    [(t["id"], c) for c in doomed],
                )
                cur.execute(
                    "DELETE FROM writes WHERE thread_id = ? AND checkpoint_id NOT IN "
                    "(SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?)",
                    (t["id"], t["id"]),
                )

# ---------------------------------------------------------------------------
# 3. Describe both files, normalized.

VERSION = re.compile(r"^(\d{32})\.(\d+\.\d+|\d+(\.\d+)?e-\d+)$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class RawExt:
    """An extension value kept as it was stored, to be written back unchanged."""

    def __init__(self, code: int, data: bytes):
        self.code, self.data = code, data


def keep_ext(code: int, data: bytes) -> RawExt:
    return RawExt(code, data)


def repack(v: Any) -> bytes:
    return ormsgpack.packb(
        v, default=lambda x: ormsgpack.Ext(x.code, x.data), option=ormsgpack.OPT_NON_STR_KEYS
    )


def readable(v: Any) -> Any:
    """Raw msgpack as JSON: extension payloads opened, bytes as hex."""
    if isinstance(v, RawExt):
        inner = ormsgpack.unpackb(v.data, ext_hook=keep_ext, option=ormsgpack.OPT_NON_STR_KEYS)
        return {"$ext": v.code, "payload": readable(inner)}
    if isinstance(v, (bytes, bytearray)):
        return {"$bytes": bytes(v).hex()}
    if isinstance(v, dict):
        return {str(k): readable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [readable(x) for x in v]
    if isinstance(v, float):
        return {"$float": repr(v)}
    return v


def describe(path: Path) -> dict[str, Any]:
    problems: list[str] = []
    conn = sqlite3.connect(path)
    out: dict[str, Any] = {
        "schema": [list(r) for r in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")],
        "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
        "threads": {},
        "problems": problems,
    }
    for tid in threads:
        rows = conn.execute(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, typeof(parent_checkpoint_id), type, "
            "checkpoint, typeof(checkpoint), metadata, typeof(metadata) "
            "FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id",
            (tid,),
        ).fetchall()
        step_of = {r[1]: json.loads(r[7])["step"] for r in rows}
        described = []
        for ns, cid, parent, parent_type, typ, blob, blob_type, meta, meta_type in rows:
            raw = ormsgpack.unpackb(blob, ext_hook=keep_ext, option=ormsgpack.OPT_NON_STR_KEYS)
            if repack(raw) != blob:
                problems.append(f"{tid}/{cid}: checkpoint bytes are not ormsgpack's canonical encoding")
            if raw.get("id") != cid:
                problems.append(f"{tid}/{cid}: checkpoint id {raw.get('id')!r} differs from the row's")
            if not UUID.match(cid) or cid[14] != "6":
                problems.append(f"{tid}/{cid}: not a version 6 UUID")
            ts = datetime.fromisoformat(raw["ts"])
            if ts.tzinfo is None or ts.isoformat() != raw["ts"]:
                problems.append(f"{tid}/{cid}: ts {raw['ts']!r} is not an aware isoformat()")
            by_number: dict[str, str] = {}

            def norm(version: str) -> str:
                m = VERSION.match(version)
                if not m:
                    problems.append(f"{tid}/{cid}: version {version!r} is not SqliteSaver's format")
                    return version
                n = str(int(m.group(1)))
                if by_number.setdefault(n, version) != version:
                    problems.append(f"{tid}/{cid}: two different versions numbered {n}")
                return "v" + n

            raw["id"], raw["ts"] = "<id>", "<ts>"
            raw["channel_versions"] = {k: norm(v) for k, v in raw["channel_versions"].items()}
            raw["versions_seen"] = {
                node: {k: norm(v) for k, v in seen.items()} for node, seen in raw["versions_seen"].items()
            }
            writes = conn.execute(
                "SELECT checkpoint_ns, task_id, task_path, idx, channel, type, value, typeof(value) "
                "FROM writes WHERE thread_id = ? AND checkpoint_id = ? ORDER BY task_path, idx",
                (tid, cid),
            ).fetchall()
            for w in writes:
                if not UUID.match(w[1]):
                    problems.append(f"{tid}/{cid}: task id {w[1]!r} is not UUID-shaped")
            described.append(
                {
                    "step": step_of[cid],
                    "ns": ns,
                    "parent": None if parent is None else step_of.get(parent, "<deleted>"),
                    "parent_type": parent_type,
                    "type": typ,
                    "checkpoint_type": blob_type,
                    "checkpoint_hex": repack(raw).hex(),
                    "checkpoint": readable(raw),
                    "metadata": meta.decode("utf-8") if isinstance(meta, bytes) else meta,
                    "metadata_type": meta_type,
                    "writes": [[w[0], w[2], w[3], w[4], w[5], w[6].hex(), w[7]] for w in writes],
                }
            )
        orphans = conn.execute(
            "SELECT count(*) FROM writes WHERE thread_id = ? AND checkpoint_id NOT IN "
            "(SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?)",
            (tid, tid),
        ).fetchone()[0]
        if orphans:
            problems.append(f"{tid}: {orphans} writes rows name no checkpoint")
        out["threads"][tid] = described
    conn.close()
    return out


report = {
    "versions": {
        name: package_version(name)
        for name in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "langchain-core", "ormsgpack")
    },
    "read": read_report,
    "ours": describe(demo_db),
    "langgraph": describe(replayed),
}
out_path.write_text(json.dumps(report, ensure_ascii=False, indent=1))

#!/usr/bin/env python3
"""Check the demo against real LangGraph.

Run by demo_test.go with the venv of scripts/pyenv.sh (langgraph,
langgraph-checkpoint-sqlite, langgraph-checkpoint-postgres), on the SQLite
file `historyd demo` writes (SqliteSaver's format) or on the PostgreSQL
schema `historyd demo --dsn` writes (PostgresSaver's). It does three things
and writes one JSON report:

1. Reads the demo the way an agent host would: the saver's list() for
   every checkpoint, and get_state_history() of the demo's graph compiled
   on it, giving each checkpoint's message counts, tool_state and the nodes
   LangGraph would run next. Then continues thread "demo" with a fifth
   turn, on a copy, to show LangGraph can resume from it.

2. Replays the same conversation (the transcript the Go side wrote, in
   msgpack that JsonPlusSerializer loads into real LangChain messages)
   through the same graph with the real saver, prunes "demo-pruned" the
   same way, and

3. describes both in a normalized form: every row of every table, with
   what only differs between two runs (checkpoint and task ids, timestamps,
   the random part of channel versions) replaced by stable stand-ins, so
   the Go side can require the two to be identical.

Usage: langgraph_check.py sqlite DEMO_DB TRANSCRIPT_MSGPACK WORK_DIR OUT_JSON
       langgraph_check.py postgres DSN SCHEMA TRANSCRIPT_MSGPACK OUT_JSON

For PostgreSQL the copy resumed is SCHEMA_resume and the replay is written
to SCHEMA_replay; both are created here, and left for the caller to drop.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
import sqlite3
import sys
from collections.abc import Iterator
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

backend = sys.argv[1]
if backend == "sqlite":
    demo_db, transcript_path, work_dir, out_path = map(Path, sys.argv[2:6])
elif backend == "postgres":
    dsn, schema = sys.argv[2:4]
    transcript_path, out_path = map(Path, sys.argv[4:6])
    resume_schema, replay_schema = schema + "_resume", schema + "_replay"
else:
    sys.exit(f"unknown backend {backend!r}: want sqlite or postgres")
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


def build(saver: Any, thread_id: str):
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
# Opening the savers.


@contextlib.contextmanager
def postgres_saver(in_schema: str) -> Iterator[Any]:
    """A PostgresSaver on in_schema, as a host points one at a schema: by search_path."""
    import psycopg
    from psycopg.rows import dict_row

    from langgraph.checkpoint.postgres import PostgresSaver

    with psycopg.connect(
        dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row, options=f"-c search_path={in_schema}"
    ) as conn:
        yield PostgresSaver(conn)


def postgres_conn():
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


def quote(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


PG_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def copy_schema(src: str, dst: str) -> None:
    """A copy of a schema's demo rows in tables PostgresSaver.setup() made."""
    with postgres_conn() as conn:
        conn.execute(f"CREATE SCHEMA {quote(dst)}")
    with postgres_saver(dst) as saver:
        saver.setup()
    with postgres_conn() as conn:
        for table in PG_TABLES:
            cols = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                    (src, table),
                )
            ]
            names = ", ".join(quote(c) for c in cols)
            conn.execute(
                f"INSERT INTO {quote(dst)}.{table} ({names}) SELECT {names} FROM {quote(src)}.{table}"
            )


# ---------------------------------------------------------------------------
# 1. Read the demo with LangGraph.

threads = [t["id"] for t in transcript["threads"]]
read_report: dict[str, Any] = {}


def read_threads(saver: Any) -> None:
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


def resume(saver: Any) -> None:
    """Resume "demo" with a fifth turn: LangGraph must run exactly the input,
    __start__ and agent steps from the last checkpoint."""
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


if backend == "sqlite":
    reading = work_dir / "reading.db"
    shutil.copyfile(demo_db, reading)
    with SqliteSaver.from_conn_string(str(reading)) as saver:
        read_threads(saver)
        resume(saver)
else:
    with postgres_saver(schema) as saver:
        read_threads(saver)
    copy_schema(schema, resume_schema)
    with postgres_saver(resume_schema) as saver:
        resume(saver)

# ---------------------------------------------------------------------------
# 2. Replay the conversation through LangGraph with the real saver.


def doomed(saver: Any, tid: str, through: int) -> list[str]:
    return [
        tup.config["configurable"]["checkpoint_id"]
        for tup in saver.list({"configurable": {"thread_id": tid}})
        if humans(tup.checkpoint["channel_values"].get("messages", [])) <= through
    ]


def replay(saver: Any, prune: Any) -> None:
    for t in transcript["threads"]:
        app = build(saver, t["id"])
        for turn in t["turns"]:
            app.invoke({"messages": [turn["human"]]}, config(t["id"]))
        if t["prune_through"]:
            prune(saver, t["id"], doomed(saver, t["id"], t["prune_through"]))


def prune_sqlite(saver: Any, tid: str, ids: list[str]) -> None:
    """A retention job: the checkpoints, then the writes recorded against them."""
    with saver.cursor() as cur:
        cur.executemany(
            "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
            [(tid, c) for c in ids],
        )
        cur.execute(
            "DELETE FROM writes WHERE thread_id = ? AND checkpoint_id NOT IN "
            "(SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?)",
            (tid, tid),
        )


def prune_postgres(saver: Any, tid: str, ids: list[str]) -> None:
    """A retention job: the checkpoints, the writes recorded against them, and
    the blobs of channel versions no checkpoint left refers to."""
    conn = saver.conn
    conn.execute(
        "DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = ANY(%s)",
        (tid, ids),
    )
    conn.execute(
        "DELETE FROM checkpoint_writes w WHERE thread_id = %s AND NOT EXISTS (SELECT 1 FROM checkpoints c "
        "WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)",
        (tid,),
    )
    conn.execute(
        "DELETE FROM checkpoint_blobs b WHERE thread_id = %s AND NOT EXISTS (SELECT 1 FROM checkpoints c "
        "WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
        "AND c.checkpoint->'channel_versions'->>b.channel = b.version)",
        (tid,),
    )


if backend == "sqlite":
    replayed = work_dir / "replayed.db"
    with SqliteSaver.from_conn_string(str(replayed)) as saver:
        replay(saver, prune_sqlite)
else:
    with postgres_conn() as conn:
        conn.execute(f"CREATE SCHEMA {quote(replay_schema)}")
    with postgres_saver(replay_schema) as saver:
        saver.setup()
        replay(saver, prune_postgres)

# ---------------------------------------------------------------------------
# 3. Describe both, normalized.

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


def describe_sqlite(path: Path) -> dict[str, Any]:
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


def describe_postgres(in_schema: str) -> dict[str, Any]:
    """describe_sqlite for PostgresSaver's tables in in_schema: each checkpoint
    with the blobs of its channel versions and its writes, blobs no checkpoint
    refers to, and the tables, indexes and migrations."""
    from psycopg.rows import dict_row

    problems: list[str] = []
    conn = postgres_conn()
    conn.row_factory = dict_row
    q = quote(in_schema)
    columns = conn.execute(
        "SELECT table_name, column_name, data_type, is_nullable, COALESCE(column_default, '') AS d "
        "FROM information_schema.columns WHERE table_schema = %s ORDER BY table_name, ordinal_position",
        (in_schema,),
    ).fetchall()
    indexes = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY indexname", (in_schema,)
    ).fetchall()
    for i in indexes:
        # The schema as PostgreSQL writes it: quoted only where it must be.
        i["def"] = i["indexdef"].replace(q + ".", "<schema>.").replace(in_schema + ".", "<schema>.")
    migrations = [r["v"] for r in conn.execute(f"SELECT v FROM {q}.checkpoint_migrations ORDER BY v")]
    out: dict[str, Any] = {
        "schema": [["column", c["table_name"], c["column_name"], c["data_type"], c["is_nullable"], c["d"]] for c in columns]
        + [["index", i["indexname"], i["def"]] for i in indexes]
        + [["migrations", " ".join(str(v) for v in migrations)]],
        "journal_mode": "",
        "threads": {},
        "problems": problems,
    }
    for tid in threads:
        by_number: dict[str, str] = {}

        def norm(version: str, where: str) -> str:
            m = VERSION.match(version)
            if not m:
                problems.append(f"{where}: version {version!r} is not PostgresSaver's format")
                return version
            n = str(int(m.group(1)))
            if by_number.setdefault(n, version) != version:
                problems.append(f"{where}: two different versions numbered {n}")
            return "v" + n

        rows = conn.execute(
            f"SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
            f"FROM {q}.checkpoints WHERE thread_id = %s ORDER BY checkpoint_id",
            (tid,),
        ).fetchall()
        step_of = {r["checkpoint_id"]: r["metadata"]["step"] for r in rows}
        blobs = {
            (b["checkpoint_ns"], b["channel"], b["version"]): b
            for b in conn.execute(
                f"SELECT checkpoint_ns, channel, version, type, blob FROM {q}.checkpoint_blobs WHERE thread_id = %s",
                (tid,),
            )
        }
        referenced = set()
        described = []
        for r in rows:
            cid, cp = r["checkpoint_id"], r["checkpoint"]
            where = f"{tid}/{cid}"
            if cp.get("id") != cid:
                problems.append(f"{where}: checkpoint id {cp.get('id')!r} differs from the row's")
            if not UUID.match(cid) or cid[14] != "6":
                problems.append(f"{where}: not a version 6 UUID")
            ts = datetime.fromisoformat(cp["ts"])
            if ts.tzinfo is None or ts.isoformat() != cp["ts"]:
                problems.append(f"{where}: ts {cp['ts']!r} is not an aware isoformat()")
            channel_blobs = {}
            for channel, version in sorted(cp["channel_versions"].items()):
                key = (r["checkpoint_ns"], channel, version)
                if key in blobs:
                    referenced.add(key)
                    b = blobs[key]
                    channel_blobs[channel] = [b["type"], None if b["blob"] is None else bytes(b["blob"]).hex()]
            cp = dict(cp, id="<id>", ts="<ts>")
            cp["channel_versions"] = {k: norm(v, where) for k, v in cp["channel_versions"].items()}
            cp["versions_seen"] = {
                node: {k: norm(v, where) for k, v in seen.items()} for node, seen in cp["versions_seen"].items()
            }
            writes = conn.execute(
                f"SELECT checkpoint_ns, task_id, task_path, idx, channel, type, blob FROM {q}.checkpoint_writes "
                "WHERE thread_id = %s AND checkpoint_id = %s ORDER BY task_path, idx",
                (tid, cid),
            ).fetchall()
            for w in writes:
                if not UUID.match(w["task_id"]):
                    problems.append(f"{where}: task id {w['task_id']!r} is not UUID-shaped")
            described.append(
                {
                    "step": step_of[cid],
                    "ns": r["checkpoint_ns"],
                    "parent": None if r["parent_checkpoint_id"] is None else step_of.get(r["parent_checkpoint_id"], "<deleted>"),
                    "type": r["type"],
                    "checkpoint": plain(cp),
                    "blobs": channel_blobs,
                    "metadata": r["metadata"],
                    "writes": [
                        [w["checkpoint_ns"], w["task_path"], w["idx"], w["channel"], w["type"], bytes(w["blob"]).hex()]
                        for w in writes
                    ],
                }
            )
        for ns, channel, version in sorted(set(blobs) - referenced):
            problems.append(f"{tid}: blob {channel} {norm(version, tid)} belongs to no checkpoint")
        orphans = conn.execute(
            f"SELECT count(*) AS n FROM {q}.checkpoint_writes w WHERE thread_id = %s AND NOT EXISTS "
            f"(SELECT 1 FROM {q}.checkpoints c WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns "
            "AND c.checkpoint_id = w.checkpoint_id)",
            (tid,),
        ).fetchone()["n"]
        if orphans:
            problems.append(f"{tid}: {orphans} writes rows name no checkpoint")
        out["threads"][tid] = described
    conn.close()
    return out


packages = ["langgraph", "langgraph-checkpoint", "langchain-core", "ormsgpack"]
if backend == "sqlite":
    packages.append("langgraph-checkpoint-sqlite")
    ours, theirs = describe_sqlite(demo_db), describe_sqlite(replayed)
else:
    packages += ["langgraph-checkpoint-postgres", "psycopg"]
    ours, theirs = describe_postgres(schema), describe_postgres(replay_schema)
report = {
    "versions": {name: package_version(name) for name in packages},
    "read": read_report,
    "ours": ours,
    "langgraph": theirs,
}
out_path.write_text(json.dumps(report, ensure_ascii=False, indent=1))

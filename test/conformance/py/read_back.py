#!/usr/bin/env python3
"""Read a thread back through Python's real savers and print what they see.

historyd's tests write checkpoints with Go writers that mimic each saver's
storage layout (package langgraph/saver); this program is how they check the mimicry
against the real thing: it opens the database with langgraph-checkpoint-
postgres's PostgresSaver (--dsn, --schema) or langgraph-checkpoint-sqlite's
SqliteSaver (--sqlite), lists the thread's checkpoints in the root namespace
and prints, as JSON on stdout, each checkpoint's id, parent, metadata,
channel versions and values, and pending writes, values mapped to plain JSON
(messages as {type, id, content, additional_kwargs}, a DeltaChannel snapshot
as {"delta_snapshot": value}).

Usage: read_back.py (--dsn DSN [--schema S] | --sqlite PATH) --thread ID
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot


def plain(v: Any) -> Any:
    if isinstance(v, _DeltaSnapshot):
        return {"delta_snapshot": plain(v.value)}
    if isinstance(v, BaseMessage):
        return {"type": v.type, "id": v.id, "content": plain(v.content), "additional_kwargs": plain(v.additional_kwargs)}
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return {"bytes": bytes(v).hex()}
    return v


def describe(saver: Any, thread: str) -> list[dict[str, Any]]:
    out = []
    for tup in saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}):
        cp = tup.checkpoint
        parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
        out.append({
            "id": cp["id"],
            "parent": parent,
            "metadata": plain(dict(tup.metadata)),
            "versions": {k: str(v) for k, v in cp["channel_versions"].items()},
            "values": {k: plain(v) for k, v in cp["channel_values"].items()},
            "writes": [[task, channel, plain(value)] for task, channel, value in (tup.pending_writes or [])],
        })
    out.sort(key=lambda c: c["id"])
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dsn")
    p.add_argument("--schema")
    p.add_argument("--sqlite")
    p.add_argument("--thread", required=True)
    args = p.parse_args()
    if args.sqlite:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with sqlite3.connect(args.sqlite, check_same_thread=False) as conn:
            result = describe(SqliteSaver(conn), args.thread)
    else:
        import psycopg
        from psycopg.rows import dict_row
        from langgraph.checkpoint.postgres import PostgresSaver

        kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        if args.schema:
            kwargs["options"] = f"-c search_path={args.schema}"
        with psycopg.connect(args.dsn, **kwargs) as conn:
            result = describe(PostgresSaver(conn), args.thread)
    json.dump(result, sys.stdout, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

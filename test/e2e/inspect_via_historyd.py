#!/usr/bin/env python3
"""Ask mcp-toolsets-runtime's inspect_state about a thread, with historyd as its history.

Builds the real ``inspect_state`` tool with
``mcp_state.inspect.make_inspect_state(history=HistorydThreadHistory(...))``
and runs it the way an agent does: as a tool call executed by LangGraph's
``ToolNode``, in a graph invoked under the thread's ``thread_id`` and holding
the thread's present ``tool_state`` (read off the thread's newest checkpoint
with ``PostgresSaver``). One tool call per ``--ask``: a JSON object of the
tool's arguments, such as ``{"key": "k"}`` (the present) or
``{"key": "k", "turn": 3}`` (the end of turn 3).

Writes to --out:

    {"answers": [{"args": ..., "status": ..., "content": ...}, ...],
     "snapshot_type": "mcp_state.history.Snapshot",
     "history_type": "mcp_agent.history.History",
     "snapshots": {"total": N, "turns": {"3": {"checkpoint_id", "question", "state"}, ...}},
     "turns": {"total": N, "retained": [...], "questions": [...]},
     "versions": {...}}

``snapshots`` is HistorydThreadHistory.snapshots(thread) as JSON, for the
caller to compare with what LangGraph itself reports about the thread. With
--compare-reference each answer also carries ``reference_content``: the same
tool call answered with the reference's own ``mcp_agent.history.
CheckpointHistory`` reading the checkpointer directly (root namespace), which
a faithful client matches character for character.

historyd_client is imported from client/python/src (PYTHONPATH), not
installed, so the pinned virtualenv stays as scripts/pyenv.sh built it.
Exits 3, saying why on stderr, when mcp-toolsets-runtime does not import.

Usage:
  inspect_via_historyd.py --target HOST:PORT --dsn DSN --thread ID --out answers.json
                          --ask '{"key": "k"}' --ask '{"key": "k", "turn": 3}' ...
                          [--compare-reference]
"""

import argparse
import asyncio
import json
import sys
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from historyd_client import HistorydThreadHistory

UNAVAILABLE = 3


class State(TypedDict, total=False):
    """The agent state inspect_state runs in: messages, and the session state."""

    messages: Annotated[list[AnyMessage], add_messages]
    tool_state: dict[str, Any]


def type_name(x: Any) -> str:
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}"


def present_tool_state(dsn: str, thread: str) -> dict[str, Any]:
    """The thread's tool_state as its newest root checkpoint holds it."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        newest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        if newest is None:
            raise SystemExit(f"thread {thread!r} has no checkpoints")
        return dict(newest.checkpoint["channel_values"].get("tool_state") or {})


class RootOnly:
    """A saver seen from the root graph: its alist always names checkpoint_ns "".

    The reference's CheckpointHistory lists a thread's checkpoints without a
    namespace, which PostgresSaver answers with subgraph checkpoints too;
    historyd reads the root namespace. Pinning the saver makes the two read
    the same checkpoints.
    """

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def alist(self, config: Any, **kwargs: Any) -> Any:
        pinned = {**config, "configurable": {**(config.get("configurable") or {}), "checkpoint_ns": ""}}
        return self.saver.alist(pinned, **kwargs)


async def ask_all(inspect_state: Any, asks: list[dict], present: dict, thread: str) -> list[dict]:
    """Each ask as one tool call run by ToolNode, under the thread's config."""
    g = StateGraph(State)
    g.add_node("tools", ToolNode([inspect_state]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    graph = g.compile()
    config = {"configurable": {"thread_id": thread}}
    answers = []
    for i, call in enumerate(asks):
        ask = AIMessage(
            content="",
            id=f"ask-{i}",
            tool_calls=[{"name": inspect_state.name, "args": call, "id": f"call-{i}", "type": "tool_call"}],
        )
        out = await graph.ainvoke({"messages": [ask], "tool_state": present}, config)
        reply = out["messages"][-1]
        content = reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
        answers.append({"args": call, "status": getattr(reply, "status", None), "content": content})
    return answers


async def reference_answers(dsn: str, make_inspect_state: Any, asks: list[dict], present: dict, thread: str) -> list[str]:
    """The same asks answered with the reference's own history, read off the checkpointer."""
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from mcp_agent.history import CheckpointHistory
    from psycopg.rows import dict_row

    async with await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        history = CheckpointHistory(RootOnly(AsyncPostgresSaver(conn)))
        answers = await ask_all(make_inspect_state(history=history), asks, present, thread)
    return [a["content"] for a in answers]


async def run(args: argparse.Namespace, make_inspect_state: Any) -> dict[str, Any]:
    asks = [json.loads(raw) for raw in args.ask]
    present = present_tool_state(args.dsn, args.thread)

    async with HistorydThreadHistory(args.target, timeout=args.timeout, plaintext=True) as history:
        answers = await ask_all(make_inspect_state(history=history), asks, present, args.thread)
        snap = await history.snapshot(args.thread, 1)
        whole = await history.snapshots(args.thread)
        index = await history.turns(args.thread)

    if args.compare_reference:
        reference = await reference_answers(args.dsn, make_inspect_state, asks, present, args.thread)
        for answer, theirs in zip(answers, reference):
            answer["reference_content"] = theirs

    return {
        "answers": answers,
        "snapshot_type": type_name(snap),
        "history_type": type_name(whole),
        "turn_type": type_name(whole.turns[0]) if whole.turns else None,
        "snapshots": {
            "total": whole.total,
            "turns": {
                str(t.n): {"checkpoint_id": t.checkpoint_id, "question": t.question, "state": t.state}
                for t in whole.turns
            },
        },
        "turns": {
            "total": index.total,
            "retained": [t.n for t in index.turns if t.retained],
            "questions": [t.question for t in index.turns],
        },
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for name in ("mcp-toolsets-runtime", "langgraph", "langchain", "langchain-core", "grpcio", "protobuf"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="historyd's gRPC address")
    ap.add_argument("--dsn", required=True, help="PostgreSQL holding the thread (for its present state)")
    ap.add_argument("--thread", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ask", action="append", default=[], help="inspect_state arguments as JSON; repeatable")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per historyd call")
    ap.add_argument(
        "--compare-reference",
        action="store_true",
        help="also answer each ask with the reference's CheckpointHistory over the same database",
    )
    args = ap.parse_args()

    try:
        from mcp_state.inspect import make_inspect_state
    except Exception as exc:  # ImportError, or a SyntaxError on an older Python
        print(
            f"mcp-toolsets-runtime unavailable under Python {sys.version.split()[0]}: "
            f"{type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return UNAVAILABLE

    result = asyncio.run(run(args, make_inspect_state))
    result["versions"] = versions()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    print(
        f"wrote {args.out}: {len(result['answers'])} answers, total {result['snapshots']['total']}, "
        f"retained {sorted(map(int, result['snapshots']['turns']))}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

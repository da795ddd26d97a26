#!/usr/bin/env python3
"""The Python side of historyd's benchmark: LangGraph and the reference.

Subcommands (each prints one JSON document on stdout):

  setup     --dsn DSN
      Create LangGraph's checkpoint tables with PostgresSaver.setup().
  versions
      Python and package versions.
  readback  --dsn DSN --thread ID
      Read a thread back with LangGraph itself: every checkpoint through
      PostgresSaver.list() (message types, tool_state, pending writes) and
      every snapshot through get_state_history() of a graph with the same
      channels and nodes.
  reference --dsn DSN --thread ID --turns 1,25 [--repeat N] [--warm ID]
            [--tracemalloc]
      Time mcp_agent.history.turns_from(saver, thread, keep=turn) over an
      AsyncPostgresSaver, and measure how much the process grows doing it.
  deepreadback --dsn DSN --thread ID
      Read a deepagents-shaped thread back with LangGraph and deepagents
      themselves: every checkpoint through PostgresSaver.list() (metadata,
      which DeltaChannels are stored there) and every snapshot through
      get_state_history() of create_deep_agent's own graph (messages, files,
      tool_state, next tasks).
  deepwalk  --dsn DSN --thread ID [--warm ID]
      Time a whole get_state_history() walk of a deepagents thread through
      create_deep_agent's graph over PostgresSaver, and say where each turn
      ends (historyd's rule: the most messages, then the greatest id).
  deepstate --dsn DSN --thread ID --checkpoints ID,ID [--repeat N] [--warm ID]
      Time get_state() at each checkpoint (the one read a host needs for a
      turn once it knows the checkpoint) and return its files and tool_state.
  host      --side client|reference --thread ID --turns 1,25 [--repeat N]
            [--memory-calls M] [--warm ID] (--dsn DSN | --target ADDR
            --client-src DIR [--value-format json|proto|raw])
      What a Python host sees answering "what did turn n hold": time
      ThreadHistory.snapshot(thread, turn) of mcp-toolsets-runtime's host
      protocol, either historyd's Python client (HistorydThreadHistory over
      gRPC to historyd at ADDR, imported from DIR, the checkout's
      client/python/src) or the reference (mcp_agent.history's
      CheckpointHistory over an AsyncPostgresSaver), with this process's
      CPU time and peak RSS growth per turn (over its first M calls, default
      all, and over all of them), and a digest of the state returned (its
      JSON, keys sorted) to check both sides answer alike.

Memory, for `reference`, `deepwalk`, `deepstate` and `host`: after imports, the connection and one warm-up call
on a small thread (--warm), the script records VmRSS, resets the kernel's
high-water mark (writing 5 to /proc/self/clear_refs) and runs the timed
calls; `rss_growth_bytes` is VmHWM at the end minus that VmRSS. This is the
same measure the bench applies to historyd. `ru_maxrss_delta_bytes` (the
change of getrusage's ru_maxrss, which cannot be reset) is reported beside
it. With --tracemalloc, a separate run under tracemalloc reports the peak of
Python-level allocations during one call (`tracemalloc_peak_bytes`);
tracemalloc slows the call several times, so it is never timed.
"""


import argparse
import asyncio
import gc
import json
import os
import resource
import sys
import time
from typing import Any


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def cmd_versions(_: argparse.Namespace) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for name in (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-postgres",
        "langchain-core",
        "psycopg",
        "ormsgpack",
        "mcp-toolsets-runtime",
        "deepagents",
        "langchain",
    ):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def cmd_setup(args: argparse.Namespace) -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(args.dsn) as saver:
        saver.setup()
    return {"ok": True}


# ---------------------------------------------------------------------------
# readback


def graph(saver: Any) -> Any:
    """A graph with the generated threads' channels and nodes.

    It is never run: get_state_history only needs its channels to read the
    state and its nodes to name the next tasks.
    """
    from typing import Annotated, TypedDict

    from langchain_core.messages import AnyMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    def merge(old: dict | None, new: dict | None) -> dict:
        out = dict(old or {})
        out.update(new or {})
        return out

    class State(TypedDict, total=False):
        messages: Annotated[list[AnyMessage], add_messages]
        tool_state: Annotated[dict[str, Any], merge]

    def agent(state: State) -> dict:
        return {}

    def tools(state: State) -> dict:
        return {}

    def route(state: State) -> str:
        return END

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tools", tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


def describe(values: dict[str, Any]) -> dict[str, Any]:
    msgs = values.get("messages") or []
    return {
        "types": [m.type for m in msgs],
        "classes": [type(m).__name__ for m in msgs],
        "humans": sum(1 for m in msgs if m.type == "human"),
        "tool_state": values.get("tool_state"),
    }


def cmd_readback(args: argparse.Namespace) -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    config = {"configurable": {"thread_id": args.thread}}
    out: dict[str, Any] = {"list": {}, "history": {}}
    with PostgresSaver.from_conn_string(args.dsn) as saver:
        for tup in saver.list(config):
            cid = tup.config["configurable"]["checkpoint_id"]
            d = describe(tup.checkpoint.get("channel_values") or {})
            d["step"] = tup.metadata.get("step")
            d["source"] = tup.metadata.get("source")
            d["parent"] = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            d["writes"] = [[w[1], type(w[2]).__name__] for w in (tup.pending_writes or [])]
            d["ts"] = tup.checkpoint.get("ts")
            out["list"][cid] = d
        for snap in graph(saver).get_state_history(config):
            cid = snap.config["configurable"]["checkpoint_id"]
            d = describe(snap.values or {})
            d["next"] = list(snap.next)
            out["history"][cid] = d
    return out


# ---------------------------------------------------------------------------
# reference


async def reference(args: argparse.Namespace) -> dict[str, Any]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from mcp_agent.history import turns_from

    turns = [int(x) for x in args.turns.split(",") if x]
    out: dict[str, Any] = {"thread": args.thread, "calls": []}
    async with AsyncPostgresSaver.from_conn_string(args.dsn) as saver:
        if args.warm:
            await turns_from(saver, args.warm, keep=1)
        gc.collect()
        if args.tracemalloc:
            import tracemalloc

            peaks = {}
            for turn in turns:
                gc.collect()
                tracemalloc.start()
                await turns_from(saver, args.thread, keep=turn)
                peaks[str(turn)] = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            out["tracemalloc_peak_bytes"] = peaks
            return out
        base_rss = status_kb("VmRSS") * 1024
        base_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        out["hwm_reset"] = reset_hwm()
        for turn in turns:
            for i in range(args.repeat):
                c0 = time.process_time()
                t0 = time.perf_counter()
                history = await turns_from(saver, args.thread, keep=turn)
                dt = time.perf_counter() - t0
                cpu = time.process_time() - c0
                found = history.find(turn)
                out["calls"].append(
                    {
                        "turn": turn,
                        "seconds": dt,
                        "cpu_seconds": cpu,
                        "total": history.total,
                        "checkpoint_id": found.checkpoint_id if found else None,
                        "keys": len(found.state) if found else None,
                        "rss_hwm_bytes": status_kb("VmHWM") * 1024,
                    }
                )
        out["baseline_rss_bytes"] = base_rss
        out["peak_rss_bytes"] = status_kb("VmHWM") * 1024
        out["rss_growth_bytes"] = out["peak_rss_bytes"] - base_rss
        out["ru_maxrss_delta_bytes"] = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base_maxrss
        )
    return out


def cmd_reference(args: argparse.Namespace) -> dict[str, Any]:
    return asyncio.run(reference(args))


# ---------------------------------------------------------------------------
# host


def state_digest(state: Any) -> str | None:
    """The state as JSON with sorted keys, hashed: equal for equal values."""
    import hashlib

    if state is None:
        return None
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def parsed(state: Any) -> Any:
    """A state whose entries hold raw JSON text (value_json) with the text parsed, as the client parses it."""
    if not state or not any("value_json" in e for e in state.values()):
        return state
    from historyd_client._convert import json_to_python

    out = {}
    for key, entry in state.items():
        entry = dict(entry)
        if "value_json" in entry:
            entry = {"value": json_to_python(entry.pop("value_json")), **entry}
        out[key] = entry
    return out


async def host_calls(history: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Times history.snapshot(thread, turn), turn by turn, as `reference` times turns_from.

    Each turn's calls are measured from their own baseline: VmRSS after a
    collection, the high-water mark reset to it; the peak is read after the
    first --memory-calls calls (so that two sides making different numbers
    of calls can be compared over the same number) and after all of them.
    The digest is taken after that, so hashing the state is not counted.
    """
    turns = [int(x) for x in args.turns.split(",") if x]
    out: dict[str, Any] = {"side": args.side, "thread": args.thread, "calls": [], "turns": {}}
    if args.warm:
        await history.snapshot(args.warm, 1)
    for turn in turns:
        gc.collect()
        base = status_kb("VmRSS") * 1024
        reset = reset_hwm()
        snap = None
        first = None
        for i in range(args.repeat):
            if i == args.memory_calls:
                first = status_kb("VmHWM") * 1024
            snap = None  # the last answer is not held through the next call
            c0 = time.process_time()
            t0 = time.perf_counter()
            snap = await history.snapshot(args.thread, turn)
            dt = time.perf_counter() - t0
            cpu = time.process_time() - c0
            out["calls"].append(
                {
                    "turn": turn,
                    "seconds": dt,
                    "cpu_seconds": cpu,
                    "total": snap.total,
                    "retained": len(snap.retained),
                    "keys": None if snap.state is None else len(snap.state),
                }
            )
        peak = status_kb("VmHWM") * 1024
        if first is None:
            first = peak
        out["turns"][str(turn)] = {
            "baseline_rss_bytes": base,
            "memory_calls": min(args.memory_calls, args.repeat),
            "rss_growth_bytes": first - base,
            "all_calls_rss_growth_bytes": peak - base,
            "hwm_reset": reset,
            "digest": state_digest(parsed(snap.state) if snap else None),
        }
        del snap
    return out


async def host(args: argparse.Namespace) -> dict[str, Any]:
    if args.side == "reference":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from mcp_agent.history import CheckpointHistory

        async with AsyncPostgresSaver.from_conn_string(args.dsn) as saver:
            return await host_calls(CheckpointHistory(saver), args)
    # The client as it is in the checkout, not an installed copy: the venv
    # has what it needs (grpcio, protobuf, orjson, pinned as the
    # conformance suite pins them).
    sys.path.insert(0, args.client_src)
    from historyd_client import HistorydThreadHistory

    async with HistorydThreadHistory(args.target, plaintext=True, timeout=600, value_format=args.value_format) as history:
        out = await host_calls(history, args)
    out["value_format"] = args.value_format
    return out


def cmd_host(args: argparse.Namespace) -> dict[str, Any]:
    if args.side == "reference" and not args.dsn:
        raise SystemExit("host --side reference needs --dsn")
    if args.side == "client" and not (args.target and args.client_src):
        raise SystemExit("host --side client needs --target and --client-src")
    return asyncio.run(host(args))


# ---------------------------------------------------------------------------
# deepagents


def deep_graph(saver: Any) -> Any:
    """create_deep_agent's graph (deepagents' own state schema: messages and
    files as DeltaChannels with their reducers), plus the host's plain
    tool_state channel and the survey_gauge tool the generated threads call.

    Its model is never called: reading history runs no node.
    """
    from typing import Annotated, NotRequired

    from deepagents import create_deep_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain.agents import AgentState
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.tools import tool

    class IdleModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "idle"

        def bind_tools(self, tools: Any, **kwargs: Any) -> "IdleModel":
            return self

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the benchmark's graph only reads history")

    def merge(old: dict | None, new: dict | None) -> dict:
        out = dict(old or {})
        out.update(new or {})
        return out

    class SessionState(AgentState):
        tool_state: NotRequired[Annotated[dict, merge]]

    class SessionStateMiddleware(AgentMiddleware):
        state_schema = SessionState

    @tool
    def survey_gauge(gauge: str) -> str:
        """Survey a river gauge and record its levels in session state."""
        return gauge

    return create_deep_agent(
        model=IdleModel(),
        tools=[survey_gauge],
        middleware=[SessionStateMiddleware()],
        checkpointer=saver,
    )


def deep_describe(values: dict[str, Any]) -> dict[str, Any]:
    msgs = values.get("messages") or []
    return {
        "ids": [m.id for m in msgs],
        "types": [m.type for m in msgs],
        "humans": sum(1 for m in msgs if m.type == "human"),
        "files": values.get("files"),
        "tool_state": values.get("tool_state"),
    }


def cmd_deepreadback(args: argparse.Namespace) -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    config = {"configurable": {"thread_id": args.thread}}
    out: dict[str, Any] = {"list": {}, "history": {}}
    with PostgresSaver.from_conn_string(args.dsn) as saver:
        for tup in saver.list(config):
            cid = tup.config["configurable"]["checkpoint_id"]
            out["list"][cid] = {
                "step": tup.metadata.get("step"),
                "source": tup.metadata.get("source"),
                "counters": tup.metadata.get("counters_since_delta_snapshot"),
                "parent": (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                "writes": len(tup.pending_writes or []),
            }
        g = deep_graph(saver)
        for snap in g.get_state_history(config):
            cid = snap.config["configurable"]["checkpoint_id"]
            d = deep_describe(snap.values or {})
            d["next"] = [t.name for t in snap.tasks]
            out["history"][cid] = d
    return out


def proc_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process on this machine, or -1."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return -1.0


class Meter:
    """Wall time, CPU time and peak RSS growth of what runs inside it, and
    the CPU time of the PostgreSQL backend serving the saver's connection
    (when it runs on this machine)."""

    def __init__(self, saver: Any) -> None:
        self.backend = saver.conn.info.backend_pid

    def __enter__(self) -> "Meter":
        gc.collect()
        self.base = status_kb("VmRSS") * 1024
        self.reset = reset_hwm()
        self.pg0 = proc_cpu_seconds(self.backend)
        self.c0, self.t0 = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self.t0
        self.cpu_seconds = time.process_time() - self.c0
        pg1 = proc_cpu_seconds(self.backend)
        self.pg_cpu_seconds = pg1 - self.pg0 if self.pg0 >= 0 and pg1 >= 0 else -1.0
        self.growth = status_kb("VmHWM") * 1024 - self.base

    def report(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "postgres_cpu_seconds": self.pg_cpu_seconds,
            "baseline_rss_bytes": self.base,
            "rss_growth_bytes": self.growth,
            "hwm_reset": self.reset,
        }


def deep_warm(g: Any, warm: str) -> None:
    if warm:
        for _ in g.get_state_history({"configurable": {"thread_id": warm}}):
            pass


def cmd_deepwalk(args: argparse.Namespace) -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(args.dsn) as saver:
        g = deep_graph(saver)
        deep_warm(g, args.warm)
        ends: dict[int, tuple[int, str]] = {}
        n = 0
        with Meter(saver) as m:
            for snap in g.get_state_history({"configurable": {"thread_id": args.thread}}):
                n += 1
                cid = snap.config["configurable"]["checkpoint_id"]
                msgs = snap.values.get("messages") or []
                humans = sum(1 for x in msgs if x.type == "human")
                if humans and (humans not in ends or (len(msgs), cid) > ends[humans]):
                    ends[humans] = (len(msgs), cid)
        out = m.report()
    out.update({"checkpoints": n, "turns": len(ends), "turn_ends": {str(k): v[1] for k, v in sorted(ends.items())}})
    return out


def cmd_deepstate(args: argparse.Namespace) -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    out: dict[str, Any] = {"calls": []}
    with PostgresSaver.from_conn_string(args.dsn) as saver:
        g = deep_graph(saver)
        deep_warm(g, args.warm)
        for cid in [c for c in args.checkpoints.split(",") if c]:
            config = {"configurable": {"thread_id": args.thread, "checkpoint_id": cid}}
            runs = []
            for _ in range(args.repeat):
                with Meter(saver) as m:
                    snap = g.get_state(config)
                runs.append(m.report())
            got = snap.config["configurable"]["checkpoint_id"]
            out["calls"].append({
                "checkpoint_id": got,
                "runs": runs,
                "messages": len(snap.values.get("messages") or []),
                "files": snap.values.get("files"),
                "tool_state": snap.values.get("tool_state"),
            })
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("versions")
    p = sub.add_parser("setup")
    p.add_argument("--dsn", required=True)
    p = sub.add_parser("readback")
    p.add_argument("--dsn", required=True)
    p.add_argument("--thread", required=True)
    p = sub.add_parser("reference")
    p.add_argument("--dsn", required=True)
    p.add_argument("--thread", required=True)
    p.add_argument("--turns", required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warm", default="")
    p.add_argument("--tracemalloc", action="store_true")
    p = sub.add_parser("deepreadback")
    p.add_argument("--dsn", required=True)
    p.add_argument("--thread", required=True)
    p = sub.add_parser("deepwalk")
    p.add_argument("--dsn", required=True)
    p.add_argument("--thread", required=True)
    p.add_argument("--warm", default="")
    p = sub.add_parser("deepstate")
    p.add_argument("--dsn", required=True)
    p.add_argument("--thread", required=True)
    p.add_argument("--checkpoints", required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warm", default="")
    p = sub.add_parser("host")
    p.add_argument("--side", required=True, choices=["client", "reference"])
    p.add_argument("--dsn", default="")
    p.add_argument("--target", default="")
    p.add_argument("--client-src", default="")
    p.add_argument("--value-format", default="json", choices=["json", "proto", "raw"])
    p.add_argument("--thread", required=True)
    p.add_argument("--turns", required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--memory-calls", type=int, default=1 << 30)
    p.add_argument("--warm", default="")
    args = ap.parse_args()
    fn = {
        "versions": cmd_versions,
        "setup": cmd_setup,
        "readback": cmd_readback,
        "reference": cmd_reference,
        "deepreadback": cmd_deepreadback,
        "deepwalk": cmd_deepwalk,
        "deepstate": cmd_deepstate,
        "host": cmd_host,
    }[args.cmd]
    json.dump(fn(args), sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Answer the shared inspect_state cases with the Python client's LangChain tool.

    run_cases.py --target HOST:PORT --cases client/testdata/cases.json --out results.json

test/clients runs this against the historyd it started, in the client
virtualenv (langchain-core, grpcio and protobuf, no mcp-toolsets-runtime),
and compares each answer with the table's and with the Go and TypeScript
clients'. Each case is played as a host plays a tool call: a chat model with
the tool bound (``bind_tools``) asks for it, and the tool runs the call under
the case's thread as the run's ``configurable.thread_id`` (none for a
``no_thread`` case). Each call is made twice, with ``ainvoke`` over
``HistorydThreadHistory`` and with ``invoke`` over
``SyncHistorydThreadHistory``, and the two answers must be the same.

Writes ``{"tool": {"name", "description", "parameters"}, "results": [{"name",
"output"} or {"name", "error"}, ...]}``, the tool as the model sees it and
one result per case, in the table's order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from historyd_client import HistorydThreadHistory, SyncHistorydThreadHistory
from historyd_client.langchain import inspect_state_tool


class ScriptedModel(BaseChatModel):
    """A chat model that calls inspect_state with the arguments it is given."""

    calls: list[dict[str, Any]]
    bound: list[dict[str, Any]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: list[Any], **kwargs: Any) -> Any:
        schemas = [convert_to_openai_tool(t) for t in tools]
        self.bound = schemas
        return self.bind(tools=schemas, **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if not kwargs.get("tools"):
            raise RuntimeError("the model was called without the tool bound")
        i = sum(1 for m in messages if isinstance(m, HumanMessage)) - 1
        call = self.calls[i]
        message = AIMessage(
            content="",
            tool_calls=[{"name": "inspect_state", "args": call, "id": f"call-{i}", "type": "tool_call"}],
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


def content(reply: Any) -> str:
    return reply.content if isinstance(reply.content, str) else json.dumps(reply.content)


async def run(target: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    results = []
    sync_history = SyncHistorydThreadHistory(target, plaintext=True)
    async with HistorydThreadHistory(target, plaintext=True) as history:
        tools: dict[tuple[bool, bool, str], Any] = {}

        def tool(sync: bool, case: dict[str, Any]) -> Any:
            which = (sync, bool(case.get("no_history")), case.get("channel") or "")
            if which not in tools:
                over = None if which[1] else (sync_history if sync else history)
                tools[which] = inspect_state_tool(over, channel=which[2])
            return tools[which]

        model = ScriptedModel(calls=[c["args"] for c in cases])
        bound = model.bind_tools([tool(False, {})])
        conversation: list[BaseMessage] = []
        for case in cases:
            conversation.append(HumanMessage(content=case["name"]))
            ask = await bound.ainvoke(conversation)
            (call,) = ask.tool_calls
            config = {} if case.get("no_thread") else {"configurable": {"thread_id": case["thread"]}}
            try:
                answer = content(await tool(False, case).ainvoke({**call, "type": "tool_call"}, config=config))
                # The sync path, as agent.invoke() runs tools (in a worker thread).
                again = content(await asyncio.to_thread(tool(True, case).invoke, {**call, "type": "tool_call"}, config))
                if again != answer:
                    raise AssertionError(f"invoke answered {again!r}, ainvoke {answer!r}")
                results.append({"name": case["name"], "output": answer})
            except Exception as exc:  # recorded: the comparison says which case failed and why
                results.append({"name": case["name"], "error": f"{type(exc).__name__}: {exc}"})
            conversation.append(ask)
        function = model.bound[0]["function"]
    sync_history.close()
    return {
        "tool": {"name": function["name"], "description": function["description"], "parameters": function["parameters"]},
        "results": results,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="historyd's address, served in plaintext")
    ap.add_argument("--cases", required=True, help="the shared table, client/testdata/cases.json")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.cases, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    result = asyncio.run(run(args.target, cases))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    failed = sum(1 for r in result["results"] if "error" in r)
    print(f"run_cases.py: {len(result['results'])} cases answered, {failed} raised", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``inspect_state`` as a LangChain tool, for any LangChain host on Python 3.10+.

Needs only ``langchain-core`` (``pip install 'historyd-client[langchain]'``),
not mcp-toolsets-runtime::

    from historyd_client import SyncHistorydThreadHistory
    from historyd_client.langchain import inspect_state_tool

    history = SyncHistorydThreadHistory("historyd.internal:8443", token=token)
    inspect_state = inspect_state_tool(history)
    model = model.bind_tools([inspect_state, ...])   # or ToolNode([inspect_state, ...])

The tool runs under ``invoke`` and ``ainvoke`` alike (``agent.invoke()``
runs its tools with ``invoke``), over either client: a sync one is called
in a worker thread by ``ainvoke``, the async ``HistorydThreadHistory``
through its sync twin by ``invoke``.

The tool reads the thread named by the run's ``configurable.thread_id`` (the
one LangGraph checkpoints under) and answers exactly as the Go client's
``client/inspect`` does: the value with its turn label, ``no_such_turn`` with
the count, ``turn_no_longer_retained`` with the retained turns, and so on
(see :mod:`historyd_client.inspect`). A run without a thread id is answered
``no_thread_id`` (the host named no thread), with a warning in the
``historyd_client.inspect`` log. Its name, description and parameter
descriptions are the Go tool's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from historyd_client.inspect import (
    DEFAULT_MAX_LINE_CHARS,
    DEFAULT_MAX_MATCHES,
    DEFAULT_MAX_VALUE_CHARS,
    PARAMETER_DESCRIPTIONS,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    Inspector,
    Present,
    TurnHistory,
)

__all__ = ["InspectStateArgs", "inspect_state_tool"]


class InspectStateArgs(BaseModel):
    """The tool's arguments, as the model supplies them."""

    key: str = Field(description=PARAMETER_DESCRIPTIONS["key"])
    pattern: str | None = Field(default=None, description=PARAMETER_DESCRIPTIONS["pattern"])
    path: str | None = Field(default=None, description=PARAMETER_DESCRIPTIONS["path"])
    turn: int | None = Field(default=None, description=PARAMETER_DESCRIPTIONS["turn"])


def inspect_state_tool(
    history: TurnHistory | None = None,
    *,
    present: Present | None = None,
    declared_keys: Sequence[str] = (),
    max_value_chars: int = DEFAULT_MAX_VALUE_CHARS,
    max_matches: int = DEFAULT_MAX_MATCHES,
    max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
    channel: str = "",
) -> StructuredTool:
    """The ``inspect_state`` tool over ``history`` (a :class:`~historyd_client.SyncHistorydThreadHistory`
    or :class:`~historyd_client.HistorydThreadHistory`), for ``invoke`` and ``ainvoke``.

    ``history=None`` is a deployment without history: turn reads answer
    ``no_turn_history``, and reads of the present need ``present``.
    ``present(thread_id)`` (plain or async) returns the live session state,
    key → entry dict, when the host holds fresher state than its newest
    checkpoint; without it the present is the state the newest turn ended on.
    ``declared_keys`` are keys some tool declares it publishes. ``channel``
    is the state channel the tool reads (``""``: the history's own), such as
    deepagents' ``"files"``; the model cannot choose it, as which channel
    holds what is the host's configuration.

    Errors reading the history (:class:`~historyd_client.HistorydError`) are
    raised, not answered: a host that wants an outage to reach the model as a
    failed tool call builds its ``ToolNode`` with ``handle_tool_errors``.
    """
    inspector = Inspector(
        history,
        present=present,
        declared_keys=declared_keys,
        max_value_chars=max_value_chars,
        max_matches=max_matches,
        max_line_chars=max_line_chars,
        channel=channel,
    )

    def inspect_state(
        key: str,
        pattern: str | None = None,
        path: str | None = None,
        turn: int | None = None,
        *,
        config: RunnableConfig,
    ) -> str:
        return inspector.read_sync(_thread_of(config), key, turn=turn, pattern=pattern or "", path=path or "")

    async def ainspect_state(
        key: str,
        pattern: str | None = None,
        path: str | None = None,
        turn: int | None = None,
        *,
        config: RunnableConfig,
    ) -> str:
        return await inspector.read(_thread_of(config), key, turn=turn, pattern=pattern or "", path=path or "")

    return StructuredTool.from_function(
        func=inspect_state,
        coroutine=ainspect_state,
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        args_schema=InspectStateArgs,
    )


def _thread_of(config: RunnableConfig | None) -> str:
    """The run's thread id, ``""`` when the run names none."""
    configurable: dict[str, Any] = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    return "" if thread_id is None else str(thread_id)

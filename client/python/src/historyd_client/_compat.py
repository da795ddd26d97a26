"""The result types: mcp-toolsets-runtime's own when it imports, else look-alikes.

``HistorydThreadHistory`` answers in the types of the package whose host
protocol it implements, so a caller that checks ``isinstance(x, Snapshot)``
against ``mcp_state.history.Snapshot``, or hands a ``History`` to code written
for ``mcp_agent.history``, gets exactly what it expects. Without that package
(it is optional, and declares Python 3.12+), the same names are defined here
with the same fields, in the same order, and the same methods.

The lookup is lazy and done once: importing ``mcp_state`` loads LangChain, a
cost a caller that never asks for a result should not pay on import.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple


class LocalSnapshot(NamedTuple):
    """``mcp_state.history.Snapshot``'s shape: one turn's state and its thread.

    ``state`` is ``None`` both for a turn the thread never had and for one
    that is no longer retained; :meth:`never_had` tells the two apart.
    """

    state: Mapping[str, Any] | None
    retained: frozenset[int]
    total: int

    def never_had(self, n: int) -> bool:
        """Whether the thread never had turn ``n`` (rather than no longer holds it)."""
        return n < 1 or n > self.total


class LocalTurn(NamedTuple):
    """``mcp_agent.history.Turn``'s shape: one retained turn and its state."""

    n: int
    question: str
    checkpoint_id: str | None
    state: dict[str, Any]


class LocalHistory(NamedTuple):
    """``mcp_agent.history.History``'s shape: retained turns and the total."""

    turns: list[Any]
    total: int

    def find(self, n: int) -> Any | None:
        """The retained turn ``n``, or ``None``."""
        return next((turn for turn in self.turns if turn.n == n), None)


@functools.cache
def snapshot_type() -> type:
    """``mcp_state.history.Snapshot`` when it imports, else :class:`LocalSnapshot`."""
    try:
        from mcp_state.history import Snapshot
    except Exception:  # ImportError, or a SyntaxError on an older Python
        return LocalSnapshot
    return Snapshot


@functools.cache
def history_types() -> tuple[type, type]:
    """``(History, Turn)`` from ``mcp_agent.history`` when it imports, else the local ones."""
    try:
        from mcp_agent.history import History, Turn
    except Exception:
        return LocalHistory, LocalTurn
    return History, Turn

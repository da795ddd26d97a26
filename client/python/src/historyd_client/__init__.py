"""Python client of historyd, the turn history of LangGraph threads.

:class:`HistorydThreadHistory` reads historyd.v1.ThreadHistory over gRPC
(``grpc.aio``) and implements the host protocol of mcp-toolsets-runtime's
``mcp_state.history.ThreadHistory``::

    from mcp_state.inspect import make_inspect_state
    from historyd_client import HistorydThreadHistory

    history = HistorydThreadHistory("historyd:8443", secure=True, token=token)
    inspect_state = make_inspect_state(history=history)

``Snapshot``, ``History`` and ``Turn`` are mcp-toolsets-runtime's own classes
when it imports and look-alikes with the same fields otherwise
(``LocalSnapshot``, ``LocalHistory``, ``LocalTurn``), resolved on first use.
The generated stubs are ``historyd_client.gen.historyd.v1.history_pb2`` and
``history_pb2_grpc``.
"""

from typing import Any

from historyd_client._compat import LocalHistory, LocalSnapshot, LocalTurn
from historyd_client.client import (
    DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
    HistorydError,
    HistorydThreadHistory,
    TurnIndex,
    TurnInfo,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH",
    "History",
    "HistorydError",
    "HistorydThreadHistory",
    "LocalHistory",
    "LocalSnapshot",
    "LocalTurn",
    "Snapshot",
    "Turn",
    "TurnIndex",
    "TurnInfo",
]


def __getattr__(name: str) -> Any:
    from historyd_client import _compat

    if name == "Snapshot":
        return _compat.snapshot_type()
    if name == "History":
        return _compat.history_types()[0]
    if name == "Turn":
        return _compat.history_types()[1]
    raise AttributeError(f"module 'historyd_client' has no attribute {name!r}")

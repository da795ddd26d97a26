"""Python client of historyd, the turn history of LangGraph threads.

:class:`HistorydThreadHistory` reads historyd.v1.ThreadHistory over gRPC
(``grpc.aio``); :class:`SyncHistorydThreadHistory` is the same client for
synchronous code (the same arguments and methods, without ``await``). For
any LangChain host (Python 3.10+, ``langchain-core`` only, the
``[langchain]`` extra), the tool works under ``invoke`` and ``ainvoke``
alike, over either client::

    from historyd_client import HistorydThreadHistory
    from historyd_client.langchain import inspect_state_tool

    history = HistorydThreadHistory("historyd:8443", token=token)   # TLS
    inspect_state = inspect_state_tool(history)      # bind it, or put it in a ToolNode

``await history.turn(thread_id, n)`` answers one turn as a :class:`TurnResult`
whose ``outcome`` (:class:`Outcome`) says which of found, no_such_turn and
no_longer_retained it is, with ``answered_with`` (the turns whose questions
came in the same input, sharing its state) and ``numbering``
(:class:`Numbering`: how sure the turn numbers are). ``channel=`` (on the
client, or per call) reads another state channel, such as deepagents'
``files``. Values travel as JSON text, parsed with orjson, unless
``value_format`` (:class:`ValueFormat`, on the client or per call) asks for
``"proto"`` (``google.protobuf.Value``, the same values) or ``"raw"`` (the
text, unparsed). The client also implements the host protocol of
mcp-toolsets-runtime's ``mcp_state.history.ThreadHistory`` (Python 3.12+,
the ``[mcp]`` extra)::

    from mcp_state.inspect import make_inspect_state

    inspect_state = make_inspect_state(history=history)

``Snapshot``, ``History`` and ``Turn`` are mcp-toolsets-runtime's own classes
when it imports and look-alikes with the same fields otherwise
(``LocalSnapshot``, ``LocalHistory``, ``LocalTurn``), resolved on first use.
The generated stubs are ``historyd_client.gen.historyd.v1.history_pb2`` and
``history_pb2_grpc``.
"""

from typing import Any

from historyd_client._compat import LocalHistory, LocalSnapshot, LocalTurn
from historyd_client._ops import Diff, DiffTurn, KeyChange, ThreadInfo, ThreadsPage
from historyd_client.client import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    MAX_BACKOFF,
    HistorydError,
    HistorydThreadHistory,
    Numbering,
    Outcome,
    TurnIndex,
    TurnInfo,
    TurnResult,
    TurnState,
    ValueFormat,
)
from historyd_client.sync import SyncHistorydThreadHistory

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "Diff",
    "DiffTurn",
    "History",
    "HistorydError",
    "HistorydThreadHistory",
    "KeyChange",
    "LocalHistory",
    "LocalSnapshot",
    "LocalTurn",
    "MAX_BACKOFF",
    "Numbering",
    "Outcome",
    "Snapshot",
    "SyncHistorydThreadHistory",
    "ThreadInfo",
    "ThreadsPage",
    "Turn",
    "TurnIndex",
    "TurnInfo",
    "TurnResult",
    "TurnState",
    "ValueFormat",
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

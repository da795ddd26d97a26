"""historyd's protobuf messages as the Python values a LangGraph host holds.

A ``StateEntry`` on the wire is the tool_state convention split into typed
fields plus ``extra``; here it is put back together as the dict a host's
``tool_state`` channel holds: ``{"value": ..., "tool": ..., "seq": ...,
"inputs": {...}, "turn": ..., "turns_written": ..., **extra}``, each
bookkeeping field present only when the server set it.

Values arrive as ``google.protobuf.Value``, which has one number type, a
double. A number whose value is integral and within ±2^53 becomes an ``int``,
every other number a ``float``. That is what the thread held in nearly every
case: a Python host stores integers as integers (counts, ids, ``seq``,
vertices), and historyd sends integers beyond ±2^53 as decimal strings, so an
integral double within that range is an integer that fit. The one value this
changes is a float that happened to be integral, such as ``2.0``, which comes
back as ``2``: the same JSON number, and what a JavaScript host would have
written anyway. Keeping every number a float instead would turn each integer
the thread holds into ``60000.0`` in whatever the model reads.

Maps come back with their keys sorted. ``google.protobuf.Struct`` is a map on
the wire, so the order the host wrote a value's keys in does not reach the
client (historyd's Go server sends map entries in no particular order); sorted
is the one order that is the same on every read, so two reads of one value,
or of two turns' values, print alike. Compared with the host's own dict, the
value is equal and only its key order may differ.

Everything else is passed through as historyd documents it and not guessed
back: integers beyond ±2^53 stay decimal strings, NaN and ±Infinity stay the
strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, bytes stay base64 text,
datetimes ISO-8601 text and UUIDs hex text. A string cannot say whether it was
one of those or a string all along, so converting it back would be wrong for
some values whichever way it went.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from google.protobuf import struct_pb2

from historyd_client.gen.historyd.v1 import history_pb2

#: The largest magnitude a double holds every integer up to.
_EXACT = 2**53


def value_to_python(v: struct_pb2.Value) -> Any:
    """One ``google.protobuf.Value`` as plain Python data."""
    kind = v.WhichOneof("kind")
    if kind == "string_value":
        return v.string_value
    if kind == "number_value":
        return _number(v.number_value)
    if kind == "bool_value":
        return v.bool_value
    if kind == "struct_value":
        return struct_to_python(v.struct_value)
    if kind == "list_value":
        return [value_to_python(item) for item in v.list_value.values]
    # null_value, or a Value with no kind set, which proto3 JSON also reads
    # as null.
    return None


def struct_to_python(s: struct_pb2.Struct) -> dict[str, Any]:
    """A ``google.protobuf.Struct`` as a dict, its keys in sorted order."""
    fields = s.fields
    return {name: value_to_python(fields[name]) for name in sorted(fields)}


def _number(x: float) -> int | float:
    # -0.0 stays a float: as an int it would lose its sign, which the other
    # clients print ("-0").
    if math.isfinite(x) and x.is_integer() and -_EXACT <= x <= _EXACT and not (x == 0 and math.copysign(1, x) < 0):
        return int(x)
    return x


def entry_to_python(e: history_pb2.StateEntry) -> dict[str, Any]:
    """One ``StateEntry`` as the dict the host's tool_state held.

    The conventional fields come first, in ``mcp_state.state.StateEntry``'s
    order (value, tool, seq, inputs, turn, turns_written), then the fields of
    ``extra``, sorted. A field the server set wins over a same-named one in
    ``extra``. historyd puts a recorded field whose type did not fit the
    convention (an ``inputs`` that is not a map of strings, say) in ``extra``
    and leaves the typed field unset, so such a value comes back as stored.
    """
    out: dict[str, Any] = {}
    if e.HasField("value"):
        out["value"] = value_to_python(e.value)
    if e.HasField("tool"):
        out["tool"] = e.tool
    if e.HasField("seq"):
        out["seq"] = e.seq
    if e.inputs:
        out["inputs"] = {name: e.inputs[name] for name in sorted(e.inputs)}
    if e.HasField("turn"):
        out["turn"] = e.turn
    if e.HasField("turns_written"):
        out["turns_written"] = e.turns_written
    if e.HasField("extra"):
        for name, item in struct_to_python(e.extra).items():
            out.setdefault(name, item)
    return out


def entries_to_python(state: history_pb2.TurnState) -> dict[str, dict[str, Any]]:
    """A turn's entries, key by key, in sorted order."""
    entries = state.entries
    return {key: entry_to_python(entries[key]) for key in sorted(entries)}


def timestamp_to_datetime(message: Any, field: str) -> _dt.datetime | None:
    """An optional ``google.protobuf.Timestamp`` field as an aware UTC datetime."""
    if not message.HasField(field):
        return None
    return getattr(message, field).ToDatetime(tzinfo=_dt.timezone.utc)

"""historyd's protobuf messages as the Python values a LangGraph host holds.

A ``StateEntry`` on the wire is the tool_state convention split into typed
fields plus ``extra``; here it is put back together as the dict a host's
``tool_state`` channel holds: ``{"value": ..., "tool": ..., "seq": ...,
"inputs": {...}, "turn": ..., "turns_written": ..., **extra}``, each
bookkeeping field present only when the server set it.

Values arrive as JSON text (``StateEntry.value_json``, what the client asks
for by default) or as a ``google.protobuf.Value`` (``value``: with
``value_format="proto"``, or from a server older than ``value_json``), and
both give the same Python values, down to ``int`` against ``float`` and the
order of a dict's keys. The text is parsed with orjson; historyd writes it
from the stored bytes with the same conversion as the Value.

A ``google.protobuf.Value`` has one number type, a double. A number whose
value is integral and within ±2^53 becomes an ``int``, every other number a
``float``. That is what the thread held in nearly every case: a Python host
stores integers as integers (counts, ids, ``seq``, vertices), and historyd
sends integers beyond ±2^53 as decimal strings, so an integral double within
that range is an integer that fit. The one value this changes is a float
that happened to be integral, such as ``2.0``, which comes back as ``2``: the
same JSON number, and what a JavaScript host would have written anyway.
Keeping every number a float instead would turn each integer the thread
holds into ``60000.0`` in whatever the model reads.

Maps come back with their keys sorted. ``google.protobuf.Struct`` is a map on
the wire, so the order the host wrote a value's keys in does not reach the
client (historyd's Go server sends map entries in no particular order); sorted
is the one order that is the same on every read, so two reads of one value,
or of two turns' values, print alike. Compared with the host's own dict, the
value is equal and only its key order may differ. JSON text keeps the stored
order, and is sorted all the same, so that the two formats give one answer.

JSON text is read to the same numbers as the Value: each number is the
double the Value would have carried, converted as above. orjson reads a
number without a fraction or exponent as an ``int`` (beyond 64 bits, a
``float``) and every other number as the double it denotes, and historyd
writes numbers as JavaScript does (the shortest digits that read back as the
double, with no fraction when integral and below 1e21), so the two readings
differ only on ``-0`` (orjson: ``0``) and on integers beyond ±2^53 (orjson:
an ``int``, where the Value path has a ``float``). A text holding either (a
scan of its bytes finds ``-0``; orjson itself refuses to write such an
integer back under ``OPT_STRICT_INTEGER``) is read again with the standard
library's ``json``, every number through :func:`_number`; nothing else is,
as that is several times slower.

Everything else is passed through as historyd documents it and not guessed
back: integers beyond ±2^53 stay decimal strings, NaN and ±Infinity stay the
strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, bytes stay base64 text,
datetimes ISO-8601 text and UUIDs hex text. A string cannot say whether it was
one of those or a string all along, so converting it back would be wrong for
some values whichever way it went.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import operator
import re
from typing import Any

import orjson
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


#: ``-0`` as a number: followed by what can follow a number. (Inside a string,
#: such as ``"a-0,b"``, it only sends the text the slower way.)
_NEGATIVE_ZERO = re.compile(rb"-0(?=[,\]}\s]|$)")

_first = operator.itemgetter(0)


def json_to_python(text: bytes) -> Any:
    """A value's JSON text (``StateEntry.value_json``) as the Value path gives it.

    The same numbers (see the module documentation) and dicts with sorted
    keys. Raises ``ValueError`` when the text is not JSON.
    """
    if _NEGATIVE_ZERO.search(text):
        return _json_exactly(text)
    value = orjson.loads(text)
    try:
        # Written again with sorted keys, and refused if it holds an integer
        # beyond ±2^53 (OPT_STRICT_INTEGER): a sort that stays in orjson's C
        # code, several times cheaper for a large value than a walk in
        # Python, and the check of the integers in the same pass.
        again = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError:
        return _json_exactly(text)
    if b"{" not in text:
        return value  # no dict to sort
    del value  # not held beside the sorted copy
    return orjson.loads(again)


def _json_exactly(text: bytes) -> Any:
    """The text read by the standard library, each number as the Value path reads it: slower."""
    return json.loads(
        text,
        parse_int=_number_text,
        parse_float=_number_text,
        parse_constant=_not_json,
        object_pairs_hook=_sorted_object,
    )


def python_to_json(value: Any) -> bytes:
    """A converted value as JSON text, keys sorted: raw values from a server that sent a Value."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _number_text(text: str) -> int | float:
    # The double the text denotes, as the Value would carry it, converted as
    # the Value path converts it.
    return _number(float(text))


def _not_json(name: str) -> Any:
    # NaN and Infinity are not JSON (historyd sends them as strings); orjson
    # refuses them, and so does this path.
    raise ValueError(f"{name} is not JSON")


def _sorted_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Stable, so of a key given twice the last value wins, as in orjson.
    return dict(sorted(pairs, key=_first))


def entry_to_python(e: history_pb2.StateEntry, raw: bool = False) -> dict[str, Any]:
    """One ``StateEntry`` as the dict the host's tool_state held.

    The conventional fields come first, in ``mcp_state.state.StateEntry``'s
    order (value, tool, seq, inputs, turn, turns_written), then the fields of
    ``extra``, sorted. A field the server set wins over a same-named one in
    ``extra``. historyd puts a recorded field whose type did not fit the
    convention (an ``inputs`` that is not a map of strings, say) in ``extra``
    and leaves the typed field unset, so such a value comes back as stored.

    The value is read from ``value_json`` when the server sent it, else from
    ``value``. With ``raw``, the entry holds ``value_json``, the value's JSON
    text as bytes, in place of ``value``: as historyd sent it, or written
    here from the Value a server without ``value_json`` sent.
    """
    out: dict[str, Any] = {}
    text = e.value_json
    if text:
        if raw:
            out["value_json"] = text
        else:
            out["value"] = json_to_python(text)
    elif e.HasField("value"):
        value = value_to_python(e.value)
        if raw:
            out["value_json"] = python_to_json(value)
        else:
            out["value"] = value
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


def entries_to_python(state: history_pb2.TurnState, raw: bool = False) -> dict[str, dict[str, Any]]:
    """A turn's entries, key by key, in sorted order.

    Raises ``ValueError`` naming the key when a value's JSON text does not
    parse.
    """
    entries = state.entries
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(entries):
        try:
            out[key] = entry_to_python(entries[key], raw)
        except ValueError as exc:
            raise ValueError(f"the value_json of key {key!r} is not JSON: {exc}") from exc
    return out


def timestamp_to_datetime(message: Any, field: str) -> _dt.datetime | None:
    """An optional ``google.protobuf.Timestamp`` field as an aware UTC datetime."""
    if not message.HasField(field):
        return None
    return getattr(message, field).ToDatetime(tzinfo=_dt.timezone.utc)

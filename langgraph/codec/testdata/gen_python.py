"""Write python_golden.json: values serialized by LangGraph's real Python
serializer, each with the plain data codec must decode it to.

Run with a Python that has langgraph-checkpoint and langchain-core installed
(langgraph too for the Send cases, numpy for the array cases; each is left
out without its package):

    python langgraph/codec/testdata/gen_python.py

Options:
    --out PATH            where to write (default: python_golden.json beside
                          this script)
    --old-jsonplus PATH   jsonplus.py of an old langgraph-checkpoint (1.0.x,
                          which also needs the msgpack package) to add cases in
                          the old "json" format.

The expected value ("want") is computed here from the Python objects by the
mapping codec documents, not by decoding the bytes, so the Go test checks
the decoder against the mapping. In "want", bytes are {"$bytes": base64},
NaN and infinities {"$float": "NaN" | "Infinity" | "-Infinity"}, and a value
codec must refuse {"$error": "unsupported" | "malformed"}. Floats are
written with a '.' or an exponent and integers without, so the test can tell
them apart.

Each case written in msgpack (and the old-format values case) also records
"pydantic": what pydantic_core.to_jsonable_python, the JSON rendering Python
hosts (pydantic, FastAPI, LangGraph's API server) give their own values,
makes of the same Python value, bytes in base64. Where pydantic cannot
render a value it is {"$unsupported": type name}; where historyd renders one
otherwise on purpose it is {"$deviates": why} (namedtuples, which the
serializer stores exactly as it stores dataclasses, and maps with keys that
are not strings). The Go test holds the decoder to it elsewhere.
"""

from __future__ import annotations

import argparse
import base64
import collections
import dataclasses
import datetime as dt
import decimal
import enum
import importlib.util
import ipaddress
import json
import math
import pathlib
import re
import sys
import uuid
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import pydantic
import pydantic.v1
from pydantic_core import to_jsonable_python
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

try:
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
except ImportError:  # DeltaChannel snapshots arrived in 2026
    _DeltaSnapshot = None

try:
    import numpy as np
except ImportError:  # the array cases are optional
    np = None

try:
    from langgraph.types import Send
except ImportError:
    Send = None


# --- the mapping, computed from Python objects -----------------------------


def js_number(x: float) -> str:
    """A float's text as JavaScript's Number#toString writes it."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    d = decimal.Decimal(repr(abs(x)))
    _, digits_t, exp = d.normalize().as_tuple()
    digits = "".join(map(str, digits_t))
    k = len(digits)
    n = exp + k  # position of the decimal point
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    mant = digits[0] + ("." + digits[1:] if k > 1 else "")
    return sign + mant + "e" + ("+" if e >= 0 else "-") + str(abs(e))


def key_text(k: Any) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, bool):
        return "true" if k else "false"
    if k is None:
        return "null"
    if isinstance(k, int):
        return str(k)
    if isinstance(k, float):
        return js_number(k)
    if isinstance(k, uuid.UUID):
        return str(k)
    if isinstance(k, (dt.datetime, dt.date)):
        return k.isoformat()
    if isinstance(k, tuple):
        return json.dumps([expect(e) for e in k], separators=(",", ":"), ensure_ascii=False)
    raise TypeError(f"no key text for {k!r}")


def float_want(x: float) -> Any:
    if math.isnan(x):
        return {"$float": "NaN"}
    if math.isinf(x):
        return {"$float": "Infinity" if x > 0 else "-Infinity"}
    return x


def bytes_want(b: bytes) -> dict:
    return {"$bytes": base64.b64encode(bytes(b)).decode()}


NUMERIC_KINDS = {"b", "i", "u", "f"}


def numpy_want(a: Any) -> Any:
    kind, size = a.dtype.kind, a.dtype.itemsize
    numeric = kind in NUMERIC_KINDS and not (kind == "f" and size > 8)
    if numeric:
        return expect(a.tolist())
    order = "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"
    buf = a.tobytes(order="A") if not a.flags.c_contiguous else a.tobytes()
    return {
        "dtype": a.dtype.str,
        "shape": list(a.shape),
        "order": order,
        "data": bytes_want(buf),
    }


def expect(o: Any) -> Any:
    """The plain data codec documents for a Python value."""
    if o is None or isinstance(o, (bool, str)):
        if isinstance(o, str):
            # the serializer replaces lone surrogates with '?'
            return o.encode("utf-8", "replace").decode("utf-8")
        return o
    if isinstance(o, enum.Enum):
        return expect(o.value)
    if isinstance(o, int):
        assert -(2**63) <= o < 2**64, o
        return o
    if isinstance(o, float):
        return float_want(o)
    if isinstance(o, (bytes, bytearray)):
        return bytes_want(o)
    if isinstance(o, dict):
        return {key_text(k): expect(v) for k, v in o.items()}
    if hasattr(o, "_asdict"):  # namedtuple
        return expect(o._asdict())
    if isinstance(o, (list, tuple)):
        return [expect(e) for e in o]
    if hasattr(o, "model_dump"):  # pydantic v2, LangChain messages
        return expect(o.model_dump())
    if hasattr(o, "get_secret_value"):
        return "**********" if o.get_secret_value() else ""
    if hasattr(o, "dict") and callable(o.dict):  # pydantic v1
        return expect(o.dict())
    if isinstance(o, pathlib.PurePath):
        return str(o)
    if isinstance(o, re.Pattern):
        return o.pattern
    if isinstance(o, uuid.UUID):
        return str(o)
    if isinstance(o, decimal.Decimal):
        return str(o)
    if isinstance(o, (set, frozenset, collections.deque)):
        return [expect(e) for e in o]
    if isinstance(
        o,
        (
            ipaddress.IPv4Address,
            ipaddress.IPv4Interface,
            ipaddress.IPv4Network,
            ipaddress.IPv6Address,
            ipaddress.IPv6Interface,
            ipaddress.IPv6Network,
        ),
    ):
        return str(o)
    if isinstance(o, dt.datetime):
        off = o.utcoffset()
        return o.replace(tzinfo=None).isoformat() + ("" if off is None else py_offset(off))
    if isinstance(o, dt.timedelta):
        return iso_duration(o)
    if isinstance(o, dt.date):
        return o.isoformat()
    if isinstance(o, dt.time):
        off = o.utcoffset()
        return o.replace(tzinfo=None).isoformat() + ("" if off is None else py_offset(off))
    if isinstance(o, dt.timezone):
        return iso_offset(o.utcoffset(None))
    if isinstance(o, ZoneInfo):
        return o.key
    if Send is not None and isinstance(o, Send):
        return [expect(o.node), expect(o.arg)]
    if dataclasses.is_dataclass(o):
        return {f.name: expect(getattr(o, f.name)) for f in dataclasses.fields(o)}
    if np is not None and isinstance(o, np.ndarray):
        return numpy_want(o)
    if isinstance(o, BaseException):
        return repr(o)
    raise TypeError(f"no expectation for {type(o)}")


def py_offset(off: dt.timedelta) -> str:
    """A UTC offset as pydantic writes it after a time: Z, or +HH:MM with
    the seconds dropped."""
    secs = int(off.total_seconds())
    if secs == 0:
        return "Z"
    mins = abs(secs) // 60
    return ("-" if secs < 0 else "+") + f"{mins // 60:02d}:{mins % 60:02d}"


def iso_offset(off: dt.timedelta) -> str:
    """A UTC offset as isoformat() writes it: +HH:MM, and :SS if any."""
    secs = int(off.total_seconds())
    sign, secs = ("-" if secs < 0 else "+"), abs(secs)
    out = f"{sign}{secs // 3600:02d}:{secs % 3600 // 60:02d}"
    return out + (f":{secs % 60:02d}" if secs % 60 else "")


def iso_duration(d: dt.timedelta) -> str:
    """A timedelta as the ISO-8601 duration pydantic writes: a sign and the
    magnitude in years of 365 days, days, hours, minutes and seconds."""
    neg = d < dt.timedelta(0)
    d = -d if neg else d
    days, secs, micros = d.days, d.seconds, d.microseconds
    out = "-P" if neg else "P"
    if days // 365:
        out += f"{days // 365}Y"
    if days % 365:
        out += f"{days % 365}D"
    if secs or micros:
        out += "T"
        if secs // 3600:
            out += f"{secs // 3600}H"
        if secs % 3600 // 60:
            out += f"{secs % 3600 // 60}M"
        if secs % 60 or micros:
            out += f"{secs % 60}" + (("." + f"{micros:06d}".rstrip("0")) if micros else "") + "S"
    if not (days or secs or micros):
        out += "T0S"
    return out


class Deviates:
    """Stands, in the value given to pydantic, for a part historyd renders
    otherwise on purpose."""

    def __init__(self, why: str):
        self.why = why


STRING_LIKE_KEYS = (str, uuid.UUID, dt.date)  # the serializer writes them as their text


def marked(o: Any) -> Any:
    """o with the parts historyd renders otherwise on purpose replaced by a
    Deviates."""
    if hasattr(o, "_asdict") and isinstance(o, tuple):
        return Deviates("namedtuple: stored as a dataclass is, so served as its field map")
    if isinstance(o, dict):
        if not all(isinstance(k, STRING_LIKE_KEYS) for k in o):
            return Deviates("keys that are not strings: served as their JSON text")
        return {k: marked(v) for k, v in o.items()}
    if isinstance(o, list):
        return [marked(e) for e in o]
    if isinstance(o, tuple):
        return tuple(marked(e) for e in o)
    return o


def pydantic_fallback(o: Any) -> Any:
    if isinstance(o, Deviates):
        return {"$deviates": o.why}
    return {"$unsupported": type(o).__qualname__}


def finite(o: Any) -> Any:
    """o with NaN and infinities as the {"$float"} markers JSON can hold,
    and text as the serializer writes it."""
    if isinstance(o, float):
        return float_want(o)
    if isinstance(o, str):
        return expect(o)  # lone surrogates as the serializer writes them
    if isinstance(o, list):
        return [finite(e) for e in o]
    if isinstance(o, dict):
        return {expect(k): finite(v) for k, v in o.items()}
    return o


def pydantic_want(o: Any) -> Any:
    """What pydantic's to_jsonable_python gives for o, bytes in base64."""
    return finite(to_jsonable_python(marked(o), fallback=pydantic_fallback, bytes_mode="base64"))


def messages_want(msgs: list) -> dict:
    humans = [m.text for m in msgs if isinstance(m, BaseMessage) and m.type == "human"]
    return {"count": len(msgs), "humans": humans}


# --- the values ------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class InnerV2(pydantic.BaseModel):
    k: int


class ModelV2(pydantic.BaseModel):
    name: str
    when: dt.datetime
    tags: set[str]
    inner: InnerV2
    blob: bytes


class ModelV1(pydantic.v1.BaseModel):
    a: int
    b: str


class WithSecret(pydantic.BaseModel):
    user: str
    password: pydantic.SecretStr


@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str = "p"


class Pair(NamedTuple):
    a: int
    b: list


UTC = dt.timezone.utc


def messages_basic() -> list:
    return [
        HumanMessage("What is the area of the sketch?", id="h1"),
        AIMessage(
            content="",
            id="a1",
            tool_calls=[{"name": "sketch_area", "args": {"unit": "km2"}, "id": "call_1"}],
        ),
        ToolMessage(content="42.5", tool_call_id="call_1", id="t1"),
        AIMessage("The area is 42.5 km².", id="a2"),
        HumanMessage(
            content=[
                {"type": "text", "text": "And the "},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                "perimeter",
                {"type": "text", "text": "?"},
                {"type": "text", "text": 5},
            ],
            id="h2",
        ),
        SystemMessage("You are terse.", id="s1"),
    ]


def messages_kinds() -> list:
    return [
        HumanMessage("Grüße, 世界 🌍"),
        HumanMessage(""),
        AIMessageChunk(content="chunk"),
        HumanMessageChunk(content="human chunk"),
        ChatMessage(role="user", content="chat"),
        FunctionMessage(name="f", content="fn"),
        RemoveMessage(id="gone"),
        HumanMessage(content=[]),
    ]


def cases() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [
        ("messages_basic", messages_basic()),
        ("messages_kinds", messages_kinds()),
        (
            "tool_state",
            {
                "sketch-ops/sketch_area/area_km2": {
                    "value": 42.5,
                    "tool": "sketch_area",
                    "seq": 3,
                    "inputs": {"polygon": "sketch-ops/draw/polygon", "unit": "model"},
                    "turn": 2,
                    "turns_written": 1,
                }
            },
        ),
        (
            "datetimes",
            {
                "utc": dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
                "naive": dt.datetime(2020, 1, 2, 3, 4, 5),
                "paris": dt.datetime(2024, 7, 1, 12, 0, tzinfo=ZoneInfo("Europe/Paris")),
                "date": dt.date(2024, 2, 29),
                "time": dt.time(12, 30, 15, 500, tzinfo=UTC),
                "time_naive": dt.time(1, 2, 3),
                "delta": dt.timedelta(days=1, seconds=5, microseconds=7),
                "tz": dt.timezone(dt.timedelta(hours=2), "CEST"),
                "zone": ZoneInfo("America/New_York"),
            },
        ),
        (
            "datetime_edges",
            {
                "london_winter": dt.datetime(2024, 1, 1, tzinfo=ZoneInfo("Europe/London")),
                "offset_seconds": dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1, seconds=30))),
                "offset_negative": dt.datetime(2024, 1, 1, 23, 59, 59, 999999, tzinfo=dt.timezone(dt.timedelta(hours=-3, minutes=-30))),
                "year_999": dt.datetime(999, 1, 1, 1, 1, 1),
                "one_microsecond": dt.datetime(2024, 1, 1, 0, 0, 0, 1),
                "date_year_9": dt.date(9, 3, 4),
                "date_max": dt.date.max,
                "time_zoneinfo": dt.time(1, 2, 3, tzinfo=ZoneInfo("Europe/Paris")),
                "time_fold": dt.time(1, 2, 3, fold=1),
                "time_offset": dt.time(23, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
                "time_microseconds": dt.time(0, 0, 0, 10),
                "tz_utc": dt.timezone.utc,
                "tz_negative": dt.timezone(dt.timedelta(hours=-3, minutes=-30)),
                "tz_seconds": dt.timezone(dt.timedelta(hours=5, seconds=45)),
            },
        ),
        (
            "timedeltas",
            [
                dt.timedelta(0),
                dt.timedelta(days=1, seconds=5),
                dt.timedelta(days=-1, seconds=3600),
                dt.timedelta(seconds=-1),
                dt.timedelta(microseconds=-1),
                dt.timedelta(microseconds=1),
                dt.timedelta(seconds=1, microseconds=120000),
                dt.timedelta(days=365),
                dt.timedelta(days=730, seconds=59, microseconds=100000),
                dt.timedelta(days=400, hours=25, minutes=61, seconds=1.5),
                dt.timedelta(hours=2),
                dt.timedelta(minutes=-90),
                dt.timedelta.max,
                dt.timedelta.min,
            ],
        ),
        (
            "paths_patterns",
            {
                "relative": pathlib.Path("a/b"),
                "empty": pathlib.Path(),
                "root": pathlib.Path("/"),
                "double_slash": pathlib.Path("//srv/x"),
                "pattern_flags": re.compile(r"^\d+$", re.M | re.X),
                "uuid_max": uuid.UUID(int=2**128 - 1),
                "uuid_v4": uuid.UUID("4b3f8a4e-8c1d-4e6a-9f2b-1c2d3e4f5a6b"),
                "secret_empty": pydantic.SecretStr(""),
                "secret_bytes": pydantic.SecretBytes(b"pw"),
            },
        ),
        (
            "uuids",
            {
                "u": uuid.UUID("12345678-1234-5678-1234-567812345678"),
                "list": [uuid.UUID(int=1), uuid.UUID(int=2**128 - 1)],
            },
        ),
        (
            "collections",
            {
                "set": {3, 1, 2},
                "frozenset": frozenset({"a"}),
                "tuple": (1, "two", 3.0),
                "deque": collections.deque([1, [2, 3]]),
                "nested_tuple": ((1, 2), (3,)),
                "set_of_tuples": {(1, 2)},
            },
        ),
        (
            "numbers",
            {
                "max_i64": 2**63 - 1,
                "min_i64": -(2**63),
                "above_i64": 2**63,
                "max_u64": 2**64 - 1,
                "boundaries": [
                    0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32,
                    -1, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1,
                ],
                "float": 1.5,
                "float_int": 2.0,
                "neg_zero": -0.0,
                "nan": math.nan,
                "inf": math.inf,
                "ninf": -math.inf,
                "tiny": 5e-324,
                "huge": 1.7976931348623157e308,
            },
        ),
        (
            "decimal_enum",
            {
                "dec": decimal.Decimal("3.14159265358979323846"),
                "dec_neg_zero": decimal.Decimal("-0.0"),
                "enum": Color.RED,
                "int_enum": Level.HIGH,
            },
        ),
        (
            "pydantic",
            {
                "v2": ModelV2(
                    name="x",
                    when=dt.datetime(2023, 3, 4, 5, 6, 7, tzinfo=UTC),
                    tags={"only"},
                    inner=InnerV2(k=1),
                    blob=b"\x01\x02",
                ),
                "v1": ModelV1(a=1, b="b"),
            },
        ),
        ("secrets", {"secret": pydantic.SecretStr("hunter2"), "model": WithSecret(user="u", password="pw")}),
        (
            "dataclass_namedtuple",
            {"dc": Point(1, 2.5), "nt": Pair(a=1, b=[1, 2]), "nested": [Point(0, 0.0, label="o")]},
        ),
        ("bytes_nested", {"b": b"\x00\xff binary", "ba": bytearray(b"abc"), "empty": b""}),
        ("top_bytes", b"raw \x00 bytes"),
        ("top_bytearray", bytearray(b"xyz")),
        ("top_none", None),
        ("top_string", "just a string"),
        ("top_int", 7),
        ("top_float", 0.1),
        ("top_list_empty", []),
        ("top_dict_empty", {}),
        (
            "non_string_keys",
            {
                1: "one",
                2: {3: "three", -5: "minus five"},
                None: "none",
                False: "false",
                1.5: "float",
                1e21: "big float",
                (1, "a"): "tuple",
                "s": "str",
            },
        ),
        (
            "string_like_keys",
            {uuid.UUID(int=5): "uuid key", dt.date(2020, 1, 1): "date key", dt.datetime(2020, 1, 1, 1, 2, 3): "dt key"},
        ),
        (
            "non_ascii",
            {
                "ключ": "значение",
                "emoji": "🎉",
                "cjk": "漢字",
                "combining": "e\u0301",
                "nul": "a\x00b",
                "surrogate": "a\udc80b",
            },
        ),
        (
            "misc",
            {
                "path": pathlib.Path("/tmp/x/y"),
                "regex": re.compile("ab+c", re.I),
                "ip4": ipaddress.IPv4Address("10.0.0.1"),
                "ip6net": ipaddress.IPv6Network("2001:db8::/32"),
                "exc": ValueError("bad"),
            },
        ),
        ("deep", nest(40)),
    ]
    if Send is not None:
        out.append(("send", [Send("node", {"x": 1}), Send("other", [1, 2])]))
    if np is not None:
        out.append(
            (
                "numpy",
                {
                    "i4": np.arange(6, dtype="<i4").reshape(2, 3),
                    "f8_fortran": np.asfortranarray(np.arange(6, dtype="<f8").reshape(2, 3) / 4),
                    "f8_3d_fortran": np.asfortranarray(np.arange(24, dtype="<i8").reshape(2, 3, 4)),
                    "bool": np.array([True, False, True]),
                    "u8": np.array([0, 2**64 - 1], dtype="<u8"),
                    "i1": np.array([-128, 127], dtype="i1"),
                    "f2": np.array([1.5, -2.0, 65504.0], dtype="<f2"),
                    "f4": np.array([0.25, np.nan], dtype="<f4"),
                    "scalar": np.array(3.5),
                    "big_endian": np.arange(3, dtype=">i2"),
                    "empty": np.zeros((0, 3)),
                    "slice": np.arange(12).reshape(3, 4)[:, 1:3],
                    "strings": np.array(["ab", "c"]),
                    "complex": np.array([1 + 2j]),
                },
            )
        )
    return out


def nest(n: int) -> Any:
    v: Any = "bottom"
    for i in range(n):
        v = [v] if i % 2 else {"k": v}
    return v


# --- old "json" format ------------------------------------------------------


def old_json_cases(path: str) -> list[dict]:
    spec = importlib.util.spec_from_file_location("lgcodec_old_jsonplus", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ser = mod.JsonPlusSerializer()

    def lc_want(o: Any) -> Any:
        # LangChain objects are written with to_json(): their kwargs.
        from langchain_core.load.serializable import Serializable

        if isinstance(o, Serializable):
            return {k: lc_want(v) for k, v in o.to_json()["kwargs"].items()}
        if isinstance(o, (list, tuple)):  # json writes tuples, namedtuples too, as lists
            return [lc_want(e) for e in o]
        if isinstance(o, dict):
            return {key_text(k): lc_want(v) for k, v in o.items()}
        if Send is not None and isinstance(o, Send):
            return {"node": expect(o.node), "arg": expect(o.arg)}
        if isinstance(o, int) and not isinstance(o, bool) and o >= 2**64:
            return float(o)  # beyond uint64 a JSON integer decodes to float64
        return expect(o)

    values = [
        ("messages_basic", messages_basic()),
        ("messages_kinds", messages_kinds()),
        (
            "values",
            {
                "dt": dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC),
                "date": dt.date(2024, 2, 29),
                "time": dt.time(12, 30, 15, 500, tzinfo=UTC),
                "delta": dt.timedelta(days=2),
                "tz": dt.timezone(dt.timedelta(hours=-3)),
                "zone": ZoneInfo("Europe/Paris"),
                "uuid": uuid.UUID(int=7),
                "set": {1, 2},
                "dec": decimal.Decimal("1.10"),
                "enum": Color.RED,
                "path": pathlib.Path("/a/b"),
                "regex": re.compile("x+"),
                "ip": ipaddress.IPv4Address("10.0.0.2"),
                "bytes": b"\x00\x01hex",
                "dc": Point(1, 2.5),
                "nt": Pair(a=1, b=[2]),
                "v1": ModelV1(a=1, b="b"),
                "exc": KeyError("k"),
                "nan": math.nan,
                "inf": -math.inf,
                "huge_int": 2**70,
                "int_keys": {1: "a", None: "b", True: "c"},
                "text": "Grüße 🌍",
            },
        ),
    ]
    if Send is not None:
        values.append(("send", [Send("node", {"x": 1})]))
    out = []
    for name, v in values:
        data = ser.dumps(v)
        want = lc_want(v)
        case = {"name": "oldjson_" + name, "type": "json", "data_b64": base64.b64encode(data).decode(), "want": want}
        if name.startswith("messages"):
            case["messages"] = messages_want(v)
        if name == "values":
            case["pydantic"] = pydantic_want(v)
        out.append(case)
    return out


def main() -> None:
    here = pathlib.Path(__file__).resolve().parent
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(here / "python_golden.json"))
    ap.add_argument("--old-jsonplus", default=None)
    args = ap.parse_args()

    ser = JsonPlusSerializer()
    golden = []
    for name, value in cases():
        typ, data = ser.dumps_typed(value)
        case = {"name": name, "type": typ, "data_b64": base64.b64encode(data).decode(), "want": expect(value)}
        if name.startswith("messages"):
            case["messages"] = messages_want(value)
        if typ == "msgpack":
            case["pydantic"] = pydantic_want(value)
        golden.append(case)

    # A DeltaChannel snapshot (ext 7) stores the channel's whole value:
    # it reads as that value.
    if _DeltaSnapshot is not None:
        typ, data = ser.dumps_typed(_DeltaSnapshot(messages_basic()))
        golden.append({"name": "delta_snapshot", "type": typ, "data_b64": base64.b64encode(data).decode(),
                       "want": expect(messages_basic()), "messages": messages_want(messages_basic())})

    if args.old_jsonplus:
        golden.extend(old_json_cases(args.old_jsonplus))

    from importlib.metadata import version

    versions = {p: version(p) for p in ("langgraph-checkpoint", "langchain-core", "ormsgpack", "pydantic")}
    if np is not None:
        versions["numpy"] = np.__version__
    if args.old_jsonplus:
        root = pathlib.Path(args.old_jsonplus).resolve().parents[3]
        infos = sorted(root.glob("langgraph_checkpoint-*.dist-info"))
        versions["old langgraph-checkpoint"] = infos[0].name.split("-")[1].removesuffix(".dist") if infos else "unknown"
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"versions": versions, "cases": golden}, f, indent=1, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    print(f"wrote {len(golden)} cases to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

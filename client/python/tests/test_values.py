"""Values sent as JSON text (the default) against values sent as a Value.

Every way a value can reach the client gives the same Python objects:
``int`` against ``float``, ``-0.0``, and the order of each dict's keys
included, which ``==`` alone would not see. Held here on hand-picked edge
cases, on thousands of random values written as historyd writes
``value_json`` (test_client.historyd_json), and through the in-process
server; test/clients holds both formats to each other on the real server's
answers for its whole fixture.
"""

from __future__ import annotations

import json
import math
import random
import struct
import unittest
from typing import Any

import grpc
import orjson
from google.protobuf import struct_pb2

from historyd_client import HistorydError, ValueFormat
from historyd_client._convert import entry_to_python, json_to_python, value_to_python
from historyd_client.gen.historyd.v1 import history_pb2 as pb
from test_client import AREA, SUMMARY, TOTAL, Served, also_sync, historyd_json, js_number, value


def typed(x: Any) -> Any:
    """``x`` with every type and order spelled out, for comparisons that ``==`` would blur."""
    if isinstance(x, dict):
        return ("dict", [(k, typed(v)) for k, v in x.items()])
    if isinstance(x, list):
        return ("list", [typed(v) for v in x])
    if isinstance(x, tuple):  # NamedTuples too: their fields in order
        return (type(x).__name__, [typed(v) for v in x])
    if isinstance(x, float):
        return ("float", x.hex())
    return (type(x).__name__, x)


def parsed_value(text: bytes) -> struct_pb2.Value:
    """The Value historyd sends for what the text says: every number the
    double it denotes (protobuf's own JSON parser would read ``-0`` as 0)."""
    return value(json.loads(text, parse_int=float, parse_float=float))


class JSONTextTest(unittest.TestCase):
    def same(self, text: bytes) -> Any:
        """Parses the text both ways and requires the same objects."""
        got = json_to_python(text)
        want = value_to_python(parsed_value(text))
        self.assertEqual(typed(got), typed(want), text)
        return got

    def test_numbers(self) -> None:
        self.assertIs(type(self.same(b"12935")), int)
        self.assertIs(type(self.same(b"9007199254740991")), int)
        self.assertEqual(self.same(b"9007199254740992"), 2**53)
        self.assertIs(type(self.same(b"9007199254740992")), int)
        self.assertIs(type(self.same(b"-9007199254740992")), int)
        # Integral doubles beyond 2^53 are floats on the Value path; orjson
        # would read them as ints.
        for text in (b"9007199254740994", b"-9007199254740994", b"18446744073709551616", b"100000000000000000000"):
            self.assertIs(type(self.same(text)), float, text)
        self.assertIs(type(self.same(b"1e+21")), float)
        # -0 is a float (its sign kept), as on the Value path; orjson reads 0.
        for text in (b"-0", b"[-0,0,-0.5]", b'{"a":-0}', b"[1, -0 ]"):
            self.same(text)
        self.assertEqual(math.copysign(1, json_to_python(b"-0")), -1.0)
        self.assertIs(type(self.same(b"0")), int)
        self.assertIs(type(self.same(b"2.5")), float)
        for text in (b"0.30000000000000004", b"1e-07", b"5e-324", b"1.7976931348623157e+308", b"-2.5e-7", b"123456789.125"):
            self.assertIs(type(self.same(text)), float, text)

    def test_strings_that_look_like_numbers(self) -> None:
        # "-0" inside strings sends the text the slower way, to the same result.
        self.assertEqual(self.same(b'{"date":"2026-0","b":"x-0,y","c":[1,2]}'), {"b": "x-0,y", "c": [1, 2], "date": "2026-0"})
        self.assertEqual(self.same(b'"12345678901234567890"'), "12345678901234567890")

    def test_keys_sorted(self) -> None:
        got = self.same('{"z":1,"é":2,"😀":3,"\uffff":4,"A":{"b":1,"a":[{"y":1,"x":2}]},"10":5,"2":6}'.encode())
        self.assertEqual(list(got), sorted(got))
        self.assertEqual(list(got["A"]), ["a", "b"])
        self.assertEqual(list(got["A"]["a"][0]), ["x", "y"])
        # The sort is by code point, as sorted() sorts str: "\uffff" before
        # the emoji, whose UTF-16 form would sort first.
        self.assertEqual(list(got), ["10", "2", "A", "z", "é", "\uffff", "😀"])

    def test_sorted_on_the_slow_path_too(self) -> None:
        got = self.same(b'{"b":-0,"a":{"d":1,"c":9007199254740994}}')
        self.assertEqual(typed(got), ("dict", [("a", ("dict", [("c", ("float", (2.0**53 + 2).hex())), ("d", ("int", 1))])), ("b", ("float", (-0.0).hex()))]))

    def test_duplicate_keys_last_wins(self) -> None:
        self.assertEqual(json_to_python(b'{"a":1,"a":2}'), {"a": 2})
        self.assertEqual(json_to_python(b'{"a":1,"a":-0}'), {"a": -0.0})

    def test_not_json(self) -> None:
        for text in (b"NaN", b"[Infinity]", b"{", b"[1,]", b"", b'{"a":-0,}'):
            with self.assertRaises(ValueError, msg=text):
                json_to_python(text)

    def test_random_values(self) -> None:
        """Random values, written as historyd writes them, read as the Value path reads them."""
        rng = random.Random(20261201)
        for i in range(3000):
            v = struct_pb2.Value()
            v.CopyFrom(random_value(rng, 4))
            text = historyd_json(v)
            self.assertEqual(typed(json_to_python(text)), typed(value_to_python(v)), (i, text))


def random_number(rng: random.Random) -> float:
    pick = rng.random()
    if pick < 0.3:
        return float(rng.randint(-(2**20), 2**20))
    if pick < 0.45:
        return float(rng.choice([2**53, -(2**53), 2**53 + 2, 2**60, 1e20, 1e21, -0.0, 0.0, 2**53 - 1]))
    if pick < 0.6:
        return round(rng.uniform(-180, 180), 7)
    while True:  # any double but NaN and the infinities
        x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(x):
            return x


def random_string(rng: random.Random) -> str:
    alphabet = "ab-0,:[]{}\"\\ \n\t\u2028é😀\uffff1"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))


def random_value(rng: random.Random, depth: int) -> struct_pb2.Value:
    v = struct_pb2.Value()
    pick = rng.random() if depth > 0 else rng.random() * 0.7
    if pick < 0.35:
        v.number_value = random_number(rng)
    elif pick < 0.5:
        v.string_value = random_string(rng)
    elif pick < 0.6:
        v.bool_value = rng.random() < 0.5
    elif pick < 0.7:
        v.null_value = struct_pb2.NULL_VALUE
    elif pick < 0.85:
        for _ in range(rng.randint(0, 4)):
            v.list_value.values.add().CopyFrom(random_value(rng, depth - 1))
    else:
        v.struct_value.SetInParent()
        for _ in range(rng.randint(0, 4)):
            v.struct_value.fields[random_string(rng)].CopyFrom(random_value(rng, depth - 1))
    return v


class HistorydNumbersTest(unittest.TestCase):
    def test_js_number_is_javascripts(self) -> None:
        # The test's writer against JavaScript's own spelling of these doubles.
        for x, want in ((1e20, "100000000000000000000"), (1e21, "1e+21"), (2.0**60, "1152921504606847000"), (1e-7, "1e-07"),
                        (0.000001, "0.000001"), (-0.0, "-0"), (2.0, "2"), (0.1 + 0.2, "0.30000000000000004")):
            # JavaScript writes "1e-7"; historyd (Go's strconv) "1e-07": the same double.
            self.assertEqual(float(js_number(x)), x)
            self.assertEqual(js_number(x), want)


class RawEntryTest(unittest.TestCase):
    def test_raw_keeps_the_text(self) -> None:
        text = b'{"b":1,"a":-0}'
        e = pb.StateEntry(value_json=text, tool="t", seq=2)
        self.assertEqual(entry_to_python(e, raw=True), {"value_json": text, "tool": "t", "seq": 2})
        self.assertEqual(list(entry_to_python(e)), ["value", "tool", "seq"])

    def test_raw_from_a_value(self) -> None:
        # A server without value_json: the client writes the text itself.
        e = pb.StateEntry()
        e.value.struct_value.update({"b": 1, "a": [1.5, "x"]})
        self.assertEqual(entry_to_python(e, raw=True), {"value_json": b'{"a":[1.5,"x"],"b":1}'})
        self.assertEqual(orjson.loads(entry_to_python(e, raw=True)["value_json"]), entry_to_python(e)["value"])


@also_sync
class ServedFormatsTest(Served):
    async def read_all(self, h, fmt=None) -> list[Any]:
        kw = {} if fmt is None else {"value_format": fmt}
        return [
            (await h.turn("t", 3, **kw)).state,
            (await h.snapshot("t", 4, **kw)).state,
            [t.state for t in (await h.snapshots("t", **kw)).turns],
            [t.state async for t in h.stream_turns("t", **kw)],
            [t.state async for t in h.stream_snapshots("t", **kw)],
        ]

    async def test_json_by_default_and_the_same_as_proto(self) -> None:
        async with self.client() as h:
            self.assertIs(h.value_format, ValueFormat.JSON)
            as_json = await self.read_all(h)
            sent = [r.value_format for _, r in self.fake.requests]
            self.fake.requests.clear()
            as_proto = await self.read_all(h, "proto")
            sent_proto = [r.value_format for _, r in self.fake.requests]
        self.assertEqual(sent, [pb.VALUE_FORMAT_JSON] * 5)
        self.assertEqual(sent_proto, [pb.VALUE_FORMAT_PROTO] * 5)
        self.assertEqual(typed(as_json), typed(as_proto))
        self.assertEqual(as_json[0][SUMMARY]["value"]["exactly_2_53"], 2**53)

    async def test_client_wide_format(self) -> None:
        async with self.client(value_format=ValueFormat.PROTO) as h:
            await h.turn("t", 3)
            await h.turn("t", 3, value_format="json")
            [t async for t in h.stream_turns("t")]
            await h.snapshots("t", value_format=ValueFormat.RAW)
        self.assertEqual(
            [(name, r.value_format) for name, r in self.fake.requests],
            [
                ("Snapshot", pb.VALUE_FORMAT_PROTO),
                ("Snapshot", pb.VALUE_FORMAT_JSON),
                ("StreamSnapshots", pb.VALUE_FORMAT_PROTO),
                ("StreamSnapshots", pb.VALUE_FORMAT_JSON),  # raw is JSON on the wire
            ],
        )
        self.assertIn("value_format='proto'", repr(self.client(value_format="proto")))
        with self.assertRaisesRegex(ValueError, "value_format must be one of 'json', 'proto', 'raw', not 'xml'"):
            self.client(value_format="xml")
        async with self.client() as h:
            with self.assertRaisesRegex(ValueError, "value_format"):
                await h.turn("t", 3, value_format="JSON")

    async def test_raw(self) -> None:
        async with self.client(value_format="raw") as h:
            raw = await h.turn("t", 3)
        async with self.client() as h:
            parsed = await h.turn("t", 3)
        for key, entry in raw.state.items():
            self.assertNotIn("value", entry)
            self.assertIsInstance(entry["value_json"], bytes)
            self.assertEqual(json_to_python(entry["value_json"]), parsed.state[key]["value"])
            self.assertEqual({k: v for k, v in entry.items() if k != "value_json"}, {k: v for k, v in parsed.state[key].items() if k != "value"})
        # As historyd sent it: the text's own key order, not sorted.
        self.assertTrue(raw.state[AREA]["value_json"].startswith(b'{"vertices":60000,'))

    async def test_a_server_without_value_json(self) -> None:
        self.fake.json = False
        async with self.client() as h:
            old = await self.read_all(h)
            raw = await h.turn("t", 3, value_format="raw")
        self.fake.json = True
        async with self.client() as h:
            new = await self.read_all(h)
        self.assertEqual(typed(old), typed(new))
        self.assertEqual(orjson.loads(raw.state[AREA]["value_json"]), {"amount": 14123.456, "unit": "km2", "vertices": 60000})

    async def test_text_that_does_not_parse(self) -> None:
        self.fake.texts[AREA] = b'{"amount": 14123.456,'
        async with self.client() as h:
            with self.assertRaises(HistorydError) as err:
                await h.turn("t", 3)
            raw = await h.turn("t", 3, value_format="raw")  # unparsed: handed on as sent
            proto = await h.turn("t", 3, value_format="proto")
        self.assertEqual(err.exception.code(), grpc.StatusCode.INTERNAL)
        self.assertIn(f"the value_json of key {AREA!r} is not JSON", err.exception.details())
        self.assertEqual(raw.state[AREA]["value_json"], b'{"amount": 14123.456,')
        self.assertEqual(proto.total, TOTAL)

    async def test_inspector_refuses_raw(self) -> None:
        from historyd_client.inspect import Inspector

        with self.assertRaisesRegex(ValueError, "value_format is 'raw'"):
            Inspector(self.client(value_format="raw"))
        Inspector(self.client(value_format="proto"))


if __name__ == "__main__":
    unittest.main()

"""Unit tests of historyd_client.inspect and the LangChain inspect_state tool.

What the answers say, and that they are the Go tool's byte for byte, is
client/testdata/cases.json's job (test/clients runs it against historyd in
every client). These cover what the table cannot reach through a server: a
host's present state, declared keys, the limits, the JSON and pattern
translations on their own, and the tool's LangChain surface.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import unittest

from langchain_core.messages import ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from historyd_client import Numbering, Outcome, TurnResult
from historyd_client import inspect as ins
from historyd_client._re2 import Refused, compile_re2, translate
from historyd_client.langchain import inspect_state_tool


class FakeHistory:
    """Turns 2..4 of a 4-turn thread whose turn 1 was pruned, in memory."""

    def __init__(self) -> None:
        area = lambda km2, turn, written: {"value": {"km2": km2}, "turn": turn, "turns_written": written}  # noqa: E731
        self.turns = {2: {"area": area(11420, 2, 1)}, 3: {"area": area(12935, 3, 2)}, 4: {"area": area(12935, 3, 2), "notes": {"value": "n"}}}
        self.calls: list[tuple[str, int, tuple[str, ...] | None]] = []

    async def turn(self, thread_id, turn, *, keys=None):
        self.calls.append((thread_id, turn, None if keys is None else tuple(keys)))
        retained = tuple(sorted(self.turns))
        if turn < 1 or turn > 4:
            return TurnResult(Outcome.NO_SUCH_TURN, turn, 4, retained)
        if turn not in self.turns:
            return TurnResult(Outcome.NO_LONGER_RETAINED, turn, 4, retained, question="first")
        state = self.turns[turn]
        if keys:
            state = {k: v for k, v in state.items() if k in keys}
        return TurnResult(Outcome.FOUND, turn, 4, retained, question=f"q{turn}", state=state)


class SyncFakeHistory(FakeHistory):
    """FakeHistory with a plain ``turn``, as SyncHistorydThreadHistory has."""

    def turn(self, thread_id, turn, *, keys=None):  # type: ignore[override]
        coro = super().turn(thread_id, turn, keys=keys)
        try:
            coro.send(None)
        except StopIteration as done:
            return done.value
        raise AssertionError("FakeHistory.turn awaited something")


NO_THREAD = (
    "The host running this tool did not name this conversation's thread, so its saved state cannot be read, "
    "now or at any turn. Calling again will not change that: say that the state could not be read."
)


class ChannelHistory(FakeHistory):
    """FakeHistory that also takes ``channel``, recording it, with answered_with and numbering set."""

    def __init__(self, numbering: Numbering | None = None, answered: dict[int, tuple[int, ...]] | None = None) -> None:
        super().__init__()
        self.numbering = numbering
        self.answered = answered or {}
        self.channels: list[str | None] = []

    async def turn(self, thread_id, turn, *, keys=None, channel=None):
        self.channels.append(channel)
        r = await super().turn(thread_id, turn, keys=keys)
        return r._replace(numbering=self.numbering, answered_with=self.answered.get(turn, ()) if r.found else ())


SHARED = "Turns 2, 3 and 4 were asked in one message and answered by one run, so each of them shows the state that run ended on."
GUESS = (
    "Turn numbers here are estimated and may be too low: the oldest part of this conversation's saved history "
    "was pruned, and what is left does not show how many questions came before it."
)


class TurnNoteTest(unittest.IsolatedAsyncioTestCase):
    async def test_answered_together(self) -> None:
        inspector = ins.Inspector(ChannelHistory(answered={2: (4, 3), 3: (2, 4), 4: (2, 3)}))
        self.assertEqual(
            await inspector.read("t", "notes", turn=4),
            '"n"\n[This is notes as it stood at the end of turn 4. ' + SHARED + "]",
        )
        listing = json.loads(await inspector.read("t", "*", turn=2))
        self.assertEqual(list(listing), ["at_turn", "available_keys", "note"])
        self.assertEqual(listing["note"], SHARED)
        self.assertEqual(await inspector.read("t", "notes"), '"n"')  # the present says nothing of it

    async def test_estimated(self) -> None:
        history = ChannelHistory(numbering=Numbering.ESTIMATED)
        inspector = ins.Inspector(history, max_line_chars=5)
        self.assertEqual(
            await inspector.read("t", "area", turn=2, path="km2"),
            "11420\n[This is area.km2 as it stood at the end of turn 2. " + GUESS + ' Turn 2 is the question "q2".]',
        )
        beyond = json.loads(await inspector.read("t", "area", turn=9))
        self.assertEqual(list(beyond), ["no_such_turn", "turns_so_far", "reason", "note"])
        self.assertEqual(beyond["note"], GUESS)
        pruned = json.loads(await inspector.read("t", "area", turn=1))
        self.assertEqual(pruned["note"], GUESS)
        history.turns[3] = {"area": {"value": 1}}
        history_question = "a question longer than five characters"
        original = history.turn

        async def long_question(thread_id, turn, *, keys=None, channel=None):
            r = await original(thread_id, turn, keys=keys, channel=channel)
            return r._replace(question=history_question) if r.found else r

        history.turn = long_question  # type: ignore[method-assign]
        self.assertTrue((await inspector.read("t", "area", turn=3)).endswith(' Turn 3 is the question "a que…(+33 chars)".]'))

    async def test_counted_says_nothing(self) -> None:
        inspector = ins.Inspector(ChannelHistory(numbering=Numbering.COUNTED))
        self.assertEqual(await inspector.read("t", "area", turn=2, path="km2"), "11420\n[This is area.km2 as it stood at the end of turn 2.]")
        self.assertNotIn("note", json.loads(await inspector.read("t", "area", turn=1)))

    async def test_channel(self) -> None:
        history = ChannelHistory()
        inspector = ins.Inspector(history, channel="files")
        await inspector.read("t", "area", turn=2)
        await inspector.read("t", "nope")
        self.assertEqual(history.channels, ["files"] * 4)
        # Without one, a history need not take the argument (FakeHistory does not).
        self.assertTrue((await ins.Inspector(FakeHistory()).read("t", "area", turn=2)).startswith('{"km2":11420}'))
        with self.assertRaises(TypeError):
            ins.Inspector(history, channel=None)  # type: ignore[arg-type]
        tool = inspect_state_tool(history, channel="todos")
        await tool.ainvoke({"key": "area", "turn": 3}, config={"configurable": {"thread_id": "t"}})
        self.assertEqual(history.channels[-1], "todos")


class InspectorTest(unittest.IsolatedAsyncioTestCase):
    async def test_present_from_the_host(self) -> None:
        calls = []

        async def present(thread_id):
            calls.append(thread_id)
            return {"area": {"value": {"km2": 1.5}, "turns_written": 3}, "bare": 7}

        history = FakeHistory()
        inspector = ins.Inspector(history, present=present)
        text = await inspector.read("t", "area")
        self.assertTrue(text.startswith('{"km2":1.5}\n[3 turns of this conversation wrote this key;'))
        self.assertEqual(await inspector.read("t", "bare"), "7")
        self.assertEqual(calls, ["t", "t"])
        self.assertEqual(history.calls, [])  # the present came from the host, not the history
        at = await inspector.read("t", "area", turn=2)
        self.assertEqual(at, '{"km2":11420}\n[This is area as it stood at the end of turn 2.]')

    async def test_present_from_the_newest_turn_projected(self) -> None:
        history = FakeHistory()
        text = await ins.Inspector(history).read("t", "area")
        self.assertEqual(text.split("\n")[0], '{"km2":12935}')
        self.assertEqual(history.calls, [("t", 0, ("area",)), ("t", 4, ("area",))])
        history.calls.clear()
        miss = json.loads(await ins.Inspector(history).read("t", "nope"))
        # A projected miss is answered from the same turn's whole state.
        self.assertEqual(history.calls, [("t", 0, ("nope",)), ("t", 4, ("nope",)), ("t", 4, None)])
        self.assertEqual(sorted(miss["available_keys"]), ["area", "notes"])

    async def test_declared_key_hint(self) -> None:
        inspector = ins.Inspector(FakeHistory(), declared_keys=["perimeter"])
        now = json.loads(await inspector.read("t", "perimeter"))
        self.assertIn("Run the tool that produces it", now["hint"])
        then = json.loads(await inspector.read("t", "perimeter", turn=3))
        self.assertNotIn("hint", then)
        self.assertIn("end of turn 3", then["reason"])

    async def test_no_source_of_the_present(self) -> None:
        with self.assertRaises(ins.NoStateError):
            await ins.Inspector().read("t", "area")
        self.assertIn("no_turn_history", await ins.Inspector().read("", "area", turn=2))

    async def test_no_thread_id(self) -> None:
        # A history but no thread: the host named none, which is what the
        # model is told (not that there is no history), and the host's
        # author is told in the log.
        history = FakeHistory()
        inspector = ins.Inspector(history)
        with self.assertLogs("historyd_client.inspect", "WARNING") as logs:
            at = await inspector.read("", "area", turn=2)
            now = await inspector.read("", "area")
        self.assertEqual(at, json.dumps({"no_thread_id": True, "turn": 2, "reason": NO_THREAD}, separators=(",", ":")))
        self.assertEqual(now, json.dumps({"no_thread_id": True, "reason": NO_THREAD}, separators=(",", ":")))
        self.assertEqual(history.calls, [])
        self.assertEqual(len(logs.records), 2)
        self.assertIn("without a thread id", logs.output[0])
        self.assertIn("configurable", logs.output[0])
        # A host holding the present itself still has it read.
        self.assertEqual(await ins.Inspector(history, present=lambda t: {"k": {"value": 1}}).read("", "k"), "1")

    async def test_sync_and_async_read_alike(self) -> None:
        asks = [
            ("t", "area", {}),
            ("t", "area", {"turn": 1}),
            ("t", "area", {"turn": 3}),
            ("t", "*", {"turn": 4}),
            ("t", "nope", {}),
            ("t", "area", {"turn": 9}),
            ("t", "area", {"turn": 2, "pattern": "km"}),
        ]
        for thread, key, kw in asks:
            with self.subTest(key=key, **kw):
                asynchronous, synchronous = FakeHistory(), SyncFakeHistory()
                want = await ins.Inspector(asynchronous).read(thread, key, **kw)
                self.assertEqual(ins.Inspector(synchronous).read_sync(thread, key, **kw), want)
                # Each kind of history read from the other kind of call.
                self.assertEqual(await ins.Inspector(SyncFakeHistory()).read(thread, key, **kw), want)
                self.assertEqual(await asyncio.to_thread(ins.Inspector(FakeHistory()).read_sync, thread, key, **kw), want)
                self.assertEqual(synchronous.calls, asynchronous.calls)

    async def test_sync_read_of_an_async_present(self) -> None:
        async def present(thread_id):
            return {"k": {"value": thread_id}}

        inspector = ins.Inspector(present=present)
        self.assertEqual(await asyncio.to_thread(inspector.read_sync, "t", "k"), '"t"')
        with self.assertRaisesRegex(RuntimeError, "event loop"):
            inspector.read_sync("t", "k")  # this thread runs a loop: the coroutine cannot be run here

    async def test_limits(self) -> None:
        inspector = ins.Inspector(present=lambda t: {"k": {"value": {"a": "x" * 30, "b": list(range(5))}}}, max_value_chars=20, max_matches=2, max_line_chars=10)
        outline = json.loads(await inspector.read("t", "k"))
        self.assertEqual(outline["outline"], {"a": "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"", "b": "array[5] of 0"})
        grep = await inspector.read("t", "k", pattern=".")
        self.assertEqual(grep, '6 matches for "." in k (first 2 shown):\na = "xxxxxxxxx…(+22 chars)\nb[0] = 0')

    def test_json_as_go_writes_it(self) -> None:
        d = ins._dumps
        self.assertEqual(d({"b": [1, 2.5, None, True], "a": "<&>\u2028\x01\x7f"}), '{"b":[1,2.5,null,true],"a":"<&>\\u2028\\u0001\x7f"}')
        self.assertEqual(d(-0.0), "-0")
        self.assertEqual(d(1e21), "1e+21")
        self.assertEqual(d(1e-7), "1e-7")
        self.assertEqual(d(123456789012345678901234567890), "123456789012345678901234567890")
        self.assertEqual(ins._prepare({"z": math.nan, "a": math.inf, "m": -math.inf}), {"a": "Infinity", "m": "-Infinity", "z": "NaN"})
        self.assertEqual(list(ins._prepare({"é": 1, "z": 2, "𝔘": 3, "！": 4})), ["z", "é", "！", "𝔘"])

    def test_go_quote(self) -> None:
        self.assertEqual(ins._go_quote('a"b\\c\n\x00\u00a0é🏞'), '"a\\"b\\\\c\\n\\x00\\u00a0é🏞"')

    def test_data_marker(self) -> None:
        self.assertEqual(ins._data_marker("data:image/png;base64,AAAA"), "<data:image/png;base64, 3 bytes>")
        self.assertEqual(ins._data_marker("data:,é"), "<data:, 2 bytes>")  # bytes, not characters


class Re2Test(unittest.TestCase):
    def test_refused_as_re2_refuses(self) -> None:
        for p in ["(?=a)", "(?!a)", "(?<=a)b", "(?<!a)b", r"(a)\1", "(?P=n)", "(?>a)", "a*+", "a++", "a**", "(?x)a", r"a\Z", "a{1001}", "(?#c)", "(", ")", "[a", "x{2}{3}"]:
            with self.subTest(p):
                with self.assertRaises(Refused):
                    translate(p)
                self.assertTrue(compile_re2(p)[1])

    def test_rewritten(self) -> None:
        cases = {
            r"\d+": ("٣12", "12"),  # ASCII digits only, as in RE2
            r"\w+": ("é_ab", "_ab"),
            r"\bab\b": ("éab ab", "ab"),
            r"a\z": ("ba", "a"),
            r"\Qa.b\E": ("axb a.b", "a.b"),
            "[[:upper:]]+": ("ab CD", "ab"),  # (?i) folds classes too, in Go as here
            "x{,2}": ("x{,2}", "x{,2}"),
            r"\x{41}": ("zA", "A"),
            "(?<n>b)": ("ab", "b"),
            "a(?-i)B|c": ("aB C", "aB"),
        }
        rx, _ = compile_re2("a(?-i)B|c")
        self.assertIsNone(rx.search("ab C"))  # the flag holds across |, as in Go
        for p, (text, want) in cases.items():
            with self.subTest(p):
                rx, literal = compile_re2(p)
                self.assertFalse(literal, translate(p))
                m = rx.search(text)
                self.assertEqual(m.group(0) if m else None, want)

    def test_case_insensitive(self) -> None:
        rx, _ = compile_re2("КЛЮЧ")
        self.assertIsNotNone(rx.search("ключ"))
        self.assertEqual(rx.flags & re.IGNORECASE, re.IGNORECASE)


class ToolTest(unittest.IsolatedAsyncioTestCase):
    def test_binds_as_go_describes_it(self) -> None:
        fn = convert_to_openai_tool(inspect_state_tool(FakeHistory()))["function"]
        self.assertEqual(fn["name"], "inspect_state")
        self.assertEqual(fn["description"], ins.TOOL_DESCRIPTION)
        self.assertEqual(fn["parameters"]["required"], ["key"])
        self.assertEqual(list(fn["parameters"]["properties"]), ["key", "pattern", "path", "turn"])
        for name, prop in fn["parameters"]["properties"].items():
            self.assertEqual(prop["description"], ins.PARAMETER_DESCRIPTIONS[name])

    async def test_reads_the_runs_thread(self) -> None:
        history = FakeHistory()
        tool = inspect_state_tool(history)
        call = {"name": "inspect_state", "args": {"key": "area", "turn": 1}, "id": "c1", "type": "tool_call"}
        reply = await tool.ainvoke(call, config={"configurable": {"thread_id": "thread-7"}})
        self.assertIsInstance(reply, ToolMessage)
        self.assertEqual(json.loads(reply.content)["turn_no_longer_retained"], 1)
        self.assertEqual(history.calls, [("thread-7", 1, ("area",))])
        # Without a thread the host named none.
        with self.assertLogs("historyd_client.inspect", "WARNING"):
            bare = await tool.ainvoke({"key": "area", "turn": 2})
        self.assertTrue(bare.startswith('{"no_thread_id":true,"turn":2,'), bare)
        # The model may send null for what it leaves out.
        text = await tool.ainvoke({"key": "area", "turn": None, "pattern": None, "path": None}, config={"configurable": {"thread_id": "t"}})
        self.assertTrue(text.startswith('{"km2":12935}'))

    async def test_invoke_and_ainvoke(self) -> None:
        # The usual sync call of a host (agent.invoke) runs the tool with
        # invoke; either kind of history serves both calls.
        config = {"configurable": {"thread_id": "t"}}
        call = {"name": "inspect_state", "args": {"key": "area", "turn": 2}, "id": "c1", "type": "tool_call"}
        want = '{"km2":11420}\n[This is area as it stood at the end of turn 2.]'
        for history in (FakeHistory(), SyncFakeHistory()):
            with self.subTest(type(history).__name__):
                tool = inspect_state_tool(history)
                synchronous = await asyncio.to_thread(tool.invoke, call, config)
                asynchronous = await tool.ainvoke(call, config)
                self.assertEqual((synchronous.content, asynchronous.content), (want, want))
                self.assertEqual(history.calls, [("t", 2, ("area",))] * 2)


if __name__ == "__main__":
    unittest.main()

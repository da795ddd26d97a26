// What the shared table (client/testdata/cases.json) cannot reach through a
// server: a host's present state, declared keys, the limits, the JSON
// writer on its own, and the tool's LangChain.js surface.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { ToolMessage } from "@langchain/core/messages";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";

import { Inspector, NoStateError, PARAMETER_DESCRIPTIONS, TOOL_DESCRIPTION } from "../../dist/inspect.js";
import { compareCodePoints, dumps, goQuote } from "../../dist/json.js";
import { inspectState } from "../../dist/langchain.js";

/**
 * Turns 2..4 of a 4-turn thread whose turn 1 was pruned, in memory; with
 * `numbering` and `answered` (turn → the turns asked with it) as given.
 */
function fakeHistory({ numbering, answered = {} } = {}) {
  const area = (km2, turn, turnsWritten) => ({ value: { km2 }, turn, turnsWritten, inputs: {} });
  const turns = { 2: { area: area(11420, 2, 1) }, 3: { area: area(12935, 3, 2) }, 4: { area: area(12935, 3, 2), notes: { value: "n", inputs: {} } } };
  const calls = [];
  const channels = [];
  return {
    calls,
    channels,
    async snapshot(threadId, turn, opts = {}) {
      calls.push([threadId, turn, opts.keys ?? null]);
      channels.push(opts.channel);
      const retained = [2, 3, 4];
      if (turn < 1 || turn > 4) return { outcome: "no_such_turn", turn, total: 4, retained, numbering };
      if (!turns[turn]) return { outcome: "no_longer_retained", turn, total: 4, retained, question: "first", numbering };
      let state = turns[turn];
      if (opts.keys?.length) state = Object.fromEntries(Object.entries(state).filter(([k]) => opts.keys.includes(k)));
      return { outcome: "found", turn, total: 4, retained, question: `q${turn}`, checkpointId: `c${turn}`, state, numbering, answeredWith: answered[turn] ?? [] };
    },
  };
}

describe("Inspector", () => {
  test("reads the present from the host", async () => {
    const history = fakeHistory();
    const seen = [];
    const inspector = new Inspector({ history, present: async (t) => (seen.push(t), { area: { value: { km2: 1.5 }, turnsWritten: 3 }, bare: { value: 7 } }) });
    assert.match(await inspector.read("t", { key: "area" }), /^\{"km2":1\.5\}\n\[3 turns of this conversation wrote this key;/);
    assert.equal(await inspector.read("t", { key: "bare" }), "7");
    assert.deepEqual(seen, ["t", "t"]);
    assert.deepEqual(history.calls, []);
    assert.equal(await inspector.read("t", { key: "area", turn: 2 }), '{"km2":11420}\n[This is area as it stood at the end of turn 2.]');
  });

  test("reads the present from the newest turn, projected", async () => {
    const history = fakeHistory();
    assert.equal((await new Inspector({ history }).read("t", { key: "area" })).split("\n")[0], '{"km2":12935}');
    assert.deepEqual(history.calls, [["t", 0, ["area"]], ["t", 4, ["area"]]]);
    history.calls.length = 0;
    const miss = JSON.parse(await new Inspector({ history }).read("t", { key: "nope" }));
    assert.deepEqual(history.calls, [["t", 0, ["nope"]], ["t", 4, ["nope"]], ["t", 4, null]]);
    assert.deepEqual(Object.keys(miss.available_keys), ["area", "notes"]);
  });

  test("declared keys", async () => {
    const inspector = new Inspector({ history: fakeHistory(), declaredKeys: ["perimeter"] });
    assert.match(JSON.parse(await inspector.read("t", { key: "perimeter" })).hint, /Run the tool that produces it/);
    const then = JSON.parse(await inspector.read("t", { key: "perimeter", turn: 3 }));
    assert.equal(then.hint, undefined);
    assert.match(then.reason, /end of turn 3/);
  });

  test("no source of the present", async () => {
    await assert.rejects(new Inspector().read("t", { key: "area" }), NoStateError);
    assert.match(await new Inspector().read("", { key: "area", turn: 2 }), /^\{"no_turn_history":2,/);
  });

  test("no thread id: the host named none, and its author is told", async () => {
    const history = fakeHistory();
    const logged = [];
    const inspector = new Inspector({ history, log: (m) => logged.push(m) });
    const reason =
      "The host running this tool did not name this conversation's thread, so its saved state cannot be read, now or at any turn. Calling again will not change that: say that the state could not be read.";
    assert.equal(await inspector.read("", { key: "area", turn: 2 }), JSON.stringify({ no_thread_id: true, turn: 2, reason }));
    assert.equal(await inspector.read("", { key: "area" }), JSON.stringify({ no_thread_id: true, reason }));
    assert.deepEqual(history.calls, []);
    assert.equal(logged.length, 2);
    assert.match(logged[0], /without a thread id.*configurable\.thread_id/);
    // A host holding the present itself still has it read.
    assert.equal(await new Inspector({ history, present: () => ({ k: { value: 1 } }) }).read("", { key: "k" }), "1");
  });

  test("limits", async () => {
    const inspector = new Inspector({ present: () => ({ k: { value: { a: "x".repeat(30), b: [0, 1, 2, 3, 4] } } }), maxValueChars: 20, maxMatches: 2, maxLineChars: 10 });
    assert.deepEqual(JSON.parse(await inspector.read("t", { key: "k" })).outline, { a: '"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"', b: "array[5] of 0" });
    assert.equal(await inspector.read("t", { key: "k", pattern: "." }), '6 matches for "." in k (first 2 shown):\na = "xxxxxxxxx…(+22 chars)\nb[0] = 0');
  });
});

const SHARED = "Turns 2, 3 and 4 were asked in one message and answered by one run, so each of them shows the state that run ended on.";
const GUESS =
  "Turn numbers here are estimated and may be too low: the oldest part of this conversation's saved history was pruned, and what is left does not show how many questions came before it.";

describe("turn notes", () => {
  test("turns answered together", async () => {
    const inspector = new Inspector({ history: fakeHistory({ answered: { 2: [4, 3], 3: [2, 4], 4: [2, 3] } }) });
    assert.equal(await inspector.read("t", { key: "notes", turn: 4 }), `"n"\n[This is notes as it stood at the end of turn 4. ${SHARED}]`);
    const listing = JSON.parse(await inspector.read("t", { key: "*", turn: 2 }));
    assert.deepEqual(Object.keys(listing), ["at_turn", "available_keys", "note"]);
    assert.equal(listing.note, SHARED);
    assert.equal(await inspector.read("t", { key: "notes" }), '"n"');
  });

  test("estimated numbering", async () => {
    const inspector = new Inspector({ history: fakeHistory({ numbering: "estimated" }) });
    assert.equal(await inspector.read("t", { key: "area", turn: 2, path: "km2" }), `11420\n[This is area.km2 as it stood at the end of turn 2. ${GUESS} Turn 2 is the question "q2".]`);
    const beyond = JSON.parse(await inspector.read("t", { key: "area", turn: 9 }));
    assert.deepEqual(Object.keys(beyond), ["no_such_turn", "turns_so_far", "reason", "note"]);
    assert.equal(beyond.note, GUESS);
    assert.equal(JSON.parse(await inspector.read("t", { key: "area", turn: 1 })).note, GUESS);
  });

  test("counted numbering says nothing", async () => {
    const inspector = new Inspector({ history: fakeHistory({ numbering: "counted" }) });
    assert.equal(await inspector.read("t", { key: "area", turn: 2, path: "km2" }), "11420\n[This is area.km2 as it stood at the end of turn 2.]");
    assert.equal(JSON.parse(await inspector.read("t", { key: "area", turn: 1 })).note, undefined);
  });

  test("the channel is the host's", async () => {
    const history = fakeHistory();
    const inspector = new Inspector({ history, channel: "files" });
    await inspector.read("t", { key: "area", turn: 2 });
    await inspector.read("t", { key: "nope" });
    assert.deepEqual(history.channels, ["files", "files", "files", "files"]);
    const tool = inspectState(history, { channel: "todos" });
    await tool.invoke({ key: "area", turn: 3 }, { configurable: { thread_id: "t" } });
    assert.equal(history.channels.at(-1), "todos");
    await new Inspector({ history }).read("t", { key: "area", turn: 3 });
    assert.equal(history.channels.at(-1), undefined, "no channel asked for without one");
  });
});

describe("JSON as Go writes it", () => {
  test("keys sorted by code point, Maps in order, Go's escapes and numbers", () => {
    assert.equal(dumps({ b: [1, 2.5, null, true], a: "<&>\u2028\x01\x7f", 10: 1, 2: 2 }), '{"10":1,"2":2,"a":"<&>\\u2028\\u0001\x7f","b":[1,2.5,null,true]}');
    assert.equal(dumps(new Map([["z", 1], ["a", 2]])), '{"z":1,"a":2}');
    assert.equal(dumps(-0), "-0");
    assert.equal(dumps(1e21), "1e+21");
    assert.equal(dumps(1e20), "100000000000000000000");
    assert.equal(dumps(1e-7), "1e-7");
    assert.deepEqual(["𝔘", "！", "é", "z"].sort(compareCodePoints), ["z", "é", "！", "𝔘"]);
  });

  test("%q", () => {
    assert.equal(goQuote('a"b\\c\n\x00\u00a0é🏞'), '"a\\"b\\\\c\\n\\x00\\u00a0é🏞"');
  });
});

describe("the LangChain.js tool", () => {
  test("binds with Go's name, description and parameters", () => {
    const fn = convertToOpenAITool(inspectState(fakeHistory())).function;
    assert.equal(fn.name, "inspect_state");
    assert.equal(fn.description, TOOL_DESCRIPTION);
    assert.deepEqual(fn.parameters.required, ["key"]);
    assert.deepEqual(Object.keys(fn.parameters.properties), ["key", "pattern", "path", "turn"]);
    for (const [name, prop] of Object.entries(fn.parameters.properties)) assert.equal(prop.description, PARAMETER_DESCRIPTIONS[name]);
  });

  test("reads the run's thread", async () => {
    const history = fakeHistory();
    const tool = inspectState(history);
    const reply = await tool.invoke({ name: "inspect_state", args: { key: "area", turn: 1 }, id: "c1", type: "tool_call" }, { configurable: { thread_id: "thread-7" } });
    assert.ok(reply instanceof ToolMessage);
    assert.equal(JSON.parse(reply.content).turn_no_longer_retained, 1);
    assert.deepEqual(history.calls, [["thread-7", 1, ["area"]]]);
    const warn = console.warn;
    const warned = [];
    console.warn = (m) => warned.push(m);
    try {
      assert.match(await tool.invoke({ key: "area", turn: 2 }), /^\{"no_thread_id":true,"turn":2,/);
    } finally {
      console.warn = warn;
    }
    assert.equal(warned.length, 1);
    const text = await tool.invoke({ key: "area", turn: null, pattern: null, path: null }, { configurable: { thread_id: "t" } });
    assert.match(text, /^\{"km2":12935\}/);
  });
});

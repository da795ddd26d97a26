// End to end: a LangGraph.js agent whose tool node runs inspectState against
// historyd, reading a real LangGraph.js thread in PostgreSQL.
//
// 1. The conformance writer (test/conformance/js/write_thread.mjs) runs a
//    real LangGraph.js graph through five turns, checkpointed by
//    PostgresSaver into a schema of its own, and reports what LangGraph
//    itself holds at the end of each turn.
// 2. historyd (HISTORYD_BIN) serves that database on loopback.
// 3. An agent (StateGraph, a scripted chat model with the tool bound,
//    ToolNode) asks inspect_state for the area key at turn 2, now, and at a
//    turn the thread never had; then, after turn 1's checkpoints are deleted
//    as a retention job would, at turn 1.
// 4. Every turn, read with values as JSON text (the default) and as
//    google.protobuf.Value, is the same, key order and all, and LangGraph's.
//
// Needs HISTORYD_BIN, HISTORYD_TEST_DSN and HISTORYD_TEST_NODE (the
// conformance writer's directory, with its node_modules); test/clients sets
// them when it runs `npm test`. Without them the test fails, saying which.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { Annotation, END, START, StateGraph, messagesStateReducer } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import pg from "pg";

import { ThreadHistory } from "../../dist/index.js";
import { inspectState } from "../../dist/langchain.js";
import { sameValues } from "../support/same.mjs";

const AREA = "sketch-ops/sketch_area/area";
const env = (name, why) => {
  const v = process.env[name];
  if (!v) assert.fail(`${name} is not set: ${why}. test/clients sets it when it runs npm test (see client/js/README.md)`);
  return v;
};

const State = Annotation.Root({ messages: Annotation({ reducer: messagesStateReducer, default: () => [] }) });

/** Asks for the given tool calls, then answers with what the tools returned. */
class ScriptedModel extends BaseChatModel {
  constructor(calls) {
    super({});
    this.calls = calls;
  }
  _llmType() {
    return "scripted";
  }
  bindTools(tools) {
    return this.withConfig({ tools });
  }
  async _generate(messages, options) {
    assert.equal(options?.tools?.[0]?.name, "inspect_state", "the model runs with inspect_state bound");
    const last = messages.at(-1);
    const message =
      last.getType() === "human"
        ? new AIMessage({ content: "", tool_calls: this.calls.map((args, i) => ({ name: "inspect_state", args, id: `call-${i}`, type: "tool_call" })) })
        : new AIMessage({ content: messages.filter((m) => m.getType() === "tool").map((m) => m.content).join("\n---\n") });
    return { generations: [{ text: typeof message.content === "string" ? message.content : "", message }] };
  }
}

async function ask(history, threadId, calls) {
  const tools = [inspectState(history)];
  const model = new ScriptedModel(calls).bindTools(tools);
  const graph = new StateGraph(State)
    .addNode("agent", async (s) => ({ messages: [await model.invoke(s.messages)] }))
    .addNode("tools", new ToolNode(tools))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", (s) => (s.messages.at(-1).tool_calls?.length ? "tools" : END), ["tools", END])
    .addEdge("tools", "agent")
    .compile();
  const out = await graph.invoke({ messages: [new HumanMessage("How does the area now compare with turn 2's?")] }, { configurable: { thread_id: threadId } });
  const replies = out.messages.filter((m) => m.getType() === "tool");
  assert.equal(replies.length, calls.length);
  return { replies: replies.map((m) => m.content), answer: out.messages.at(-1).content };
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });

let bin, dsn, writerDir, schema, threadId, expected, historyd, history, log = "";

before(async () => {
  bin = env("HISTORYD_BIN", "the historyd binary to serve the thread");
  dsn = env("HISTORYD_TEST_DSN", "the PostgreSQL database the LangGraph.js thread is written to");
  writerDir = env("HISTORYD_TEST_NODE", "test/conformance/js, whose writer writes the LangGraph.js thread");
  schema = `lgjs_client_${process.pid}`;
  threadId = `js-client-e2e-${process.pid}-${Date.now()}`;
  const outDir = mkdtempSync(join(tmpdir(), "historyd-js-e2e-"));
  const out = join(outDir, "expected.json");
  try {
    const w = spawnSync(process.execPath, ["write_thread.mjs", "--dsn", dsn, "--schema", schema, "--thread", threadId, "--out", out], { cwd: writerDir, encoding: "utf8", timeout: 300_000 });
    assert.equal(w.status, 0, `write_thread.mjs failed:\n${w.stderr}`);
    expected = JSON.parse(readFileSync(out, "utf8"));
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
  assert.equal(expected.total, 5);

  const addr = `127.0.0.1:${await freePort()}`;
  historyd = spawn(bin, ["serve", "--listen", addr, "--dsn", dsn, "--schema", schema], { stdio: ["ignore", "pipe", "pipe"] });
  historyd.stdout.on("data", (d) => (log += d));
  historyd.stderr.on("data", (d) => (log += d));
  history = new ThreadHistory(addr, { plaintext: true });
  const probe = new ThreadHistory(addr, { plaintext: true, retries: 0, timeoutMs: 1000 });
  for (const start = Date.now(); ; ) {
    try {
      await probe.turns(threadId);
      break;
    } catch (err) {
      if (historyd.exitCode !== null || Date.now() - start > 30_000) assert.fail(`historyd did not serve on ${addr}: ${err.message}\n${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
});

after(async () => {
  history?.close();
  historyd?.kill("SIGTERM");
  if (dsn && schema) {
    const db = new pg.Client({ connectionString: dsn });
    await db.connect();
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await db.end();
  }
});

test("the agent reads an earlier turn, the present and a turn never had", async () => {
  const total = expected.total;
  const then = expected.turns["2"].tool_state[AREA];
  const now = expected.turns[String(total)].tool_state[AREA];
  assert.notDeepEqual(then.value, now.value, "the thread rewrote the key after turn 2");

  const { replies, answer } = await ask(history, threadId, [{ key: AREA, turn: 2 }, { key: AREA }, { key: AREA, turn: total + 1 }]);
  const [atTwo, present, never] = replies;

  const [value2, label2] = atTwo.split("\n");
  assert.deepEqual(JSON.parse(value2), then.value, "turn 2's value is LangGraph's own, not the present one");
  assert.equal(label2, `[This is ${AREA} as it stood at the end of turn 2.]`);

  const [valueNow, noteNow] = present.split("\n");
  assert.deepEqual(JSON.parse(valueNow), now.value);
  assert.equal(now.turns_written, 3);
  assert.ok(noteNow.startsWith(`[3 turns of this conversation wrote this key; the value above is the newest`), noteNow);

  assert.deepEqual(JSON.parse(never), {
    no_such_turn: total + 1,
    turns_so_far: total,
    reason: `Turns are the user's questions, counted from 1; this conversation has had ${total} so far.`,
  });
  assert.ok(answer.includes(value2) && answer.includes(valueNow), "the model's answer rests on what the tool returned");
});

test("both value formats read every turn alike, and as LangGraph holds it", async () => {
  const asJson = await history.snapshots(threadId);
  const asProto = await history.snapshots(threadId, { valueFormat: "proto" });
  assert.equal(asJson.turns.length, expected.total);
  sameValues(asJson, asProto);
  for (const t of asJson.turns) {
    const one = await history.snapshot(threadId, t.turn);
    const oneProto = await history.snapshot(threadId, t.turn, { valueFormat: "proto" });
    sameValues(one, oneProto);
    for (const [key, e] of Object.entries(expected.turns[String(t.turn)].tool_state)) {
      assert.deepEqual(t.state[key].value, e.value, `turn ${t.turn} ${key}`);
    }
  }
});

test("a pruned turn is no longer retained, never another turn's value", async () => {
  const turn1 = expected.checkpoints.filter((c) => c.humans === 1).map((c) => c.checkpoint_id);
  assert.ok(turn1.length > 0);
  const db = new pg.Client({ connectionString: dsn });
  await db.connect();
  try {
    await db.query(`DELETE FROM ${schema}.checkpoint_writes WHERE thread_id = $1 AND checkpoint_id = ANY($2)`, [threadId, turn1]);
    const { rowCount } = await db.query(`DELETE FROM ${schema}.checkpoints WHERE thread_id = $1 AND checkpoint_id = ANY($2)`, [threadId, turn1]);
    assert.equal(rowCount, turn1.length);
  } finally {
    await db.end();
  }
  const { replies } = await ask(history, threadId, [{ key: AREA, turn: 1 }]);
  assert.deepEqual(JSON.parse(replies[0]), {
    turn_no_longer_retained: 1,
    question: expected.questions[0],
    retained_turns: [2, 3, 4, 5],
    reason:
      "That turn happened, but its state has since been pruned and cannot be read. Say that the value it held is no longer available; do not answer from the current value, which may be a different one.",
  });
});

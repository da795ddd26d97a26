#!/usr/bin/env node
// Write one real LangGraph.js thread of a named scenario and record its
// truth (truth.json, defined in ../README.md), as ../py/write_scenario.py
// does for Python.
//
// Scenarios:
//   delta      a StateGraph whose `messages` is a DeltaChannel
//              (DeltaValue with LangGraph.js's messagesDeltaReducer,
//              snapshotFrequency 4) and whose `tool_state` is one too (the
//              tool_state merge folded into a batch reducer, snapshotFrequency
//              3), with a tool loop, an interrupt and Command({resume}), and a
//              node removing a human message (RemoveMessage) and clearing the
//              list (REMOVE_ALL_MESSAGES).
//   summarize  langchain's createAgent with its summarizationMiddleware
//              (trigger { messages: 6 }, keep { messages: 2 }), six
//              catchments written to one tool_state key.
//
// The chat models are deterministic scripts (lgwriter.mjs's
// ScriptedChatModel; @langchain/core's FakeListChatModel for the summaries).
// The PostgreSQL saver keeps its tables in --schema (default "lgjs"), apart
// from the Python saver's.
//
// Usage:
//   node write_scenario.mjs --scenario NAME (--dsn DSN [--schema lgjs] | --sqlite PATH)
//        --thread ID --out truth.json [--read-only [--truth T]]
//   node write_scenario.mjs --check [--dsn DSN [--schema S]]

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { AIMessage, HumanMessage, RemoveMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import {
  Command,
  DeltaValue,
  END,
  REMOVE_ALL_MESSAGES,
  ReducedValue,
  START,
  StateGraph,
  StateSchema,
  entrypoint,
  getPreviousState,
  interrupt,
  task,
  messagesDeltaReducer,
  messagesStateReducer,
} from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod/v4";

import {
  RawReader,
  Recorder,
  STATE,
  ScriptedChatModel,
  batch,
  carriedTurns,
  describeCheckpoints,
  dump,
  mergeToolState,
  openSaver,
  publish,
  versions,
} from "./lgwriter.mjs";

const AREAS = { Severn: 11420, Thames: 12935, Trent: 10452, Wye: 4136, Tay: 4970, Clyde: 4000 };
const AREA_KEY = "sketch-ops/sketch_area/area_km2";

const sketchCatchment = tool(
  async ({ river }, runtime) =>
    publish(runtime.state, runtime.toolCallId, "sketch_area", { [AREA_KEY]: AREAS[river], "sketch-ops/sketch_area/name": river }, { river: "model" }),
  {
    name: "sketch_catchment",
    description: "Sketch a river's catchment and measure its area.",
    schema: z.object({ river: z.string() }),
  },
);

const surveyGauge = tool(
  async ({ river, gauge }, runtime) =>
    publish(
      runtime.state,
      runtime.toolCallId,
      "survey_gauge",
      { [`hydro/survey_gauge/${river.toLowerCase()}`]: { gauge, flow_m3s: Math.round((10 + gauge * 1.5) * 10) / 10 } },
      { river: "model", gauge: "model" },
    ),
  {
    name: "survey_gauge",
    description: "Read one gauge on a river; the same key is rewritten gauge after gauge.",
    schema: z.object({ river: z.string(), gauge: z.number().int() }),
  },
);

const publishReport = tool(
  async ({ river }, runtime) => {
    const answer = interrupt({ approve: `publish the ${river} report?` });
    return publish(
      runtime.state,
      runtime.toolCallId,
      "publish_report",
      { [`reports/publish_report/${river.toLowerCase()}`]: { river, status: answer === "approve" ? "published" : "held", answer } },
      { river: "model" },
    );
  },
  {
    name: "publish_report",
    description: "Publish a catchment report once a person approves it (interrupts).",
    schema: z.object({ river: z.string() }),
  },
);

const sketch = (river) => [[["sketch_catchment", { river }]], []];

const DELTA_TURNS = [
  ["Sketch the Severn catchment.", sketch("Severn")],
  ["Now the Thames.", sketch("Thames")],
  ["Survey the first eight Wye gauges.", [...Array.from({ length: 8 }, (_, g) => [["survey_gauge", { river: "Wye", gauge: g + 1 }]]), []]],
  ["Publish the Thames report.", [[["publish_report", { river: "Thames" }]], []]],
  ["Forget my first question.", [[]]],
  ["Sketch the Trent.", sketch("Trent")],
  ["Start over, please.", [[]]],
  ["Sketch the Tay.", sketch("Tay")],
  ["Sketch the Clyde.", sketch("Clyde")],
];

const RECURSION = { recursionLimit: 200 };

async function ask(rec, graph, n, text) {
  const msg = new HumanMessage({ content: text, id: `q-${n}` });
  await rec.run("question", () => graph.invoke({ messages: [msg] }, { ...rec.config, ...RECURSION }), [text]);
}

const messagesValue = () => z.custom().default(() => []);
const stateValue = () => z.custom().default(() => ({}));

const SCENARIOS = {
  delta: {
    channels: {
      messages: { delta: true, snapshot_frequency: 4, reducer: "messages" },
      [STATE]: { delta: true, snapshot_frequency: 3, reducer: "tool_state" },
    },
    served: [STATE],
    notes: [
      "tool_state: lgwriter.mjs's mergeToolState folded over the batch",
      "question 4 interrupts in its tool and is resumed with Command({resume: 'approve'})",
      "after question 5's answer a node removes q-1 (RemoveMessage); after question 7's a node clears the list (REMOVE_ALL_MESSAGES)",
    ],
    expect: { delta: ["messages", STATE], minSnapshots: { messages: 2, [STATE]: 2 }, resumes: 1 },
    build(saver) {
      const State = new StateSchema({
        messages: new DeltaValue(messagesValue(), { inputSchema: z.custom(), reducer: messagesDeltaReducer, snapshotFrequency: 4 }),
        [STATE]: new DeltaValue(stateValue(), { inputSchema: z.custom(), reducer: batch(mergeToolState), snapshotFrequency: 3 }),
      });
      const model = new ScriptedChatModel({ turns: DELTA_TURNS, by: "id" });
      const after = {
        5: () => ({ messages: [new RemoveMessage({ id: "q-1" })] }),
        7: () => ({ messages: [new RemoveMessage({ id: REMOVE_ALL_MESSAGES }), new AIMessage({ content: "Starting over.", id: "reset-7" })] }),
      };
      const route = (state) => {
        const last = state.messages.at(-1);
        if (last.tool_calls?.length) return "tools";
        const [n] = model.locate(state.messages);
        return after[n] ? `after_${n}` : END;
      };
      let g = new StateGraph(State)
        .addNode("agent", async (state) => ({ messages: [await model.invoke(state.messages)] }))
        .addNode("tools", new ToolNode([sketchCatchment, surveyGauge, publishReport]))
        .addNode("after_5", after[5])
        .addNode("after_7", after[7])
        .addEdge(START, "agent")
        .addConditionalEdges("agent", route, ["tools", "after_5", "after_7", END])
        .addEdge("tools", "agent")
        .addEdge("after_5", END)
        .addEdge("after_7", END);
      return g.compile({ checkpointer: saver });
    },
    async drive(rec, graph) {
      for (const [i, [text]] of DELTA_TURNS.entries()) {
        await ask(rec, graph, i + 1, text);
        if (i + 1 === 4) {
          await rec.run("resume", () => graph.invoke(new Command({ resume: "approve" }), { ...rec.config, ...RECURSION }));
        }
      }
    },
  },
  summarize: {
    channels: {
      messages: { delta: false, snapshot_frequency: null, reducer: "messages" },
      [STATE]: { delta: false, snapshot_frequency: null, reducer: "tool_state" },
    },
    served: [STATE],
    notes: ["createAgent with summarizationMiddleware({ trigger: { messages: 6 }, keep: { messages: 2 } }); summaries by FakeListChatModel"],
    extraVersions: ["langchain"],
    expect: { summarized: true, removed: true },
    turns: Object.keys(AREAS).map((r) => [`Sketch the ${r} catchment.`, sketch(r)]),
    async buildAsync(saver) {
      const { createAgent, summarizationMiddleware } = await import("langchain");
      const { FakeListChatModel } = await import("@langchain/core/utils/testing");
      const State = new StateSchema({
        [STATE]: new ReducedValue(stateValue(), { inputSchema: z.custom(), reducer: mergeToolState }),
      });
      return createAgent({
        model: new ScriptedChatModel({ turns: this.turns, by: "id" }),
        tools: [sketchCatchment],
        stateSchema: State,
        middleware: [
          summarizationMiddleware({
            model: new FakeListChatModel({ responses: ["Catchments sketched so far."] }),
            trigger: { messages: 6 },
            keep: { messages: 2 },
          }),
        ],
        checkpointer: saver,
      });
    },
    async drive(rec, graph) {
      for (const [i, [text]] of this.turns.entries()) await ask(rec, graph, i + 1, text);
    },
  },
};

// --- forks: time travel on plain channels, as ../py/write_scenario.py's ----

let flowReadings = 100;
const readFlow = tool(
  async ({ river }, runtime) =>
    publish(runtime.state, runtime.toolCallId, "read_flow", { [`hydro/read_flow/${river.toLowerCase()}`]: { river, reading: ++flowReadings } }, { river: "model" }),
  {
    name: "read_flow",
    description: "Read a river's flow now: every call reads a new value, so a replayed run writes another one.",
    schema: z.object({ river: z.string() }),
  },
);

const LINEAGE_TURNS = [
  ["Sketch the Severn catchment.", sketch("Severn")],
  ["Now the Thames.", sketch("Thames")],
  ["Sketch the Trent.", sketch("Trent")],
  ["Sketch the Wye.", sketch("Wye")],
  ["Sketch the Tay.", sketch("Tay")],
  ["Sketch the Clyde.", sketch("Clyde")],
  ["Which is the largest so far?", [[]]],
];
const REPLAY_TURNS = [LINEAGE_TURNS[0], ["Read the Thames flow.", [[["read_flow", { river: "Thames" }]], []]], ...LINEAGE_TURNS.slice(2)];

const PLAIN = {
  messages: { delta: false, snapshot_frequency: null, reducer: "messages" },
  [STATE]: { delta: false, snapshot_frequency: null, reducer: "tool_state" },
};

function plainGraph(saver, turns) {
  const State = new StateSchema({
    messages: new ReducedValue(messagesValue(), { inputSchema: z.custom(), reducer: messagesStateReducer }),
    [STATE]: new ReducedValue(stateValue(), { inputSchema: z.custom(), reducer: mergeToolState }),
  });
  const model = new ScriptedChatModel({ turns, by: "id" });
  return new StateGraph(State)
    .addNode("agent", async (state) => ({ messages: [await model.invoke(state.messages)] }))
    .addNode("tools", new ToolNode([sketchCatchment, readFlow]))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", (state) => (state.messages.at(-1).tool_calls?.length ? "tools" : END), ["tools", END])
    .addEdge("tools", "agent")
    .compile({ checkpointer: saver });
}

const turnEnd = (rec, turn) => rec.turns()[turn - 1].checkpoint_id;

async function askFrom(rec, graph, n, text, start) {
  const msg = new HumanMessage({ content: text, id: `q-${n}` });
  await rec.run("question", () => graph.invoke({ messages: [msg] }, { ...rec.at(start), ...RECURSION }), [text], { start });
}

async function replayFrom(rec, graph, start) {
  await rec.run("replay", () => graph.invoke(null, { ...rec.at(start), ...RECURSION }), [], { start });
}

async function toolsCheckpoint(rec, graph, question) {
  const run = rec.runs.find((r) => r.question_numbers.includes(question));
  for (const id of run.checkpoints) {
    const snap = await graph.getState(rec.at(id));
    if (snap.next.length === 1 && snap.next[0] === "tools") return id;
  }
  throw new Error(`question ${question}'s run has no checkpoint before its tools`);
}

const askAll = async (rec, graph, turns, from, to) => {
  for (let n = from; n <= to; n++) await ask(rec, graph, n, turns[n - 1][0]);
};

const forkScenario = (turns, forks, note, drive, expect = {}) => ({
  channels: PLAIN,
  served: [STATE],
  notes: [note],
  expect: { forks, ...expect },
  build: (saver) => plainGraph(saver, turns),
  drive,
});

const FORK_SCENARIOS = {
  "fork-question": forkScenario(LINEAGE_TURNS, 1, "four questions, then question 5 (Tay) sent from turn 2's end, then two more: 5 turns, turn 3 Tay", async (rec, graph) => {
    await askAll(rec, graph, LINEAGE_TURNS, 1, 4);
    await askFrom(rec, graph, 5, LINEAGE_TURNS[4][0], turnEnd(rec, 2));
    await askAll(rec, graph, LINEAGE_TURNS, 6, 7);
  }, { minTotal: 5 }),
  "fork-replay-tools": forkScenario(REPLAY_TURNS, 1, "four questions, then invoke(null) from turn 2's checkpoint whose next node is tools (read_flow reads a new value), then two questions: 4 turns", async (rec, graph) => {
    await askAll(rec, graph, REPLAY_TURNS, 1, 4);
    await replayFrom(rec, graph, await toolsCheckpoint(rec, graph, 2));
    await askAll(rec, graph, REPLAY_TURNS, 5, 6);
  }, { minTotal: 4, replayedValue: 2 }),
  "fork-replay-end": forkScenario(LINEAGE_TURNS, 1, "four questions, then invoke(null) from turn 2's end, then two questions: 4 turns", async (rec, graph) => {
    await askAll(rec, graph, LINEAGE_TURNS, 1, 4);
    await replayFrom(rec, graph, turnEnd(rec, 2));
    await askAll(rec, graph, LINEAGE_TURNS, 5, 6);
  }, { minTotal: 4 }),
  "fork-update": forkScenario(LINEAGE_TURNS, 1, "two questions, then updateState on turn 1's end (asNode 'agent': a message and a tool_state entry), then two questions: 3 turns, turn 2 Tay", async (rec, graph) => {
    await askAll(rec, graph, LINEAGE_TURNS, 1, 2);
    const start = turnEnd(rec, 1);
    await rec.run(
      "update_state",
      () =>
        graph.updateState(
          rec.at(start),
          {
            messages: [new AIMessage({ content: "Going back to the Severn.", id: "fork-note" })],
            [STATE]: { "notes/fork": { value: "rewound to turn 1", tool: "update_state", turn: 1 } },
          },
          "agent",
        ),
      [],
      { start },
    );
    await askAll(rec, graph, LINEAGE_TURNS, 5, 6);
  }, { minTotal: 3 }),
  "fork-of-fork": forkScenario(LINEAGE_TURNS, 2, "four questions; question 5 from turn 2's end, then 6; then question 7 from the fork's turn 3: the lineage holds 1, 2, 5, 7", async (rec, graph) => {
    await askAll(rec, graph, LINEAGE_TURNS, 1, 4);
    await askFrom(rec, graph, 5, LINEAGE_TURNS[4][0], turnEnd(rec, 2));
    await askAll(rec, graph, LINEAGE_TURNS, 6, 6);
    await askFrom(rec, graph, 7, LINEAGE_TURNS[6][0], turnEnd(rec, 3));
  }, { minTotal: 4 }),
  "fork-first": forkScenario(LINEAGE_TURNS, 1, "three questions, then the first replaced: question 4 sent from the thread's first checkpoint, then two more: 3 turns", async (rec, graph) => {
    await askAll(rec, graph, LINEAGE_TURNS, 1, 3);
    await askFrom(rec, graph, 4, LINEAGE_TURNS[3][0], rec.runs[0].checkpoints[0]);
    await askAll(rec, graph, LINEAGE_TURNS, 5, 6);
  }, { minTotal: 3 }),
};

// --- runs: graphs without messages ------------------------------------------

const RUN_INPUTS = ["Severn", "Thames", "Trent"].map((r) => ({ question: `Sketch the ${r} catchment.` }));
const riverOf = (q) => Object.keys(AREAS).find((r) => q.includes(r));
const measured = (river) => ({
  [AREA_KEY]: { value: AREAS[river], tool: "sketch_area", inputs: { river: "model" } },
  "sketch-ops/sketch_area/name": { value: river, tool: "sketch_area" },
});
// A run's input as the question text of a runs-numbered turn.
const inputText = (v) => JSON.stringify(v);

async function askRun(rec, graph, value, fails = false) {
  await rec.run("question", () => graph.invoke(value, rec.config), [inputText(value)], { inputs: [value], fails });
}

function runsGraph(failing) {
  return {
    channels: { [STATE]: PLAIN[STATE] },
    served: [STATE],
    notes: [
      "a StateGraph without messages (question, tool_state), run three times: three runs, each a turn whose question is its input as JSON" +
        (failing ? "; the second run fails in its node and is resumed with invoke(null): still one run" : ""),
    ],
    expect: { numbering: "runs", minTotal: 3, ...(failing ? { resumes: 1 } : {}) },
    build(saver) {
      let failed = false; // the Thames run fails once
      const State = new StateSchema({
        question: z.string(),
        [STATE]: new ReducedValue(stateValue(), { inputSchema: z.custom(), reducer: mergeToolState }),
      });
      return new StateGraph(State)
        .addNode("plan", () => ({}))
        .addNode("measure", (state) => {
          const river = riverOf(state.question);
          if (failing && river === "Thames" && !failed) {
            failed = true;
            throw new Error("the Thames gauge did not answer");
          }
          return { [STATE]: measured(river) };
        })
        .addEdge(START, "plan")
        .addEdge("plan", "measure")
        .addEdge("measure", END)
        .compile({ checkpointer: saver });
    },
    async drive(rec, graph) {
      for (const value of RUN_INPUTS) {
        const fails = failing && value.question.includes("Thames");
        await askRun(rec, graph, value, fails);
        if (fails) await rec.run("resume", () => graph.invoke(null, rec.config));
      }
    },
  };
}

function functional(withMessages) {
  return {
    channels: { [STATE]: PLAIN[STATE] },
    served: [STATE],
    notes: [
      "the functional API: an entrypoint with a checkpointer calling a task, run three times; the saved return value (__previous__) holds tool_state" +
        (withMessages ? " and a messages list (a question and an answer per run)" : ""),
    ],
    expect: { numbering: withMessages ? "complete" : "runs", minTotal: 3 },
    build(saver) {
      const sketchArea = task("sketch_area", async (river) => measured(river));
      return entrypoint({ name: "surveyor", checkpointer: saver }, async (inputs) => {
        const previous = getPreviousState() ?? {};
        const saved = { ...previous };
        saved[STATE] = mergeToolState(previous[STATE], await sketchArea(riverOf(inputs.question)));
        if (withMessages) {
          const msgs = previous.messages ?? [];
          const n = msgs.length / 2 + 1;
          saved.messages = [...msgs, new HumanMessage({ content: inputs.question, id: `q-${n}` }), new AIMessage({ content: `Answer to turn ${n}.`, id: `ai-${n}-0` })];
        }
        return saved;
      });
    },
    async drive(rec, graph) {
      for (const value of RUN_INPUTS) {
        // The saved messages hold each run's question: turns are numbered
        // by question, as a graph with messages is.
        if (withMessages) await rec.run("question", () => graph.invoke(value, rec.config), [value.question]);
        else await askRun(rec, graph, value);
      }
    },
  };
}

const RUN_SCENARIOS = {
  "runs-graph": runsGraph(false),
  "runs-resumed": runsGraph(true),
  functional: functional(false),
  "functional-messages": functional(true),
};

Object.assign(SCENARIOS, FORK_SCENARIOS, RUN_SCENARIOS);

async function write(args) {
  const sc = SCENARIOS[args.scenario];
  const started = Date.now();
  const schema = args.sqlite ? "" : (args.schema ?? "lgjs");
  const { saver, close } = await openSaver(args, schema);
  let result;
  try {
    const graph = sc.buildAsync ? await sc.buildAsync(saver) : sc.build(saver);
    const rec = new Recorder(graph, saver, args.thread, sc.served);
    if (!args["read-only"]) {
      if (await saver.getTuple(rec.config)) throw new Error(`thread ${args.thread} already has checkpoints`);
      await sc.drive(rec, graph);
    }
    const reader = await new RawReader(args, schema, args.thread, Object.keys(sc.channels)).open();
    let described;
    try {
      described = await describeCheckpoints(graph, reader, sc.served);
    } finally {
      await reader.close();
    }
    const forks = args["read-only"] ? [] : await rec.readBackForks();
    result = {
      writer: "js",
      program: "write_scenario.mjs",
      scenario: args.scenario,
      thread_id: args.thread,
      schema,
      sqlite: args.sqlite ?? "",
      versions: await versions(Boolean(args.sqlite), sc.extraVersions ?? []),
      channels: sc.channels,
      served: sc.served,
      notes: sc.notes,
      read_only: Boolean(args["read-only"]),
      numbering: sc.expect.numbering ?? "complete",
      forks: [],
      head: null,
    };
    if (args["read-only"]) {
      const previous = args.truth ? JSON.parse(readFileSync(args.truth, "utf8")) : {};
      result.runs = null;
      result.turns = carriedTurns(previous, described.checkpoints, sc.served);
      result.total = previous.total ?? null;
    } else {
      result.runs = rec.runs;
      result.turns = rec.turns();
      result.total = result.turns.length;
      result.forks = forks;
      result.head = rec.head;
    }
    result.checkpoints = described.checkpoints;
    result.branches = described.branches;
    result.reference = null;
    result.reference_error = "the reference implementation (mcp-toolsets-runtime) is Python only";
    result.seconds = (Date.now() - started) / 1000;
  } finally {
    await close();
  }
  return result;
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// What is inconsistent in a truth; empty when all is well (as
// write_scenario.py's check).
function check(truth, expect) {
  const bad = [];
  const cps = new Map(truth.checkpoints.map((c) => [c.checkpoint_id, c]));
  const compare = (what, id, got) => {
    const c = cps.get(id);
    if (!c) return bad.push(`${what}: checkpoint ${id} is not in getStateHistory`);
    for (const ch of [...truth.served, "messages"]) {
      if (!same(got[ch], c.values[ch])) bad.push(`${what}: ${ch} differs from checkpoint ${id}'s reconstructed values`);
    }
  };
  for (const t of truth.turns ?? []) if (t.retained) compare(`turn ${t.turn}`, t.checkpoint_id, { ...t.state, messages: t.messages });
  if (!truth.read_only) {
    if (truth.total !== truth.turns.length || truth.total < (expect.minTotal ?? 5)) bad.push(`total ${truth.total}, ${truth.turns.length} turns`);
    bad.push(...checkLineage(truth, expect));
    truth.runs.forEach((r, i) => {
      compare(`run ${i}`, r.state_after.checkpoint_id, r.state_after);
      if (!r.checkpoints.length) bad.push(`run ${i} (${r.kind}) created no checkpoint`);
    });
    if (expect.resumes != null) {
      const n = truth.runs.filter((r) => r.kind === "resume").length;
      if (n !== expect.resumes) bad.push(`${n} resume runs, want ${expect.resumes}`);
    }
    const dropped = truth.turns.filter(
      (t) => t.messages.filter((m) => m.type === "human" && !m.synthetic).length < Math.max(...t.answered_with),
    );
    if ((expect.removed || truth.scenario === "delta") && !dropped.length) bad.push("no turn ends with fewer human messages than questions asked");
  }
  const ordered = truth.checkpoints;
  for (const ch of expect.delta ?? []) {
    const snaps = ordered.slice(1).filter((c) => c.stored[ch] === "snapshot").length;
    const bare = ordered.filter((c) => !(ch in c.stored)).length;
    if (snaps < (expect.minSnapshots?.[ch] ?? 0)) bad.push(`${ch}: ${snaps} snapshots after the first checkpoint`);
    if (bare < ordered.length / 3) bad.push(`${ch}: only ${bare} of ${ordered.length} checkpoints store nothing (replayed)`);
    if (ordered.some((c) => c.stored[ch] === "value")) bad.push(`${ch}: a plain value stored in a DeltaChannel thread`);
  }
  if (expect.summarized && !ordered.some((c) => c.values.messages.some((m) => m.marker === "lc_source=summarization"))) {
    bad.push("no checkpoint holds a summarization message (lc_source=summarization)");
  }
  return bad;
}

// What is inconsistent in a truth's lineage and forks (as
// write_scenario.py's check_lineage). The abandoned branch's turns read
// back with getState as recorded except where the saver lost the fork's
// values (checkpoint-postgres's blobs, ON CONFLICT DO NOTHING): that is
// reported in the truth's notes, not here, since the branch read back is the
// abandoned one.
function checkLineage(truth, expect) {
  const bad = [];
  const ordered = truth.checkpoints;
  const head = truth.head;
  if (ordered.length && head !== ordered.at(-1).checkpoint_id) bad.push(`head ${head} (getState) is not the newest root checkpoint ${ordered.at(-1).checkpoint_id}`);
  const chains = new Map(truth.branches.map((b) => [b.head, b.checkpoints]));
  const lineage = new Set(chains.get(head) ?? []);
  if (!chains.has(head)) bad.push(`head ${head} is not a leaf of getStateHistory`);
  for (const t of truth.turns) if (!lineage.has(t.checkpoint_id)) bad.push(`turn ${t.turn} ends at ${t.checkpoint_id}, off the head's lineage`);
  if (truth.forks.length !== (expect.forks ?? 0)) bad.push(`${truth.forks.length} forks, want ${expect.forks ?? 0}`);
  truth.forks.forEach((f, i) => {
    if (!lineage.has(f.from_checkpoint_id)) bad.push(`fork ${i}: its fork point ${f.from_checkpoint_id} is off the lineage`);
    const chain = chains.get(f.newest_checkpoint_id);
    if (!chain || lineage.has(f.newest_checkpoint_id) || !chain.includes(f.from_checkpoint_id)) bad.push(`fork ${i}: ${f.newest_checkpoint_id} is not a leaf off the lineage`);
    if (f.turns.length !== f.questions) bad.push(`fork ${i}: ${f.turns.length} turns for ${f.questions} questions`);
    f.turns.forEach((t, j) => {
      if (!same(t.state, f.read_back[j].state) || !same(t.messages, f.read_back[j].messages)) bad.push(`fork ${i} turn ${t.turn}: getState at ${t.checkpoint_id} reads back another state`);
    });
  });
  // LangGraph.js's PostgresSaver numbers channel versions with integers and
  // inserts blobs with ON CONFLICT DO NOTHING: where the abandoned branch
  // already wrote a version, the fork's blob is dropped and the fork reads
  // back the abandoned branch's value, its own getState included. The
  // test's truth for that thread is the SQLite run; here it is only noted.
  if (expect.replayedValue && truth.forks.length && !truth.sqlite) return bad;
  if (expect.replayedValue && truth.forks.length) {
    const n = expect.replayedValue;
    if (same(truth.forks[0].turns[n - 1].state, truth.turns[n - 1].state)) bad.push(`turn ${n}: the replayed run wrote the same state as the run it replaced`);
  }
  return bad;
}

function summary(truth, bad) {
  const snaps = {};
  for (const [ch, spec] of Object.entries(truth.channels)) {
    if (spec.delta) snaps[ch] = truth.checkpoints.filter((c) => c.stored[ch] === "snapshot").length;
  }
  const where = truth.sqlite ? `sqlite ${truth.sqlite}` : `postgres schema ${truth.schema}`;
  return (
    `${truth.scenario} (${where}${truth.read_only ? ", read-only" : ""}): ${truth.total} questions, ` +
    `${(truth.runs ?? []).length} runs, ${truth.checkpoints.length} checkpoints, ${truth.branches.length} branch(es), ${truth.forks.length} fork(s), numbering ${truth.numbering}, ` +
    `snapshots ${JSON.stringify(snaps)}, ${truth.seconds}s: ${bad.length ? "INCONSISTENT: " + bad.join("; ") : "ok"}`
  );
}

async function runCheck(args) {
  const tmp = mkdtempSync(join(tmpdir(), "write-scenario-js-"));
  let failed = 0;
  let runs = 0;
  try {
    const stores = [{ sqlite: null }];
    if (args.dsn) stores.push({ dsn: args.dsn, schema: args.schema ?? "lgjs" });
    for (const name of Object.keys(SCENARIOS)) {
      for (const st of stores) {
        const thread = `check-${name}-${process.hrtime.bigint()}`;
        const a = { scenario: name, thread, dsn: st.dsn, schema: st.schema, sqlite: st.dsn ? undefined : join(tmp, `${name}.db`) };
        runs += 2;
        try {
          const truth = await write(a);
          const bad = check(truth, SCENARIOS[name].expect);
          console.log(summary(truth, bad));
          const path = join(tmp, `${thread}.json`);
          dump(path, truth);
          const again = await write({ ...a, "read-only": true, truth: path });
          const bad2 = check(again, SCENARIOS[name].expect);
          if (!same(again.checkpoints.map((c) => c.values), truth.checkpoints.map((c) => c.values))) bad2.push("--read-only reconstructs other values");
          if (!same(again.turns, truth.turns)) bad2.push("--read-only carries other turns");
          console.log(summary(again, bad2));
          failed += (bad.length ? 1 : 0) + (bad2.length ? 1 : 0);
        } catch (err) {
          failed += 2;
          console.log(`${name}: FAILED\n${err?.stack ?? err}`);
        }
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`${runs - failed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

async function main() {
  const { values: args } = parseArgs({
    options: {
      check: { type: "boolean", default: false },
      scenario: { type: "string" },
      dsn: { type: "string" },
      sqlite: { type: "string" },
      schema: { type: "string" },
      thread: { type: "string" },
      out: { type: "string" },
      "read-only": { type: "boolean", default: false },
      truth: { type: "string" },
    },
  });
  if (args.sqlite && args.schema !== undefined) throw new Error("--schema is for PostgreSQL");
  if (args.check) return runCheck(args);
  if (!SCENARIOS[args.scenario]) throw new Error(`--scenario: one of ${Object.keys(SCENARIOS).join(", ")}`);
  for (const need of ["thread", "out"]) if (!args[need]) throw new Error(`--${need} is required`);
  if (!args.dsn === !args.sqlite) throw new Error("exactly one of --dsn and --sqlite is required");
  if (args.truth && !args["read-only"]) throw new Error("--truth is for --read-only");
  const truth = await write(args);
  const bad = check(truth, SCENARIOS[args.scenario].expect);
  dump(args.out, truth);
  process.stderr.write(summary(truth, bad) + "\n");
  return bad.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`write_scenario.mjs: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);

#!/usr/bin/env node
// Write one real LangGraph.js thread and say what LangGraph sees.
//
// Runs a LangGraph.js StateGraph through five scripted turns, checkpointed by
// @langchain/langgraph-checkpoint-postgres's PostgresSaver (--dsn) or by
// @langchain/langgraph-checkpoint-sqlite's SqliteSaver in a file (--sqlite),
// then writes expected.json: the thread's turns as LangGraph.js
// itself reports them through getStateHistory, derived by historyd's turn
// rules, with each turn's session state converted to JSON the way historyd's
// API documents (StateEntry in history.proto).
//
// The chat model is a deterministic script; the tools are real LangChain.js
// tools run by LangGraph's ToolNode, publishing into a `tool_state` channel in
// the mcp-toolsets-runtime convention (see ../py/write_thread.py). What the
// JS writers share is in lgwriter.mjs.
//
// The JS PostgreSQL saver keeps its tables in a schema of its own choosing
// ("public" by default). Its migrations differ from the Python saver's, so
// sharing one schema with Python's tables is not safe; this writer uses
// --schema (default "lgjs"). The SQLite saver has no schemas: --schema does
// not apply to it.
//
// Usage:
//   node write_thread.mjs (--dsn DSN [--schema lgjs] | --sqlite PATH)
//                         --thread ID --out expected.json [--read-only]

import { parseArgs } from "node:util";

import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Annotation, Command, END, START, StateGraph, messagesStateReducer } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

import {
  HANDLE,
  MODEL,
  STATE,
  ScriptedChatModel,
  dump,
  humans,
  isMap,
  mergeToolState,
  openSaver,
  publish,
  stateJson,
  versions,
} from "./lgwriter.mjs";

const State = Annotation.Root({
  messages: Annotation({ reducer: messagesStateReducer, default: () => [] }),
  tool_state: Annotation({ reducer: mergeToolState, default: () => ({}) }),
});

// --- tools -----------------------------------------------------------------

const origin = (arg) => (typeof arg === "string" && arg.startsWith(HANDLE) ? arg.slice(HANDLE.length) : MODEL);

function resolve(state, arg) {
  if (typeof arg === "string" && arg.startsWith(HANDLE)) {
    const entry = (state[STATE] ?? {})[arg.slice(HANDLE.length)];
    return isMap(entry) ? entry.value : entry;
  }
  return arg;
}

const round = (x, d) => Math.round(x * 10 ** d) / 10 ** d;

function polygon(region, vertices) {
  const [lon0, lat0] = [-2.6, 52.3];
  const ring = [];
  for (let i = 0; i < vertices; i++) {
    const a = (2 * Math.PI * i) / vertices;
    const w = 1 + 0.07 * Math.sin(5 * a) + 0.02 * Math.cos(31 * a);
    ring.push([round(lon0 + 1.3 * w * Math.cos(a), 7), round(lat0 + 0.8 * w * Math.sin(a), 7)]);
  }
  ring.push([...ring[0]]);
  return {
    type: "Feature",
    properties: { name: region, vertices },
    geometry: { type: "Polygon", coordinates: [ring] },
  };
}

function areaKm2(feature) {
  const ring = feature.geometry.coordinates[0];
  let s = 0;
  for (let i = 0; i + 1 < ring.length; i++) s += ring[i][0] * ring[i + 1][1] - ring[i + 1][0] * ring[i][1];
  return round((Math.abs(s) / 2) * 111.32 * 111.32 * Math.cos((52.3 * Math.PI) / 180), 3);
}

const sketchPolygon = tool(
  async ({ region, vertices }, runtime) => {
    const feature = polygon(region, vertices);
    const ring = feature.geometry.coordinates[0];
    const xs = ring.map((p) => p[0]);
    const ys = ring.map((p) => p[1]);
    const bbox = [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
    return publish(
      runtime.state,
      runtime.toolCallId,
      "sketch_polygon",
      { "sketch-ops/sketch_polygon/geometry": feature, "sketch-ops/sketch_polygon/bbox": bbox },
      { region: origin(region), vertices: origin(vertices) },
    );
  },
  {
    name: "sketch_polygon",
    description: "Sketch a region's outline as a GeoJSON polygon.",
    schema: z.object({ region: z.string(), vertices: z.number().int() }),
  },
);

const sketchArea = tool(
  async ({ geometry, unit }, runtime) => {
    let area = areaKm2(resolve(runtime.state, geometry));
    if (unit === "mi2") area = round(area / 2.589988, 3);
    return publish(
      runtime.state,
      runtime.toolCallId,
      "sketch_area",
      { "sketch-ops/sketch_area/area": { amount: area, unit } },
      { geometry: origin(geometry), unit: origin(unit) },
    );
  },
  {
    name: "sketch_area",
    description: "Area of a sketched geometry, in km2 or mi2.",
    schema: z.object({ geometry: z.string(), unit: z.string() }),
  },
);

const catchmentStats = tool(
  async ({ river }, runtime) =>
    publish(
      runtime.state,
      runtime.toolCallId,
      "catchment_stats",
      {
        "hydro/catchment_stats/summary": {
          river,
          name_local: "Hafren – dalgylch ≈ 🏞️",
          retrieved_at: new Date(Date.UTC(2026, 4, 1, 12, 30, 15, 250)),
          max_safe: Number.MAX_SAFE_INTEGER,
          exactly_2_53: 2 ** 53,
          beyond_2_53: 2 ** 60,
          negative_big: -(2 ** 55),
          ratio: 0.1 + 0.2,
          tiny: 5e-324,
          not_a_number: NaN, // JSON has no NaN: LangGraph.js stores null
          missing: null,
          flags: [true, false],
          nested: { a: { b: { c: [1, [2, [3, { d: "deep" }]]] } }, empty: {}, none: [] },
        },
      },
      { river: origin(river) },
      { source: { provider: "Natural Resources Wales", licence: "OGL-3.0" } },
    ),
  {
    name: "catchment_stats",
    description: "Facts about a river's catchment.",
    schema: z.object({ river: z.string() }),
  },
);

const remember = tool(
  async ({ text }, runtime) =>
    new Command({
      update: {
        [STATE]: { "notes/plain": text },
        messages: [
          new ToolMessage({
            content: "[state updated: notes/plain]",
            tool_call_id: runtime.toolCallId,
            name: "remember",
            id: `tool-${runtime.toolCallId}`,
          }),
        ],
      },
    }),
  {
    name: "remember",
    description: "Keep a note, stored bare rather than as an entry map.",
    schema: z.object({ text: z.string() }),
  },
);

const TOOLS = [sketchPolygon, sketchArea, catchmentStats, remember];
const GEOMETRY = HANDLE + "sketch-ops/sketch_polygon/geometry";

// Each turn: the question, and per model step the tool calls made (an empty
// list ends the turn with a plain answer).
const TURNS = [
  ["Draw the outline of the Severn catchment.", [[["sketch_polygon", { region: "severn", vertices: 50000 }]], []]],
  [
    "Wie groß ist das Einzugsgebiet des Severn? 🏞️",
    [
      [
        ["sketch_area", { geometry: GEOMETRY, unit: "km2" }],
        ["catchment_stats", { river: "Severn" }],
      ],
      [],
    ],
  ],
  ["Thanks, that is all for now.", [[]]],
  [
    [
      { type: "text", text: "Redraw it " },
      { type: "text", text: "for the estuary only." },
    ],
    [
      [["sketch_polygon", { region: "severn-estuary", vertices: 1500 }]],
      [["sketch_area", { geometry: GEOMETRY, unit: "km2" }]],
      [],
    ],
  ],
  [
    "Et maintenant, compare les deux surfaces ? 🤔",
    [
      [["sketch_area", { geometry: GEOMETRY, unit: "km2" }]],
      [["sketch_area", { geometry: GEOMETRY, unit: "mi2" }], ["remember", { text: "compared ✓" }]],
      [],
    ],
  ],
];

function build(saver) {
  const model = new ScriptedChatModel({ turns: TURNS });
  return new StateGraph(State)
    .addNode("agent", async (state) => ({ messages: [await model.invoke(state.messages)] }))
    .addNode("tools", new ToolNode(TOOLS))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", (state) => (state.messages.at(-1).tool_calls?.length ? "tools" : END), ["tools", END])
    .addEdge("tools", "agent")
    .compile({ checkpointer: saver });
}

// --- turn derivation over what LangGraph.js reports (design.md) ------------

function derive(snapshots) {
  const points = [];
  let richest = [];
  for (const snap of snapshots) {
    const msgs = snap.values?.messages ?? [];
    const hs = humans(msgs);
    points.push({
      checkpoint_id: snap.config.configurable.checkpoint_id,
      humans: hs.length,
      messages: msgs.length,
      created_at: snap.createdAt ?? null,
      snap,
    });
    if (hs.length > richest.length) richest = hs;
  }
  const ends = new Map();
  for (const p of points) {
    if (p.humans === 0) continue;
    const held = ends.get(p.humans);
    if (
      !held ||
      p.messages > held.messages ||
      (p.messages === held.messages && p.checkpoint_id > held.checkpoint_id)
    ) {
      ends.set(p.humans, p);
    }
  }
  const questions = richest.map((m) => m.text);
  const turns = {};
  const retained = [...ends.keys()].sort((a, b) => a - b);
  for (const n of retained) {
    const p = ends.get(n);
    turns[String(n)] = {
      turn: n,
      checkpoint_id: p.checkpoint_id,
      question: questions[n - 1],
      ended_at: p.created_at,
      tool_state: stateJson(p.snap.values?.[STATE]),
    };
  }
  return {
    total: richest.length,
    questions,
    turns,
    retained,
    checkpoints: points
      .map(({ checkpoint_id, humans, messages, created_at }) => ({ checkpoint_id, humans, messages, created_at }))
      .sort((a, b) => (a.checkpoint_id < b.checkpoint_id ? -1 : a.checkpoint_id > b.checkpoint_id ? 1 : 0)),
  };
}

async function main() {
  const { values: args } = parseArgs({
    options: {
      dsn: { type: "string" },
      sqlite: { type: "string" },
      thread: { type: "string" },
      out: { type: "string" },
      schema: { type: "string" },
      "read-only": { type: "boolean", default: false },
    },
  });
  for (const need of ["thread", "out"]) {
    if (!args[need]) throw new Error(`--${need} is required`);
  }
  if (!args.dsn === !args.sqlite) throw new Error("exactly one of --dsn and --sqlite is required");
  if (args.sqlite && args.schema !== undefined) throw new Error("--schema is for PostgreSQL");
  const schema = args.sqlite ? "" : (args.schema ?? "lgjs");
  const { saver, close } = await openSaver(args, schema);
  let result;
  let sqliteVersion;
  try {
    const graph = build(saver);
    const config = { configurable: { thread_id: args.thread } };
    if (!args["read-only"]) {
      const now = await graph.getState(config);
      if (Object.keys(now.values ?? {}).length && (now.values.messages ?? []).length) {
        throw new Error(`thread ${args.thread} already has checkpoints`);
      }
      for (const [i, [question]] of TURNS.entries()) {
        await graph.invoke({ messages: [new HumanMessage({ content: question, id: `human-${i + 1}` })] }, config);
      }
    }
    const history = [];
    for await (const snap of graph.getStateHistory(config)) history.push(snap);
    result = derive(history);
    if (args.sqlite) sqliteVersion = saver.db.prepare("SELECT sqlite_version() AS v").get().v;
  } finally {
    await close();
  }
  result.thread_id = args.thread;
  result.schema = schema;
  result.sqlite = args.sqlite ?? "";
  result.writer = "js";
  result.versions = await versions(Boolean(args.sqlite));
  if (sqliteVersion) result.versions.sqlite = sqliteVersion;
  result.reference = null;
  result.reference_error = "the reference implementation (mcp-toolsets-runtime) is Python only";
  dump(args.out, result);
  process.stderr.write(
    `wrote ${args.out}: thread ${args.thread}, ${result.total} turns, retained [${result.retained}], ` +
      `${result.checkpoints.length} checkpoints\n`,
  );
}

main().catch((err) => {
  process.stderr.write(`write_thread.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});

// Write js_golden.json: values serialized by LangChain.js's real checkpoint
// serializer, each with the plain data codec must decode it to.
//
// It needs @langchain/langgraph-checkpoint and @langchain/core installed in
// some node_modules folder, given as the first argument or in
// LGCODEC_NODE_MODULES:
//
//   npm install --prefix /tmp/lgjs @langchain/langgraph-checkpoint @langchain/core
//   node langgraph/codec/testdata/gen_js.mjs /tmp/lgjs/node_modules
//
// An optional second argument is the output path (default: js_golden.json
// beside this script).
//
// The expected value ("want") is computed here from the JavaScript values by
// the mapping codec documents, not by decoding the bytes. In "want", bytes
// are {"$bytes": base64} and a value codec must refuse is
// {"$error": "unsupported"}.
//
// Each case but the refused ones also records "host": the JSON a JavaScript
// host's own tools write for the same value (JSON.stringify), where the
// parts historyd renders otherwise on purpose, because JSON.stringify loses
// them, are {"$deviates": why}. The Go test holds the decoder to it.

import { createRequire } from "node:module";
import { writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const nodeModules = process.argv[2] ?? process.env.LGCODEC_NODE_MODULES;
if (!nodeModules) {
  console.error("usage: node gen_js.mjs NODE_MODULES_DIR [OUT]  (or set LGCODEC_NODE_MODULES)");
  process.exit(2);
}
const outPath = process.argv[3] ?? join(here, "js_golden.json");
const require = createRequire(join(resolve(nodeModules), "_resolve_from_here.js"));

const { JsonPlusSerializer, DeltaSnapshot } = require("@langchain/langgraph-checkpoint");
const messages = require("@langchain/core/messages");
const { Serializable } = require("@langchain/core/load/serializable");
const {
  HumanMessage,
  HumanMessageChunk,
  AIMessage,
  AIMessageChunk,
  ToolMessage,
  SystemMessage,
  ChatMessage,
  FunctionMessage,
  RemoveMessage,
} = messages;

const versions = {
  "@langchain/langgraph-checkpoint": require("@langchain/langgraph-checkpoint/package.json").version,
  "@langchain/core": require("@langchain/core/package.json").version,
};

// --- the mapping, computed from JavaScript values ---------------------------

const MESSAGE_TYPES = {
  HumanMessage: "human",
  AIMessage: "ai",
  ToolMessage: "tool",
  SystemMessage: "system",
  FunctionMessage: "function",
  ChatMessage: "chat",
  RemoveMessage: "remove",
};

class Unsupported extends Error {}

function isSerializable(v) {
  return v instanceof Serializable;
}

function jsonText(v) {
  // Compact JSON with sorted object keys, as codec writes key text.
  if (Array.isArray(v)) return "[" + v.map(jsonText).join(",") + "]";
  if (v && typeof v === "object" && !("$bytes" in v)) {
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + jsonText(v[k])).join(",") + "}";
  }
  if (v && typeof v === "object") return JSON.stringify(v.$bytes);
  return JSON.stringify(v);
}

function keyText(k) {
  const w = want(k);
  return typeof w === "string" ? w : jsonText(w);
}

function want(v, inKwargs = false) {
  if (v === undefined || v === null) return null;
  if (typeof v === "number") return Number.isFinite(v) ? (Object.is(v, -0) ? 0 : v) : null;
  if (typeof v === "string" || typeof v === "boolean") return v;
  if (v instanceof DeltaSnapshot) throw new Unsupported();
  if (v instanceof Date) return v.toISOString();
  if (v instanceof Set) return [...v].map((e) => want(e));
  if (v instanceof Map) {
    const out = {};
    for (const [k, e] of v) out[keyText(k)] = want(e);
    return out;
  }
  if (v instanceof RegExp) return [v.source, v.flags];
  if (v instanceof Error) return v.message;
  if (v instanceof Uint8Array) return { $bytes: Buffer.from(v).toString("base64") };
  if (Array.isArray(v)) return v.map((e) => want(e, inKwargs));
  if (v.lg_name === "Send") {
    const out = { node: want(v.node), args: want(v.args) };
    if (v.timeout !== undefined) out.timeout = want(v.timeout);
    return out;
  }
  if (isSerializable(v)) {
    const j = v.toJSON();
    if (j.type !== "constructor") return null; // secrets and not_implemented
    const out = {};
    for (const [k, e] of Object.entries(j.kwargs)) out[k] = kwargWant(e);
    const t = MESSAGE_TYPES[j.id[j.id.length - 1]] ?? (j.id[j.id.length - 1].endsWith("MessageChunk") ? j.id[j.id.length - 1] : undefined);
    if (t !== undefined && !("type" in out)) out.type = t;
    return out;
  }
  const out = {};
  for (const [k, e] of Object.entries(v)) out[k] = want(e, inKwargs);
  return out;
}

// kwargWant is want for a value of serialized kwargs: user maps escaped by
// toJSON are kept as stored, and secrets become null.
function kwargWant(v) {
  if (v && typeof v === "object" && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype) {
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === "__lc_escaped__") return JSON.parse(JSON.stringify(v.__lc_escaped__));
    if (v.lc === 1 && v.type === "secret") return null;
    const out = {};
    for (const [k, e] of Object.entries(v)) out[k] = kwargWant(e);
    return out;
  }
  if (Array.isArray(v)) return v.map(kwargWant);
  return want(v, true);
}

function messageText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((b) => (typeof b === "string" ? b : b && b.type === "text" && typeof b.text === "string" ? b.text : ""))
    .join("");
}

function messagesWant(list) {
  const humans = list
    .filter((m) => isSerializable(m) && m.toJSON().id.at(-1) === "HumanMessage")
    .map((m) => messageText(m.content));
  return { count: list.length, humans };
}

// hostMarked is v as JSON.stringify would see it, with the parts historyd
// renders otherwise on purpose replaced by {"$deviates": why}.
function hostMarked(v) {
  const deviates = (why) => ({ $deviates: why });
  if (v === undefined) return deviates("undefined: JSON.stringify drops the field, historyd serves null");
  if (typeof v === "number" && !Number.isFinite(v)) return deviates("NaN and infinities: JSON.stringify writes null, historyd the strings");
  if (v === null || typeof v !== "object") return v;
  if (v instanceof Date) return v;
  if (v instanceof DeltaSnapshot) return deviates("DeltaSnapshot: a channel's whole stored value, served as the value it holds");
  if (v instanceof Set) return deviates("Set: JSON.stringify writes {}, historyd lists the members");
  if (v instanceof Map) return deviates("Map: JSON.stringify writes {}, historyd the entries");
  if (v instanceof RegExp) return deviates("RegExp: JSON.stringify writes {}, historyd [source, flags]");
  if (v instanceof Error) return deviates("Error: JSON.stringify writes {}, historyd the message");
  if (v instanceof Uint8Array) return deviates("Uint8Array: JSON.stringify writes an index map, historyd the bytes");
  if (isSerializable(v)) return deviates("LangChain objects: JSON.stringify writes their serialized record, historyd their fields, as for Python");
  if (v.lg_name === "Send") return deviates("Send: historyd drops lg_name");
  if (Array.isArray(v)) return v.map(hostMarked);
  const out = {};
  for (const [k, e] of Object.entries(v)) out[k] = hostMarked(e);
  return out;
}

// --- the values ------------------------------------------------------------

class CustomClient extends Serializable {
  lc_namespace = ["langchain_core", "custom"];
  lc_serializable = true;
  get lc_secrets() {
    return { apiKey: "MY_API_KEY" };
  }
  constructor(fields) {
    super(fields);
    this.apiKey = fields.apiKey;
    this.modelName = fields.modelName;
  }
}

class NotSerializable extends Serializable {
  lc_namespace = ["langchain_core", "custom"];
  lc_serializable = false;
}

function messagesBasic() {
  return [
    new HumanMessage({ content: "What is the area of the sketch?", id: "h1" }),
    new AIMessage({
      content: "",
      id: "a1",
      tool_calls: [{ name: "sketch_area", args: { unit: "km2" }, id: "call_1", type: "tool_call" }],
    }),
    new ToolMessage({ content: "42.5", tool_call_id: "call_1", id: "t1" }),
    new AIMessage({ content: "The area is 42.5 km².", id: "a2" }),
    new HumanMessage({
      content: [
        { type: "text", text: "And the " },
        { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
        "perimeter",
        { type: "text", text: "?" },
        { type: "text", text: 5 },
      ],
      id: "h2",
    }),
    new SystemMessage({ content: "You are terse.", id: "s1" }),
  ];
}

function messagesKinds() {
  return [
    new HumanMessage("Grüße, 世界 🌍"),
    new HumanMessage(""),
    new AIMessageChunk({ content: "chunk" }),
    new HumanMessageChunk({ content: "human chunk" }),
    new ChatMessage({ role: "user", content: "chat" }),
    new FunctionMessage({ name: "f", content: "fn" }),
    new RemoveMessage({ id: "gone" }),
    new HumanMessage({
      content: "with extras",
      additional_kwargs: {
        user_data: { lc: 1, type: "constructor", note: "user data that looks like a record" },
        when: new Date(Date.UTC(2024, 0, 2, 3, 4, 5)),
        tags: new Set(["a", "b"]),
      },
    }),
    new HumanMessage({ content: [] }),
  ];
}

function cases() {
  return [
    ["messages_basic", messagesBasic()],
    ["messages_kinds", messagesKinds()],
    [
      "state",
      {
        tool_state: {
          "sketch-ops/sketch_area/area_km2": {
            value: 42.5,
            tool: "sketch_area",
            seq: 3,
            inputs: { polygon: "sketch-ops/draw/polygon", unit: "model" },
            turn: 2,
            turns_written: 1,
          },
        },
        messages: messagesBasic().slice(0, 2),
        undefinedField: undefined,
        list: [1, undefined, 3],
        set: new Set([1, "a", [2]]),
        map: new Map([
          ["k", 1],
          [2, "v"],
          [true, null],
          [null, "null key"],
          [1.5, "float key"],
        ]),
        objectKeyMap: new Map([[{ b: 1, a: [2] }, "object key"]]),
        emptySet: new Set(),
        date: new Date(Date.UTC(2024, 4, 6, 7, 8, 9, 123)),
        regexp: /ab+c/gi,
        error: new Error("boom"),
        typeError: new TypeError("bad type"),
        bytes: new Uint8Array([0, 1, 255]),
        big: 2 ** 60,
        maxSafe: Number.MAX_SAFE_INTEGER,
        negZero: -0,
        float: 1.5,
        nan: NaN,
        inf: Infinity,
        exp: 1e21,
        small: 1e-7,
        unicode: "Grüße 🌍 \u0000 \"quoted\"",
        lcUserTopLevel: { lc: 5, note: "not a record" },
        send: { lg_name: "Send", node: "node", args: { x: 1 } },
        client: new CustomClient({ apiKey: "sk-secret", modelName: "m" }),
        notSerializable: new NotSerializable({ x: 1 }),
      },
    ],
    ["top_string", "just a string"],
    ["top_number", 7],
    ["top_null", null],
    ["top_list_empty", []],
    ["top_bytes", new Uint8Array([1, 2, 3])],
    ["delta_snapshot", new DeltaSnapshot(messagesBasic())],
    ["delta_snapshot_nested", { messages: new DeltaSnapshot([]) }],
  ];
}

// --- output ------------------------------------------------------------------

const serde = new JsonPlusSerializer();
const golden = [];
for (const [name, value] of cases()) {
  const [type, data] = await serde.dumpsTyped(value);
  let w;
  try {
    // A snapshot stores the channel's whole value and reads as that value;
    // one nested inside a value is refused.
    w = want(value instanceof DeltaSnapshot ? value.value : value);
  } catch (e) {
    if (!(e instanceof Unsupported)) throw e;
    w = { $error: "unsupported" };
  }
  const c = { name, type, data_b64: Buffer.from(data).toString("base64"), want: w };
  if (name.startsWith("messages")) c.messages = messagesWant(value);
  if (name === "delta_snapshot") c.messages = messagesWant(value.value);
  if (!(w && typeof w === "object" && "$error" in w)) c.host = JSON.parse(JSON.stringify(hostMarked(value)) ?? "null");
  golden.push(c);
}
writeFileSync(outPath, JSON.stringify({ versions, cases: golden }, null, 1) + "\n");
console.error(`wrote ${golden.length} cases to ${outPath}`);

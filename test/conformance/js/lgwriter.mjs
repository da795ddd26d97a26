// What the LangGraph.js conformance writers share: savers, the tool_state
// convention, the scripted chat model, historyd's JSON mapping and the truth
// about a thread. write_thread.mjs (expected.json) and write_scenario.mjs
// (truth.json) import it; the Python writers' py/lgwriter.py is its twin.
// The truth.json shape is defined in ../README.md.

import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, ToolMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";

export const STATE = "tool_state";
export const MODEL = "model";
export const HANDLE = "@state:";

// --- the session-state reducer (tool_state convention) ---------------------

export function isMap(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

// mergeToolState is mcp-toolsets-runtime's merge_tool_state: keys merged,
// a missing seq stamped, turns_written counted when a later turn displaces
// an entry (a key's first entry carries none).
export function mergeToolState(old, update) {
  const out = { ...(old ?? {}) };
  if (!update) return out;
  const seqs = Object.values(out)
    .filter((e) => isMap(e))
    .map((e) => e.seq ?? 0);
  let following = Math.max(0, ...seqs) + 1;
  for (const [key, raw] of Object.entries(update)) {
    if (!isMap(raw)) {
      out[key] = raw;
      continue;
    }
    const entry = { ...raw };
    if (entry.seq == null) entry.seq = following++;
    const before = out[key];
    if (isMap(before) && entry.turns_written == null) {
      const held = before.turns_written ?? 1;
      const later = before.turn == null || entry.turn == null || entry.turn > before.turn;
      entry.turns_written = later ? held + 1 : held;
    }
    out[key] = entry;
  }
  return out;
}

// A DeltaChannel batch reducer from a binary one: a left fold, which is
// batching-invariant by construction.
export const batch = (binary) => (state, writes) => writes.reduce((s, w) => binary(s, w), state);

export const humans = (messages) => (messages ?? []).filter((m) => m.getType() === "human");

// A tool's answer: entries for tool_state and a short ToolMessage, as a
// capture middleware would write them; `turn` is the number of human messages.
export function publish(state, callId, toolName, values, inputs, extra) {
  const turn = humans(state.messages).length;
  const update = {};
  for (const [key, value] of Object.entries(values)) {
    update[key] = { value, tool: toolName, turn, ...(inputs ? { inputs: { ...inputs } } : {}), ...(extra ?? {}) };
  }
  return new Command({
    update: {
      [STATE]: update,
      messages: [
        new ToolMessage({
          content: `[state updated: ${Object.keys(values).sort().join(", ")}]`,
          tool_call_id: callId,
          name: toolName,
          id: `tool-${callId}`,
        }),
      ],
    },
  });
}

// --- the scripted chat model -----------------------------------------------

const QUESTION_ID = /^q-(\d+)$/;
const ANSWER_ID = /^ai-(\d+)-(\d+)$/;

// A chat model that plays a script back, chosen by where the thread is:
// turns[n-1][1] is question n's steps, each the tool calls made (an empty
// list ends the turn with a plain answer). by "count": question n is the
// number of human messages, the step the AI messages since the last one;
// by "id": the highest n among human messages q-<n> and the model's own
// answers ai-<n>-<step>, so removed or summarized messages do not move it.
// bindTools returns the model itself, as createAgent binds its tools.
export class ScriptedChatModel extends BaseChatModel {
  constructor({ turns, by = "count" } = {}) {
    super({});
    this.turns = turns;
    this.by = by;
  }

  _llmType() {
    return "scripted";
  }

  bindTools() {
    return this;
  }

  locate(messages) {
    if (this.by === "count") {
      const turn = humans(messages).length;
      let last = -1;
      messages.forEach((m, i) => {
        if (m.getType() === "human") last = i;
      });
      return [turn, messages.slice(last).filter((m) => m.getType() === "ai").length];
    }
    let at = [0, 0];
    const later = (a, b) => a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
    for (const m of messages) {
      const id = m.id ?? "";
      let g;
      if (m.getType() === "human" && (g = QUESTION_ID.exec(id))) {
        if (later([Number(g[1]), 0], at)) at = [Number(g[1]), 0];
      } else if (m.getType() === "ai" && (g = ANSWER_ID.exec(id))) {
        if (later([Number(g[1]), Number(g[2]) + 1], at)) at = [Number(g[1]), Number(g[2]) + 1];
      }
    }
    if (at[0] === 0) throw new Error("no question (q-<n>) nor answer (ai-<n>-<step>) among the messages");
    return at;
  }

  async _generate(messages) {
    const [turn, step] = this.locate(messages);
    const steps = this.turns[turn - 1][1];
    const calls = steps[step] ?? [];
    const id = `ai-${turn}-${step}`;
    const message = calls.length
      ? new AIMessage({
          content: "",
          id,
          tool_calls: calls.map(([name, args], i) => ({ name, args, id: `call-${turn}-${step}-${i}`, type: "tool_call" })),
        })
      : new AIMessage({ content: `Answer to turn ${turn}.`, id });
    return { generations: [{ text: typeof message.content === "string" ? message.content : "", message }] };
  }
}

// --- historyd's JSON mapping (history.proto, StateEntry) -------------------

const LIMIT = 2 ** 53;

export function wire(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "number") {
    if (Number.isNaN(v)) return "NaN";
    if (!Number.isFinite(v)) return v > 0 ? "Infinity" : "-Infinity";
    // An integral number beyond 2^53 is stored by JSON.stringify as JS's
    // shortest decimal text of it (2**60 -> 1152921504606847000), and historyd
    // returns those digits as a string. (From 1e21 up, JS writes an exponent,
    // which reads back as a float; the test data stays below that.)
    if (Number.isInteger(v) && Math.abs(v) > LIMIT) return String(v);
    return v;
  }
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return v.map(wire);
  if (typeof v === "object") {
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = wire(x);
    return out;
  }
  throw new Error(`no JSON mapping for ${typeof v} in the test data`);
}

export const entryJson = (e) => (isMap(e) ? wire(e) : { value: wire(e) });

export function stateJson(state) {
  const out = {};
  for (const [k, e] of Object.entries(state ?? {})) out[k] = entryJson(e);
  return out;
}

const channelJson = (channel, value) => (channel === STATE ? stateJson(value) : wire(value));

// --- messages: which human messages are not questions ----------------------

// Why a human message is not a question somebody asked, or null: a string
// additional_kwargs.lc_source, as LangChain.js's summarizationMiddleware
// ("summarization") and @langchain/core's notification metadata set it.
export function syntheticMarker(m) {
  if (m.getType() !== "human") return null;
  const source = m.additional_kwargs?.lc_source;
  return typeof source === "string" ? `lc_source=${source}` : null;
}

export function messagesJson(messages) {
  return (messages ?? []).map((m) => {
    const marker = syntheticMarker(m);
    return {
      id: m.id ?? null,
      type: m.getType(),
      synthetic: marker !== null,
      text: m.text,
      ...(marker ? { marker } : {}),
    };
  });
}

// --- savers ----------------------------------------------------------------

// The saver, its tables set up, and a function closing it. The JS
// PostgreSQL saver keeps its tables in `schema`.
export async function openSaver(args, schema) {
  if (args.sqlite) {
    // Imported only when asked for: it loads better-sqlite3, a native addon
    // the PostgreSQL thread has no use for.
    const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
    const saver = SqliteSaver.fromConnString(args.sqlite);
    await saver.setup();
    return { saver, close: async () => saver.db.close() };
  }
  const { PostgresSaver } = await import("@langchain/langgraph-checkpoint-postgres");
  const saver = PostgresSaver.fromConnString(args.dsn, { schema });
  await saver.setup();
  return { saver, close: () => saver.end() };
}

export async function versions(sqlite, extra = []) {
  const require = createRequire(import.meta.url);
  const out = { node: process.versions.node };
  const names = ["@langchain/langgraph", "@langchain/langgraph-checkpoint"];
  if (sqlite) names.push("@langchain/langgraph-checkpoint-sqlite", "better-sqlite3");
  else names.push("@langchain/langgraph-checkpoint-postgres", "pg");
  names.push("@langchain/core", ...extra);
  for (const name of names) {
    try {
      let dir = dirname(require.resolve(name));
      for (let i = 0; i < 5; i++) {
        try {
          const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
          if (pkg.name === name) {
            out[name] = pkg.version;
            break;
          }
        } catch {}
        dir = dirname(dir);
      }
    } catch {}
  }
  return out;
}

export function dump(path, result) {
  writeFileSync(path, JSON.stringify(result) + "\n");
}

// --- what is physically stored at a checkpoint -----------------------------

const isSnapshot = (v) => isMap(v) && v.lc === 2 && v.type === "delta_snapshot";

// Reads a thread's root checkpoints as the saver stored them: stored(id)
// says per channel "snapshot" (a delta snapshot, {"lc":2,"type":
// "delta_snapshot",...}) or "value"; in SQLite from the checkpoint's own
// JSON, in PostgreSQL from the blob of the channel's version there (shared
// by every checkpoint at that version). writes(id) counts the writes per
// channel attached to the checkpoint.
export class RawReader {
  constructor(args, schema, thread, channels) {
    this.args = args;
    this.schema = schema;
    this.thread = thread;
    this.channels = channels;
  }

  async open() {
    if (this.args.sqlite) {
      const require = createRequire(import.meta.url);
      const Database = require("better-sqlite3");
      this.db = new Database(this.args.sqlite, { readonly: true });
    } else {
      const pg = (await import("pg")).default;
      this.pg = new pg.Client({ connectionString: this.args.dsn });
      await this.pg.connect();
    }
    return this;
  }

  async close() {
    if (this.db) this.db.close();
    if (this.pg) await this.pg.end();
  }

  table(name) {
    return `"${this.schema}"."${name}"`;
  }

  async stored(id) {
    const out = {};
    if (this.db) {
      const row = this.db
        .prepare("SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?")
        .get(this.thread, id);
      if (!row) return out;
      const values = JSON.parse(Buffer.from(row.checkpoint).toString("utf8")).channel_values ?? {};
      for (const ch of this.channels) if (ch in values) out[ch] = isSnapshot(values[ch]) ? "snapshot" : "value";
      return out;
    }
    const { rows } = await this.pg.query(
      `SELECT checkpoint -> 'channel_versions' AS versions FROM ${this.table("checkpoints")} WHERE thread_id = $1 AND checkpoint_ns = '' AND checkpoint_id = $2`,
      [this.thread, id],
    );
    if (!rows.length) return out;
    const vers = rows[0].versions ?? {};
    for (const ch of this.channels) {
      if (!(ch in vers)) continue;
      const blob = await this.pg.query(
        `SELECT type, blob FROM ${this.table("checkpoint_blobs")} WHERE thread_id = $1 AND checkpoint_ns = '' AND channel = $2 AND version = $3`,
        [this.thread, ch, String(vers[ch])],
      );
      const b = blob.rows[0];
      if (!b || b.type === "empty" || b.blob === null) continue;
      if (b.type !== "json") throw new Error(`checkpoint ${id}: ${ch} blob of type ${b.type}, not json`);
      out[ch] = isSnapshot(JSON.parse(b.blob.toString("utf8"))) ? "snapshot" : "value";
    }
    return out;
  }

  async writes(id) {
    let rows;
    if (this.db) {
      rows = this.db
        .prepare("SELECT channel, count(*) AS n FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ? GROUP BY channel")
        .all(this.thread, id);
    } else {
      rows = (
        await this.pg.query(
          `SELECT channel, count(*)::int AS n FROM ${this.table("checkpoint_writes")} WHERE thread_id = $1 AND checkpoint_ns = '' AND checkpoint_id = $2 GROUP BY channel`,
          [this.thread, id],
        )
      ).rows;
    }
    const out = {};
    for (const r of rows) if (this.channels.includes(r.channel)) out[r.channel] = Number(r.n);
    return out;
  }
}

// --- the truth about a thread ----------------------------------------------

function snapshotValues(snap, served) {
  const values = snap.values ?? {};
  const out = {};
  for (const ch of served) out[ch] = channelJson(ch, values[ch]);
  out.messages = messagesJson(values.messages);
  return out;
}

// Runs a scenario's inputs and records the truth, as py/lgwriter.Recorder
// does: questions numbered in the order asked; the turns are the
// lineage's, the questions whose runs the head descends from; a run started
// from an older checkpoint (`start`) rewinds the lineage to the turn that
// checkpoint belongs to and records the branch it leaves as a fork; a run
// works on the last question of the lineage (an updateState or a replay
// too) or on the questions it asks. Runs of a graph without messages are
// questions whose text is the input as JSON.
export class Recorder {
  constructor(graph, saver, thread, served) {
    this.graph = graph;
    this.saver = saver;
    this.thread = thread;
    this.config = { configurable: { thread_id: thread } };
    this.served = served;
    this.runs = [];
    this.questions = [];
    this.inputs = new Map();
    this.turnRuns = new Map();
    this.askedWith = new Map();
    this.lineage = [];
    this.cpQuestion = new Map();
    this.head = null;
    this.forks = [];
  }

  async historyIds() {
    const ids = new Set();
    // The saver's own listing: the same checkpoints as getStateHistory,
    // without rebuilding every DeltaChannel value on the way.
    for await (const t of this.saver.list(this.config)) {
      if ((t.config.configurable.checkpoint_ns ?? "") === "") ids.add(t.config.configurable.checkpoint_id);
    }
    return ids;
  }

  at(checkpointId) {
    return { configurable: { thread_id: this.thread, checkpoint_ns: "", checkpoint_id: checkpointId } };
  }

  async stateAfter(config) {
    const snap = await this.graph.getState(config ?? this.config);
    return { checkpoint_id: snap.config.configurable.checkpoint_id, ...snapshotValues(snap, this.served) };
  }

  async isInput(id) {
    const t = await this.saver.getTuple(this.at(id));
    return t?.metadata?.source === "input";
  }

  // run records one invoke/updateState call. opts.start: the checkpoint it
  // starts from when not the head (a fork); opts.inputs: each question's
  // input (runs numbering); opts.fails: the call is meant to throw (a run
  // resumed later), its error recorded and swallowed.
  async run(kind, call, questions = [], opts = {}) {
    const { start = null, inputs = [], fails = false } = opts;
    if (start !== null && start !== this.head) this.rewind(start);
    const before = await this.historyIds();
    let result;
    let error = null;
    try {
      result = await call();
    } catch (err) {
      if (!fails) throw err;
      error = String(err?.message ?? err);
    }
    if (fails && error === null) throw new Error(`run ${this.runs.length} (${kind}) was meant to fail and did not`);
    const after = await this.historyIds();
    const numbers = questions.map((q, i) => {
      const n = this.questions.push(q);
      if (i < inputs.length) this.inputs.set(n, inputs[i]);
      return n;
    });
    if (numbers.length) {
      this.lineage.push(...numbers);
      for (const n of numbers) this.askedWith.set(n, numbers);
    }
    const current = this.lineage.length ? this.askedWith.get(this.lineage.at(-1)) : [];
    const created = [...after].filter((id) => !before.has(id)).sort();
    for (const id of created) {
      // A run's input checkpoint holds the state before its questions.
      const at = (await this.isInput(id)) ? this.lineage.slice(0, this.lineage.length - numbers.length) : this.lineage;
      this.cpQuestion.set(id, at.length ? at.at(-1) : 0);
    }
    const entry = { kind, questions: [...questions], question_numbers: numbers, start, checkpoints: created, state_after: await this.stateAfter() };
    if (error !== null) entry.error = error;
    this.runs.push(entry);
    this.head = entry.state_after.checkpoint_id;
    for (const n of current) this.turnRuns.set(n, this.runs.length - 1);
    return result;
  }

  rewind(start) {
    if (!this.cpQuestion.has(start)) throw new Error(`fork from ${start}, a checkpoint no recorded run wrote`);
    const q = this.cpQuestion.get(start);
    const keep = q ? this.lineage.indexOf(q) + 1 : 0;
    this.forks.push({ from_checkpoint_id: start, turn: keep, questions: this.lineage.length, newest_checkpoint_id: this.head, turns: this.turns() });
    this.lineage = this.lineage.slice(0, keep);
  }

  turns() {
    const number = new Map(this.lineage.map((q, i) => [q, i + 1]));
    return this.lineage.map((n) => {
      const st = this.runs[this.turnRuns.get(n)].state_after;
      const state = {};
      for (const ch of this.served) state[ch] = st[ch];
      const t = {
        turn: number.get(n),
        question: this.questions[n - 1],
        asked: n,
        checkpoint_id: st.checkpoint_id,
        answered_with: this.askedWith.get(n).filter((m) => number.has(m)).map((m) => number.get(m)),
        retained: true,
        state,
        messages: st.messages,
      };
      if (this.inputs.has(n)) t.input = this.inputs.get(n);
      return t;
    });
  }

  // The forks, each abandoned turn's state read back with getState at its
  // checkpoint now that the thread has moved on.
  async readBackForks() {
    const out = [];
    for (const f of this.forks) {
      const back = [];
      for (const t of f.turns) {
        const st = await this.stateAfter(this.at(t.checkpoint_id));
        const state = {};
        for (const ch of this.served) state[ch] = st[ch];
        back.push({ turn: t.turn, checkpoint_id: st.checkpoint_id, state, messages: st.messages });
      }
      out.push({ ...f, read_back: back });
    }
    return out;
  }
}

// Every root checkpoint from getStateHistory, oldest first, with what is
// stored at it, and the thread's branches.
export async function describeCheckpoints(graph, reader, served) {
  const out = [];
  for await (const snap of graph.getStateHistory({ configurable: { thread_id: reader.thread } })) {
    const id = snap.config.configurable.checkpoint_id;
    const md = snap.metadata ?? {};
    const metadata = { step: md.step ?? null, source: md.source ?? null };
    if ("counters_since_delta_snapshot" in md) metadata.counters_since_delta_snapshot = wire(md.counters_since_delta_snapshot);
    out.push({
      checkpoint_id: id,
      parent_checkpoint_id: snap.parentConfig?.configurable?.checkpoint_id ?? null,
      metadata,
      created_at: snap.createdAt ?? null,
      stored: await reader.stored(id),
      inline_true_marker: [],
      writes: await reader.writes(id),
      values: snapshotValues(snap, served),
    });
  }
  out.sort((a, b) => (a.checkpoint_id < b.checkpoint_id ? -1 : a.checkpoint_id > b.checkpoint_id ? 1 : 0));
  return { checkpoints: out, branches: branches(out) };
}

export function branches(checkpoints) {
  const byId = new Map(checkpoints.map((c) => [c.checkpoint_id, c]));
  const parents = new Set(checkpoints.map((c) => c.parent_checkpoint_id));
  const out = [];
  for (const c of checkpoints) {
    if (parents.has(c.checkpoint_id)) continue;
    const chain = [];
    for (let cur = c; cur; cur = byId.get(cur.parent_checkpoint_id)) chain.push(cur.checkpoint_id);
    out.push({ head: c.checkpoint_id, checkpoints: chain.reverse() });
  }
  return out;
}

// A --read-only truth's turns: the earlier truth's, each retained while its
// checkpoint is, with the state LangGraph.js now reconstructs there.
export function carriedTurns(previous, checkpoints, served) {
  const byId = new Map(checkpoints.map((c) => [c.checkpoint_id, c]));
  return (previous.turns ?? []).map((t) => {
    const c = byId.get(t.checkpoint_id);
    if (!c) return { ...t, retained: false, state: null, messages: null };
    const state = {};
    for (const ch of served) state[ch] = c.values[ch];
    return { ...t, retained: true, state, messages: c.values.messages };
  });
}

// The model-facing inspect_state tool's answers, ported from the Go client's
// client/inspect, whose answers and wording are the reference.
//
// A turn read answers in exactly one of three ways and never with another
// turn's value in place of the one asked for: the value followed by a line
// naming its turn; no_such_turn with how many turns the conversation has had;
// turn_no_longer_retained with the turns still retained and a reason telling
// the model not to answer from the current value. Without a history the
// present can still be read, and a turn read answers no_turn_history; with a
// history but no thread id (a host that did not pass the run's thread), a
// read answers no_thread_id and the host's author is warned in the log. Large
// values come back as an outline; `pattern` searches flattened
// "path = value" lines (an RE2 expression, as in Go, run with re2js), `path`
// reads one part; data: URIs become a short marker before anything else
// looks at a value. A turn whose question came in one message with others
// says which turns share its state, and when the service says the turn
// numbers are estimated, a turn read says they may be too low and, for a
// found turn, quotes its question; counted numbering is not mentioned (see
// Go's package documentation for why).
//
// For the same state and arguments the text is the Go tool's byte for byte
// (client/testdata/cases.json holds every client to it).

import { RE2JS } from "re2js";

import { HistorydError, type Entry, type ReadOpts, type Snapshot } from "./client.js";
import { chars, compareCodePoints, dumps, goQuote, sortedKeys } from "./json.js";
import { Code } from "@connectrpc/connect";

/** The name the tool is registered under. */
export const TOOL_NAME = "inspect_state";

/** What the tool tells the model: Go's inspect.ToolDescription. */
export const TOOL_DESCRIPTION = `Read or search a session-state key, such as one named in a "[state updated: ...]" note.

With key alone, returns the key's value as JSON, or an outline of its structure when it is large; then narrow the read with pattern or path. key="*" lists every stored key, or searches all of them with pattern.

Pass turn=<n> to read the key as it stood at the end of turn n instead of now; turns are the user's questions, counted from 1. A key holds only its latest value, so a comparison with an earlier result made without turn compares the current value with itself. An earlier value exists when a read says several turns wrote the key, when a listing marks a key "written in N turns", or when a note says a write replaced what a key held at some turn: read it with turn.

Answer from what a turn read returns. If the turn is no longer retained, say that the earlier value is no longer available; do not use the current value in its place.`;

/** Each parameter's description: Go's inspect.ParametersSchema. */
export const PARAMETER_DESCRIPTIONS = Object.freeze({
  key: 'State key to read, or "*" for every stored key.',
  pattern:
    "Case-insensitive regular expression matched against the value's flattened \"path = value\" lines; only matching lines are returned. An invalid expression is matched as plain text.",
  path: 'Part of the value to return, e.g. "features[0].properties.name". The paths printed by pattern matches work here.',
  turn: "Read the key as it stood at the end of this turn instead of now. Turns are the user's questions, counted from 1.",
});

/** The key that lists every stored key, or with a pattern, searches all of them. */
export const ALL_KEYS = "*";

export const DEFAULT_MAX_VALUE_CHARS = 4000;
export const DEFAULT_MAX_MATCHES = 50;
export const DEFAULT_MAX_LINE_CHARS = 160;

const HANDLE_PREFIX = "@state:";
const SHAPE_KEYS = 8;
const SHAPE_STRING_CHARS = 40;
const OUTLINE_KEYS = 50;
const OUTLINE_FIRST_CHARS = 500;
const MARKER_HEADER_CHARS = 40;
const NO_THREAD_REASON =
  "The host running this tool did not name this conversation's thread, so its saved state cannot be read, now or at any turn. Calling again will not change that: say that the state could not be read.";
const ESTIMATED_NUMBERS =
  "Turn numbers here are estimated and may be too low: the oldest part of this conversation's saved history was pruned, and what is left does not show how many questions came before it.";

/** The tool's arguments, as the model supplies them. */
export interface InspectArgs {
  key: string;
  turn?: number | null;
  pattern?: string | null;
  path?: string | null;
}

/** What an Inspector reads turns through; ThreadHistory is one. */
export interface TurnReader {
  snapshot(threadId: string, turn: number, opts?: ReadOpts): Promise<Snapshot>;
}

/** A session-state entry as a host holds it: at least its value. */
export type StoredEntry = Pick<Entry, "value"> & Partial<Omit<Entry, "value">>;

/** Returns a thread's live session state, key → entry. */
export type PresentFn = (threadId: string) => Record<string, StoredEntry> | Promise<Record<string, StoredEntry>>;

export interface InspectorOptions {
  /** Answers turn reads, and reads of the present when `present` is not set. None: no history. */
  history?: TurnReader;
  /** The live state, for a host holding fresher state than its newest checkpoint. */
  present?: PresentFn;
  /** Keys some tool declares it publishes: a present read of one not stored yet says to run that tool. */
  declaredKeys?: string[];
  /**
   * The state channel read ("" or unset: the history's own), such as
   * deepagents' "files": the host's choice, not the model's, so the tool has
   * no argument for it.
   */
  channel?: string;
  maxValueChars?: number;
  maxMatches?: number;
  maxLineChars?: number;
  /** Gets what the host's author must fix, such as a call without a thread id. Default: console.warn. */
  log?: (message: string) => void;
}

/** A read of the present with no way to see it; a host misconfiguration, not something to tell the model. */
export class NoStateError extends Error {
  constructor() {
    super("inspect: no source of current session state: set present, or history with a thread id");
    this.name = "NoStateError";
  }
}

// Values after prepare: JSON data whose objects are Maps in key order.
type Prepared = null | boolean | number | bigint | string | Prepared[] | PMap;
type PMap = Map<string, Prepared>;

/** Answers inspect_state reads, as Go's inspect.Inspector does. */
export class Inspector {
  readonly history?: TurnReader;
  readonly present?: PresentFn;
  readonly declaredKeys: string[];
  readonly channel: string;
  readonly maxValueChars: number;
  readonly maxMatches: number;
  readonly maxLineChars: number;
  readonly log: (message: string) => void;

  constructor(o: InspectorOptions = {}) {
    if ((o.history as { valueFormat?: unknown } | undefined)?.valueFormat === "raw") {
      // Entries would come without their value, which every answer reads.
      throw new TypeError(`inspect: the history's valueFormat is "raw", which leaves values unparsed; inspect_state reads them: use "json" (the default) or "proto"`);
    }
    this.history = o.history;
    this.present = o.present;
    this.declaredKeys = [...(o.declaredKeys ?? [])];
    this.channel = o.channel ?? "";
    this.maxValueChars = positive(o.maxValueChars, DEFAULT_MAX_VALUE_CHARS);
    this.maxMatches = positive(o.maxMatches, DEFAULT_MAX_MATCHES);
    this.maxLineChars = positive(o.maxLineChars, DEFAULT_MAX_LINE_CHARS);
    this.log = o.log ?? ((message) => console.warn(message));
  }

  /**
   * The answer to one inspect_state call, for the model. Misses are answers;
   * failures (history unreachable, NoStateError) are thrown for the host.
   */
  async read(threadId: string, args: InspectArgs): Promise<string> {
    let key = args.key.startsWith(HANDLE_PREFIX) ? args.key.slice(HANDLE_PREFIX.length) : args.key;
    if (key === "") key = ALL_KEYS;
    const project = key === ALL_KEYS ? undefined : [key];
    const pattern = args.pattern ?? "";
    const path = args.path ?? "";
    if (args.turn !== undefined && args.turn !== null) return this.#readAt(threadId, key, args.turn, project, pattern, path);
    if (!this.present && this.history && threadId === "") return this.#noThread(undefined);
    let [state, newest] = await this.#present(threadId, project);
    if (newest > 0 && project && !populated(state, key)) {
      // The projection came back without the key; the listing the miss
      // answers with needs every key of the same turn.
      const full = await this.history!.snapshot(threadId, newest, this.#opts());
      if (full.outcome !== "found") throw changed(threadId);
      state = full.state;
    }
    return this.#render(key, state, undefined, "", pattern, path);
  }

  /** The answer to a read the host gave no thread id for, logged for the host's author. */
  #noThread(turn: number | undefined): string {
    this.log(
      "inspect_state: called without a thread id, so the history cannot be read; the host must pass the conversation's thread id to Inspector.read (LangChain.js: the run's configurable.thread_id)",
    );
    const out = new Map<string, unknown>([["no_thread_id", true]]);
    if (turn !== undefined) out.set("turn", turn);
    out.set("reason", NO_THREAD_REASON);
    return dumps(out);
  }

  /** The read options of every history read, projected to keys when given. */
  #opts(keys?: string[]): ReadOpts {
    const o: ReadOpts = {};
    if (keys) o.keys = keys;
    if (this.channel !== "") o.channel = this.channel;
    return o;
  }

  /** What a turn read adds about the turn itself, as Go's Inspector.turnNote, or "". */
  #turnNote(turn: number, snap: Snapshot): string {
    const parts: string[] = [];
    if (snap.outcome === "found" && snap.answeredWith && snap.answeredWith.length > 0) {
      const together = [...snap.answeredWith, turn].sort((a, b) => a - b);
      parts.push(`Turns ${and(together)} were asked in one message and answered by one run, so each of them shows the state that run ended on.`);
    }
    if (snap.numbering === "estimated") {
      parts.push(ESTIMATED_NUMBERS);
      if (snap.outcome === "found" && snap.question !== "") {
        parts.push(`Turn ${turn} is the question ${dumps(excerpt(snap.question, -1, 0, this.maxLineChars))}.`);
      }
    }
    return parts.join(" ");
  }

  async #readAt(threadId: string, key: string, turn: number, project: string[] | undefined, pattern: string, path: string): Promise<string> {
    if (this.history && threadId === "") return this.#noThread(turn);
    if (!this.history) {
      return dumps(
        new Map<string, unknown>([
          ["no_turn_history", turn],
          ["reason", "This deployment keeps no per-turn history, so only the current value of a key can be read. Call again without turn."],
        ]),
      );
    }
    // A turn no request can carry (negative, past 2^31-1) is asked as turn
    // 0, which no thread has: the model's miscount is answered as one, with
    // the total, not refused.
    const asked = turn >= 0 && turn <= 2 ** 31 - 1 ? turn : 0;
    let snap = await this.history.snapshot(threadId, asked, this.#opts(project));
    if (snap.outcome === "found" && key !== ALL_KEYS && !populated(snap.state, key)) {
      snap = await this.history.snapshot(threadId, asked, this.#opts());
    }
    const note = this.#turnNote(turn, snap);
    switch (snap.outcome) {
      case "found":
        return this.#render(key, snap.state, turn, note, pattern, path);
      case "no_such_turn": {
        const reason =
          snap.total === 0
            ? "Turns are the user's questions, counted from 1; this conversation has had none yet."
            : `Turns are the user's questions, counted from 1; this conversation has had ${snap.total} so far.`;
        return dumps(noted(new Map<string, unknown>([["no_such_turn", turn], ["turns_so_far", snap.total], ["reason", reason]]), note));
      }
      case "no_longer_retained": {
        const out = new Map<string, unknown>([["turn_no_longer_retained", turn]]);
        if (snap.question) out.set("question", snap.question);
        out.set("retained_turns", [...snap.retained]);
        out.set(
          "reason",
          "That turn happened, but its state has since been pruned and cannot be read. Say that the value it held is no longer available; do not answer from the current value, which may be a different one.",
        );
        return dumps(noted(out, note));
      }
    }
    throw new HistorydError("inspect", threadId, Code.Internal, `snapshot of turn ${turn} has no outcome`);
  }

  async #present(threadId: string, keys: string[] | undefined): Promise<[Record<string, StoredEntry>, number]> {
    if (this.present) return [(await this.present(threadId)) ?? {}, 0];
    if (!this.history || threadId === "") throw new NoStateError();
    const snap = await current(this.history, threadId, this.#opts(keys));
    if (snap.outcome === "found") return [snap.state, snap.turn];
    if (snap.outcome === "no_such_turn") return [{}, 0]; // no turns yet: nothing stored
    throw changed(threadId);
  }

  #render(key: string, stored: Record<string, StoredEntry>, asOf: number | undefined, turnNote: string, pattern: string, path: string): string {
    // The model reads values, not the bookkeeping around them; a key whose
    // value is null holds nothing to read.
    const values: PMap = new Map();
    for (const k of sortedKeys(stored)) {
      const v = valueOf(stored[k]);
      if (v !== null && v !== undefined) values.set(k, prepare(v));
    }

    if (key === ALL_KEYS) {
      if (path !== "") return dumps(noted(listing(values, stored, asOf, "path needs a specific key"), turnNote));
      if (pattern !== "") {
        const where = asOf === undefined ? "all keys" : `all keys at the end of turn ${asOf}`;
        const every = function* (): Generator<[string, Prepared]> {
          for (const [k, v] of values) yield* walk(v, pathKey(k));
        };
        const out = this.#grep(pattern, where, values, every());
        return turnNote !== "" ? `${out}\n[${turnNote}]` : out;
      }
      return dumps(noted(listing(values, stored, asOf), turnNote));
    }

    if (!values.has(key)) {
      const miss = new Map<string, unknown>([["unknown_or_empty_key", key]]);
      if (asOf !== undefined) miss.set("at_turn", asOf);
      miss.set("available_keys", summaries(values, stored));
      if (asOf !== undefined) {
        // Absent then is not absent now: the key may have been written
        // later, and advice to produce it would have the model refill a key
        // that is already full.
        miss.set(
          "reason",
          `Nothing was stored under this key at the end of turn ${asOf}. A later turn may have written it; read it without turn for its current value.`,
        );
      } else if (this.declaredKeys.includes(key)) {
        miss.set("hint", "A tool declares this key but has not published it in this conversation yet. Run the tool that produces it, then read it again.");
      }
      return dumps(noted(miss, turnNote));
    }

    let target: Prepared = values.get(key)!;
    let sub = "";
    if (path !== "") {
      sub = stripKey(path, key);
      if (sub !== "") {
        const [segs, bad] = parsePath(sub);
        if (bad !== "") {
          return dumps(
            noted(
              pathMiss(path, key, asOf, bad, {
                reason: 'The path cannot be read from here on. Write object keys as name or ["quoted name"] and array items as [index], joined by dots.',
              }),
              turnNote,
            ),
          );
        }
        const [found, failed, ok] = resolve(target, segs);
        if (!ok) return dumps(noted(describeMiss(path, key, asOf, failed, found), turnNote));
        target = found;
      }
    }

    const where = sub !== "" ? join(key, sub) : key;
    let note = "";
    const written = writtenInTurns(stored[key]);
    if (asOf !== undefined) {
      // Not the "newest" note: the value above is not the newest, and the
      // count an old entry carries is the count as of that turn.
      note = `\n[This is ${where} as it stood at the end of turn ${asOf}.${turnNote !== "" ? " " + turnNote : ""}]`;
    } else if (written > 1) {
      note = `\n[${written} turns of this conversation wrote this key; the value above is the newest, and an earlier turn may have held a different one. Pass turn=<n> (the user's questions, counted from 1) to read the value a turn ended with.]`;
    }

    if (pattern !== "") return this.#grep(pattern, where, target, walk(target, sub)) + note;
    const text = dumps(target);
    const n = chars(text);
    if (n > this.maxValueChars) return dumps(outline(where, target, n)) + note;
    return text + note;
  }

  /** Flattened leaves matching pattern: a header, then one "path = value" line per match. */
  #grep(pattern: string, where: string, v: Prepared, leaves: Iterable<[string, Prepared]>): string {
    const [re, literal] = compile(pattern);
    const note = literal ? " (not a valid regular expression, so matched as plain text)" : "";
    const lines: string[] = [];
    let scanned = 0;
    let matches = 0;
    for (const [p, value] of leaves) {
      scanned++;
      const rendered = dumps(value);
      const line = p + " = " + rendered;
      const m = re.matcher(line);
      if (!m.find()) continue;
      matches++;
      if (lines.length >= this.maxMatches) continue;
      // re2js reports UTF-16 offsets; the excerpt is placed by characters.
      const off = chars(p) + 3;
      let start = chars(line.slice(0, m.start())) - off;
      const end = chars(line.slice(0, m.end())) - off;
      if (start < 0) start = -1; // the match is in the path; show the value from its start
      lines.push(p + " = " + excerpt(rendered, start, end, this.maxLineChars));
    }
    if (matches === 0) {
      return `No match for ${goQuote(pattern)} in ${where} (${scanned} values searched)${note}. Its structure: ${structure(v)}`;
    }
    let header = `${matches} ${matches === 1 ? "match" : "matches"} for ${goQuote(pattern)} in ${where}`;
    if (matches > lines.length) header += ` (first ${lines.length} shown)`;
    return header + note + ":\n" + lines.join("\n");
  }
}

/**
 * The thread's current state, as Go's client.Current reads it: turn 0, whose
 * no_such_turn answer carries the total, then the total. A thread with no
 * turns answers no_such_turn with turn and total 0.
 */
export async function current(history: TurnReader, threadId: string, opts: ReadOpts = {}): Promise<Snapshot> {
  const probe = await history.snapshot(threadId, 0, opts);
  if (probe.total === 0) return probe;
  return history.snapshot(threadId, probe.total, opts);
}

/** Numbers as prose: "2 and 3", "2, 3 and 4". */
function and(ns: number[]): string {
  const words = ns.map(String);
  if (words.length < 2) return words.join("");
  return `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`;
}

/** answer with its "note" field last, as Go's answers end with it, when there is one. */
function noted(answer: Map<string, unknown>, note: string): Map<string, unknown> {
  if (note !== "") answer.set("note", note);
  return answer;
}

function positive(v: number | undefined, def: number): number {
  return v !== undefined && v > 0 ? v : def;
}

function changed(threadId: string): HistorydError {
  return new HistorydError("inspect", threadId, Code.Aborted, `inspect: thread ${goQuote(threadId)} changed while its current state was read`);
}

function valueOf(e: StoredEntry | unknown): unknown {
  return e !== null && typeof e === "object" && !Array.isArray(e) && "value" in (e as object) ? (e as StoredEntry).value : e;
}

function populated(state: Record<string, StoredEntry>, key: string): boolean {
  return Object.hasOwn(state, key) && valueOf(state[key]) !== null && valueOf(state[key]) !== undefined;
}

function writtenInTurns(e: StoredEntry | undefined): number {
  const n = e && typeof e === "object" ? (e as StoredEntry).turnsWritten : undefined;
  return typeof n === "number" ? Math.max(n, 1) : 1;
}

function listing(values: PMap, stored: Record<string, StoredEntry>, asOf: number | undefined, error?: string): Map<string, unknown> {
  const out = new Map<string, unknown>();
  if (error) out.set("error", error);
  if (asOf !== undefined) out.set("at_turn", asOf);
  out.set("available_keys", summaries(values, stored));
  return out;
}

function summaries(values: PMap, stored: Record<string, StoredEntry>): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, v] of values) {
    let s = shape(v);
    const n = writtenInTurns(stored[k]);
    if (n > 1) s += `; written in ${n} turns`;
    out.set(k, s);
  }
  return out;
}

function pathMiss(path: string, key: string, asOf: number | undefined, failedAt: string, rest: { found?: string; availableKeys?: string[]; reason?: string }): Map<string, unknown> {
  const out = new Map<string, unknown>([
    ["path_not_found", path],
    ["key", key],
  ]);
  if (asOf !== undefined) out.set("at_turn", asOf);
  out.set("failed_at", failedAt);
  if (rest.found) out.set("found", rest.found);
  if (rest.availableKeys && rest.availableKeys.length > 0) out.set("available_keys", rest.availableKeys);
  if (rest.reason) out.set("reason", rest.reason);
  return out;
}

/** Where a path stopped and what could follow there. */
function describeMiss(path: string, key: string, asOf: number | undefined, failed: string, at: Prepared): Map<string, unknown> {
  let availableKeys: string[] | undefined;
  let reason = "";
  if (at instanceof Map) {
    let keys = [...at.keys()];
    if (keys.length === 0) reason = "The object is empty.";
    if (keys.length > OUTLINE_KEYS) keys = [...keys.slice(0, OUTLINE_KEYS), `… ${keys.length - OUTLINE_KEYS} more`];
    availableKeys = keys;
  } else if (Array.isArray(at)) {
    reason = at.length === 0 ? "The array is empty." : `Array indexes run from 0 to ${at.length - 1}.`;
  } else {
    reason = `A ${jsonType(at)} has no parts to read.`;
  }
  return pathMiss(path, key, asOf, failed, { found: shape(at), availableKeys, reason });
}

// -- values -------------------------------------------------------------------

/** v as plain JSON data, objects as Maps in key order, every data: URI a marker. */
function prepare(v: unknown): Prepared {
  if (v === null || v === undefined) return null;
  switch (typeof v) {
    case "boolean":
    case "bigint":
      return v;
    case "string":
      return v.startsWith("data:") ? dataMarker(v) : v;
    case "number":
      if (Number.isNaN(v)) return "NaN";
      if (!Number.isFinite(v)) return v > 0 ? "Infinity" : "-Infinity";
      return v;
  }
  if (Array.isArray(v)) return v.map(prepare);
  if (v instanceof Map) {
    const out: PMap = new Map();
    for (const k of [...v.keys()].map(String).sort(compareCodePoints)) out.set(k, prepare(v.get(k)));
    return out;
  }
  if (typeof v === "object") {
    if (v instanceof Date) return v.toISOString();
    const o = v as Record<string, unknown>;
    const out: PMap = new Map();
    for (const k of sortedKeys(o)) if (o[k] !== undefined) out.set(k, prepare(o[k]));
    return out;
  }
  return String(v);
}

/** The stand-in for a data: URI: its media type and payload size in bytes. */
function dataMarker(uri: string): string {
  const body = uri.slice("data:".length);
  const comma = body.indexOf(",");
  let header = comma < 0 ? "" : body.slice(0, comma);
  const payload = comma < 0 ? body : body.slice(comma + 1);
  let size = Buffer.byteLength(payload, "utf8");
  if (header.toLowerCase().endsWith(";base64")) size = Math.floor((Buffer.byteLength(payload.replace(/=+$/, ""), "utf8") * 3) / 4);
  if (chars(header) > MARKER_HEADER_CHARS) header = Array.from(header).slice(0, MARKER_HEADER_CHARS).join("") + "…";
  return `<data:${header}, ${size} bytes>`;
}

function isMarker(s: string): boolean {
  return s.startsWith("<data:") && s.endsWith(" bytes>") && chars(s) <= MARKER_HEADER_CHARS + 40;
}

function jsonType(v: Prepared): string {
  if (v === null) return "null";
  if (typeof v === "boolean") return "boolean";
  if (typeof v === "number" || typeof v === "bigint") return "number";
  if (typeof v === "string") return "string";
  if (Array.isArray(v)) return "array";
  return "object";
}

/** v's structure in one line. */
function shape(v: Prepared): string {
  if (v instanceof Map) {
    if (v.size === 0) return "object(empty)";
    const keys = [...v.keys()];
    let shown = keys.slice(0, SHAPE_KEYS).join(", ");
    if (keys.length > SHAPE_KEYS) shown += ", …";
    return `object(${keys.length} keys: ${shown})`;
  }
  if (Array.isArray(v)) return v.length === 0 ? "array[0]" : `array[${v.length}] of ${shape(v[0])}`;
  if (typeof v === "string") {
    const n = chars(v);
    if (n > SHAPE_STRING_CHARS && !isMarker(v)) return `string(${n} chars)`;
  }
  return dumps(v);
}

/** The top level of v, for a search that matched nothing. */
function structure(v: Prepared): string {
  if (!(v instanceof Map) || v.size === 0) return shape(v);
  return [...v].map(([k, x]) => `${k}: ${shape(x)}`).join(", ");
}

function outline(where: string, v: Prepared, size: number): Map<string, unknown> {
  const out = new Map<string, unknown>([
    ["key", where],
    ["size_chars", size],
    ["type", jsonType(v)],
  ]);
  if (Array.isArray(v)) {
    const a = new Map<string, unknown>([
      ["length", v.length],
      ["items", "empty"],
    ]);
    if (v.length > 0) {
      a.set("items", shape(v[0]));
      let first: Prepared = v[0];
      if (chars(dumps(first)) > OUTLINE_FIRST_CHARS) first = shape(first);
      if (first !== null) a.set("first", first); // Go's omitempty leaves a null first item out
    }
    out.set("outline", a);
  } else if (v instanceof Map) {
    const keys = [...v.keys()];
    const fields: Record<string, string> = {}; // a Go map: written with its keys sorted
    for (const k of keys.slice(0, OUTLINE_KEYS)) fields[k] = shape(v.get(k)!);
    if (keys.length > OUTLINE_KEYS) fields["…"] = `${keys.length - OUTLINE_KEYS} more keys not shown; pattern=<regex> finds them`;
    out.set("outline", fields);
  } else {
    out.set("outline", shape(v));
  }
  out.set("hint", "Too large to return whole. Pass pattern=<regex> to search it, or path=<path> (e.g. a.b[0].c) to read one part.");
  return out;
}

// -- paths --------------------------------------------------------------------

const WORD = /^[\p{L}\p{Nd}\p{Mn}_-]+$/u;

/** One object key as a path segment: bare when a word, else bracketed and quoted. */
function pathKey(k: string): string {
  return WORD.test(k) ? k : "[" + dumps(k) + "]";
}

function join(prefix: string, segment: string): string {
  if (prefix === "") return segment;
  if (segment.startsWith("[")) return prefix + segment;
  return prefix + "." + segment;
}

/** Leaves of v depth first, objects in key order; empty containers are leaves; a root scalar's path is ".". */
function* walk(v: Prepared, prefix: string): Generator<[string, Prepared]> {
  if (v instanceof Map && v.size > 0) {
    for (const [k, x] of v) yield* walk(x, join(prefix, pathKey(k)));
    return;
  }
  if (Array.isArray(v) && v.length > 0) {
    for (let i = 0; i < v.length; i++) yield* walk(v[i], `${prefix}[${i}]`);
    return;
  }
  yield [prefix === "" ? "." : prefix, v];
}

type Segment = { text: string; index: boolean };

/** path as segments, and the unparsable rest when it is malformed. */
function parsePath(path: string): [Segment[], string] {
  const segs: Segment[] = [];
  let i = 0;
  while (i < path.length) {
    const c = path[i];
    if (c === ".") {
      i++;
    } else if (c === "[") {
      const rest = path.slice(i + 1);
      const j = rest.indexOf("]");
      if (j > 0 && isDigits(rest.slice(0, j))) {
        segs.push({ text: rest.slice(0, j), index: true });
        i += j + 2;
        continue;
      }
      if (rest.startsWith('"')) {
        const parsed = leadingJSONString(rest);
        if (parsed && rest.slice(parsed[1]).startsWith("]")) {
          segs.push({ text: parsed[0], index: false });
          i += 1 + parsed[1] + 1;
          continue;
        }
      }
      return [segs, path.slice(i)];
    } else if (c === "]") {
      return [segs, path.slice(i)];
    } else {
      let j = i;
      while (j < path.length && !".[]".includes(path[j])) j++;
      segs.push({ text: path.slice(i, j), index: false });
      i = j;
    }
  }
  return [segs, ""];
}

/** The JSON string at the start of text and its length, as Go's decoder reads one. */
function leadingJSONString(text: string): [string, number] | undefined {
  // A JSON string ends at the first quote not escaped by a backslash.
  let i = 1;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\") i += 2;
    else if (c === '"') break;
    else i++;
  }
  if (i >= text.length) return undefined;
  try {
    const s = JSON.parse(text.slice(0, i + 1));
    return typeof s === "string" ? [s, i + 1] : undefined;
  } catch {
    return undefined;
  }
}

function isDigits(s: string): boolean {
  return /^[0-9]+$/.test(s);
}

function resolve(v: Prepared, segs: Segment[]): [Prepared, string, boolean] {
  let cur = v;
  for (const s of segs) {
    if (Array.isArray(cur)) {
      if (isDigits(s.text)) {
        const i = Number(s.text);
        if (Number.isSafeInteger(i) && i < cur.length) {
          cur = cur[i];
          continue;
        }
      }
    } else if (cur instanceof Map) {
      if (cur.has(s.text)) {
        cur = cur.get(s.text)!;
        continue;
      }
    }
    return [cur, s.text, false];
  }
  return [cur, "", true];
}

function stripKey(path: string, key: string): string {
  path = path.replace(/^\.+/, "");
  if (path === key) return "";
  if (path.startsWith(key + ".")) return path.slice(key.length + 1);
  if (path.startsWith(key + "[")) return path.slice(key.length);
  return path;
}

// -- text ---------------------------------------------------------------------

/** pattern as a case-insensitive RE2 expression, or, when it does not compile, its literal text. */
function compile(pattern: string): [ReturnType<typeof RE2JS.compile>, boolean] {
  try {
    return [RE2JS.compile("(?i)" + pattern), false];
  } catch {
    return [RE2JS.compile("(?i)" + RE2JS.quote(pattern)), true];
  }
}

/** text capped at limit characters, centred on a match (character offsets; start -1 for none). */
function excerpt(text: string, start: number, end: number, limit: number): string {
  const n = chars(text);
  if (n <= limit) return text;
  const r = Array.from(text);
  if (start < 0) return r.slice(0, limit).join("") + `…(+${n - limit} chars)`;
  let from = start - Math.floor(Math.max(0, limit - (end - start)) / 2);
  from = Math.max(0, Math.min(from, n - limit));
  const to = from + limit;
  return (from > 0 ? "…" : "") + r.slice(from, to).join("") + (to < n ? "…" : "");
}

// ThreadHistory: historyd.v1.ThreadHistory over gRPC, with the Go client's
// behaviour and defaults.

import type { SecureContextOptions } from "node:tls";

import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, timestampDate, timestampFromDate, type Value } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type CallOptions, type Client, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import {
  KeyChangeKind,
  ThreadHistory as ThreadHistoryService,
  ThreadsOrder,
  type DiffTurn as WireDiffTurn,
  TurnNumbering,
  ValueFormat as WireValueFormat,
  type StateEntry,
  type TurnState as WireTurnState,
} from "./gen/historyd/v1/history_pb.js";
import { traceContextInterceptor } from "./tracing.js";
import { hostPort, mismatch } from "./transport.js";

/**
 * How state values travel from historyd, and what an Entry holds:
 *
 * - "json", the default: historyd sends each value as JSON text
 *   (StateEntry.value_json), written on the server straight from the stored
 *   bytes, which the client reads with JSON.parse. Several times cheaper for
 *   both sides than a google.protobuf.Value tree, and the same values.
 * - "proto": historyd sends each value as a google.protobuf.Value
 *   (StateEntry.value), as servers that predate value_json do.
 * - "raw": JSON text on the wire, left unparsed: each Entry's `value` is
 *   null and `json` holds the text, as historyd sent it (keys in stored
 *   order). For a host that hands values on as text or parses them itself;
 *   the cheapest way to read a large state.
 */
export type ValueFormat = "json" | "proto" | "raw";

const VALUE_FORMATS: readonly ValueFormat[] = ["json", "proto", "raw"];

/**
 * The defaults of every historyd client (Go, Python, TypeScript), as
 * client/testdata/defaults.json records them.
 */
export const DEFAULTS = Object.freeze({
  /** Each call's deadline, retries and backoff included (a stream's as a whole). */
  timeoutMs: 10_000,
  /** How many times a call that failed with UNAVAILABLE is tried again. */
  retries: 3,
  /** The wait before the first retry; each later one waits twice as long. */
  backoffMs: 100,
  /** The longest single wait between two tries. */
  maxBackoffMs: 2_000,
  /** Each wait is spread by up to this fraction either way. */
  backoffJitter: 0.2,
  /** The largest response accepted: historyd's default --max-response-bytes. */
  maxReceiveBytes: 64 * 1024 * 1024,
  /** How values travel (ValueFormat). */
  valueFormat: "json" as ValueFormat,
});

/**
 * The trailer with which historyd ends a stream the client is to make again
 * from where it got to (the stream reached the server's maximum age, or a
 * reload of its token file changed what the call reads), with UNAVAILABLE:
 * it is resumed at once and counts as no failure.
 */
export const RESUME_TRAILER = "historyd-resume";

/**
 * The largest turn number the API can carry: turn fields are int32 on the
 * wire (so that JSON carries them as numbers), and the server refuses a
 * larger value INVALID_ARGUMENT rather than truncate it.
 */
const MAX_TURN = 2 ** 31 - 1;

/**
 * The turn number `n` a request carries in `field`, checked before
 * anything is sent: a whole number from 0 (the field's default; for
 * snapshot, a turn no thread has) to MAX_TURN, else a TypeError or
 * RangeError naming the field, never some other number on the wire.
 */
function wireTurn(field: string, n: number | undefined): number {
  if (n === undefined) return 0;
  if (!Number.isInteger(n)) throw new TypeError(`historyd: ${field} must be a whole number, not ${n}`);
  if (n < 0 || n > MAX_TURN) {
    throw new RangeError(`historyd: ${field} ${n}: must be 0 to ${MAX_TURN} (turn numbers count from 1, 0 is the field's default; the wire carries them as int32)`);
  }
  return n;
}

/** How a ThreadHistory connects and calls. */
export interface ThreadHistoryOptions {
  /**
   * Connect without transport security. The default is TLS verified against
   * the system roots (or `tls`); plaintext is for local development, or a
   * trusted proxy or mesh that provides transport security. A token is sent
   * over plaintext only because this says so, as in the Go client.
   */
  plaintext?: boolean;
  /** TLS settings, such as a private CA (`ca`) or a client certificate (`cert`, `key`). */
  tls?: SecureContextOptions & { servername?: string };
  /** Sent on every call as `authorization: Bearer <token>`; a function is called per call (rotating tokens). */
  token?: string | (() => string | Promise<string>);
  /** Each call's deadline in ms, retries and backoff included, a stream's as a whole; 0 for none. */
  timeoutMs?: number;
  /** How many times a call that failed with UNAVAILABLE is tried again; 0 disables retries. */
  retries?: number;
  /** The wait before the first retry in ms; each later one waits twice as long (±20%, at most 2 s). */
  backoffMs?: number;
  /** The checkpoint namespace read; "" (the default) is the root graph. */
  namespace?: string;
  /**
   * The state channel read; "" (the default) is the server's default, the
   * first of its --state-channels. E.g. deepagents' "files" or "todos". A
   * channel the server does not serve fails with INVALID_ARGUMENT naming the
   * ones it does. Each read may name its own (ReadOpts.channel).
   */
  channel?: string;
  /** The largest response accepted, in bytes. */
  maxReceiveBytes?: number;
  /**
   * How values travel: "json" (the default), "proto" or "raw" (ValueFormat).
   * Each read may name its own (ReadOpts.valueFormat).
   */
  valueFormat?: ValueFormat;
  /**
   * A Connect transport to call through instead of the gRPC transport this
   * client makes (tests, a custom HTTP/2 session). `plaintext`, `tls`,
   * `maxReceiveBytes` and `traceContext` then do not apply: add
   * `traceContextInterceptor()` to its interceptors for trace context.
   */
  transport?: Transport;
  /**
   * Send the caller's OpenTelemetry trace context (W3C `traceparent`,
   * through the host's propagator) with every call when `@opentelemetry/api`
   * is installed, so that historyd's spans join the host's traces; default
   * true. Turn it off when something else already injects it.
   */
  traceContext?: boolean;
}

/** What one call may add: an abort signal and a deadline of its own. */
export interface CallOpts {
  /** Aborts the call (a stream: the rest of it). */
  signal?: AbortSignal;
  /** This call's deadline in ms, instead of the client's `timeoutMs`; 0 for none. */
  timeoutMs?: number;
}

/** A read of state: which keys, in which namespace. */
export interface ReadOpts extends CallOpts {
  /** Restricts each turn's state to these keys; keys a turn does not hold are absent. */
  keys?: string[];
  /** The checkpoint namespace, instead of the client's. */
  namespace?: string;
  /** The state channel, instead of the client's. */
  channel?: string;
  /** How values travel, instead of the client's (ValueFormat). */
  valueFormat?: ValueFormat;
}

/**
 * How sure a thread's turn numbers are, which depends on what the
 * checkpointer still retains: "complete" (the first checkpoint is retained:
 * exact), "counted" (the oldest were pruned, and the questions before the
 * oldest one left were counted from its messages: exact unless messages were
 * removed before it without a trace), "estimated" (no checkpoint left shows
 * how many questions came before: numbers may be too low; a turn's question
 * says which one it was), or "unspecified" (a server older than the field).
 */
export type Numbering = "complete" | "counted" | "estimated" | "unspecified";

/** One session-state key's entry: the published value and the bookkeeping the host recorded with it. */
export interface Entry {
  /**
   * The published value, as plain JSON (history.proto's StateEntry documents
   * the mapping); null with valueFormat "raw", which leaves it in `json`.
   */
  value: JsonValue;
  /**
   * With valueFormat "raw" only: the value's JSON text, as historyd sent it
   * (or, from a server that sent a google.protobuf.Value, as JSON.stringify
   * writes it).
   */
  json?: string;
  /** The tool that wrote the value, when recorded. */
  tool?: string;
  /** The entry's write order within the thread, when recorded. */
  seq?: number;
  /** The turn of the key's last write, when recorded. */
  turn?: number;
  /** How many turns have written the key, as of this state, when recorded. */
  turnsWritten?: number;
  /** Each parameter of the producing call → the state key it was read from, or "model". */
  inputs: Record<string, string>;
  /** Every other field the host stored in the entry, unchanged. */
  extra?: JsonObject;
}

/** A thread's session state at the end of one retained turn. */
export interface TurnState {
  /** The turn number, counted from 1. */
  turn: number;
  /** The checkpoint the turn ended on. */
  checkpointId: string;
  /** The text of the user's message that opened the turn. */
  question: string;
  /** When the turn's last checkpoint was written, when known. */
  endedAt?: Date;
  /** Each session-state key's entry as the turn ended. */
  state: Record<string, Entry>;
  /**
   * The other turns whose questions came in the same input as this one's and
   * were answered by the same run, whose end state this one shares,
   * ascending; empty for a turn asked on its own. Always set by
   * ThreadHistory (optional so that other TurnReaders need not).
   */
  answeredWith?: number[];
  /** How sure the thread's turn numbers were when this turn was read. Always set by ThreadHistory. */
  numbering?: Numbering;
}

interface SnapshotCommon {
  /** The turn that was asked for. */
  turn: number;
  /** How many turns the thread has had. */
  total: number;
  /** The turns whose state can still be read, ascending. */
  retained: number[];
  /**
   * How sure the thread's turn numbers are: with "estimated", `turn` may name
   * a later question than the caller counted. Always set by ThreadHistory.
   */
  numbering?: Numbering;
}

/** The turn is retained: its state. */
export interface Found extends SnapshotCommon, TurnState {
  outcome: "found";
}

/** The thread never had the turn (below 1, or past the total). Nothing was lost. */
export interface NoSuchTurn extends SnapshotCommon {
  outcome: "no_such_turn";
}

/** The turn happened, but none of its checkpoints are retained any more. */
export interface NoLongerRetained extends SnapshotCommon {
  outcome: "no_longer_retained";
  /** The turn's question, when the thread's newest messages still hold it (else ""). */
  question: string;
}

/**
 * The answer for one turn: exactly one of the three, told apart by
 * `outcome`. Only a Found has state, so a missing turn can never pass for a
 * found one, nor carry another turn's state.
 */
export type Snapshot = Found | NoSuchTurn | NoLongerRetained;

/** Every retained turn of a thread, and how many turns it has had. */
export interface History {
  /** How many turns the thread has had, retained or not. */
  total: number;
  /** The retained turns, ascending. */
  turns: TurnState[];
  /** How sure the turn numbers are. Always set by ThreadHistory. */
  numbering?: Numbering;
}

/** One turn without its state. */
export interface TurnInfo {
  turn: number;
  question: string;
  retained: boolean;
  /** The checkpoint the turn ended on; "" when not retained. */
  checkpointId: string;
  endedAt?: Date;
  /** The keys whose last write was in this turn, sorted; only with `includeKeysWritten`. */
  keysWritten: string[];
  /** The other turns whose questions came in the same input as this one's, ascending. Always set by ThreadHistory. */
  answeredWith?: number[];
}

/** Turns 1..total of a thread, and how sure their numbers are. */
export interface TurnIndex {
  total: number;
  turns: TurnInfo[];
  /** Always set by ThreadHistory. */
  numbering?: Numbering;
}

/** One listed thread, without its turns. */
export interface ThreadInfo {
  threadId: string;
  /** How many checkpoints it has in the namespace. */
  checkpoints: number;
  /** When its oldest and newest checkpoints were written, when known. */
  firstCheckpointAt?: Date;
  lastCheckpointAt?: Date;
  lastCheckpointId: string;
  /** How many turns it has had; only with `includeTurns`. */
  totalTurns?: number;
  /**
   * Why the thread could not be read in full (a value of its own that does
   * not decode, say): the error a call reading it alone would throw. The
   * fields it kept from being read are absent; the page's other threads are
   * unaffected.
   */
  error?: HistorydError;
}

/** One page of `threads`. */
export interface ThreadsPage {
  threads: ThreadInfo[];
  /** Continues the listing (pass it as `pageToken`); "" when it is complete. A page may hold fewer threads than asked for, even none, and still have one. */
  nextPageToken: string;
}

/** What `threads` lists. */
export interface ThreadsOpts extends CallOpts {
  /** Only thread ids starting with this. */
  prefix?: string;
  namespace?: string;
  /** Threads per page: 0 (the default) is the server's, 100. */
  pageSize?: number;
  pageToken?: string;
  /** By last activity, newest first (the server refuses that past 10,000 threads under the prefix), instead of by thread id. */
  newestFirst?: boolean;
  /** Only threads whose last checkpoint was written after (before) this. */
  activeAfter?: Date;
  activeBefore?: Date;
  /** Each thread's number of turns; costs the server a derivation per thread. */
  includeTurns?: boolean;
}

/** One end of a diff: a turn and what became of it. */
export interface DiffTurn {
  turn: number;
  outcome: "found" | "no_such_turn" | "no_longer_retained";
  question?: string;
  /** The checkpoint the turn ended on, and when (found only). */
  checkpointId?: string;
  endedAt?: Date;
}

/** An RFC 6902 JSON Patch operation: `value` for every op but remove. */
export type PatchOp = { op: "remove"; path: string } | { op: "add" | "replace"; path: string; value: JsonValue };

/** What became of one key between two turns. */
export interface KeyChange {
  key: string;
  change: "added" | "removed" | "changed" | "unchanged";
  /** Its entries at the two turns' ends, where it is present. */
  before?: Entry;
  after?: Entry;
  /** The JSON Patch from before's value to after's (changed only; empty when only the bookkeeping changed). */
  patch: PatchOp[];
}

/** What changed between the ends of two turns; `changes` is empty unless both ends were found. */
export interface Diff {
  from: DiffTurn;
  to: DiffTurn;
  changes: KeyChange[];
  total: number;
  retained: number[];
  /** How sure the turn numbers are. */
  numbering?: Numbering;
}

const CHANGE_KINDS: Record<number, KeyChange["change"]> = {
  [KeyChangeKind.ADDED]: "added",
  [KeyChangeKind.REMOVED]: "removed",
  [KeyChangeKind.CHANGED]: "changed",
  [KeyChangeKind.UNCHANGED]: "unchanged",
};

/** The gRPC code names, as the other clients and grpcurl spell them. */
const CODE_NAMES: Record<number, string> = {
  [Code.Canceled]: "CANCELLED",
  [Code.Unknown]: "UNKNOWN",
  [Code.InvalidArgument]: "INVALID_ARGUMENT",
  [Code.DeadlineExceeded]: "DEADLINE_EXCEEDED",
  [Code.NotFound]: "NOT_FOUND",
  [Code.AlreadyExists]: "ALREADY_EXISTS",
  [Code.PermissionDenied]: "PERMISSION_DENIED",
  [Code.ResourceExhausted]: "RESOURCE_EXHAUSTED",
  [Code.FailedPrecondition]: "FAILED_PRECONDITION",
  [Code.Aborted]: "ABORTED",
  [Code.OutOfRange]: "OUT_OF_RANGE",
  [Code.Unimplemented]: "UNIMPLEMENTED",
  [Code.Internal]: "INTERNAL",
  [Code.Unavailable]: "UNAVAILABLE",
  [Code.DataLoss]: "DATA_LOSS",
  [Code.Unauthenticated]: "UNAUTHENTICATED",
};

/**
 * A failed call: `code` is its gRPC status code (Connect's `Code`),
 * `codeName` its name ("UNAVAILABLE"), `details` the server's message, and
 * `cause` the ConnectError, with the server's error details.
 */
export class HistorydError extends Error {
  readonly code: Code;
  readonly codeName: string;
  readonly details: string;
  readonly method: string;
  readonly threadId: string;

  constructor(method: string, threadId: string, code: Code, details: string, cause?: unknown) {
    const name = CODE_NAMES[code] ?? `CODE_${code}`;
    super(`historyd ${method}(thread ${JSON.stringify(threadId)}): ${name}: ${details}`, { cause });
    this.name = "HistorydError";
    this.code = code;
    this.codeName = name;
    this.details = details;
    this.method = method;
    this.threadId = threadId;
  }
}

/**
 * ThreadHistory reads thread history from a historyd server over gRPC, with
 * TLS unless plaintext is asked for, a bearer token, a deadline per call, and
 * retries of UNAVAILABLE with backoff; the defaults are the Go client's
 * (DEFAULTS).
 */
export class ThreadHistory {
  readonly target: string;
  readonly namespace: string;
  readonly channel: string;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly backoffMs: number;
  readonly plaintext: boolean;
  readonly valueFormat: ValueFormat;
  readonly #rpc: Client<typeof ThreadHistoryService>;
  readonly #token: ThreadHistoryOptions["token"];
  /** The address the client's own transport dials; undefined over a transport of the caller's. */
  readonly #address: { host: string; port: number } | undefined;
  #closed = false;

  /**
   * `target` is "host:port" (or "dns:///host:port", as the other clients
   * take it). The connection is made on the first call.
   */
  constructor(target: string, options: ThreadHistoryOptions = {}) {
    if (typeof target !== "string" || target === "") {
      throw new TypeError("historyd: target must be a non-empty address, such as 'host:port'");
    }
    const o = options;
    check(o.timeoutMs === undefined || (Number.isFinite(o.timeoutMs) && o.timeoutMs >= 0), "timeoutMs must be 0 (none) or more ms", o.timeoutMs);
    check(o.retries === undefined || (Number.isInteger(o.retries) && o.retries >= 0), "retries must be a whole number 0 or more", o.retries);
    check(o.backoffMs === undefined || (Number.isFinite(o.backoffMs) && o.backoffMs >= 0), "backoffMs must be 0 or more ms", o.backoffMs);
    check(o.maxReceiveBytes === undefined || (Number.isInteger(o.maxReceiveBytes) && o.maxReceiveBytes > 0), "maxReceiveBytes must be a positive whole number", o.maxReceiveBytes);
    check(o.channel === undefined || typeof o.channel === "string", "channel must be a string", typeof o.channel);
    this.valueFormat = valueFormat(o.valueFormat ?? DEFAULTS.valueFormat);
    check(o.token === undefined || typeof o.token === "function" || (typeof o.token === "string" && o.token !== ""), "token must be a non-empty string or a function returning one", o.token === "" ? '""' : typeof o.token);
    if (o.plaintext && o.tls) throw new TypeError("historyd: plaintext and tls contradict each other");
    this.target = target;
    this.namespace = o.namespace ?? "";
    this.channel = o.channel ?? "";
    this.timeoutMs = o.timeoutMs ?? DEFAULTS.timeoutMs;
    this.retries = o.retries ?? DEFAULTS.retries;
    this.backoffMs = o.backoffMs ?? DEFAULTS.backoffMs;
    this.plaintext = o.plaintext === true;
    this.#token = o.token;
    this.#address = o.transport ? undefined : hostPort(target);
    const transport =
      o.transport ??
      createGrpcTransport({
        baseUrl: baseUrl(target, this.plaintext),
        readMaxBytes: o.maxReceiveBytes ?? DEFAULTS.maxReceiveBytes,
        nodeOptions: this.plaintext ? {} : { ...(o.tls ?? {}) },
        interceptors: o.traceContext === false ? [] : [traceContextInterceptor()],
      });
    this.#rpc = createClient(ThreadHistoryService, transport);
  }

  /**
   * The state at the end of one turn, or which of the two misses it is. Only
   * that turn's state is read. Turn 0, which no thread has, and a turn past
   * the total are answered NoSuchTurn with the thread's total and retained
   * turns; a negative turn, or one past 2^31-1 (int32 on the wire), is
   * refused with a RangeError before anything is sent.
   */
  async snapshot(threadId: string, turn: number, opts: ReadOpts = {}): Promise<Snapshot> {
    const asked = wireTurn("turn", turn);
    const read = this.#read("Snapshot", threadId, opts);
    const resp = await this.#unary("Snapshot", threadId, opts, (call) =>
      this.#rpc.snapshot(
        { threadId, turn: asked, checkpointNs: opts.namespace ?? this.namespace, keys: opts.keys ?? [], channel: opts.channel ?? this.channel, valueFormat: read.wire },
        call,
      ),
    );
    const common = { turn, total: resp.total, retained: [...resp.retainedTurns], numbering: fromNumbering(resp.numbering) };
    switch (resp.result.case) {
      case "state":
        return { ...fromTurnState(resp.result.value, resp.numbering, read), ...common, outcome: "found" };
      case "noSuchTurn":
        return { ...common, outcome: "no_such_turn" };
      case "noLongerRetained":
        return { ...common, outcome: "no_longer_retained", question: resp.result.value.question };
    }
    // Guessing would be the one wrong answer: an empty state reads as "the
    // key was not there", which the server never said.
    throw new HistorydError("Snapshot", threadId, Code.Internal, "response carries none of state, no_such_turn or no_longer_retained");
  }

  /** The state at the end of every retained turn, ascending, and the thread's total, in one response. */
  async snapshots(threadId: string, opts: ReadOpts = {}): Promise<History> {
    const read = this.#read("Snapshots", threadId, opts);
    const resp = await this.#unary("Snapshots", threadId, opts, (call) =>
      this.#rpc.snapshots(
        { threadId, checkpointNs: opts.namespace ?? this.namespace, keys: opts.keys ?? [], channel: opts.channel ?? this.channel, valueFormat: read.wire },
        call,
      ),
    );
    const turns = Object.entries(resp.turns).map(([n, t]) => ({ ...fromTurnState(t, resp.numbering, read), turn: Number(n) }));
    turns.sort((a, b) => a.turn - b.turn);
    return { total: resp.total, turns, numbering: fromNumbering(resp.numbering) };
  }

  /**
   * What snapshots returns, one turn at a time, ascending, read with
   * StreamSnapshots: a long history never has to fit in one response nor in
   * memory. Breaking out of the loop cancels the call. A stream cut with
   * UNAVAILABLE resumes after the last turn yielded, so no turn comes twice;
   * one the server ends at its maximum age (RESUME_TRAILER) resumes at once,
   * counting as no failure; only failures in a row count against the
   * retries, and the deadline
   * bounds the whole read. Each turn carries the numbering its message was
   * sent with.
   */
  async *streamSnapshots(threadId: string, opts: ReadOpts & { fromTurn?: number } = {}): AsyncGenerator<TurnState, void, undefined> {
    const method = "StreamSnapshots";
    let from = wireTurn("fromTurn", opts.fromTurn);
    this.#open(method, threadId);
    const read = this.#read(method, threadId, opts);
    const deadline = this.#deadline(opts);
    const stop = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
    let failures = 0;
    try {
      for (;;) {
        try {
          const call = { signal, timeoutMs: remaining(method, threadId, deadline), headers: await this.#headers() };
          const stream = this.#rpc.streamSnapshots(
            { threadId, checkpointNs: opts.namespace ?? this.namespace, keys: opts.keys ?? [], fromTurn: from, channel: opts.channel ?? this.channel, valueFormat: read.wire },
            call,
          );
          for await (const msg of stream) {
            if (!msg.turn) continue; // the one message of a thread with no retained turn
            failures = 0;
            from = Math.min(msg.turn.turn, MAX_TURN - 1) + 1;
            yield fromTurnState(msg.turn, msg.numbering, read);
          }
          return;
        } catch (err) {
          const e = err instanceof HistorydError ? err : ConnectError.from(err);
          if (e instanceof HistorydError) throw e;
          if (e.code === Code.Unavailable && e.metadata.has(RESUME_TRAILER)) continue; // not a failure: resume at once
          if (e.code !== Code.Unavailable || failures >= this.retries) throw await this.#fail(method, threadId, e, opts.signal);
        }
        failures++;
        await this.#wait(method, threadId, failures, deadline, opts.signal);
      }
    } finally {
      stop.abort(); // the consumer stopped early: end the call
    }
  }

  /**
   * Turns 1..total, retained or not, without their state: cheap enough for a
   * UI to call on every render. `channel` is the state channel
   * `includeKeysWritten` reads.
   */
  async turns(threadId: string, opts: CallOpts & { namespace?: string; channel?: string; includeKeysWritten?: boolean } = {}): Promise<TurnIndex> {
    const resp = await this.#unary("Turns", threadId, opts, (call) =>
      this.#rpc.turns(
        { threadId, checkpointNs: opts.namespace ?? this.namespace, includeKeysWritten: opts.includeKeysWritten ?? false, channel: opts.channel ?? this.channel },
        call,
      ),
    );
    return {
      total: resp.total,
      numbering: fromNumbering(resp.numbering),
      turns: resp.turns.map((t) => ({
        turn: t.number,
        question: t.question,
        retained: t.retained,
        checkpointId: t.checkpointId,
        ...(t.endedAt ? { endedAt: timestampDate(t.endedAt) } : {}),
        keysWritten: [...t.keysWritten],
        answeredWith: [...t.answeredWith],
      })),
    };
  }

  /** One page of the threads the caller may read: by thread id, or newest activity first. */
  async threads(opts: ThreadsOpts = {}): Promise<ThreadsPage> {
    const prefix = opts.prefix ?? "";
    const resp = await this.#unary("Threads", prefix, opts, (call) =>
      this.#rpc.threads(
        {
          threadIdPrefix: prefix,
          checkpointNs: opts.namespace ?? this.namespace,
          pageSize: opts.pageSize ?? 0,
          pageToken: opts.pageToken ?? "",
          order: opts.newestFirst ? ThreadsOrder.LAST_ACTIVITY : ThreadsOrder.UNSPECIFIED,
          ...(opts.activeAfter ? { lastActivityAfter: timestampFromDate(opts.activeAfter) } : {}),
          ...(opts.activeBefore ? { lastActivityBefore: timestampFromDate(opts.activeBefore) } : {}),
          includeTurns: opts.includeTurns ?? false,
        },
        call,
      ),
    );
    return {
      nextPageToken: resp.nextPageToken,
      threads: resp.threads.map((t) => ({
        threadId: t.threadId,
        checkpoints: Number(t.checkpointCount),
        ...(t.firstCheckpointAt ? { firstCheckpointAt: timestampDate(t.firstCheckpointAt) } : {}),
        ...(t.lastCheckpointAt ? { lastCheckpointAt: timestampDate(t.lastCheckpointAt) } : {}),
        lastCheckpointId: t.lastCheckpointId,
        ...(t.totalTurns !== undefined ? { totalTurns: t.totalTurns } : {}),
        ...(t.error ? { error: new HistorydError("Threads", t.threadId, t.error.code as Code, t.error.message) } : {}),
      })),
    };
  }

  /**
   * What changed in the thread's state between the ends of two turns:
   * `toTurn` 0 (the default) is the newest turn, `fromTurn` 0 the one before
   * it. Either end may be a miss, which its outcome says; nothing is
   * compared then.
   */
  async diff(threadId: string, opts: ReadOpts & { toTurn?: number; fromTurn?: number; includeUnchanged?: boolean } = {}): Promise<Diff> {
    const read = this.#read("Diff", threadId, opts);
    const req = {
      threadId,
      checkpointNs: opts.namespace ?? this.namespace,
      toTurn: wireTurn("toTurn", opts.toTurn),
      fromTurn: wireTurn("fromTurn", opts.fromTurn),
      keys: opts.keys ?? [],
      channel: opts.channel ?? this.channel,
      includeUnchanged: opts.includeUnchanged ?? false,
      valueFormat: read.wire,
    };
    const resp = await this.#unary("Diff", threadId, opts, (call) => this.#rpc.diff(req, call));
    const end = (d: WireDiffTurn | undefined): DiffTurn => {
      switch (d?.result.case) {
        case "found": {
          const f = d.result.value;
          return { turn: f.number, outcome: "found", question: f.question, checkpointId: f.checkpointId, ...(f.endedAt ? { endedAt: timestampDate(f.endedAt) } : {}) };
        }
        case "noSuchTurn":
          return { turn: d.result.value.turn, outcome: "no_such_turn" };
        case "noLongerRetained":
          return { turn: d.result.value.turn, outcome: "no_longer_retained", question: d.result.value.question };
      }
      // As for snapshot: guessing would be the one wrong answer.
      throw new HistorydError("Diff", threadId, Code.Internal, "a turn of the diff carries none of found, no_such_turn or no_longer_retained");
    };
    return {
      from: end(resp.fromTurn),
      to: end(resp.toTurn),
      total: resp.total,
      retained: [...resp.retainedTurns],
      numbering: fromNumbering(resp.numbering),
      changes: resp.changes.map((c) => {
        const change = CHANGE_KINDS[c.kind];
        if (change === undefined) throw new HistorydError("Diff", threadId, Code.Internal, `key ${JSON.stringify(c.key)}: unknown change kind ${c.kind}`);
        // Entries read as the client's value format asks; patch values are
        // always parsed, whichever form they came in.
        return {
          key: c.key,
          change,
          ...(c.fromEntry ? { before: fromEntry(c.fromEntry, read.format) } : {}),
          ...(c.toEntry ? { after: fromEntry(c.toEntry, read.format) } : {}),
          patch: c.patch.map((op): PatchOp =>
            op.op === "remove" ? { op: "remove", path: op.path ?? "" } : { op: op.op as "add" | "replace", path: op.path ?? "", value: patchValue(op) },
          ),
        };
      }),
    };
  }

  /** Stops the client: later calls fail with FAILED_PRECONDITION. Connections close when idle. */
  close(): void {
    this.#closed = true;
  }

  /** What a read asks for and how its values are read. */
  #read(method: string, threadId: string, opts: ReadOpts): ValueRead {
    const format = opts.valueFormat === undefined ? this.valueFormat : valueFormat(opts.valueFormat);
    return { method, threadId, format, wire: format === "proto" ? WireValueFormat.PROTO : WireValueFormat.JSON };
  }

  #open(method: string, threadId: string): void {
    if (this.#closed) throw new HistorydError(method, threadId, Code.FailedPrecondition, "client is closed");
  }

  #deadline(opts: CallOpts): number | undefined {
    const ms = opts.timeoutMs ?? this.timeoutMs;
    return ms > 0 ? Date.now() + ms : undefined;
  }

  async #headers(): Promise<Record<string, string>> {
    if (this.#token === undefined) return {};
    const token = typeof this.#token === "function" ? await this.#token() : this.#token;
    if (typeof token !== "string" || token === "") throw new TypeError("historyd: the token function returned no token");
    return { authorization: `Bearer ${token}` };
  }

  async #unary<T>(method: string, threadId: string, opts: CallOpts, call: (o: CallOptions) => Promise<T>): Promise<T> {
    this.#open(method, threadId);
    const deadline = this.#deadline(opts);
    for (let failures = 0; ; failures++) {
      try {
        return await call({ signal: opts.signal, timeoutMs: remaining(method, threadId, deadline), headers: await this.#headers() });
      } catch (err) {
        if (err instanceof HistorydError) throw err;
        const e = ConnectError.from(err);
        if (e.code !== Code.Unavailable || failures >= this.retries) throw await this.#fail(method, threadId, e, opts.signal);
      }
      await this.#wait(method, threadId, failures + 1, deadline, opts.signal);
    }
  }

  /**
   * The error a failed call throws. A call that could not connect because
   * the server speaks the other of TLS and plaintext says so in one line,
   * with the code UNAVAILABLE (see transport.ts); finding that out asks the
   * server once, so it is not done for a call the caller aborted, nor over
   * a transport of the caller's.
   */
  async #fail(method: string, threadId: string, e: ConnectError, signal?: AbortSignal): Promise<HistorydError> {
    if (this.#address && !signal?.aborted) {
      const line = await mismatch(this.target, this.#address, this.plaintext, e);
      if (line !== undefined) return new HistorydError(method, threadId, Code.Unavailable, line, e);
    }
    return fail(method, threadId, e);
  }

  /** Waits before retry number n (from 1), or fails if the deadline or an abort comes first. */
  async #wait(method: string, threadId: string, n: number, deadline: number | undefined, signal?: AbortSignal): Promise<void> {
    const jitter = 1 + DEFAULTS.backoffJitter * (2 * Math.random() - 1);
    const wait = Math.min(this.backoffMs * 2 ** (n - 1) * jitter, DEFAULTS.maxBackoffMs);
    const late = deadline !== undefined && Date.now() + wait >= deadline;
    const ms = late ? Math.max(0, deadline! - Date.now()) : wait;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, ms);
      signal?.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          reject(new HistorydError(method, threadId, Code.Canceled, "the call was aborted"));
        },
        { once: true },
      );
    });
    if (late) throw new HistorydError(method, threadId, Code.DeadlineExceeded, "deadline exceeded while waiting to retry");
  }
}

/** A read's value format, and the call it is for (named in its errors). */
interface ValueRead {
  method: string;
  threadId: string;
  format: ValueFormat;
  wire: WireValueFormat;
}

function valueFormat(f: unknown): ValueFormat {
  if (!VALUE_FORMATS.includes(f as ValueFormat)) {
    throw new TypeError(`historyd: valueFormat must be one of ${VALUE_FORMATS.map((v) => JSON.stringify(v)).join(", ")}, not ${JSON.stringify(f)}`);
  }
  return f as ValueFormat;
}

function check(ok: boolean, what: string, got: unknown): void {
  if (!ok) throw new TypeError(`historyd: ${what}, not ${String(got)}`);
}

function baseUrl(target: string, plaintext: boolean): string {
  const address = target.startsWith("dns:///") ? target.slice("dns:///".length) : target;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(address) || address.includes("/")) {
    throw new TypeError(`historyd: target ${JSON.stringify(target)} must be "host:port" or "dns:///host:port"`);
  }
  return `${plaintext ? "http" : "https"}://${address}`;
}

function remaining(method: string, threadId: string, deadline: number | undefined): number | undefined {
  if (deadline === undefined) return undefined;
  const left = deadline - Date.now();
  if (left <= 0) throw new HistorydError(method, threadId, Code.DeadlineExceeded, "deadline exceeded");
  return left;
}

function fail(method: string, threadId: string, e: ConnectError): HistorydError {
  return new HistorydError(method, threadId, e.code, e.rawMessage, e);
}

/** A wire turn, read from a response whose numbering was `numbering`. */
function fromTurnState(t: WireTurnState, numbering: TurnNumbering, read: ValueRead): TurnState {
  const state: Record<string, Entry> = {};
  for (const [key, e] of Object.entries(t.entries)) {
    try {
      state[key] = fromEntry(e, read.format);
    } catch (err) {
      // The server's fault, not the caller's: nothing the call could change.
      throw new HistorydError(read.method, read.threadId, Code.Internal, `turn ${t.turn}: the value_json of key ${JSON.stringify(key)} is not JSON: ${(err as Error).message}`, err);
    }
  }
  return {
    turn: t.turn,
    checkpointId: t.checkpointId,
    question: t.question,
    ...(t.endedAt ? { endedAt: timestampDate(t.endedAt) } : {}),
    state,
    answeredWith: [...t.answeredWith],
    numbering: fromNumbering(numbering),
  };
}

/**
 * The wire's numbering. A value this client does not know (a newer
 * server's) reads as unspecified, not as a certainty it was not given.
 */
function fromNumbering(n: TurnNumbering): Numbering {
  switch (n) {
    case TurnNumbering.COMPLETE:
      return "complete";
    case TurnNumbering.COUNTED:
      return "counted";
    case TurnNumbering.ESTIMATED:
      return "estimated";
  }
  return "unspecified";
}

/** Reads value_json, which historyd writes as UTF-8; anything else is refused, not repaired. */
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A wire entry as an Entry, its value read from value_json when the server
 * sent it, else from value. A missing value reads as null, as protobuf's
 * JSON mapping does.
 */
/** A patch operation's value: its JSON text when sent, else its Value. */
function patchValue(op: { valueJson: Uint8Array; value?: Value }): JsonValue {
  if (op.valueJson.length > 0) return JSON.parse(utf8.decode(op.valueJson)) as JsonValue;
  return op.value ? toJson(ValueSchema, op.value) : null;
}

function fromEntry(e: StateEntry, format: ValueFormat): Entry {
  let value: JsonValue = null;
  let json: string | undefined;
  if (e.valueJson.length > 0) {
    const text = utf8.decode(e.valueJson);
    if (format === "raw") json = text;
    else value = JSON.parse(text) as JsonValue;
  } else if (e.value) {
    value = toJson(ValueSchema, e.value);
    if (format === "raw") {
      json = JSON.stringify(value);
      value = null;
    }
  } else if (format === "raw") {
    json = "null";
  }
  const out: Entry = { value, inputs: { ...e.inputs } };
  if (json !== undefined) out.json = json;
  if (e.tool !== undefined) out.tool = e.tool;
  if (e.seq !== undefined) out.seq = Number(e.seq);
  if (e.turn !== undefined) out.turn = e.turn;
  if (e.turnsWritten !== undefined) out.turnsWritten = e.turnsWritten;
  if (e.extra && Object.keys(e.extra).length > 0) out.extra = e.extra;
  return out;
}

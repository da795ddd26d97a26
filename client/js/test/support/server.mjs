// An in-process historyd.v1.ThreadHistory server with canned answers, for
// the client's unit tests: a real HTTP/2 gRPC server (Connect's Node
// adapter), so calls cross a real connection. Thread "t" has 5 turns, of
// which 3..5 are retained, 4 and 5 asked in one input (answered_with), its
// numbering counted; "slow" answers after 5 s; "denied" is refused. The
// channels served are tool_state and files; any other is refused. Asked for
// VALUE_FORMAT_JSON, it sends each value as JSON text, in the order the
// Value holds its keys, as historyd writes both from the stored order;
// `values.json = false` makes it a server older than value_json, which
// ignores the field; `values.texts[key]` replaces a key's text.

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { create, fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { StateEntrySchema, ThreadHistory, TurnNumbering, TurnStateSchema, ValueFormat } from "../../dist/gen/historyd/v1/history_pb.js";

export const AREA = "sketch-ops/sketch_area/area";
export const TOTAL = 5;
export const RETAINED = [3, 4, 5];
export const QUESTIONS = ["q1", "q2", "q3", "q4", "q5"];
export const ANSWERED_WITH = { 4: [5], 5: [4] };

const entry = (value, fields = {}) => create(StateEntrySchema, { value: fromJson(ValueSchema, value), ...fields });

/** Values awkward to carry: numbers, -0, nesting, keys JavaScript orders its own way. */
export const AWKWARD = {
  numbers: [0, -0, 1, -3, 2 ** 53, 2 ** 53 + 2, 1e20, 1e21, 0.1 + 0.2, 5e-324, 1.7976931348623157e308, -2.5e-7],
  keys: { z: 1, "10": 2, "2": 3, é: 4, "😀": 5, "\uffff": 6, "": 7 },
  nested: { b: [{ y: null, x: true }, [], {}], a: "text with \u2028 and \"quotes\"" },
};

function turnState(n) {
  const entries = {
    [AREA]: entry({ amount: 14000 + n, unit: "km2" }, { tool: "sketch_area", seq: BigInt(n), turn: n, turnsWritten: n - 2, inputs: { unit: "model" } }),
    other: entry({ n }, { extra: { source: "test" } }),
    awkward: entry(AWKWARD),
  };
  return create(TurnStateSchema, {
    turn: n,
    checkpointId: `cp-${n}`,
    question: QUESTIONS[n - 1],
    entries,
    endedAt: timestampFromDate(new Date(Date.UTC(2026, 0, n))),
    answeredWith: ANSWERED_WITH[n] ?? [],
  });
}

/**
 * serve starts the server; `flaky.fail` makes the next calls fail with
 * UNAVAILABLE (streams after `flaky.cut` messages; with `flaky.resume`
 * asking to be resumed, as at historyd's maximum age). It records each call's
 * method, request and authorization header.
 */
/** JSON text as historyd writes it: JSON.stringify's, but for -0, which it writes "-0". */
function historydJson(v) {
  if (Array.isArray(v)) return `[${v.map(historydJson).join(",")}]`;
  if (v !== null && typeof v === "object") {
    return `{${Object.keys(v).map((k) => `${JSON.stringify(k)}:${historydJson(v[k])}`).join(",")}}`;
  }
  return Object.is(v, -0) ? "-0" : JSON.stringify(v);
}

export async function serve({ tls = false } = {}) {
  const calls = [];
  const flaky = { fail: 0, cut: null, resume: false };
  const values = { json: true, texts: {} };
  const encoder = new TextEncoder();
  const enter = async (method, req, ctx) => {
    calls.push({ method, req, authorization: ctx.requestHeader.get("authorization"), traceparent: ctx.requestHeader.get("traceparent"), timeout: ctx.timeoutMs() });
    if (req.threadId === "slow") await new Promise((r) => setTimeout(r, 5000));
    if (req.threadId === "denied") throw new ConnectError("token may not read thread denied", Code.PermissionDenied);
    if (req.threadId === "") throw new ConnectError("thread_id: is required", Code.InvalidArgument);
    if (req.channel !== undefined && !["", "tool_state", "files"].includes(req.channel)) {
      throw new ConnectError(`channel: "${req.channel}" is not a channel this server serves; it serves tool_state, files`, Code.InvalidArgument);
    }
  };
  const numbering = (req) => (req.threadId === "t" ? TurnNumbering.COUNTED : TurnNumbering.COMPLETE);
  const flake = () => {
    if (flaky.fail > 0 && flaky.cut === null) {
      flaky.fail--;
      throw new ConnectError("store restarting", Code.Unavailable);
    }
  };
  const turnsOf = (req) => (req.threadId === "t" ? RETAINED : []);
  const project = (t, req) => {
    if (req.keys.length) for (const k of Object.keys(t.entries)) if (!req.keys.includes(k)) delete t.entries[k];
    if (values.json && req.valueFormat === ValueFormat.JSON) {
      for (const [k, e] of Object.entries(t.entries)) {
        e.valueJson = values.texts[k] ?? encoder.encode(historydJson(toJson(ValueSchema, e.value)));
        e.value = undefined;
      }
    }
    return t;
  };
  const impl = {
    async snapshot(req, ctx) {
      await enter("Snapshot", req, ctx);
      flake();
      const retained = turnsOf(req);
      const total = req.threadId === "t" ? TOTAL : 0;
      const n = req.turn;
      let result;
      if (n < 1 || n > total) result = { case: "noSuchTurn", value: { turn: n, total } };
      else if (retained.includes(n)) result = { case: "state", value: project(turnState(n), req) };
      else result = { case: "noLongerRetained", value: { turn: n, question: QUESTIONS[n - 1] } };
      return { result, total, retainedTurns: retained, numbering: numbering(req) };
    },
    async snapshots(req, ctx) {
      await enter("Snapshots", req, ctx);
      flake();
      const turns = {};
      for (const n of turnsOf(req)) turns[n] = project(turnState(n), req);
      return { turns, total: req.threadId === "t" ? TOTAL : 0, numbering: numbering(req) };
    },
    async *streamSnapshots(req, ctx) {
      await enter("StreamSnapshots", req, ctx);
      flake();
      const failing = flaky.cut !== null && flaky.fail > 0;
      if (failing) flaky.fail--;
      const total = req.threadId === "t" ? TOTAL : 0;
      const turns = turnsOf(req).filter((n) => n >= req.fromTurn);
      if (!turns.length) yield { total, numbering: numbering(req) };
      let sent = 0;
      for (const n of turns) {
        if (failing && sent === flaky.cut) {
          // With flaky.resume, as historyd ends a stream at its maximum age.
          if (flaky.resume) throw new ConnectError("the stream reached this server's maximum age", Code.Unavailable, { "historyd-resume": "max-age" });
          throw new ConnectError("server going away", Code.Unavailable);
        }
        yield { turn: project(turnState(n), req), total, numbering: numbering(req) };
        sent++;
      }
    },
    async turns(req, ctx) {
      await enter("Turns", req, ctx);
      flake();
      const total = req.threadId === "t" ? TOTAL : 0;
      const turns = [];
      for (let n = 1; n <= total; n++) {
        const retained = RETAINED.includes(n);
        turns.push({
          number: n,
          question: QUESTIONS[n - 1],
          retained,
          checkpointId: retained ? `cp-${n}` : "",
          keysWritten: retained && req.includeKeysWritten ? [AREA] : [],
          answeredWith: ANSWERED_WITH[n] ?? [],
        });
      }
      return { turns, total, numbering: numbering(req) };
    },
    // Threads: "a/1" and "a/2" (with an error) on the first page, "a/3" on
    // the next.
    async threads(req, ctx) {
      await enter("Threads", req, ctx);
      flake();
      if (req.pageSize > 1000) throw new ConnectError(`page_size: is ${req.pageSize}; the limit is 1000`, Code.InvalidArgument);
      const at = timestampFromDate(new Date(Date.UTC(2026, 0, 5)));
      if (req.pageToken === "") {
        return {
          threads: [
            { threadId: "a/1", checkpointCount: 7n, firstCheckpointAt: at, lastCheckpointAt: at, lastCheckpointId: "c7", totalTurns: 3 },
            // One the server could not read in full.
            { threadId: "a/2", checkpointCount: 1n, lastCheckpointId: "c1", error: { code: Code.DataLoss, message: "checkpoint c1 channel messages: malformed" } },
          ],
          nextPageToken: "next",
        };
      }
      return { threads: [{ threadId: "a/3", checkpointCount: 2n, lastCheckpointId: "c2" }] };
    },
    // Diff of "t": turn 3 to 4, the area changed and a key removed; of
    // "pruned": turn 1 no longer retained.
    async diff(req, ctx) {
      await enter("Diff", req, ctx);
      flake();
      const found = (n) => ({ result: { case: "found", value: { number: n, question: QUESTIONS[n - 1], retained: true, checkpointId: `cp-${n}`, endedAt: timestampFromDate(new Date(Date.UTC(2026, 0, n))) } } });
      if (req.threadId === "pruned") {
        return { fromTurn: { result: { case: "noLongerRetained", value: { turn: 1, question: "q1" } } }, toTurn: found(2), total: 2, retainedTurns: [2] };
      }
      const text = (v) => encoder.encode(historydJson(toJson(ValueSchema, v)));
      const asText = (ch) => {
        // As a server answers asking for JSON text: value_json only.
        if (!(values.json && req.valueFormat === ValueFormat.JSON)) return ch;
        for (const e of [ch.fromEntry, ch.toEntry]) if (e) [e.valueJson, e.value] = [text(e.value), undefined];
        for (const op of ch.patch) if (op.value) [op.valueJson, op.value] = [text(op.value), undefined];
        return ch;
      };
      return {
        fromTurn: found(3),
        toTurn: found(4),
        total: TOTAL,
        retainedTurns: RETAINED,
        changes: [
          {
            key: AREA,
            kind: 3,
            fromEntry: entry({ amount: 14003 }, { seq: 3n }),
            toEntry: entry({ amount: 14004 }, { seq: 4n }),
            patch: [{ op: "replace", path: "/amount", value: fromJson(ValueSchema, 14004) }, { op: "add", path: "/note", value: fromJson(ValueSchema, null) }],
          },
          { key: "gone", kind: 2, fromEntry: entry("x"), patch: [] },
          { key: "root", kind: 3, fromEntry: entry(1), toEntry: entry(2), patch: [{ op: "replace", path: "", value: fromJson(ValueSchema, 2) }, { op: "remove", path: "/x" }] },
        ].map(asText),
      };
    },
  };
  const handler = connectNodeAdapter({ grpc: true, connect: false, grpcWeb: false, routes: (router) => router.service(ThreadHistory, impl) });
  let server;
  let ca;
  if (tls) {
    const dir = mkdtempSync(join(tmpdir(), "historyd-js-tls-"));
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=localhost",
      "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")], { stdio: "ignore" });
    ca = readFileSync(join(dir, "cert.pem"));
    const key = readFileSync(join(dir, "key.pem"));
    rmSync(dir, { recursive: true, force: true }); // read: the key need not outlive the test
    server = http2.createSecureServer({ key, cert: ca }, handler);
  } else {
    server = http2.createServer(handler);
  }
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const sessions = new Set();
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  return {
    target: `127.0.0.1:${server.address().port}`,
    calls,
    flaky,
    values,
    ca,
    close: () =>
      new Promise((resolve) => {
        for (const s of sessions) s.destroy();
        server.close(() => resolve());
      }),
  };
}

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";

import { Code, DEFAULTS, HistorydError, RESUME_TRAILER, ThreadHistory } from "../../dist/index.js";
import { ANSWERED_WITH, AREA, AWKWARD, QUESTIONS, RETAINED, TOTAL, serve } from "../support/server.mjs";
import { Inspector } from "../../dist/inspect.js";
import { sameValues } from "../support/same.mjs";

const defaultsFile = new URL("../../../testdata/defaults.json", import.meta.url);

describe("defaults", () => {
  test("are every client's (client/testdata/defaults.json)", () => {
    const want = JSON.parse(readFileSync(defaultsFile, "utf8"));
    assert.equal(want.tls, true);
    assert.deepEqual(want.retry_codes, ["UNAVAILABLE"]);
    assert.equal(DEFAULTS.timeoutMs, want.timeout_ms);
    assert.equal(DEFAULTS.retries, want.retries);
    assert.equal(DEFAULTS.backoffMs, want.backoff_ms);
    assert.equal(DEFAULTS.maxBackoffMs, want.max_backoff_ms);
    assert.equal(DEFAULTS.backoffJitter, want.backoff_jitter);
    assert.equal(DEFAULTS.maxReceiveBytes, want.max_receive_bytes);
    assert.equal(DEFAULTS.valueFormat, want.value_format);
    assert.equal(RESUME_TRAILER, want.resume_trailer);
    const h = new ThreadHistory("127.0.0.1:1");
    assert.equal(h.plaintext, false);
    assert.deepEqual([h.timeoutMs, h.retries, h.backoffMs, h.valueFormat], [10_000, 3, 100, "json"]);
  });

  test("bad options name the field", () => {
    assert.throws(() => new ThreadHistory(""), /target/);
    assert.throws(() => new ThreadHistory("http://h:1", { plaintext: true }), /host:port/);
    assert.throws(() => new ThreadHistory("h:1", { retries: -1 }), /retries/);
    assert.throws(() => new ThreadHistory("h:1", { timeoutMs: -5 }), /timeoutMs/);
    assert.throws(() => new ThreadHistory("h:1", { token: "" }), /token/);
    assert.throws(() => new ThreadHistory("h:1", { plaintext: true, tls: { ca: "x" } }), /contradict/);
    assert.throws(() => new ThreadHistory("h:1", { valueFormat: "xml" }), /valueFormat must be one of "json", "proto", "raw", not "xml"/);
  });
});

describe("over plaintext", () => {
  let srv;
  before(async () => (srv = await serve()));
  after(() => srv.close());
  const client = (o = {}) => new ThreadHistory(srv.target, { plaintext: true, backoffMs: 1, ...o });

  test("snapshot tells the three answers apart", async () => {
    const h = client();
    const found = await h.snapshot("t", 3);
    assert.equal(found.outcome, "found");
    if (found.outcome !== "found") return;
    assert.deepEqual(found.state[AREA], { value: { amount: 14003, unit: "km2" }, tool: "sketch_area", seq: 3, turn: 3, turnsWritten: 1, inputs: { unit: "model" } });
    assert.deepEqual(found.state.other, { value: { n: 3 }, inputs: {}, extra: { source: "test" } });
    assert.deepEqual([found.turn, found.total, found.retained, found.question, found.checkpointId], [3, TOTAL, RETAINED, "q3", "cp-3"]);
    assert.deepEqual([found.answeredWith, found.numbering], [[], "counted"]);
    assert.equal(found.endedAt.toISOString(), "2026-01-03T00:00:00.000Z");

    const pruned = await h.snapshot("t", 1);
    assert.deepEqual(pruned, { turn: 1, total: TOTAL, retained: RETAINED, numbering: "counted", outcome: "no_longer_retained", question: "q1" });
    for (const n of [0, 6, 2 ** 31 - 1]) {
      const never = await h.snapshot("t", n);
      assert.deepEqual(never, { turn: n, total: TOTAL, retained: RETAINED, numbering: "counted", outcome: "no_such_turn" });
    }
    assert.equal(srv.calls.at(-1).req.turn, 2 ** 31 - 1);
    // A turn the wire cannot carry is refused before anything is sent.
    const sent = srv.calls.length;
    for (const n of [-1, 2 ** 31, 2 ** 32 + 1, 2 ** 40]) {
      await assert.rejects(h.snapshot("t", n), { name: "RangeError", message: new RegExp(`turn ${n}: must be 0 to 2147483647`) });
    }
    assert.equal(srv.calls.length, sent, "refused turns reached the server");
    const unknown = await h.snapshot("nobody", 1);
    assert.deepEqual(unknown, { turn: 1, total: 0, retained: [], numbering: "complete", outcome: "no_such_turn" });
    await assert.rejects(h.snapshot("t", 1.5), TypeError);
  });

  test("keys and namespace reach the server", async () => {
    const h = client({ namespace: "sub" });
    const found = await h.snapshot("t", 4, { keys: [AREA] });
    assert.deepEqual(Object.keys(found.state), [AREA]);
    assert.equal(srv.calls.at(-1).req.checkpointNs, "sub");
    await h.snapshot("t", 4, { namespace: "" });
    assert.equal(srv.calls.at(-1).req.checkpointNs, "");
  });

  test("snapshots, streamSnapshots and turns", async () => {
    const h = client();
    const all = await h.snapshots("t");
    assert.equal(all.total, TOTAL);
    assert.deepEqual(all.turns.map((t) => t.turn), RETAINED);
    const streamed = [];
    for await (const t of h.streamSnapshots("t")) streamed.push(t);
    assert.deepEqual(streamed, all.turns);
    const from4 = [];
    for await (const t of h.streamSnapshots("t", { fromTurn: 4, keys: ["other"] })) from4.push(t);
    assert.deepEqual(from4.map((t) => [t.turn, Object.keys(t.state)]), [[4, ["other"]], [5, ["other"]]]);
    const none = [];
    for await (const t of h.streamSnapshots("nobody")) none.push(t);
    assert.deepEqual(none, []);
    for await (const t of h.streamSnapshots("t")) {
      assert.equal(t.turn, 3);
      break; // ends the call
    }
    const index = await h.turns("t", { includeKeysWritten: true });
    assert.equal(index.total, TOTAL);
    assert.equal(index.numbering, "counted");
    assert.deepEqual(index.turns.map((t) => t.answeredWith), QUESTIONS.map((_, i) => ANSWERED_WITH[i + 1] ?? []));
    assert.deepEqual(index.turns.map((t) => [t.turn, t.question, t.retained, t.keysWritten]), QUESTIONS.map((q, i) => [i + 1, q, RETAINED.includes(i + 1), RETAINED.includes(i + 1) ? [AREA] : []]));
  });

  test("answeredWith and numbering on every result", async () => {
    const h = client();
    const [four, five] = [await h.snapshot("t", 4), await h.snapshot("t", 5)];
    assert.deepEqual([four.answeredWith, five.answeredWith, four.numbering], [[5], [4], "counted"]);
    const all = await h.snapshots("t");
    assert.equal(all.numbering, "counted");
    assert.deepEqual(all.turns.map((t) => [t.turn, t.answeredWith, t.numbering]), [[3, [], "counted"], [4, [5], "counted"], [5, [4], "counted"]]);
    const streamed = [];
    for await (const t of h.streamSnapshots("t")) streamed.push([t.turn, t.answeredWith, t.numbering]);
    assert.deepEqual(streamed, [[3, [], "counted"], [4, [5], "counted"], [5, [4], "counted"]]);
  });

  test("channel: the client's, or one read's own", async () => {
    const h = client({ channel: "files" });
    assert.equal(h.channel, "files");
    await h.snapshot("t", 3);
    await h.snapshot("t", 3, { channel: "tool_state" });
    await h.snapshots("t");
    for await (const _ of h.streamSnapshots("t", { channel: "" })) break;
    await h.turns("t", { includeKeysWritten: true, channel: "tool_state" });
    assert.deepEqual(srv.calls.slice(-5).map((c) => [c.method, c.req.channel]), [
      ["Snapshot", "files"],
      ["Snapshot", "tool_state"],
      ["Snapshots", "files"],
      ["StreamSnapshots", ""],
      ["Turns", "tool_state"],
    ]);
    await assert.rejects(h.snapshot("t", 3, { channel: "nope" }), (e) => e instanceof HistorydError && e.code === Code.InvalidArgument && /"nope"/.test(e.details));
    assert.equal(client().channel, "");
    assert.throws(() => new ThreadHistory("h:1", { channel: 1 }), /channel/);
  });

  test("values: JSON text by default, the same as google.protobuf.Value", async () => {
    const h = client();
    const read = async (opts) => [
      (await h.snapshot("t", 3, opts)).state,
      (await h.snapshots("t", opts)).turns.map((t) => t.state),
      await (async () => {
        const out = [];
        for await (const t of h.streamSnapshots("t", opts)) out.push(t.state);
        return out;
      })(),
    ];
    const start = srv.calls.length;
    const asJson = await read({});
    const asProto = await read({ valueFormat: "proto" });
    assert.deepEqual(srv.calls.slice(start).map((c) => c.req.valueFormat), [2, 2, 2, 1, 1, 1], "VALUE_FORMAT_JSON (2), then VALUE_FORMAT_PROTO (1)");
    sameValues(asJson, asProto);
    const awkward = asJson[0].awkward.value;
    assert.deepEqual(awkward, AWKWARD);
    assert.ok(Object.is(awkward.numbers[1], -0));
    // Keys in the text's order, as JavaScript orders an object's keys:
    // integer-like ones first.
    assert.deepEqual(Object.keys(awkward.keys), ["2", "10", "z", "é", "😀", "\uffff", ""]);

    const proto = client({ valueFormat: "proto" });
    assert.equal(proto.valueFormat, "proto");
    await proto.snapshot("t", 3);
    await proto.snapshot("t", 3, { valueFormat: "json" });
    assert.deepEqual(srv.calls.slice(-2).map((c) => c.req.valueFormat), [1, 2]);
    await assert.rejects(h.snapshot("t", 3, { valueFormat: "JSON" }), /valueFormat must be one of/);
  });

  test("values: raw leaves the JSON text unparsed", async () => {
    const raw = await client({ valueFormat: "raw" }).snapshot("t", 3);
    const parsed = await client().snapshot("t", 3);
    assert.equal(srv.calls.at(-2).req.valueFormat, 2, "raw is JSON on the wire");
    for (const [key, e] of Object.entries(raw.state)) {
      assert.equal(e.value, null);
      assert.equal(typeof e.json, "string");
      sameValues(JSON.parse(e.json), parsed.state[key].value);
      const { value: _v, json: _j, ...rest } = e;
      const { value: _w, ...want } = parsed.state[key];
      assert.deepEqual(rest, want);
    }
    assert.equal(raw.state.other.json, '{"n":3}');
    assert.equal(parsed.state.other.json, undefined);
    assert.throws(() => new Inspector({ history: client({ valueFormat: "raw" }) }), /valueFormat is "raw"/);
    new Inspector({ history: client({ valueFormat: "proto" }) });
  });

  test("values: a server without value_json sends Values, read as before", async () => {
    srv.values.json = false;
    try {
      const old = await client().snapshot("t", 3);
      const raw = await client({ valueFormat: "raw" }).snapshot("t", 3);
      srv.values.json = true;
      const now = await client().snapshot("t", 3);
      sameValues(old.state, now.state);
      assert.equal(raw.state.other.json, '{"n":3}');
      assert.equal(raw.state.other.value, null);
    } finally {
      srv.values.json = true;
    }
  });

  test("values: JSON text that does not parse fails the read", async () => {
    srv.values.texts.other = new TextEncoder().encode('{"n": 3,');
    try {
      const err = await client().snapshot("t", 3).catch((e) => e);
      assert.ok(err instanceof HistorydError);
      assert.equal(err.code, Code.Internal);
      assert.match(err.details, /^turn 3: the value_json of key "other" is not JSON: /);
      const streamed = await (async () => {
        for await (const _ of client().streamSnapshots("t")) return "no error";
      })().catch((e) => e);
      assert.equal(streamed.code, Code.Internal);
      assert.equal((await client({ valueFormat: "raw" }).snapshot("t", 3)).state.other.json, '{"n": 3,');
      assert.equal((await client({ valueFormat: "proto" }).snapshot("t", 3)).state.other.value.n, 3);
    } finally {
      delete srv.values.texts.other;
    }
  });

  test("UNAVAILABLE is retried, other codes are not", async () => {
    const h = client();
    srv.flaky.fail = 2;
    const before = srv.calls.length;
    assert.equal((await h.snapshot("t", 3)).outcome, "found");
    assert.equal(srv.calls.length - before, 3);

    srv.flaky.fail = 100;
    const start = srv.calls.length;
    const err = await h.snapshot("t", 3).catch((e) => e);
    srv.flaky.fail = 0;
    assert.ok(err instanceof HistorydError);
    assert.equal(err.code, Code.Unavailable);
    assert.equal(err.codeName, "UNAVAILABLE");
    assert.equal(err.details, "store restarting");
    assert.match(err.message, /^historyd Snapshot\(thread "t"\): UNAVAILABLE: store restarting$/);
    assert.equal(srv.calls.length - start, 4, "one try and three retries");

    const once = srv.calls.length;
    const denied = await h.snapshots("denied").catch((e) => e);
    assert.equal(denied.code, Code.PermissionDenied);
    assert.equal(srv.calls.length - once, 1);
    const invalid = await h.turns("").catch((e) => e);
    assert.equal(invalid.code, Code.InvalidArgument);
    assert.equal(invalid.details, "thread_id: is required");

    srv.flaky.fail = 1;
    const noRetry = await client({ retries: 0 }).snapshot("t", 3).catch((e) => e);
    srv.flaky.fail = 0;
    assert.equal(noRetry.code, Code.Unavailable);
  });

  test("a cut stream resumes after the last turn", async () => {
    const h = client();
    srv.flaky.fail = 2;
    srv.flaky.cut = 1;
    const start = srv.calls.length;
    const turns = [];
    for await (const t of h.streamSnapshots("t")) turns.push(t.turn);
    srv.flaky.cut = null;
    srv.flaky.fail = 0;
    assert.deepEqual(turns, RETAINED);
    assert.deepEqual(srv.calls.slice(start).map((c) => c.req.fromTurn), [0, 4, 5]);
  });

  test("a stream ended at the server's maximum age resumes at once, as no failure", async () => {
    // Every call ends after one turn asking to be resumed: with no retries
    // allowed, the read still yields every turn once, without a backoff.
    const h = client({ retries: 0, backoffMs: 5000 });
    srv.flaky.fail = 100;
    srv.flaky.cut = 1;
    srv.flaky.resume = true;
    const start = srv.calls.length;
    const began = Date.now();
    const turns = [];
    try {
      for await (const t of h.streamSnapshots("t")) turns.push(t.turn);
    } finally {
      srv.flaky.cut = null;
      srv.flaky.fail = 0;
      srv.flaky.resume = false;
    }
    assert.deepEqual(turns, RETAINED);
    assert.deepEqual(srv.calls.slice(start).map((c) => c.req.fromTurn), [0, 4, 5]);
    assert.ok(Date.now() - began < 2000, "resumed at once");
  });

  test("the deadline bounds each call", async () => {
    const h = client({ timeoutMs: 200 });
    const start = Date.now();
    const err = await h.snapshot("slow", 1).catch((e) => e);
    assert.equal(err.code, Code.DeadlineExceeded);
    assert.ok(Date.now() - start < 2000);
    await client().snapshot("t", 3);
    const sent = srv.calls.at(-1).timeout;
    assert.ok(sent > 9000 && sent <= 10_000, `the server saw a ${sent} ms deadline, want about 10 s`);
    await client({ timeoutMs: 0 }).snapshot("t", 3);
    assert.equal(srv.calls.at(-1).timeout, undefined, "timeoutMs 0: no deadline");
    const aborted = await client().snapshot("slow", 1, { signal: AbortSignal.timeout(100) }).catch((e) => e);
    assert.equal(aborted.code, Code.Canceled);
  });

  test("the bearer token", async () => {
    let n = 0;
    await client({ token: "s3cret" }).snapshot("t", 3);
    assert.equal(srv.calls.at(-1).authorization, "Bearer s3cret");
    const rotating = client({ token: async () => `t${++n}` });
    await rotating.snapshot("t", 3);
    await rotating.turns("t");
    assert.deepEqual(srv.calls.slice(-2).map((c) => c.authorization), ["Bearer t1", "Bearer t2"]);
    await client().snapshot("t", 3);
    assert.equal(srv.calls.at(-1).authorization, null);
  });

  test("TLS is the default: a plaintext server is not reached without plaintext, and the error says so", async () => {
    const err = await new ThreadHistory(srv.target, { retries: 0, timeoutMs: 3000 }).snapshot("t", 3).catch((e) => e);
    assert.ok(err instanceof HistorydError);
    assert.equal(err.codeName, "UNAVAILABLE");
    assert.equal(err.details, `historyd at ${srv.target} speaks plaintext, not TLS: pass { plaintext: true }`);
  });

  test("close", async () => {
    const h = client();
    h.close();
    const err = await h.snapshot("t", 3).catch((e) => e);
    assert.equal(err.code, Code.FailedPrecondition);
  });
});

describe("over TLS", () => {
  let srv;
  before(async () => (srv = await serve({ tls: true })));
  after(() => srv.close());

  test("with a private CA and a token", async () => {
    const h = new ThreadHistory(srv.target, { tls: { ca: srv.ca, servername: "localhost" }, token: "s3cret" });
    const found = await h.snapshot("t", 3);
    assert.equal(found.outcome, "found");
    assert.equal(srv.calls.at(-1).authorization, "Bearer s3cret");
  });

  test("plaintext to a TLS server: the error says the server speaks TLS", async () => {
    const err = await new ThreadHistory(srv.target, { plaintext: true, retries: 0, timeoutMs: 3000 }).snapshot("t", 3).catch((e) => e);
    assert.ok(err instanceof HistorydError);
    assert.equal(err.codeName, "UNAVAILABLE");
    assert.equal(err.details, `historyd at ${srv.target} speaks TLS, not plaintext: drop plaintext: true (tls: { ca } for a private CA)`);
    assert.doesNotMatch(err.message, /\n/);
  });

  test("an unknown CA is refused", async () => {
    const err = await new ThreadHistory(srv.target, { retries: 0 }).snapshot("t", 3).catch((e) => e);
    assert.ok(err instanceof HistorydError);
    assert.match(err.details, /certificate/i);
  });
});

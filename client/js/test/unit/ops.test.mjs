import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Code, HistorydError, ThreadHistory } from "../../dist/index.js";
import { AREA, RETAINED, TOTAL, serve } from "../support/server.mjs";

describe("threads and diff", () => {
  let srv;
  before(async () => (srv = await serve()));
  after(() => srv.close());
  const client = (o = {}) => new ThreadHistory(srv.target, { plaintext: true, backoffMs: 1, ...o });

  test("threads pages, and sends what was asked", async () => {
    const h = client({ namespace: "sub:1" });
    const after = new Date(Date.UTC(2026, 0, 1, 12));
    const page = await h.threads({ prefix: "a/", pageSize: 2, newestFirst: true, activeAfter: after, includeTurns: true });
    assert.equal(page.nextPageToken, "next");
    const { error, ...second } = page.threads[1];
    assert.deepEqual([page.threads[0], second], [
      { threadId: "a/1", checkpoints: 7, firstCheckpointAt: new Date(Date.UTC(2026, 0, 5)), lastCheckpointAt: new Date(Date.UTC(2026, 0, 5)), lastCheckpointId: "c7", totalTurns: 3 },
      { threadId: "a/2", checkpoints: 1, lastCheckpointId: "c1" },
    ]);
    assert.ok(error instanceof HistorydError && error.code === Code.DataLoss && error.details === "checkpoint c1 channel messages: malformed", `${error}`);
    const req = srv.calls.at(-1).req;
    assert.deepEqual([req.threadIdPrefix, req.checkpointNs, req.pageSize, req.order, req.includeTurns], ["a/", "sub:1", 2, 2, true]);
    assert.equal(Number(req.lastActivityAfter.seconds), after.getTime() / 1000);
    assert.equal(req.lastActivityBefore, undefined);
    const more = await h.threads({ prefix: "a/", pageToken: page.nextPageToken });
    assert.deepEqual(more.threads.map((t) => t.threadId), ["a/3"]);
    assert.equal(more.nextPageToken, "");
    assert.equal(srv.calls.at(-1).req.order, 0);
  });

  test("threads failures carry the code", async () => {
    await assert.rejects(client().threads({ pageSize: 5000 }), (e) => e instanceof HistorydError && e.code === Code.InvalidArgument && /page_size/.test(e.details));
  });

  test("diff converts entries and RFC 6902 patches", async () => {
    const h = client();
    const d = await h.diff("t", { toTurn: 4, keys: [AREA, "gone", "root"], includeUnchanged: true });
    const req = srv.calls.at(-1).req;
    assert.deepEqual([req.threadId, req.toTurn, req.fromTurn, req.keys, req.includeUnchanged], ["t", 4, 0, [AREA, "gone", "root"], true]);
    assert.deepEqual(d.from, { turn: 3, outcome: "found", question: "q3", checkpointId: "cp-3", endedAt: new Date(Date.UTC(2026, 0, 3)) });
    assert.equal(d.to.turn, 4);
    assert.deepEqual([d.total, d.retained], [TOTAL, RETAINED]);
    const [area, gone, root] = d.changes;
    assert.deepEqual(area, {
      key: AREA,
      change: "changed",
      before: { value: { amount: 14003 }, seq: 3, inputs: {} },
      after: { value: { amount: 14004 }, seq: 4, inputs: {} },
      patch: [{ op: "replace", path: "/amount", value: 14004 }, { op: "add", path: "/note", value: null }],
    });
    assert.deepEqual(gone, { key: "gone", change: "removed", before: { value: "x", inputs: {} }, patch: [] });
    assert.deepEqual(root.patch, [{ op: "replace", path: "", value: 2 }, { op: "remove", path: "/x" }]);
  });

  test("diff reads the same in every value format", async () => {
    const h = client();
    const asJson = await h.diff("t", { toTurn: 4 });
    assert.equal(srv.calls.at(-1).req.valueFormat, 2);
    const asProto = await h.diff("t", { toTurn: 4, valueFormat: "proto" });
    assert.equal(srv.calls.at(-1).req.valueFormat, 1);
    assert.deepEqual(asJson.changes, asProto.changes);
    const raw = await h.diff("t", { toTurn: 4, valueFormat: "raw" });
    assert.equal(srv.calls.at(-1).req.valueFormat, 2);
    assert.deepEqual(raw.changes[0].after, { value: null, json: '{"amount":14004}', seq: 4, inputs: {} });
    assert.deepEqual(raw.changes[0].patch, asJson.changes[0].patch);
  });

  test("diff of a pruned end, and turns out of range", async () => {
    const h = client();
    const d = await h.diff("pruned", { toTurn: 2 });
    assert.deepEqual(d.from, { turn: 1, outcome: "no_longer_retained", question: "q1" });
    assert.deepEqual(d.changes, []);
    const sent = srv.calls.length;
    await assert.rejects(h.diff("t", { toTurn: 2 ** 40 }), { name: "RangeError", message: /toTurn 1099511627776: must be 0 to 2147483647/ });
    await assert.rejects(h.diff("t", { toTurn: 2, fromTurn: -5 }), { name: "RangeError", message: /fromTurn -5: must be 0 to 2147483647/ });
    await assert.rejects(h.streamSnapshots("t", { fromTurn: 2 ** 31 }).next(), { name: "RangeError", message: /fromTurn 2147483648: must be 0 to 2147483647/ });
    await assert.rejects(h.streamSnapshots("t", { fromTurn: -1 }).next(), { name: "RangeError", message: /fromTurn -1: must be 0 to 2147483647/ });
    assert.equal(srv.calls.length, sent, "refused turns reached the server");
    await h.diff("t", { toTurn: 2 ** 31 - 1, fromTurn: 0 });
    const req = srv.calls.at(-1).req;
    assert.deepEqual([req.toTurn, req.fromTurn], [2 ** 31 - 1, 0]);
    await assert.rejects(h.diff("t", { toTurn: 1.5 }), TypeError);
  });
});

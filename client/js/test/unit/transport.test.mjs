// Telling a TLS/plaintext mismatch from other failures to connect
// (src/transport.ts) on its own; the client's errors against an in-process
// server in each mode are in client.test.mjs, and every client against
// real historyd servers in test/clients' TestTransportMismatch.

import assert from "node:assert/strict";
import net from "node:net";
import { describe, test } from "node:test";

import { hostPort, probe } from "../../dist/transport.js";

describe("transport", () => {
  test("the address a target names", () => {
    assert.deepEqual(hostPort("historyd:8443"), { host: "historyd", port: 8443 });
    assert.deepEqual(hostPort("dns:///historyd:8443"), { host: "historyd", port: 8443 });
    assert.deepEqual(hostPort("[::1]:50051"), { host: "::1", port: 50051 });
    assert.deepEqual(hostPort("historyd"), { host: "historyd", port: 443 });
    for (const t of ["unix:/run/h.sock", "::1", "historyd:http", "historyd:0", "https://historyd:1"]) assert.equal(hostPort(t), undefined, t);
  });

  test("nothing listening, or a server that hangs up, says neither", async () => {
    const closed = net.createServer();
    await new Promise((r) => closed.listen(0, "127.0.0.1", r));
    const port = closed.address().port;
    await new Promise((r) => closed.close(r));
    assert.equal(await probe("127.0.0.1", port), undefined);
    const hangsUp = net.createServer((socket) => socket.destroy());
    await new Promise((r) => hangsUp.listen(0, "127.0.0.1", r));
    try {
      assert.equal(await probe("127.0.0.1", hangsUp.address().port), undefined);
    } finally {
      hangsUp.close();
    }
  });
});

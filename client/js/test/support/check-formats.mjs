#!/usr/bin/env node
// Read threads from a running historyd in every value format, and compare.
//
//   node test/support/check-formats.mjs --target HOST:PORT --reads '[["thread", "channel"], ...]' --out result.json
//
// test/clients runs this against the historyd it started on its fixture.
// For each thread and channel, every turn from 0 to one past the total is
// read with snapshot() and the whole thread with snapshots(), with values as
// JSON text (the default) and as google.protobuf.Value: the answers must be
// the same, key order and -0 included (sameValues). Raw values must parse to
// the same values.
//
// Writes {"reads": [{"thread", "channel", "turns", "entries", "json_bytes"}],
// "mismatches": ["..."]}; exits 0 either way (the caller reports).

import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { ThreadHistory } from "../../dist/index.js";
import { sameValues } from "./same.mjs";

function differs(got, want) {
  try {
    sameValues(got, want);
    return "";
  } catch (err) {
    return err.message;
  }
}

async function main() {
  const { values: args } = parseArgs({ options: { target: { type: "string" }, reads: { type: "string" }, out: { type: "string" } } });
  for (const need of ["target", "reads", "out"]) if (!args[need]) throw new Error(`--${need} is required`);
  const reads = JSON.parse(args.reads);
  const asJson = new ThreadHistory(args.target, { plaintext: true });
  const asProto = new ThreadHistory(args.target, { plaintext: true, valueFormat: "proto" });
  const asRaw = new ThreadHistory(args.target, { plaintext: true, valueFormat: "raw" });
  const out = { reads: [], mismatches: [] };
  for (const [thread, channel] of reads) {
    const where = `thread ${JSON.stringify(thread)} channel ${JSON.stringify(channel)}`;
    const whole = await asJson.snapshots(thread, { channel });
    const d = differs(whole, await asProto.snapshots(thread, { channel }));
    if (d) out.mismatches.push(`${where}: snapshots() differ between json and proto: ${d}`);
    let entries = 0;
    let jsonBytes = 0;
    for (let n = 0; n <= whole.total + 1; n++) {
      const got = await asJson.snapshot(thread, n, { channel });
      const want = await asProto.snapshot(thread, n, { channel });
      const d = differs(got, want);
      if (d) out.mismatches.push(`${where} turn ${n}: ${d}`);
      const raw = await asRaw.snapshot(thread, n, { channel });
      if (raw.outcome !== "found") continue;
      for (const [key, e] of Object.entries(raw.state)) {
        entries++;
        jsonBytes += Buffer.byteLength(e.json, "utf8");
        const d = differs(JSON.parse(e.json), got.state[key].value);
        if (d) out.mismatches.push(`${where} turn ${n} key ${JSON.stringify(key)}: raw text parses otherwise: ${d}`);
      }
    }
    out.reads.push({ thread, channel, turns: whole.total, entries, json_bytes: jsonBytes });
  }
  for (const h of [asJson, asProto, asRaw]) h.close();
  writeFileSync(args.out, JSON.stringify(out));
  process.stderr.write(`check-formats.mjs: ${reads.length} reads, ${out.mismatches.length} mismatches\n`);
}

main().catch((err) => {
  process.stderr.write(`check-formats.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});

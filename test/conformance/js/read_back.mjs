// Read a thread back through LangGraph.js's real savers and print what they
// see: the JavaScript half of py/read_back.py (see there), for
// @langchain/langgraph-checkpoint-postgres's PostgresSaver (--dsn, --schema)
// and @langchain/langgraph-checkpoint-sqlite's SqliteSaver (--sqlite).
//
//   node read_back.mjs (--dsn DSN --schema S | --sqlite PATH) --thread ID

import { parseArgs } from "node:util";
import { BaseMessage } from "@langchain/core/messages";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";

function plain(v) {
  if (v instanceof BaseMessage) {
    return { type: v.getType(), id: v.id ?? null, content: plain(v.content), additional_kwargs: plain(v.additional_kwargs ?? {}) };
  }
  if (v && typeof v === "object" && v.lg_name === "DeltaSnapshot") {
    return { delta_snapshot: plain(v.value) };
  }
  if (v instanceof Uint8Array) return { bytes: Buffer.from(v).toString("hex") };
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  }
  return v === undefined ? null : v;
}

const { values: args } = parseArgs({
  options: { dsn: { type: "string" }, schema: { type: "string" }, sqlite: { type: "string" }, thread: { type: "string" } },
});
const saver = args.sqlite
  ? (await import("@langchain/langgraph-checkpoint-sqlite")).SqliteSaver.fromConnString(args.sqlite)
  : PostgresSaver.fromConnString(args.dsn, { schema: args.schema });
const out = [];
for await (const tup of saver.list({ configurable: { thread_id: args.thread, checkpoint_ns: "" } })) {
  const cp = tup.checkpoint;
  out.push({
    id: cp.id,
    parent: tup.parentConfig?.configurable?.checkpoint_id ?? null,
    metadata: plain(tup.metadata ?? {}),
    versions: Object.fromEntries(Object.entries(cp.channel_versions).map(([k, v]) => [k, String(v)])),
    values: Object.fromEntries(Object.entries(cp.channel_values).map(([k, v]) => [k, plain(v)])),
    writes: (tup.pendingWrites ?? []).map(([task, channel, value]) => [task, channel, plain(value)]),
  });
}
out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
process.stdout.write(JSON.stringify(out));
if (saver.end) await saver.end();

#!/usr/bin/env node
// Answer the shared inspect_state cases with the TypeScript client's
// LangChain.js tool.
//
//   node test/support/run-cases.mjs --target HOST:PORT --cases client/testdata/cases.json --out results.json
//
// test/clients runs this against the historyd it started and compares each
// answer with the table's and with the Go and Python clients'. Each case is
// played as a host plays a tool call: a chat model with the tool bound
// (bindTools) asks for it, and the tool runs the call under the case's
// thread as the run's configurable.thread_id (none for a no_thread case).
//
// Writes {"tool": {"name", "description", "parameters"}, "results": [{"name",
// "output"} or {"name", "error"}, ...]}: the tool as the model sees it and one
// result per case, in the table's order.

import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";

import { ThreadHistory } from "../../dist/index.js";
import { inspectState } from "../../dist/langchain.js";

/** A chat model that calls inspect_state with the arguments it is given. */
class ScriptedModel extends BaseChatModel {
  constructor(calls) {
    super({});
    this.calls = calls;
    this.bound = [];
  }

  _llmType() {
    return "scripted";
  }

  bindTools(tools) {
    this.bound = tools.map((t) => convertToOpenAITool(t));
    return this.withConfig({ tools: this.bound });
  }

  async _generate(messages, options) {
    if (!options?.tools?.length) throw new Error("the model was called without the tool bound");
    const i = messages.filter((m) => m.getType() === "human").length - 1;
    const message = new AIMessage({
      content: "",
      tool_calls: [{ name: "inspect_state", args: this.calls[i], id: `call-${i}`, type: "tool_call" }],
    });
    return { generations: [{ text: "", message }] };
  }
}

async function main() {
  const { values: args } = parseArgs({
    options: { target: { type: "string" }, cases: { type: "string" }, out: { type: "string" } },
  });
  for (const need of ["target", "cases", "out"]) if (!args[need]) throw new Error(`--${need} is required`);
  const { cases } = JSON.parse(readFileSync(args.cases, "utf8"));

  const history = new ThreadHistory(args.target, { plaintext: true });
  const withHistory = inspectState(history);
  const without = inspectState();
  const onChannel = new Map();
  const model = new ScriptedModel(cases.map((c) => c.args));
  const bound = model.bindTools([withHistory]);
  const conversation = [];
  const results = [];
  for (const c of cases) {
    conversation.push(new HumanMessage(c.name));
    const ask = await bound.invoke(conversation);
    const [call] = ask.tool_calls;
    let tool = withHistory;
    if (c.channel) {
      if (!onChannel.has(c.channel)) onChannel.set(c.channel, inspectState(history, { channel: c.channel }));
      tool = onChannel.get(c.channel);
    }
    if (c.no_history) tool = without;
    try {
      const config = c.no_thread ? {} : { configurable: { thread_id: c.thread } };
      const reply = await tool.invoke({ ...call, type: "tool_call" }, config);
      const content = reply.content;
      results.push({ name: c.name, output: typeof content === "string" ? content : JSON.stringify(content) });
    } catch (err) {
      results.push({ name: c.name, error: `${err?.name}: ${err?.message}` });
    }
    conversation.push(ask);
  }
  history.close();
  const fn = model.bound[0].function;
  writeFileSync(args.out, JSON.stringify({ tool: { name: fn.name, description: fn.description, parameters: fn.parameters }, results }));
  const failed = results.filter((r) => "error" in r).length;
  process.stderr.write(`run-cases.mjs: ${results.length} cases answered, ${failed} raised\n`);
}

main().catch((err) => {
  process.stderr.write(`run-cases.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});

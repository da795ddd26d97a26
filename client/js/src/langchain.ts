// inspect_state as a LangChain.js tool.
//
//   import { ThreadHistory } from "@historyd/client";
//   import { inspectState } from "@historyd/client/langchain";
//
//   const history = new ThreadHistory("historyd.internal:8443", { token });
//   const tools = [inspectState(history)];   // model.bindTools(tools), new ToolNode(tools)
//
// The tool reads the thread named by the run's configurable.thread_id (the
// one LangGraph checkpoints under) and answers as the Go client's
// client/inspect does, byte for byte (see inspect.ts). Its name, description
// and parameter descriptions are the Go tool's.

import { tool } from "@langchain/core/tools";
import type { RunnableConfig } from "@langchain/core/runnables";
import { z } from "zod";

import { Inspector, PARAMETER_DESCRIPTIONS, TOOL_DESCRIPTION, TOOL_NAME, type InspectorOptions, type TurnReader } from "./inspect.js";

/** The tool's arguments. The model may send null for what it leaves out. */
export const inspectStateSchema = z.object({
  key: z.string().describe(PARAMETER_DESCRIPTIONS.key),
  pattern: z.string().nullish().describe(PARAMETER_DESCRIPTIONS.pattern),
  path: z.string().nullish().describe(PARAMETER_DESCRIPTIONS.path),
  turn: z.number().int().nullish().describe(PARAMETER_DESCRIPTIONS.turn),
});

/**
 * The inspect_state tool over history (a ThreadHistory, or anything with its
 * snapshot method). Without history the deployment keeps none: turn reads
 * answer no_turn_history, and reads of the present need `present`.
 * `options.channel` is the state channel the tool reads (deepagents'
 * "files"); the model cannot choose it, as which channel holds what is the
 * host's configuration. Errors
 * reading the history are thrown, not answered: a host that wants an outage
 * to reach the model as a failed tool call lets its ToolNode handle them.
 */
export function inspectState(history?: TurnReader, options: Omit<InspectorOptions, "history"> = {}) {
  const inspector = new Inspector({ ...options, history });
  return tool(
    async (args: z.infer<typeof inspectStateSchema>, config?: RunnableConfig) => {
      const threadId = config?.configurable?.thread_id;
      return inspector.read(threadId === undefined || threadId === null ? "" : String(threadId), args);
    },
    { name: TOOL_NAME, description: TOOL_DESCRIPTION, schema: inspectStateSchema },
  );
}

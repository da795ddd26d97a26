// @historyd/client: historyd's TypeScript client. ThreadHistory reads a
// LangGraph thread's per-turn session state over gRPC; "@historyd/client/inspect"
// renders inspect_state's answers and "@historyd/client/langchain" makes the
// LangChain.js tool of it.

export {
  DEFAULTS,
  RESUME_TRAILER,
  HistorydError,
  ThreadHistory,
  type CallOpts,
  type Diff,
  type DiffTurn,
  type Entry,
  type Found,
  type History,
  type KeyChange,
  type NoLongerRetained,
  type NoSuchTurn,
  type PatchOp,
  type Numbering,
  type ReadOpts,
  type Snapshot,
  type ThreadHistoryOptions,
  type ThreadInfo,
  type ThreadsOpts,
  type ThreadsPage,
  type TurnIndex,
  type TurnInfo,
  type TurnState,
  type ValueFormat,
} from "./client.js";
export { traceContextInterceptor } from "./tracing.js";
export { Code } from "@connectrpc/connect";

// Writes js_saver.db: a two-turn thread through LangChain.js's SqliteSaver.
//
// Run where @langchain/langgraph, @langchain/core and
// @langchain/langgraph-checkpoint-sqlite 1.0.x resolve:
//     node js_saver.mjs [output path]
import { existsSync, rmSync } from "node:fs";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { Annotation, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { AIMessage, HumanMessage } from "@langchain/core/messages";

const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  tool_state: Annotation({ reducer: (a, b) => ({ ...(a ?? {}), ...(b ?? {}) }), default: () => ({}) }),
});

const graph = new StateGraph(State)
  .addNode("agent", async (state) => {
    const turn = state.messages.filter((m) => m.getType() === "human").length;
    return {
      messages: [new AIMessage(`answer ${turn}`)],
      tool_state: {
        "sketch-ops/sketch_area/area_km2": { value: 11420.5 * turn, tool: "sketch_area", seq: turn, turn, turns_written: turn },
      },
    };
  })
  .addEdge(START, "agent")
  .addEdge("agent", END);

const path = process.argv[2] ?? new URL("./js_saver.db", import.meta.url).pathname;
if (existsSync(path)) rmSync(path);
const saver = SqliteSaver.fromConnString(path);
const app = graph.compile({ checkpointer: saver });
const config = { configurable: { thread_id: "demo" } };
await app.invoke({ messages: [new HumanMessage("sketch the Severn")] }, config);
await app.invoke({ messages: [new HumanMessage("Wie groß ist die Themse? 🌊")] }, config);
saver.db.close();

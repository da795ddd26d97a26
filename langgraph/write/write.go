// Package write writes values in the formats LangGraph's serializers
// store them: Python's msgpack with its extension types (EncodeMsgpack) and
// LangChain.js's JSON (EncodeJSON). historyd never writes to a
// checkpointer; this package exists so that the demo, the benchmark's data
// generator and tests can produce checkpoints in the real formats without
// running Python or Node. Reading those formats is langgraph/codec's job.
//
// Values are plain Go data plus a few types that each format writes its own
// way: Message (a LangChain message), DeltaSnapshot (a DeltaChannel
// snapshot), Ext (any other Python object, msgpack only), Map (a dict in a
// given order) and time.Time.
package write

// Message is a LangChain message, written as a pydantic v2 model by
// EncodeMsgpack and as a serialized LangChain.js object by EncodeJSON.
type Message struct {
	// Type is the message type: "human", "ai", "tool", "system" or
	// "remove".
	Type string
	// ID is the message id; empty for none.
	ID string
	// Content is a string or a list of content blocks.
	Content any
	// Name is the message's name (a tool message's tool); empty for none.
	Name string
	// ToolCalls are an AI message's tool calls.
	ToolCalls []ToolCall
	// ToolCallID is the call a tool message answers.
	ToolCallID string
	// AdditionalKwargs is the message's additional_kwargs, e.g.
	// {"lc_source": "summarization"} on the summary LangChain's
	// SummarizationMiddleware writes; nil for none.
	AdditionalKwargs map[string]any
}

// Human is a human message with the given id and content.
func Human(id string, content any) Message { return Message{Type: "human", ID: id, Content: content} }

// AI is an AI message with the given id, content and tool calls.
func AI(id string, content any, calls ...ToolCall) Message {
	return Message{Type: "ai", ID: id, Content: content, ToolCalls: calls}
}

// Tool is a tool message answering call of tool name.
func Tool(id string, content any, name, call string) Message {
	return Message{Type: "tool", ID: id, Content: content, Name: name, ToolCallID: call}
}

// Remove is a RemoveMessage of the message id (format.RemoveAll for every one).
func Remove(id string) Message { return Message{Type: "remove", ID: id, Content: ""} }

// DeltaSnapshot is a DeltaChannel's snapshot of its whole value, which
// LangGraph stores every snapshot_frequency updates: msgpack extension 7
// around the value in Python, {"lc": 2, "type": "delta_snapshot", "value":
// ...} in LangChain.js.
type DeltaSnapshot struct {
	// Value is the channel's value at the checkpoint.
	Value any
}

// Package format holds the vocabulary of LangGraph's storage formats that
// both directions share: the blob type names the savers write in their type
// columns, the id of the message removal that clears a list, the nesting
// limit every value stays within, and Map, the ordered dict that LangGraph's
// own structures are written as. The reader (langgraph/codec) and the
// writers (langgraph/write, langgraph/saver) import it so that neither
// direction imports the other.
package format

// The blob types the LangGraph savers write, as they name them in their
// type columns.
const (
	// TypeMsgpack is Python's JsonPlusSerializer.
	TypeMsgpack = "msgpack"
	// TypeJSON is LangChain.js, and Python before msgpack.
	TypeJSON = "json"
	// TypeBytes and TypeBytearray are raw bytes values.
	TypeBytes     = "bytes"
	TypeBytearray = "bytearray"
	// TypeNull is a None value.
	TypeNull = "null"
	// TypeEmpty marks a channel that has no value.
	TypeEmpty = "empty"
	// TypePickle is the opt-in pickle fallback, never decoded.
	TypePickle = "pickle"
)

// RemoveAll is the id of the RemoveMessage that clears a messages list
// (LangGraph's REMOVE_ALL_MESSAGES).
const RemoveAll = "__remove_all__"

// DefaultMaxDepth is the deepest nesting of lists, maps and extension
// payloads a value may have: the reader's limit when its Limits.MaxDepth is
// zero, and the writers' refusal point, so that what they write reads back.
const DefaultMaxDepth = 256

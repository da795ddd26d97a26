package write

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// EncodeJSON writes v as LangChain.js's serializer stores it (its type is
// "json"): plain data as JSON, Message as a serialized LangChain object
// ({"lc": 1, "type": "constructor", "id": [..., "HumanMessage"], "kwargs":
// {...}}), DeltaSnapshot as an {"lc": 2, "type": "delta_snapshot"} record,
// and time.Time as its ISO-8601 text, which is how a JavaScript Date is
// stored. Map keeps its order. Ext values have no JavaScript form and are
// refused, as are non-finite floats, which JSON cannot hold.
func EncodeJSON(v any) ([]byte, error) {
	js, err := jsValue(v, 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(js)
}

// orderedJSON marshals a Map's entries in order.
type orderedJSON []Field

func (m orderedJSON) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range m {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(f.Key)
		if err != nil {
			return nil, err
		}
		val, err := json.Marshal(f.Value)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), val...)
	}
	return append(b, '}'), nil
}

// jsClasses names the LangChain.js class of each message type.
var jsClasses = map[string]string{
	"human": "HumanMessage", "ai": "AIMessage", "tool": "ToolMessage", "system": "SystemMessage", "remove": "RemoveMessage",
}

// jsValue turns v into data encoding/json writes as LangChain.js would.
func jsValue(v any, depth int) (any, error) {
	if depth > 256 {
		return nil, encodeError("nested deeper than 256 levels (a cycle?)")
	}
	switch x := v.(type) {
	case Message:
		class, ok := jsClasses[x.Type]
		if !ok {
			return nil, encodeError("message type %q has no LangChain.js class", x.Type)
		}
		kwargs := Map{{Key: "content", Value: x.Content}}
		if x.ID != "" {
			kwargs = append(kwargs, Field{Key: "id", Value: x.ID})
		}
		if x.Name != "" {
			kwargs = append(kwargs, Field{Key: "name", Value: x.Name})
		}
		add := any(map[string]any{})
		if x.AdditionalKwargs != nil {
			add = x.AdditionalKwargs
		}
		kwargs = append(kwargs, Field{Key: "additional_kwargs", Value: add}, Field{Key: "response_metadata", Value: map[string]any{}})
		switch x.Type {
		case "ai":
			calls := make([]any, len(x.ToolCalls))
			for i, c := range x.ToolCalls {
				args := c.Args
				if args == nil {
					args = map[string]any{}
				}
				calls[i] = Map{{Key: "name", Value: c.Name}, {Key: "args", Value: args}, {Key: "id", Value: c.ID}, {Key: "type", Value: "tool_call"}}
			}
			kwargs = append(kwargs, Field{Key: "tool_calls", Value: calls}, Field{Key: "invalid_tool_calls", Value: []any{}})
		case "tool":
			kwargs = append(kwargs, Field{Key: "tool_call_id", Value: x.ToolCallID}, Field{Key: "status", Value: "success"})
		}
		return jsValue(Map{
			{Key: "lc", Value: 1}, {Key: "type", Value: "constructor"},
			{Key: "id", Value: []any{"langchain_core", "messages", class}},
			{Key: "kwargs", Value: kwargs},
		}, depth)
	case DeltaSnapshot:
		return jsValue(Map{{Key: "lc", Value: 2}, {Key: "type", Value: "delta_snapshot"}, {Key: "value", Value: x.Value}}, depth)
	case Map:
		out := make(orderedJSON, len(x))
		for i, f := range x {
			val, err := jsValue(f.Value, depth+1)
			if err != nil {
				return nil, pathError(err, "."+f.Key)
			}
			out[i] = Field{Key: f.Key, Value: val}
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			val, err := jsValue(e, depth+1)
			if err != nil {
				return nil, pathError(err, "."+k)
			}
			out[k] = val
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			val, err := jsValue(e, depth+1)
			if err != nil {
				return nil, pathError(err, fmt.Sprintf("[%d]", i))
			}
			out[i] = val
		}
		return out, nil
	case time.Time:
		return x.UTC().Format("2006-01-02T15:04:05.000Z"), nil
	case Ext, *Ext:
		return nil, encodeError("a Python object (%T) has no LangChain.js form", v)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, encodeError("%v is not a JSON number", x)
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, encodeError("%v is not a JSON number", x)
		}
	}
	return v, nil
}

package codec

import (
	"encoding/hex"
	"strings"
)

// messageTypes gives the "type" of LangChain message classes whose
// serialized kwargs lack one (LangChain.js never writes it). The names are
// Python's, so a message reads the same whichever language wrote it.
var messageTypes = map[string]string{
	"HumanMessage":         "human",
	"AIMessage":            "ai",
	"ToolMessage":          "tool",
	"SystemMessage":        "system",
	"FunctionMessage":      "function",
	"ChatMessage":          "chat",
	"RemoveMessage":        "remove",
	"HumanMessageChunk":    "HumanMessageChunk",
	"AIMessageChunk":       "AIMessageChunk",
	"ToolMessageChunk":     "ToolMessageChunk",
	"SystemMessageChunk":   "SystemMessageChunk",
	"FunctionMessageChunk": "FunctionMessageChunk",
	"ChatMessageChunk":     "ChatMessageChunk",
}

// positionalClasses are the classes Python's msgpack encoding builds from a
// list of positional arguments (ext 1). Old JSON records of them keep their
// argument list, so both encodings of a value decode alike.
var positionalClasses = map[string]bool{
	"datetime.date":              true,
	"datetime.timedelta":         true,
	"datetime.timezone":          true,
	"re.compile":                 true,
	"pathlib.Path":               true,
	"pathlib.PosixPath":          true,
	"pathlib.WindowsPath":        true,
	"pathlib._local.Path":        true,
	"pathlib._local.PosixPath":   true,
	"pathlib._local.WindowsPath": true,
}

const lcEscapedKey = "__lc_escaped__"

// isLC reports whether m is a serialized LangChain record of version v.
func isLC(m map[string]any, v int64) bool {
	switch n := m["lc"].(type) {
	case int64:
		return n == v
	case float64:
		return n == float64(v)
	}
	return false
}

// stringList returns v as a list of strings, or nil.
func stringList(v any) []string {
	l, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil
		}
		out[i] = s
	}
	return out
}

// reviver holds what one revival pass shares: the key text budget and the
// first error, after which the rest of the tree no longer matters.
type reviver struct {
	keys keyBudget
	err  error
}

// revive replaces serialized LangChain records in a parsed JSON tree with
// their data. Like LangGraph's own revivers it works bottom-up, except that
// escaped user maps inside kwargs are unwrapped and left as stored, which
// needs to know, top-down, whether a map is inside kwargs. Its recursion
// follows the parsed tree, whose depth the parser has bounded.
func (r *reviver) revive(v any, inKwargs bool) any {
	switch v := v.(type) {
	case []any:
		for i, e := range v {
			v[i] = r.revive(e, inKwargs)
		}
		return v
	case map[string]any:
		if inKwargs && len(v) == 1 {
			if inner, ok := v[lcEscapedKey]; ok {
				return inner
			}
		}
		if isLC(v, 1) {
			if out, ok := r.reviveLC1(v); ok {
				return out
			}
		}
		for k, e := range v {
			v[k] = r.revive(e, inKwargs)
		}
		if isLC(v, 2) {
			if out, ok := r.reviveLC2(v); ok {
				return out
			}
		}
		return v
	}
	return v
}

// reviveLC1 handles LangChain's own records: constructors, secrets and
// objects that could not be serialized.
func (r *reviver) reviveLC1(m map[string]any) (any, bool) {
	id := stringList(m["id"])
	if _, hasID := m["id"]; !hasID {
		return nil, false
	}
	switch m["type"] {
	case "secret":
		// The secret itself is never in the blob, only its name.
		return nil, true
	case "not_implemented":
		if rep, ok := m["repr"].(string); ok {
			return rep, true
		}
		return nil, true
	case "constructor":
	default:
		return nil, false
	}
	if len(id) == 0 {
		return nil, false
	}
	var kwargs map[string]any
	switch kw := m["kwargs"].(type) {
	case nil:
		if _, present := m["kwargs"]; present {
			return nil, false
		}
		kwargs = map[string]any{}
	case map[string]any:
		kwargs = kw
	default:
		return nil, false
	}
	for k, e := range kwargs {
		kwargs[k] = r.revive(e, true)
	}
	if t, ok := messageTypes[id[len(id)-1]]; ok {
		if _, has := kwargs["type"]; !has {
			kwargs["type"] = t
		}
	}
	return kwargs, true
}

// reviveLC2 handles version 2 records: LangChain.js's records for values
// JSON cannot hold (one-element ids) and old Python constructor records
// (module path and class name). Records that fit neither are kept.
func (r *reviver) reviveLC2(m map[string]any) (any, bool) {
	switch m["type"] {
	case "undefined":
		return nil, true
	case "constructor":
	default:
		return nil, false
	}
	id := stringList(m["id"])
	switch {
	case len(id) == 1:
		return r.reviveJSRecord(id[0], m)
	case len(id) >= 2:
		return revivePythonRecord(strings.Join(id[:len(id)-1], "."), id[len(id)-1], m)
	}
	return nil, false
}

// reviveJSRecord rebuilds the closed set of records LangChain.js writes.
// Like LangChain.js, it leaves a record as it is when its arguments do not
// have the expected shape.
func (r *reviver) reviveJSRecord(name string, m map[string]any) (any, bool) {
	if method := m["method"]; method != nil && !(name == "Uint8Array" && method == "from") {
		return nil, false
	}
	args, _ := m["args"].([]any)
	switch name {
	case "Set":
		if len(args) == 1 {
			if items, ok := args[0].([]any); ok {
				return items, true
			}
		}
	case "Map":
		if len(args) != 1 {
			return nil, false
		}
		entries, ok := args[0].([]any)
		if !ok {
			return nil, false
		}
		out := make(map[string]any, len(entries))
		for _, e := range entries {
			pair, ok := e.([]any)
			if !ok || len(pair) != 2 {
				return nil, false
			}
			key, err := r.keys.text(pair[0], -1)
			if err != nil {
				if r.err == nil {
					r.err = err
				}
				return nil, true
			}
			out[key] = pair[1]
		}
		return out, true
	case "RegExp":
		if len(args) == 2 {
			_, ok1 := args[0].(string)
			_, ok2 := args[1].(string)
			if ok1 && ok2 {
				return args, true
			}
		}
	case "Error":
		if len(args) == 1 {
			if msg, ok := args[0].(string); ok {
				return msg, true
			}
		}
	case "Uint8Array":
		if len(args) != 1 {
			return nil, false
		}
		items, ok := args[0].([]any)
		if !ok {
			return nil, false
		}
		out := make([]byte, len(items))
		for i, e := range items {
			n, ok := e.(int64)
			if !ok || n < 0 || n > 255 {
				return nil, false
			}
			out[i] = byte(n)
		}
		return out, true
	}
	return nil, false
}

// revivePythonRecord maps an old Python JSON record to what the msgpack
// extension for the same class decodes to: the same data, rendered the
// same way (see renderPython).
func revivePythonRecord(module, class string, m map[string]any) (any, bool) {
	data, ok := pythonRecordData(module, class, m)
	if !ok {
		return nil, false
	}
	return renderPython(module, class, data), true
}

// pythonRecordData is the data of an old Python JSON record as the msgpack
// extension for its class holds it.
func pythonRecordData(module, class string, m map[string]any) (any, bool) {
	args, hasArgs := m["args"].([]any)
	kwargs, hasKwargs := m["kwargs"].(map[string]any)
	full := module + "." + class
	switch {
	case module == "builtins" && (class == "bytes" || class == "bytearray") && m["method"] == "fromhex":
		if len(args) == 1 {
			if s, ok := args[0].(string); ok {
				if b, err := hex.DecodeString(strings.ReplaceAll(s, " ", "")); err == nil {
					return b, true
				}
			}
		}
		return nil, false
	case full == "datetime.time" && hasArgs:
		// Written as (hour, minute, second, microsecond, tzinfo) plus fold;
		// msgpack writes the same fields by name.
		out := map[string]any{}
		for i, name := range []string{"hour", "minute", "second", "microsecond", "tzinfo"} {
			if i < len(args) {
				out[name] = args[i]
			}
		}
		for k, v := range kwargs {
			out[k] = v
		}
		return out, true
	case positionalClasses[full] && hasArgs:
		return args, true
	case len(args) > 0 && len(kwargs) > 0:
		return map[string]any{"args": args, "kwargs": kwargs}, true
	case len(args) == 1:
		return args[0], true
	case len(args) > 1:
		return args, true
	case hasKwargs:
		return kwargs, true
	case hasArgs:
		return args, true
	}
	return nil, true
}

package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/historyd/historyd/client"
)

// ToolName is the name the tool is registered under. Hosts' prompts and the
// "[state updated: ...]" notes tools leave refer to it by this name.
const ToolName = "inspect_state"

// ToolDescription tells the model what the tool does and, above all, when
// to pass turn: a model that does not know an earlier value exists compares
// the current value with itself.
const ToolDescription = `Read or search a session-state key, such as one named in a "[state updated: ...]" note.

With key alone, returns the key's value as JSON, or an outline of its structure when it is large; then narrow the read with pattern or path. key="*" lists every stored key, or searches all of them with pattern.

Pass turn=<n> to read the key as it stood at the end of turn n instead of now; turns are the user's questions, counted from 1. A key holds only its latest value, so a comparison with an earlier result made without turn compares the current value with itself. An earlier value exists when a read says several turns wrote the key, when a listing marks a key "written in N turns", or when a note says a write replaced what a key held at some turn: read it with turn.

Answer from what a turn read returns. If the turn is no longer retained, say that the earlier value is no longer available; do not use the current value in its place.`

// ParametersSchema is the JSON Schema of the tool's arguments, for runtimes
// that register tools by schema. It is shared: callers must not modify it.
var ParametersSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "key": {
      "type": "string",
      "description": "State key to read, or \"*\" for every stored key."
    },
    "pattern": {
      "type": "string",
      "description": "Case-insensitive regular expression matched against the value's flattened \"path = value\" lines; only matching lines are returned. An invalid expression is matched as plain text."
    },
    "path": {
      "type": "string",
      "description": "Part of the value to return, e.g. \"features[0].properties.name\". The paths printed by pattern matches work here."
    },
    "turn": {
      "type": "integer",
      "description": "Read the key as it stood at the end of this turn instead of now. Turns are the user's questions, counted from 1."
    }
  },
  "required": ["key"],
  "additionalProperties": false
}`)

// Call answers a tool call whose arguments are the model's JSON text,
// reading through h (nil when the deployment keeps no history). See
// Inspector.Call.
func Call(ctx context.Context, h client.ThreadHistory, threadID string, argsJSON []byte) (string, error) {
	return (&Inspector{History: h}).Call(ctx, threadID, argsJSON)
}

// Call parses the model's JSON arguments and answers as Read does.
// Arguments the model got wrong are answered, not returned as an error: the
// model is the one who can fix them, so it is told what was wrong and what
// the tool expects. Parsing is lenient where intent is clear: a turn given
// as "3" or 3.0 is turn 3, null reads as absent, arguments double-encoded as
// a JSON string are decoded, and unknown fields are ignored.
func (in *Inspector) Call(ctx context.Context, threadID string, argsJSON []byte) (string, error) {
	args, err := ParseArgs(argsJSON)
	if err != nil {
		return dumps(invalidArgs{
			Problem:  err.Error(),
			Expected: `{"key": string, "pattern"?: string, "path"?: string, "turn"?: integer}`,
		}), nil
	}
	return in.Read(ctx, threadID, args)
}

type invalidArgs struct {
	Problem  string `json:"invalid_arguments"`
	Expected string `json:"expected"`
}

// ParseArgs reads the model's JSON arguments leniently, as Call describes.
// Its error's text is written for the model: it says what is wrong.
func ParseArgs(data []byte) (Args, error) {
	var args Args
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var inner string
		if err := json.Unmarshal(data, &inner); err == nil {
			data = bytes.TrimSpace([]byte(inner))
		}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return args, errors.New("the arguments are not a JSON object")
	}
	str := func(name string) (string, bool, string) {
		raw, ok := fields[name]
		if !ok || isNull(raw) {
			return "", false, ""
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, fmt.Sprintf("%s must be a string, got %s", name, raw)
		}
		return s, true, ""
	}
	key, ok, problem := str("key")
	if problem != "" {
		return args, errors.New(problem)
	}
	if !ok {
		return args, errors.New(`key is required: a state key, or "*" for every key`)
	}
	args.Key = key
	if args.Pattern, _, problem = str("pattern"); problem != "" {
		return args, errors.New(problem)
	}
	if args.Path, _, problem = str("path"); problem != "" {
		return args, errors.New(problem)
	}
	if raw, ok := fields["turn"]; ok && !isNull(raw) {
		n, ok := parseTurn(raw)
		if !ok {
			return args, fmt.Errorf("turn must be a whole number (the user's questions, counted from 1), got %s", raw)
		}
		args.Turn = &n
	}
	return args, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// parseTurn accepts a JSON integer, an integral float, or either as a
// string: models emit all of them for "3".
func parseTurn(raw json.RawMessage) (int, bool) {
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		text = string(raw)
	}
	text = strings.TrimSpace(text)
	if n, err := strconv.Atoi(text); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

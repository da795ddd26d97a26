package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/client"
)

// The diff mode: a second, optional tool for the model, answering "what
// changed in key K between turn 1 and turn 2" from one Diff call, with the
// same three-way care as a turn read. A host offers it next to
// inspect_state by registering DiffToolName with DiffToolDescription and
// DiffParametersSchema and answering with CallDiff; it needs an
// Inspector whose History can compare turns (a *client.Client can).

// DiffToolName is the name the diff mode is registered under.
const DiffToolName = "inspect_state_diff"

// DiffToolDescription tells the model what the diff mode answers and
// when to use it.
const DiffToolDescription = `Say what changed in a session-state key between the ends of two turns, such as "how did this result change since turn 1?". Turns are the user's questions, counted from 1.

Give key, and the turns: to_turn defaults to the latest turn, from_turn to the turn before to_turn. The answer is the value before and after (or a JSON Patch from one to the other when they are large), or says that the key did not change, or was added or removed. key="*" lists every key that changed.

If either turn never happened or is no longer retained, the answer says so and compares nothing: say that the comparison cannot be made; do not compare with the current value instead.`

// DiffParametersSchema is the JSON Schema of the diff mode's arguments. It
// is shared: callers must not modify it.
var DiffParametersSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "key": {
      "type": "string",
      "description": "State key to compare, or \"*\" for every key that changed."
    },
    "from_turn": {
      "type": "integer",
      "description": "The earlier turn. Defaults to the turn before to_turn."
    },
    "to_turn": {
      "type": "integer",
      "description": "The later turn. Defaults to the latest turn."
    }
  },
  "required": ["key"],
  "additionalProperties": false
}`)

// DiffArgs are the diff mode's arguments, as the model supplies them.
type DiffArgs struct {
	// Key is the state key, or AllKeys for every key that changed.
	Key string `json:"key"`
	// From is the earlier turn; nil is the turn before To.
	From *int `json:"from_turn,omitempty"`
	// To is the later turn; nil is the latest turn.
	To *int `json:"to_turn,omitempty"`
}

// Differ is what the diff mode reads through: Inspector.History, when it
// can compare two turns. *client.Client is one.
type Differ interface {
	Diff(ctx context.Context, threadID string, from, to int, opts ...client.ReadOption) (*client.Diff, error)
}

// ErrNoDiff is returned by Diff when the Inspector's History cannot
// compare turns: a host misconfiguration, not something to tell the model.
var ErrNoDiff = errors.New("inspect: Inspector.History cannot compare turns: give it a *client.Client, or another client.ThreadHistory with a Diff method (inspect.Differ)")

// CallDiff parses the model's JSON arguments for the diff mode and
// answers as Diff does; arguments the model got wrong are answered, not
// returned as an error.
func (in *Inspector) CallDiff(ctx context.Context, threadID string, argsJSON []byte) (string, error) {
	args, err := parseDiffArgs(argsJSON)
	if err != nil {
		return dumps(invalidArgs{Problem: err.Error(), Expected: `{"key": string, "from_turn"?: integer, "to_turn"?: integer}`}), nil
	}
	return in.Diff(ctx, threadID, args)
}

// parseDiffArgs reads the diff mode's arguments as leniently as
// ParseArgs reads inspect_state's.
func parseDiffArgs(data []byte) (DiffArgs, error) {
	var fields map[string]json.RawMessage
	base, err := ParseArgs(data) // the key, and the same lenient framing
	if err != nil {
		return DiffArgs{}, err
	}
	_ = json.Unmarshal(unwrapArgs(data), &fields)
	args := DiffArgs{Key: base.Key}
	for name, into := range map[string]**int{"from_turn": &args.From, "to_turn": &args.To} {
		if raw, ok := fields[name]; ok && !isNull(raw) {
			n, ok := parseTurn(raw)
			if !ok {
				return DiffArgs{}, fmt.Errorf("%s must be a whole number (the user's questions, counted from 1), got %s", name, raw)
			}
			*into = &n
		}
	}
	return args, nil
}

// unwrapArgs undoes arguments double-encoded as a JSON string, as
// ParseArgs does.
func unwrapArgs(data []byte) []byte {
	var inner string
	if json.Unmarshal(data, &inner) == nil {
		return []byte(inner)
	}
	return data
}

// The diff mode's answers. As with inspect_state's, each is a JSON object
// whose first field names the case.

type keyChanged struct {
	Key    string `json:"changed"`
	From   int    `json:"from_turn"`
	To     int    `json:"to_turn"`
	Before any    `json:"before"`
	After  any    `json:"after"`
}

// keyPatched is keyChanged for values too large to show whole.
type keyPatched struct {
	Key   string           `json:"changed"`
	From  int              `json:"from_turn"`
	To    int              `json:"to_turn"`
	Patch []client.PatchOp `json:"patch"`
	More  int              `json:"more_operations,omitempty"`
	Note  string           `json:"note"`
}

type keyUnchanged struct {
	Key  string `json:"unchanged"`
	From int    `json:"from_turn"`
	To   int    `json:"to_turn"`
	Note string `json:"note"`
}

type keyAdded struct {
	Key   string `json:"added"`
	From  int    `json:"from_turn"`
	To    int    `json:"to_turn"`
	After any    `json:"after"`
	Note  string `json:"note"`
}

type keyRemoved struct {
	Key    string `json:"removed"`
	From   int    `json:"from_turn"`
	To     int    `json:"to_turn"`
	Before any    `json:"before"`
	Note   string `json:"note"`
}

type keyAbsent struct {
	Key  string `json:"absent"`
	From int    `json:"from_turn"`
	To   int    `json:"to_turn"`
	Note string `json:"note"`
}

type keysChanged struct {
	Changes map[string]string `json:"changes"`
	From    int               `json:"from_turn"`
	To      int               `json:"to_turn"`
	Note    string            `json:"note,omitempty"`
}

// Diff answers one call of the diff mode for the thread. The answer is
// text for the model, misses included; the error is for failures the
// host must handle (the service unreachable, ErrNoDiff).
func (in *Inspector) Diff(ctx context.Context, threadID string, args DiffArgs) (string, error) {
	key := strings.TrimPrefix(args.Key, handlePrefix)
	if key == "" {
		key = AllKeys
	}
	if in.History != nil && threadID == "" {
		return in.noThread(ctx, nil, "The host running this tool did not name this conversation's thread, so its saved state cannot be read and no two turns can be compared. Calling again will not change that: say that the state could not be read."), nil
	}
	if in.History == nil {
		turn := 0
		if args.To != nil {
			turn = *args.To
		}
		return dumps(noTurnHistory{Turn: turn,
			Reason: "This deployment keeps no per-turn history, so turns cannot be compared. Read the key's current value with inspect_state instead."}), nil
	}
	d, ok := in.History.(Differ)
	if !ok {
		return "", ErrNoDiff
	}
	cfg := client.NewReadConfig(in.Options...)
	opts := []client.ReadOption{client.WithNamespace(cfg.Namespace), client.WithChannel(cfg.Channel)}
	var fromTurn, toTurn int
	if args.From != nil {
		fromTurn = *args.From
		if fromTurn < 1 {
			return dumps(noSuchTurn{Turn: fromTurn, Reason: "Turns are the user's questions, counted from 1."}), nil
		}
	}
	if args.To != nil {
		toTurn = *args.To
		if toTurn < 1 {
			return dumps(noSuchTurn{Turn: toTurn, Reason: "Turns are the user's questions, counted from 1."}), nil
		}
	}
	if key != AllKeys {
		// One key: listed whatever became of it, unchanged included.
		opts = append(opts, client.WithKeys(key), client.WithIncludeUnchanged())
	}
	res, err := d.Diff(ctx, threadID, fromTurn, toTurn, opts...)
	if err != nil {
		return "", err
	}
	if res.From.Outcome == client.NoSuchTurn && res.From.Turn == 0 && res.To.Outcome == client.Found {
		return dumps(noSuchTurn{Turn: 0, TurnsSoFar: res.Total, Reason: fmt.Sprintf(
			"Turn %d is the first turn, so there is no earlier turn to compare it with. Read the key with inspect_state and turn=%d for the value it ended with.", res.To.Turn, res.To.Turn)}), nil
	}
	for _, end := range []client.DiffEnd{res.From, res.To} {
		switch end.Outcome {
		case client.NoSuchTurn:
			reason := fmt.Sprintf("Turns are the user's questions, counted from 1; this conversation has had %d so far, so there is nothing to compare.", res.Total)
			if res.Total == 0 {
				reason = "Turns are the user's questions, counted from 1; this conversation has had none yet, so there is nothing to compare."
			}
			return dumps(noSuchTurn{Turn: end.Turn, TurnsSoFar: res.Total, Reason: reason}), nil
		case client.NoLongerRetained:
			return dumps(noLongerRetained{Turn: end.Turn, Question: end.Question, Retained: nonNil(res.Retained),
				Reason: "That turn happened, but its state has since been pruned, so the comparison cannot be made. " +
					"Say so; do not compare with the current value, which may be a different one."}), nil
		case client.Found:
		default:
			return "", status.Errorf(codes.Internal, "inspect: turn %d of the diff has no outcome", end.Turn)
		}
	}
	from, to := res.From.Turn, res.To.Turn
	if key == AllKeys {
		out := keysChanged{Changes: map[string]string{}, From: from, To: to}
		for _, ch := range res.Changes {
			out.Changes[ch.Key] = ch.Kind.String()
		}
		if len(out.Changes) == 0 {
			out.Note = fmt.Sprintf("No key changed between the end of turn %d and the end of turn %d.", from, to)
		} else {
			out.Note = "Compare one key by passing it as key."
		}
		return dumps(out), nil
	}
	i := slices.IndexFunc(res.Changes, func(c client.KeyChange) bool { return c.Key == key })
	if i < 0 {
		return dumps(keyAbsent{Key: key, From: from, To: to,
			Note: fmt.Sprintf("Nothing was stored under this key at the end of turn %d, nor at the end of turn %d.", from, to)}), nil
	}
	return in.renderChange(res.Changes[i], from, to), nil
}

// renderChange answers for one key's change.
func (in *Inspector) renderChange(ch client.KeyChange, from, to int) string {
	value := func(e *client.Entry) any {
		if e == nil {
			return nil
		}
		return prepare(e.Value)
	}
	fits := func(v any) bool { return chars(dumps(v)) <= in.maxValueChars() }
	shown := func(v any) any {
		if fits(v) {
			return v
		}
		return "(large: " + shape(v) + ")"
	}
	switch ch.Kind {
	case client.Added:
		return dumps(keyAdded{Key: ch.Key, From: from, To: to, After: shown(value(ch.To)),
			Note: fmt.Sprintf("Nothing was stored under this key at the end of turn %d; turn %d ended with this value.", from, to)})
	case client.Removed:
		return dumps(keyRemoved{Key: ch.Key, From: from, To: to, Before: shown(value(ch.From)),
			Note: fmt.Sprintf("Turn %d ended with this value; nothing was stored under this key at the end of turn %d.", from, to)})
	case client.Unchanged:
		return dumps(keyUnchanged{Key: ch.Key, From: from, To: to,
			Note: fmt.Sprintf("The key held the same value at the end of turn %d and at the end of turn %d.", from, to)})
	}
	if len(ch.Patch) == 0 {
		// Only the bookkeeping changed: the key was written again with the
		// same value.
		return dumps(keyUnchanged{Key: ch.Key, From: from, To: to,
			Note: fmt.Sprintf("The value is the same at the end of turn %d and at the end of turn %d, though a tool wrote the key again in between.", from, to)})
	}
	before, after := value(ch.From), value(ch.To)
	if fits(map[string]any{"before": before, "after": after}) {
		return dumps(keyChanged{Key: ch.Key, From: from, To: to, Before: before, After: after})
	}
	// Too large to show both: the operations that turn one into the other,
	// as many as fit.
	ops := make([]client.PatchOp, 0, len(ch.Patch))
	for _, op := range ch.Patch {
		op.Value = prepare(op.Value)
		if !fits(op.Value) {
			op.Value = "(large: " + shape(op.Value) + ")"
		}
		if len(ops) > 0 && chars(dumps(append(ops, op))) > in.maxValueChars() {
			break
		}
		ops = append(ops, op)
	}
	return dumps(keyPatched{Key: ch.Key, From: from, To: to, Patch: ops, More: len(ch.Patch) - len(ops),
		Note: "The values are too large to show whole: patch lists the JSON Patch (RFC 6902) operations that turn the value at the end of from_turn into the value at the end of to_turn. Read either value with inspect_state and turn."})
}

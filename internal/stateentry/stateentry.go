// Package stateentry turns historyd's served state entries back into the
// dict form a checkpointer stores them in (the tool_state convention: the
// value beside tool, seq, turn, turns_written and inputs), read as a JSON
// client reads them, so that tests and the benchmark compare what historyd
// serves with what LangGraph itself reports.
package stateentry

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// Maps is Map of every entry, by key.
func Maps(entries map[string]*historydv1.StateEntry) (map[string]any, error) {
	out := make(map[string]any, len(entries))
	for k, e := range entries {
		m, err := Map(e)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", k, err)
		}
		out[k] = m
	}
	return out, nil
}

// Map is the entry as the convention's dict: "value" and whichever of
// "tool", "seq", "turn", "turns_written" and "inputs" it has, beside its
// extra fields. The values go through protojson exactly as a JSON client
// would see them, and the whole is what encoding/json decodes (numbers are
// float64).
func Map(e *historydv1.StateEntry) (map[string]any, error) {
	m := map[string]any{}
	// Extra first, so the conventional fields win were a name in both.
	for name, v := range e.GetExtra().GetFields() {
		x, err := protoJSON(v)
		if err != nil {
			return nil, err
		}
		m[name] = x
	}
	if e.GetValue() != nil {
		x, err := protoJSON(e.GetValue())
		if err != nil {
			return nil, err
		}
		m["value"] = x
	}
	if e.Tool != nil {
		m["tool"] = e.GetTool()
	}
	if e.Seq != nil {
		m["seq"] = e.GetSeq()
	}
	if e.Turn != nil {
		m["turn"] = e.GetTurn()
	}
	if e.TurnsWritten != nil {
		m["turns_written"] = e.GetTurnsWritten()
	}
	if len(e.GetInputs()) > 0 {
		m["inputs"] = e.GetInputs()
	}
	// Normalise to what encoding/json decodes.
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode entry: %w", err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode entry: %w", err)
	}
	return out, nil
}

// protoJSON is v as protojson writes it, decoded by encoding/json.
func protoJSON(v proto.Message) (any, error) {
	raw, err := protojson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("protojson: %w", err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode protojson %s: %w", shorten(string(raw)), err)
	}
	return out, nil
}

// shorten cuts s to 160 bytes for an error message.
func shorten(s string) string {
	const limit = 160
	if len(s) <= limit {
		return s
	}
	return s[:limit] + fmt.Sprintf("… (%d bytes)", len(s))
}

package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/stateentry"
)

// expectation is what a writer's expected.json says: the thread as LangGraph
// itself reports it, with turns derived by historyd's rules and session state
// in historyd's JSON mapping.
type expectation struct {
	Total          int                 `json:"total"`
	Questions      []string            `json:"questions"`
	Turns          map[string]*expTurn `json:"turns"`
	Retained       []int               `json:"retained"`
	Checkpoints    []expCheckpoint     `json:"checkpoints"`
	ThreadID       string              `json:"thread_id"`
	Schema         string              `json:"schema"`
	SQLite         string              `json:"sqlite"`
	Writer         string              `json:"writer"`
	Versions       map[string]string   `json:"versions"`
	Reference      *reference          `json:"reference"`
	ReferenceError string              `json:"reference_error"`

	// With --all-states (Python): the state of every root checkpoint,
	// each key mapped to an index in Entries.
	Entries          []any                     `json:"entries"`
	CheckpointStates map[string]map[string]int `json:"checkpoint_states"`
}

// expTurn is one retained turn. ToolState maps each key to its entry in
// JSON dict form: {value, tool, seq, inputs, turn, turns_written, ...extra}.
type expTurn struct {
	Turn         int            `json:"turn"`
	CheckpointID string         `json:"checkpoint_id"`
	Question     string         `json:"question"`
	EndedAt      string         `json:"ended_at"`
	ToolState    map[string]any `json:"tool_state"`
}

// expCheckpoint is one root checkpoint of the thread.
type expCheckpoint struct {
	CheckpointID string `json:"checkpoint_id"`
	Humans       int    `json:"humans"`
	Messages     int    `json:"messages"`
	CreatedAt    string `json:"created_at"`
}

// reference is mcp_agent.history.turns_from's answer for the thread.
// It is read through a view of the saver pinned to the root namespace, as
// historyd reads; UnscopedDifferences says where turns_from's own read, over
// every namespace of the thread, came out differently.
type reference struct {
	Total               int                `json:"total"`
	Retained            []int              `json:"retained"`
	Turns               map[string]refTurn `json:"turns"`
	UnscopedDifferences []string           `json:"unscoped_differences"`
}

type refTurn struct {
	CheckpointID string         `json:"checkpoint_id"`
	Question     string         `json:"question"`
	State        map[string]any `json:"state"`
}

func readExpectation(t *testing.T, path string) *expectation {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var e expectation
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if len(e.Questions) != e.Total {
		t.Fatalf("%s: %d questions for total %d", path, len(e.Questions), e.Total)
	}
	for _, n := range e.Retained {
		if e.Turns[strconv.Itoa(n)] == nil {
			t.Fatalf("%s: retained turn %d has no entry in turns", path, n)
		}
	}
	return &e
}

func (e *expectation) turn(n int) *expTurn { return e.Turns[strconv.Itoa(n)] }

func (e *expectation) retained(n int) bool { return slices.Contains(e.Retained, n) }

// project is the turn as a keys projection returns it: only those of keys the
// turn holds.
func (tt *expTurn) project(keys []string) *expTurn {
	out := *tt
	out.ToolState = map[string]any{}
	for _, k := range keys {
		if v, ok := tt.ToolState[k]; ok {
			out.ToolState[k] = v
		}
	}
	return &out
}

// keysWritten lists the keys whose entry records this turn as its last
// write, sorted.
func (tt *expTurn) keysWritten() []string {
	var out []string
	for k, v := range tt.ToolState {
		if m, ok := v.(map[string]any); ok {
			if n, ok := m["turn"].(float64); ok && int(n) == tt.Turn {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// entriesJSON turns historyd's entries back into the JSON dict form the
// writers record, going through protojson exactly as a JSON client would
// see the values (stateentry.Maps).
func entriesJSON(t *testing.T, entries map[string]*historydv1.StateEntry) map[string]any {
	t.Helper()
	out, err := stateentry.Maps(entries)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diffJSON lists where got differs from want (both as encoding/json decodes
// JSON), at most maxDiffs of them, with long values shortened.
func diffJSON(path string, want, got any) []string {
	var out []string
	diffInto(&out, path, want, got)
	return out
}

const maxDiffs = 12

func diffInto(out *[]string, path string, want, got any) {
	if len(*out) >= maxDiffs {
		return
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: got %s, want an object", path, describe(got)))
			return
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			wv, inW := w[k]
			gv, inG := g[k]
			p := path + "[" + strconv.Quote(k) + "]"
			switch {
			case !inG:
				*out = append(*out, fmt.Sprintf("%s: missing, want %s", p, describe(wv)))
			case !inW:
				*out = append(*out, fmt.Sprintf("%s: unexpected %s", p, describe(gv)))
			default:
				diffInto(out, p, wv, gv)
			}
			if len(*out) >= maxDiffs {
				return
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: got %s, want an array", path, describe(got)))
			return
		}
		if len(g) != len(w) {
			*out = append(*out, fmt.Sprintf("%s: %d elements, want %d", path, len(g), len(w)))
		}
		for i := 0; i < len(w) && i < len(g); i++ {
			diffInto(out, fmt.Sprintf("%s[%d]", path, i), w[i], g[i])
			if len(*out) >= maxDiffs {
				return
			}
		}
	default:
		if !reflect.DeepEqual(want, got) {
			*out = append(*out, fmt.Sprintf("%s: got %s, want %s", path, describe(got), describe(want)))
		}
	}
}

func describe(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	kind := "null"
	switch v.(type) {
	case string:
		kind = "string"
	case float64:
		kind = "number"
	case bool:
		kind = "bool"
	case map[string]any:
		kind = "object"
	case []any:
		kind = "array"
	}
	return kind + " " + shorten(string(raw))
}

func shorten(s string) string {
	const max = 160
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("… (%d bytes)", len(s))
}

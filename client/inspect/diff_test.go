package inspect_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/client/inspect"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// diffInspector serves the suite's demo conversation (the area rewritten
// in turn 2, nothing written in turn 3, a key added in turn 4) and a copy
// with turn 1 pruned, through historyd, to an Inspector on the Go client.
func diffInspector(t *testing.T, maxChars int) *inspect.Inspector {
	t.Helper()
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "demo"}, storetest.Demo)
	pruned := backend.Ref{ThreadID: "pruned"}
	written := storetest.Build(mem, pruned, storetest.Demo)
	mem.Delete(pruned, written[0].IDs)
	big := backend.Ref{ThreadID: "big"}
	b := storetest.NewBuilder(mem, big)
	ring := func(n int) []any {
		var out []any
		for i := range n {
			out = append(out, []any{float64(i), float64(i) / 2})
		}
		return out
	}
	b.Turn(storetest.Turn{Question: "first shape", Writes: map[string]any{"shape": map[string]any{"name": "Severn", "ring": ring(300)}}})
	b.Turn(storetest.Turn{Question: "second shape", Writes: map[string]any{"shape": map[string]any{"name": "Thames", "ring": ring(300)}}})
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: mem}})
	c, err := client.Dial(servertest.Target, client.WithInsecure(), client.WithDialOptions(srv.Dialer()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &inspect.Inspector{History: c, MaxValueChars: maxChars}
}

func TestDiffMode(t *testing.T) {
	in := diffInspector(t, 0)
	ctx := context.Background()
	for _, tt := range []struct {
		thread, args, want string
	}{
		{"demo", `{"key": "sketch-ops/sketch_area/area_km2", "from_turn": 1, "to_turn": 2}`,
			`{"changed":"sketch-ops/sketch_area/area_km2","from_turn":1,"to_turn":2,"before":11420,"after":12935}`},
		// The defaults: the latest turn and the one before it.
		{"demo", `{"key": "notes/lang"}`,
			`{"added":"notes/lang","from_turn":3,"to_turn":4,"after":"de","note":"Nothing was stored under this key at the end of turn 3; turn 4 ended with this value."}`},
		{"demo", `{"key": "notes/lang", "from_turn": "4", "to_turn": 1}`,
			`{"removed":"notes/lang","from_turn":4,"to_turn":1,"before":"de","note":"Turn 4 ended with this value; nothing was stored under this key at the end of turn 1."}`},
		{"demo", `{"key": "sketch-ops/sketch_area/name", "to_turn": 3}`,
			`{"unchanged":"sketch-ops/sketch_area/name","from_turn":2,"to_turn":3,"note":"The key held the same value at the end of turn 2 and at the end of turn 3."}`},
		{"demo", `{"key": "nothing/here", "from_turn": 1, "to_turn": 2}`,
			`{"absent":"nothing/here","from_turn":1,"to_turn":2,"note":"Nothing was stored under this key at the end of turn 1, nor at the end of turn 2."}`},
		{"demo", `{"key": "*", "from_turn": 1, "to_turn": 4}`,
			`{"changes":{"notes/lang":"added","sketch-ops/sketch_area/area_km2":"changed","sketch-ops/sketch_area/name":"changed"},"from_turn":1,"to_turn":4,"note":"Compare one key by passing it as key."}`},
		{"demo", `{"key": "*", "from_turn": 2, "to_turn": 3}`,
			`{"changes":{},"from_turn":2,"to_turn":3,"note":"No key changed between the end of turn 2 and the end of turn 3."}`},
		{"demo", `{"key": "sketch-ops/sketch_area/area_km2", "to_turn": 1}`,
			`{"no_such_turn":0,"turns_so_far":4,"reason":"Turn 1 is the first turn, so there is no earlier turn to compare it with. Read the key with inspect_state and turn=1 for the value it ended with."}`},
		{"demo", `{"key": "sketch-ops/sketch_area/area_km2", "from_turn": 2, "to_turn": 9}`,
			`{"no_such_turn":9,"turns_so_far":4,"reason":"Turns are the user's questions, counted from 1; this conversation has had 4 so far, so there is nothing to compare."}`},
		{"pruned", `{"key": "sketch-ops/sketch_area/area_km2", "from_turn": 1, "to_turn": 2}`,
			`{"turn_no_longer_retained":1,"question":"sketch a rough boundary around the Severn catchment and call it Severn","retained_turns":[2,3,4],"reason":"That turn happened, but its state has since been pruned, so the comparison cannot be made. Say so; do not compare with the current value, which may be a different one."}`},
		{"never", `{"key": "k"}`,
			`{"no_such_turn":0,"turns_so_far":0,"reason":"Turns are the user's questions, counted from 1; this conversation has had none yet, so there is nothing to compare."}`},
		{"demo", `{"key": "k", "to_turn": "two"}`,
			`{"invalid_arguments":"to_turn must be a whole number (the user's questions, counted from 1), got \"two\"","expected":"{\"key\": string, \"from_turn\"?: integer, \"to_turn\"?: integer}"}`},
		{"demo", `{"from_turn": 1}`,
			`{"invalid_arguments":"key is required: a state key, or \"*\" for every key","expected":"{\"key\": string, \"from_turn\"?: integer, \"to_turn\"?: integer}"}`},
	} {
		got, err := in.CallDiff(ctx, tt.thread, []byte(tt.args))
		if err != nil {
			t.Errorf("%s %s: %v", tt.thread, tt.args, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tt.thread, tt.args, got, tt.want)
		}
	}
}

// Values too large to show whole are answered with the patch between
// them, as much of it as fits.
func TestDiffModeLargeValues(t *testing.T) {
	in := diffInspector(t, 200)
	got, err := in.CallDiff(context.Background(), "big", []byte(`{"key": "shape"}`))
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Changed string           `json:"changed"`
		Patch   []map[string]any `json:"patch"`
		Note    string           `json:"note"`
	}
	if err := json.Unmarshal([]byte(got), &answer); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if answer.Changed != "shape" || len(answer.Patch) != 1 || answer.Patch[0]["path"] != "/name" || answer.Patch[0]["value"] != "Thames" ||
		!strings.Contains(answer.Note, "RFC 6902") {
		t.Errorf("large values: %s", got)
	}
}

// The diff mode needs a history that can compare turns; without any
// history it says so to the model.
func TestDiffModeWithoutDiffer(t *testing.T) {
	in := &inspect.Inspector{History: &fakeHistory{total: 1}}
	if _, err := in.Diff(context.Background(), "t", inspect.DiffArgs{Key: "k"}); !errors.Is(err, inspect.ErrNoDiff) {
		t.Errorf("a history without Diff: %v, want ErrNoDiff", err)
	}
	got, err := (&inspect.Inspector{}).Diff(context.Background(), "t", inspect.DiffArgs{Key: "k"})
	if err != nil || !strings.HasPrefix(got, `{"no_turn_history":0,`) {
		t.Errorf("no history: %s, %v", got, err)
	}
	var schema map[string]any
	if err := json.Unmarshal(inspect.DiffParametersSchema, &schema); err != nil {
		t.Errorf("DiffParametersSchema: %v", err)
	}
}

package run

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// TestSameStateComparesAsLangGraphReads checks the D1 agreement check: a
// FileData entry compares as the stored value, a tool_state entry as the
// convention's fields put back together, and a difference is an error
// naming the key.
func TestSameStateComparesAsLangGraphReads(t *testing.T) {
	fd, _ := structpb.NewValue(map[string]any{"content": "x\n", "encoding": "utf-8", "created_at": "t0", "modified_at": "t1"})
	gauge, _ := structpb.NewValue(map[string]any{"gauge": "g", "readings": []any{1.5, 2.25}})
	tool, seq, turn, tw := "survey_gauge", int64(3), int32(2), int32(1)
	entries := map[string]*historydv1.StateEntry{
		"/a.md": {Value: fd},
		"k":     {Value: gauge, Tool: &tool, Seq: &seq, Turn: &turn, TurnsWritten: &tw, Inputs: map[string]string{"gauge": "model"}},
	}
	plain := func() map[string]any {
		t.Helper()
		m, err := plainEntries(entries)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	lg := `{"/a.md": {"content": "x\n", "encoding": "utf-8", "created_at": "t0", "modified_at": "t1"},
	        "k": {"value": {"gauge": "g", "readings": [1.5, 2.25]}, "tool": "survey_gauge", "seq": 3, "inputs": {"gauge": "model"}, "turn": 2, "turns_written": 1}}`
	if err := sameState(plain(), json.RawMessage(lg)); err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(lg, `"seq": 3`, `"seq": 4`, 1)
	if err := sameState(plain(), json.RawMessage(changed)); err == nil || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("a changed seq: %v, want an error naming the key", err)
	}
	if err := sameState(map[string]any{}, json.RawMessage(`null`)); err != nil {
		t.Fatalf("no value on either side: %v", err)
	}
	if err := sameState(plain(), json.RawMessage(`{}`)); err == nil {
		t.Fatal("historyd's two keys against none: no error")
	}
}

func TestSpeedup(t *testing.T) {
	for _, c := range []struct {
		lg, hd time.Duration
		want   string
	}{
		{time.Second, time.Millisecond, "1000× faster"},
		{3 * time.Millisecond, time.Millisecond, "3.0× faster"},
		{time.Millisecond, 4 * time.Millisecond, "4.0× slower"},
		{time.Millisecond, 40 * time.Millisecond, "40× slower"},
		{0, time.Millisecond, "–"},
	} {
		if got := speedup(c.lg, c.hd); got != c.want {
			t.Errorf("speedup(%s, %s) = %q, want %q", c.lg, c.hd, got, c.want)
		}
	}
}

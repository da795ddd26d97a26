package stateentry

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// TestMapIsTheConventionsDict: the value and the convention's fields a
// served entry has, extra fields beside them, numbers as encoding/json
// decodes them; a plain value is the one field "value".
func TestMapIsTheConventionsDict(t *testing.T) {
	v, _ := structpb.NewValue(map[string]any{"area": 12.5, "names": []any{"a", "b"}})
	extra, _ := structpb.NewStruct(map[string]any{"note": "kept", "tool": "shadowed"})
	tool, seq, turn, tw := "sketch", int64(3), int32(2), int32(1)
	got, err := Maps(map[string]*historydv1.StateEntry{
		"k":     {Value: v, Tool: &tool, Seq: &seq, Turn: &turn, TurnsWritten: &tw, Inputs: map[string]string{"area": "model"}, Extra: extra},
		"plain": {Value: structpb.NewStringValue("x")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"k": map[string]any{"value": map[string]any{"area": 12.5, "names": []any{"a", "b"}}, "tool": "sketch", "seq": 3.0,
			"turn": 2.0, "turns_written": 1.0, "inputs": map[string]any{"area": "model"}, "note": "kept"},
		"plain": map[string]any{"value": "x"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Maps = %v\nwant %v", got, want)
	}
}

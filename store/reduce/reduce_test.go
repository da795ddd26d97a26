package reduce

import (
	"errors"
	"reflect"
	"testing"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/format"
)

func msg(typ, id string) codec.Message { return codec.Message{Type: typ, ID: id} }

func ids(ms []codec.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Type+":"+m.ID)
	}
	return out
}

func TestMessages(t *testing.T) {
	base := []codec.Message{msg("human", "h1"), msg("ai", "a1")}
	w := func(ms ...codec.Message) codec.MessageWrite { return codec.MessageWrite{Messages: ms} }
	for _, c := range []struct {
		name   string
		writes []codec.MessageWrite
		want   []string
	}{
		{"append", []codec.MessageWrite{w(msg("human", "h2")), w(msg("ai", "a2"))}, []string{"human:h1", "ai:a1", "human:h2", "ai:a2"}},
		{"replace by id in place", []codec.MessageWrite{w(msg("ai", "h1"))}, []string{"ai:h1", "ai:a1"}},
		{"remove by id", []codec.MessageWrite{w(msg("remove", "h1"), msg("human", "h2"))}, []string{"ai:a1", "human:h2"}},
		{"remove of an unknown id does nothing", []codec.MessageWrite{w(msg("remove", "zz"))}, []string{"human:h1", "ai:a1"}},
		{"remove all drops the list and what came before", []codec.MessageWrite{w(msg("human", "h2")), w(msg("remove", format.RemoveAll), msg("human", "s1")), w(msg("ai", "a3"))}, []string{"human:s1", "ai:a3"}},
		{"no id appends", []codec.MessageWrite{w(msg("human", ""), msg("human", ""))}, []string{"human:h1", "ai:a1", "human:", "human:"}},
		{"overwrite resets", []codec.MessageWrite{w(msg("human", "h2")), {Overwrite: true, Messages: []codec.Message{msg("human", "o1")}}, w(msg("ai", "a9"))}, []string{"human:o1", "ai:a9"}},
		{"overwrite last", []codec.MessageWrite{{Overwrite: true}}, []string{}},
		{"a removed id written again is appended", []codec.MessageWrite{w(msg("remove", "h1")), w(msg("human", "h1"))}, []string{"ai:a1", "human:h1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := ids(base)
			got := Messages(base, c.writes)
			if !reflect.DeepEqual(ids(got), c.want) {
				t.Errorf("got %v, want %v", ids(got), c.want)
			}
			if !reflect.DeepEqual(ids(base), before) {
				t.Errorf("base modified: %v", ids(base))
			}
		})
	}
}

func TestMerge(t *testing.T) {
	base := map[string]any{"/a.md": "a", "/b.md": "b"}
	got, err := Merge.Replay(base, []any{map[string]any{"/b.md": nil, "/c.md": "c"}, map[string]any{"/a.md": "A"}})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"/a.md": "A", "/c.md": "c"}) {
		t.Errorf("merge = %v, %v", got, err)
	}
	if !reflect.DeepEqual(base, map[string]any{"/a.md": "a", "/b.md": "b"}) {
		t.Errorf("base modified: %v", base)
	}
	if got, err := Merge.Replay(nil, nil); err != nil || got != nil {
		t.Errorf("nothing written to nothing = %v, %v", got, err)
	}
	got, err = Merge.Replay(base, []any{map[string]any{"/x": 1}, map[string]any{"__overwrite__": map[string]any{"/o": 2}}, map[string]any{"/p": 3}})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"/o": 2, "/p": 3}) {
		t.Errorf("overwrite = %v, %v", got, err)
	}
	if _, err := Merge.Replay(base, []any{[]any{"not", "a map"}}); !errors.Is(err, ErrCannotApply) {
		t.Errorf("a list written to a map: %v", err)
	}
}

func TestToolState(t *testing.T) {
	base := map[string]any{
		"area": map[string]any{"value": 11420.0, "seq": int64(1), "turn": int64(1)},
		"name": map[string]any{"value": "Severn", "seq": int64(2), "turn": int64(1)},
	}
	got, err := ToolState.Replay(base, []any{
		map[string]any{"area": map[string]any{"value": 12935.0, "turn": int64(2)}},
		map[string]any{"area": map[string]any{"value": 13000.0, "turn": int64(2)}, "new": map[string]any{"value": 1.0, "turn": int64(2)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		// Displacing turn 1's value in turn 2 counts a turn; rewriting it in
		// the same turn does not.
		"area": map[string]any{"value": 13000.0, "seq": int64(4), "turn": int64(2), "turns_written": int64(2)},
		"name": map[string]any{"value": "Severn", "seq": int64(2), "turn": int64(1)},
		"new":  map[string]any{"value": 1.0, "seq": int64(5), "turn": int64(2)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if _, err := ToolState.Replay(base, []any{map[string]any{"k": "not an entry"}}); !errors.Is(err, ErrCannotApply) {
		t.Errorf("a bare value as an entry: %v", err)
	}
}

func TestNamed(t *testing.T) {
	for _, n := range []string{"merge", "tool_state", "last"} {
		if r, ok := Named(n); !ok || r.Name != n {
			t.Errorf("Named(%q) = %v, %v", n, r.Name, ok)
		}
	}
	if _, ok := Named("messages"); ok {
		t.Error("messages is not a value reducer")
	}
}

package codec

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/historyd/historyd/langgraph/format"
)

// msgList encodes a messages list as LangGraph's serializer would: each
// message an ext 5 pydantic model, human ones with their text, AI ones
// with a payload.
func msgList(t *testing.T, msgs ...[2]string) []byte {
	parts := []any{arrayHeader(len(msgs))}
	for _, m := range msgs {
		switch m[0] {
		case "human":
			parts = append(parts, pyExtMethod(t, 5, "langchain_core.messages.human", "HumanMessage", "model_validate_json",
				mapHeader(4), "content", "q "+m[1], "additional_kwargs", map[string]any{}, "type", "human", "id", m[1]))
		default:
			parts = append(parts, pyExtMethod(t, 5, "langchain_core.messages.ai", "AIMessage", "model_validate_json",
				mapHeader(4), "content", "answer "+m[1], "tool_calls", []any{map[string]any{"name": "t", "args": map[string]any{"x": 1}}}, "type", "ai", "id", m[1]))
		}
	}
	return enc(t, parts...)
}

// TestAppendReaderAgreesWithReadMessages reads a sequence of versions, the
// common appends and the cases that must fall back to a whole read, and
// holds every answer to what ReadMessages gives for the version alone.
func TestAppendReaderAgreesWithReadMessages(t *testing.T) {
	h, a := func(id string) [2]string { return [2]string{"human", id} }, func(id string) [2]string { return [2]string{"ai", id} }
	versions := [][]byte{
		msgList(t),
		msgList(t, h("q1")),
		msgList(t, h("q1"), a("a1")),
		msgList(t, h("q1"), a("a1"), h("q2"), a("a2")),
		// the same again: nothing appended
		msgList(t, h("q1"), a("a1"), h("q2"), a("a2")),
		// a message replaced: not a prefix
		msgList(t, h("q1"), a("a1-edited"), h("q2"), a("a2")),
		// appended to the replaced one
		msgList(t, h("q1"), a("a1-edited"), h("q2"), a("a2"), h("q3")),
		// removed: shorter
		msgList(t, h("q3")),
		// an older version, read out of order
		msgList(t, h("q1"), a("a1")),
		// 16 or more elements: another list header size
		msgList(t, h("q1"), a("a1"), h("2"), a("3"), h("4"), a("5"), h("6"), a("7"), h("8"), a("9"), h("10"), a("11"), h("12"), a("13"), h("14"), a("15"), h("16")),
		msgList(t, h("q1"), a("a1"), h("2"), a("3"), h("4"), a("5"), h("6"), a("7"), h("8"), a("9"), h("10"), a("11"), h("12"), a("13"), h("14"), a("15"), h("16"), a("17")),
		// a DeltaChannel snapshot of a longer list
		enc(t, ext{7, msgList(t, h("q1"), a("a1"), h("2"), a("3"), h("4"), a("5"), h("6"), a("7"), h("8"), a("9"), h("10"), a("11"), h("12"), a("13"), h("14"), a("15"), h("16"), a("17"), h("18"))}),
	}
	for _, mode := range []ReadMode{CountOnly, Humans, All} {
		t.Run(fmt.Sprint("mode ", mode), func(t *testing.T) {
			r := &AppendReader{Mode: mode}
			var prev Messages
			for i, v := range versions {
				got, extends, err := r.Read(format.TypeMsgpack, v)
				if err != nil {
					t.Fatalf("version %d: %v", i, err)
				}
				if extends {
					got.List = append(slices.Clone(prev.List), got.List...)
					got.Humans = prev.Humans
					for _, m := range got.List[len(prev.List):] {
						if m.Type == "human" && mode != CountOnly {
							got.Humans = append(slices.Clone(got.Humans), m.Text)
						}
					}
				}
				prev = got
				want, err := ReadMessages(format.TypeMsgpack, v, Limits{}, mode)
				if err != nil {
					t.Fatal(err)
				}
				if got.Count != want.Count || got.HumanCount != want.HumanCount ||
					!reflect.DeepEqual(nonNil(got.Humans), nonNil(want.Humans)) || !reflect.DeepEqual(nonNilList(got.List), nonNilList(want.List)) {
					t.Errorf("version %d: %+v\nwant %+v", i, got, want)
				}
			}
		})
	}
	// A malformed tail after a matching prefix is reported, not skipped.
	r := &AppendReader{Mode: Humans}
	if _, _, err := r.Read(format.TypeMsgpack, msgList(t, h("q1"))); err != nil {
		t.Fatal(err)
	}
	bad := msgList(t, h("q1"), a("a1"))
	bad = bad[:len(bad)-3]
	if _, _, err := r.Read(format.TypeMsgpack, bad); err == nil {
		t.Error("a truncated tail read without an error")
	}
}

func nonNilList(l []Message) []Message {
	if l == nil {
		return []Message{}
	}
	return l
}

// FuzzAppendReader holds a version read after another to what reading it
// alone gives, whenever reading it alone succeeds.
func FuzzAppendReader(f *testing.F) {
	f.Add([]byte{0x91, 0xa1, 'a'}, []byte{0x92, 0xa1, 'a', 0x81, 0xa4, 't', 'y', 'p', 'e', 0xa5, 'h', 'u', 'm', 'a', 'n'})
	f.Add([]byte{0x90}, []byte{0x91, 0xc0})
	f.Fuzz(func(t *testing.T, prev, next []byte) {
		for _, mode := range []ReadMode{CountOnly, Humans, All} {
			want, werr := ReadMessages(format.TypeMsgpack, next, fuzzLimits, mode)
			r := &AppendReader{Mode: mode, Limits: fuzzLimits}
			first, _, ferr := r.Read(format.TypeMsgpack, prev)
			got, extends, gerr := r.Read(format.TypeMsgpack, next)
			if extends {
				if ferr != nil {
					t.Fatalf("mode %d: extends a version that did not read: %v", mode, ferr)
				}
				got.List = append(slices.Clone(first.List), got.List...)
				got.Humans = want.Humans // not handed over when extending; the list says it
			}
			if werr != nil {
				continue
			}
			if gerr != nil {
				t.Fatalf("mode %d: read alone %+v; after another: %v", mode, want, gerr)
			}
			if got.Count != want.Count || got.HumanCount != want.HumanCount ||
				!reflect.DeepEqual(nonNil(got.Humans), nonNil(want.Humans)) || !reflect.DeepEqual(nonNilList(got.List), nonNilList(want.List)) {
				t.Fatalf("mode %d: after another %+v\nalone %+v", mode, got, want)
			}
		}
	})
}

package write

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/format"
)

// TestMessagesReadBack checks that a Message written in either format reads
// back through the decoder as the same message.
func TestMessagesReadBack(t *testing.T) {
	msgs := []any{
		Human("h1", "sketch the Severn"),
		AI("a1", "", ToolCall{Name: "sketch", Args: map[string]any{"name": "Severn"}, ID: "c1"}),
		Tool("t1", "done", "sketch", "c1"),
		Message{Type: "human", ID: "s1", Content: "summary", AdditionalKwargs: map[string]any{"lc_source": "summarization"}},
		Remove(format.RemoveAll),
	}
	for name, enc := range map[string]func(any) ([]byte, error){format.TypeMsgpack: EncodeMsgpack, format.TypeJSON: EncodeJSON} {
		data, err := enc(msgs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v, _, err := codec.Decode(name, data, codec.Limits{})
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		got := v.([]any)
		for i, want := range []struct{ typ, id, content string }{
			{"human", "h1", "sketch the Severn"}, {"ai", "a1", ""}, {"tool", "t1", "done"}, {"human", "s1", "summary"}, {"remove", format.RemoveAll, ""},
		} {
			m := got[i].(map[string]any)
			if m["type"] != want.typ || m["id"] != want.id || m["content"] != want.content {
				t.Errorf("%s message %d = %v; want %+v", name, i, m, want)
			}
		}
		if ak := got[3].(map[string]any)["additional_kwargs"]; !reflect.DeepEqual(ak, map[string]any{"lc_source": "summarization"}) {
			t.Errorf("%s: additional_kwargs = %v", name, ak)
		}
		scan, err := codec.ScanMessages(name, data, codec.Limits{})
		if err != nil || scan.Count != 5 || scan.HumanCount != 2 {
			t.Errorf("%s: scan = %+v, %v", name, scan, err)
		}
	}
}

// TestDeltaSnapshot checks both formats' snapshot wrappers: a snapshot
// stores the channel's whole value, and reads as that value.
func TestDeltaSnapshot(t *testing.T) {
	for name, enc := range map[string]func(any) ([]byte, error){format.TypeMsgpack: EncodeMsgpack, format.TypeJSON: EncodeJSON} {
		data, err := enc(DeltaSnapshot{Value: map[string]any{"/a.md": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		v, _, err := codec.Decode(name, data, codec.Limits{})
		if err != nil || !reflect.DeepEqual(v, map[string]any{"/a.md": "x"}) {
			t.Errorf("%s: decode of a snapshot = %v, %v", name, v, err)
		}
		nested, _ := enc([]any{DeltaSnapshot{Value: 1}})
		var ue *codec.UnsupportedError
		if _, _, err := codec.Decode(name, nested, codec.Limits{}); !errors.As(err, &ue) {
			t.Errorf("%s: a snapshot inside a value = %v; want UnsupportedError", name, err)
		}
	}
}

func TestEncodeJSONRefuses(t *testing.T) {
	for _, v := range []any{Datetime(time.Now()), []any{Ext{}}, map[string]any{"x": math.Inf(1)}} {
		if _, err := EncodeJSON(v); err == nil {
			t.Errorf("EncodeJSON(%#v): no error", v)
		}
	}
	if b, err := EncodeJSON(Map{{Key: "b", Value: 1}, {Key: "a", Value: 2}}); err != nil || string(b) != `{"b":1,"a":2}` {
		t.Errorf("ordered map = %s, %v", b, err)
	}
}

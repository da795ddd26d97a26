package codec

import (
	"fmt"
	"strings"
	"testing"
)

// benchMessages builds a 200-message list shaped like a real agent thread:
// short human questions, AI messages with tool calls, and tool results
// carrying a few kilobytes each, encoded as Python and as LangChain.js
// would.
func benchMessages(tb testing.TB) (msgpackBlob, jsonBlob []byte) {
	payload := strings.Repeat(`{"x": 1.5, "label": "feature"}, `, 64)
	var mp []any
	var js strings.Builder
	mp = append(mp, arrayHeader(200))
	js.WriteString("[")
	for i := range 200 {
		if i > 0 {
			js.WriteString(",")
		}
		switch i % 4 {
		case 0:
			text := fmt.Sprintf("question %d: what is the area?", i)
			mp = append(mp, pyExtMethod(tb, 5, "langchain_core.messages.human", "HumanMessage", "model_validate_json",
				mapHeader(7), "content", text, "additional_kwargs", map[string]any{}, "response_metadata", map[string]any{},
				"type", "human", "name", nil, "id", fmt.Sprintf("h%d", i), "example", false))
			fmt.Fprintf(&js, `{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":%q,"id":"h%d","additional_kwargs":{},"response_metadata":{}}}`, text, i)
		case 1, 3:
			mp = append(mp, pyExtMethod(tb, 5, "langchain_core.messages.ai", "AIMessage", "model_validate_json",
				mapHeader(8), "content", "Let me compute that. "+payload[:200],
				"additional_kwargs", map[string]any{}, "response_metadata", map[string]any{"model": "m", "usage": map[string]any{"in": 120, "out": 40}},
				"type", "ai", "name", nil, "id", fmt.Sprintf("a%d", i),
				"tool_calls", []any{map[string]any{"name": "sketch_area", "args": map[string]any{"unit": "km2", "precision": 3}, "id": fmt.Sprintf("c%d", i), "type": "tool_call"}},
				"usage_metadata", map[string]any{"input_tokens": 120, "output_tokens": 40, "total_tokens": 160}))
			fmt.Fprintf(&js, `{"lc":1,"type":"constructor","id":["langchain_core","messages","AIMessage"],"kwargs":{"content":%q,"id":"a%d","tool_calls":[{"name":"sketch_area","args":{"unit":"km2","precision":3},"id":"c%d","type":"tool_call"}],"invalid_tool_calls":[],"additional_kwargs":{},"response_metadata":{"model":"m"}}}`, "Let me compute that. "+payload[:200], i, i)
		case 2:
			mp = append(mp, pyExtMethod(tb, 5, "langchain_core.messages.tool", "ToolMessage", "model_validate_json",
				mapHeader(7), "content", payload, "additional_kwargs", map[string]any{}, "response_metadata", map[string]any{},
				"type", "tool", "tool_call_id", fmt.Sprintf("c%d", i-1), "status", "success",
				"artifact", map[string]any{"rows": []any{1, 2, 3, 4, 5, 6, 7, 8}, "source": "db"}))
			fmt.Fprintf(&js, `{"lc":1,"type":"constructor","id":["langchain_core","messages","ToolMessage"],"kwargs":{"content":%q,"tool_call_id":"c%d","additional_kwargs":{},"response_metadata":{}}}`, payload, i-1)
		}
	}
	js.WriteString("]")
	return enc(tb, mp...), []byte(js.String())
}

// BenchmarkScanMessages measures the turn-derivation path on a 200-message
// thread; compare with BenchmarkDecode on the same blobs.
func BenchmarkScanMessages(b *testing.B) {
	mp, js := benchMessages(b)
	for _, tc := range []struct {
		typ  string
		data []byte
	}{{"msgpack", mp}, {"json", js}} {
		b.Run(tc.typ, func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			b.ReportAllocs()
			for range b.N {
				m, err := ScanMessages(tc.typ, tc.data, Limits{})
				if err != nil || m.Count != 200 || len(m.Humans) != 50 {
					b.Fatalf("%+v %v", m, err)
				}
			}
		})
	}
}

// BenchmarkDecode measures decoding the same 200-message thread whole.
func BenchmarkDecode(b *testing.B) {
	mp, js := benchMessages(b)
	for _, tc := range []struct {
		typ  string
		data []byte
	}{{"msgpack", mp}, {"json", js}} {
		b.Run(tc.typ, func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			b.ReportAllocs()
			for range b.N {
				if _, _, err := Decode(tc.typ, tc.data, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

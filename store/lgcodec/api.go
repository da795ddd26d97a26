// Package lgcodec decodes the values LangGraph checkpointers store: Python's
// msgpack serializer with its extension types, LangChain.js JSON, and the raw
// blob types, into plain Go data that historyd can serve as JSON.
//
// Decoded values use only these Go types: nil, bool, int64, uint64 (only for
// integers above math.MaxInt64), float64, string, []byte, []any and
// map[string]any. Map keys that are not strings are turned into their JSON
// text (1 → "1", true → "true", nil → "null").
package lgcodec

// Limits bound what one decode may cost, so a crafted blob cannot exhaust
// memory or stack.
type Limits struct {
	// MaxDepth is the deepest nesting of lists, maps and extension payloads
	// allowed. Zero means DefaultMaxDepth.
	MaxDepth int
	// MaxBytes is the largest encoded blob accepted. Zero means
	// DefaultMaxBytes.
	MaxBytes int
}

const (
	// DefaultMaxDepth is the nesting limit used when Limits.MaxDepth is zero.
	DefaultMaxDepth = 256
	// DefaultMaxBytes is the blob size limit used when Limits.MaxBytes is
	// zero: 256 MiB.
	DefaultMaxBytes = 256 << 20
)

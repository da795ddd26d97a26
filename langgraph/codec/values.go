package codec

import (
	"strconv"
	"strings"

	"github.com/historyd/historyd/langgraph/format"
)

// Limits bound what one decode may cost, so a crafted blob cannot exhaust
// memory or stack.
type Limits struct {
	// MaxDepth is the deepest nesting of lists, maps and extension payloads
	// allowed: a top-level list is at depth 1, a map inside it at depth 2,
	// and an extension's (module, class, data) tuple counts as one level,
	// as does each dimension of a numpy array. Zero or negative means
	// format.DefaultMaxDepth. Decoding recurses once per level, so keep it modest.
	MaxDepth int
	// MaxBytes is the largest encoded blob accepted. Zero or negative means
	// DefaultMaxBytes. Decoded data can take several times the blob's size
	// in memory (a one-byte msgpack nil is a 16-byte interface value), so
	// this is the knob that bounds memory.
	MaxBytes int
}

// DefaultMaxBytes is the blob size limit used when Limits.MaxBytes is
// zero: 256 MiB.
const DefaultMaxBytes = 256 << 20

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = format.DefaultMaxDepth
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Decode decodes one stored value of the given LangGraph blob type into plain data.
// ok is false when the type is "empty" (the channel has no value).
//
// The result never aliases data, so callers may reuse their buffer.
func Decode(blobType string, data []byte, lim Limits) (v any, ok bool, err error) {
	lim = lim.withDefaults()
	switch blobType {
	case format.TypeEmpty:
		return nil, false, nil
	case format.TypeNull:
		return nil, true, nil
	}
	if err := checkDecodable(blobType, data, lim); err != nil {
		return nil, false, err
	}
	switch blobType {
	case format.TypeMsgpack:
		v, err = decodeMsgpack(data, lim)
	case format.TypeJSON:
		v, err = decodeJSON(data, lim)
	default: // bytes, bytearray
		v = append([]byte{}, data...)
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// checkDecodable refuses blob types that are never decoded and blobs over
// MaxBytes, before any byte of the blob is looked at.
func checkDecodable(blobType string, data []byte, lim Limits) error {
	switch blobType {
	case format.TypeMsgpack, format.TypeJSON, format.TypeBytes, format.TypeBytearray:
	case format.TypePickle:
		return &UnsupportedError{Format: blobType, Offset: -1,
			Reason: "pickle can only be read by running Python code; historyd does not decode it"}
	default:
		if i := strings.IndexByte(blobType, '+'); i >= 0 {
			return &UnsupportedError{Format: blobType, Offset: -1,
				Reason: "encrypted with cipher " + strconv.Quote(blobType[i+1:]) + "; historyd holds no keys"}
		}
		return &UnsupportedError{Format: blobType, Offset: -1, Reason: "unknown blob type"}
	}
	if len(data) > lim.MaxBytes {
		return &LimitError{Limit: "MaxBytes", Max: lim.MaxBytes, Got: len(data), Offset: -1}
	}
	return nil
}

// kindOf names a decoded value's kind for error messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int64, uint64, float64:
		return "a number"
	case string:
		return "a string"
	case []byte:
		return "bytes"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return "an unknown value"
}

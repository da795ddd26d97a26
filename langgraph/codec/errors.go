package codec

import (
	"fmt"
	"strconv"
)

// UnsupportedError reports a value that is well formed but that historyd
// refuses to decode, because any answer would be a guess (pickle, encrypted
// blobs, delta-channel snapshots, extension codes it does not know).
type UnsupportedError struct {
	// Format is the blob type the value was stored with, e.g. "pickle",
	// "msgpack+aes" or "msgpack".
	Format string
	// Feature names the unsupported part inside a decodable format, e.g.
	// "ext 7 (delta snapshot)". It is empty when the whole blob type is
	// unsupported.
	Feature string
	// Offset is the byte offset of Feature in the blob, or -1 when the whole
	// blob is concerned or the position is not known.
	Offset int
	// Reason says why the value is not decoded.
	Reason string
}

// Error names the format, the unsupported feature and where it is, so a
// log line says what to change on the writing side.
func (e *UnsupportedError) Error() string {
	msg := "codec: unsupported "
	if e.Feature == "" {
		msg += "blob type " + strconv.Quote(e.Format)
	} else {
		msg += e.Feature + " in " + e.Format + " blob"
		if e.Offset >= 0 {
			msg += " at offset " + strconv.Itoa(e.Offset)
		}
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// MalformedError reports a blob that is not valid in its format: truncated,
// corrupt, or shaped unlike anything the LangGraph serializers write.
type MalformedError struct {
	// Format is the blob type being decoded, e.g. "msgpack" or "json".
	Format string
	// Offset is the byte offset in the blob where decoding went wrong, or -1
	// when it is not known.
	Offset int
	// Reason describes what was wrong there.
	Reason string
}

// Error gives the format, the offset and what was wrong there.
func (e *MalformedError) Error() string {
	msg := "codec: malformed"
	if e.Format != "" {
		msg += " " + e.Format
	}
	msg += " blob"
	if e.Offset >= 0 {
		msg += " at offset " + strconv.Itoa(e.Offset)
	}
	return msg + ": " + e.Reason
}

// LimitError reports a blob that would cost more to decode than the Limits
// allow. The blob may be perfectly valid.
type LimitError struct {
	// Limit names the exceeded field of Limits: "MaxBytes" or "MaxDepth".
	Limit string
	// Max is the limit in force.
	Max int
	// Got is the size or depth that exceeded it. For MaxDepth it is the
	// first depth found beyond Max, not the blob's full depth.
	Got int
	// Offset is the byte offset where the limit was crossed, or -1 when the
	// whole blob is concerned.
	Offset int
}

// Error names the limit and the value that crossed it, so an operator
// knows which setting to raise if the blob is legitimate.
func (e *LimitError) Error() string {
	switch e.Limit {
	case "MaxBytes":
		return fmt.Sprintf("codec: blob of %d bytes exceeds MaxBytes (%d)", e.Got, e.Max)
	case "MaxDepth":
		msg := fmt.Sprintf("codec: nesting depth %d exceeds MaxDepth (%d)", e.Got, e.Max)
		if e.Offset >= 0 {
			msg += " at offset " + strconv.Itoa(e.Offset)
		}
		return msg
	}
	return fmt.Sprintf("codec: %s exceeded: %d > %d", e.Limit, e.Got, e.Max)
}

func depthError(max, got, off int) error {
	return &LimitError{Limit: "MaxDepth", Max: max, Got: got, Offset: off}
}

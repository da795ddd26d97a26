package service

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store/backend"
)

// Request limits. They keep one request's cost bounded and every value safe
// to pass to a database text column.
const (
	// MaxThreadIDBytes is the longest thread_id accepted.
	MaxThreadIDBytes = 512
	// MaxNamespaceBytes is the longest checkpoint_ns accepted.
	MaxNamespaceBytes = 512
	// MaxKeys is the most keys one projection may name.
	MaxKeys = 256
	// MaxKeyBytes is the longest key accepted in a projection.
	MaxKeyBytes = 512
	// MaxCheckpointIDBytes is the longest head_checkpoint_id accepted:
	// LangGraph's ids are 36-byte UUIDs; the limit leaves room for other
	// savers' without letting a request carry a document.
	MaxCheckpointIDBytes = 256
)

// FieldError says which request field is wrong and why.
type FieldError struct {
	// Field is the field's name as in the proto, with an index for repeated
	// fields, e.g. "keys[3]".
	Field string
	// Reason says what is wrong, including the limit when there is one.
	Reason string
}

// Error returns "field: reason".
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func checkText(field, v string, max int, required bool) *FieldError {
	switch {
	case v == "" && required:
		return &FieldError{field, "is required"}
	case len(v) > max:
		return &FieldError{field, fmt.Sprintf("is %d bytes; the limit is %d", len(v), max)}
	case !utf8.ValidString(v):
		return &FieldError{field, "is not valid UTF-8"}
	case strings.IndexByte(v, 0) >= 0:
		return &FieldError{field, "contains a NUL byte"}
	}
	return nil
}

func checkThread(threadID, ns string) *FieldError {
	if err := checkText("thread_id", threadID, MaxThreadIDBytes, true); err != nil {
		return err
	}
	return checkText("checkpoint_ns", ns, MaxNamespaceBytes, false)
}

// checkHead accepts an empty head_checkpoint_id (the thread's head) or a
// checkpoint id within the limit. Whether the thread holds it is the
// store's to say (store.ErrUnknownHead).
func checkHead(head string) *FieldError {
	return checkText("head_checkpoint_id", head, MaxCheckpointIDBytes, false)
}

// refOf is the backend.Ref a reading request names.
func refOf(threadID, ns, head string) backend.Ref {
	return backend.Ref{ThreadID: threadID, Namespace: ns, Head: head}
}

func checkKeys(keys []string) *FieldError {
	if len(keys) > MaxKeys {
		return &FieldError{"keys", fmt.Sprintf("names %d keys; the limit is %d", len(keys), MaxKeys)}
	}
	for i, k := range keys {
		if err := checkText(fmt.Sprintf("keys[%d]", i), k, MaxKeyBytes, true); err != nil {
			return err
		}
	}
	return nil
}

// checkChannel accepts an empty channel (the server's default) or one of
// the channels the server serves.
func checkChannel(channel string, served []string) *FieldError {
	if channel == "" || slices.Contains(served, channel) {
		return nil
	}
	if err := checkText("channel", channel, MaxKeyBytes, false); err != nil {
		return err
	}
	return &FieldError{"channel", fmt.Sprintf("%q is not a channel this server serves; it serves %s (set with --state-channels)",
		channel, strings.Join(served, ", "))}
}

// checkValueFormat refuses a value_format this server does not know (a
// newer client's).
func checkValueFormat(f historydv1.ValueFormat) *FieldError {
	if _, ok := historydv1.ValueFormat_name[int32(f)]; !ok {
		return &FieldError{"value_format", fmt.Sprintf("is %d; known formats are VALUE_FORMAT_PROTO (1, the default) and VALUE_FORMAT_JSON (2)", int32(f))}
	}
	return nil
}

func checkTurn(turn int32) *FieldError {
	if turn < 0 {
		return &FieldError{"turn", fmt.Sprintf("is %d; turns are counted from 1 (0 and numbers past the total are answered with no_such_turn)", turn)}
	}
	return nil
}

// firstError returns the first non-nil error, so a request with several
// problems reports them in field order.
func firstError(errs ...*FieldError) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func checkFromTurn(turn int32) *FieldError {
	if turn < 0 {
		return &FieldError{"from_turn", fmt.Sprintf("is %d; must not be negative", turn)}
	}
	return nil
}

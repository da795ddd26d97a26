package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/historyd/historyd/store/backend"
)

// ErrStale marks a read that found a turn's last checkpoint deleted since
// its History was derived. The cached index is dropped, so deriving the
// History again and rereading gives the current answer; ReadEncoded does
// that itself a few times (staleReads), so callers see ErrStale only when
// the thread kept changing.
var ErrStale = errors.New("thread changed while it was read; read it again")

// ErrUnknownHead marks a read whose backend.Ref.Head names a checkpoint the thread
// (in that namespace) does not hold.
var ErrUnknownHead = errors.New("the thread holds no such checkpoint")

// ErrForeignValue marks a read of a channel at a checkpoint whose stored
// value belongs to another branch: the storage shares values between
// checkpoints by version (backend.SharesBlobs), the checkpoint's branch produced
// the version after another branch had (a fork re-producing a version
// number LangGraph.js counts per channel), and the value kept is the one
// stored first. The checkpoint's own value is not stored; it is lost.
var ErrForeignValue = errors.New("the stored value belongs to another branch of the thread; this checkpoint's own was not stored")

// ForeignValueError reports a channel read at a checkpoint whose stored
// value is another branch's (ErrForeignValue), naming where.
type ForeignValueError struct {
	// Ref names the thread.
	Ref backend.Ref
	// CheckpointID is the checkpoint read.
	CheckpointID string
	// Channel is the channel read.
	Channel string
}

// Error names the thread, checkpoint and channel.
func (e *ForeignValueError) Error() string {
	return fmt.Sprintf("thread %q%s checkpoint %s channel %q: %v", e.Ref.ThreadID, nsLabel(e.Ref), e.CheckpointID, e.Channel, ErrForeignValue)
}

// Unwrap returns ErrForeignValue.
func (e *ForeignValueError) Unwrap() error { return ErrForeignValue }

// nsLabel names ref's namespace for an error, when not the root.
func nsLabel(ref backend.Ref) string {
	if ref.Namespace == "" {
		return ""
	}
	return fmt.Sprintf(" namespace %q", ref.Namespace)
}

// DecodeError reports a stored value that could not be decoded, and where it
// is. Err is the decoder's error; errors.As on it tells a malformed value
// (codec.MalformedError) from one historyd refuses to read
// (codec.UnsupportedError).
type DecodeError struct {
	// Ref names the thread.
	Ref backend.Ref
	// CheckpointID is the checkpoint whose value failed.
	CheckpointID string
	// Channel is the channel whose value failed.
	Channel string
	// Err is the underlying decode error.
	Err error
}

// Error names the thread, checkpoint and channel, then the decode failure.
func (e *DecodeError) Error() string {
	ns := ""
	if e.Ref.Namespace != "" {
		ns = fmt.Sprintf(" namespace %q", e.Ref.Namespace)
	}
	return fmt.Sprintf("thread %q%s checkpoint %s channel %q: %v", e.Ref.ThreadID, ns, e.CheckpointID, e.Channel, e.Err)
}

// Unwrap returns the decode error.
func (e *DecodeError) Unwrap() error { return e.Err }

// CycleError reports stored parent links that loop: following them from
// one of Checkpoints leads back to it. No saver writes such links, and no
// history can be derived from them; the thread cannot be read until they
// are repaired.
type CycleError struct {
	// Ref names the thread.
	Ref backend.Ref
	// Checkpoints are the checkpoints of the loop, from the smallest id,
	// each followed by its parent (the last's parent is the first).
	Checkpoints []string
}

// cycleShown is how many of a cycle's checkpoints its error names.
const cycleShown = 8

// Error names the thread and the checkpoints of the loop, the first
// cycleShown of a long one.
func (e *CycleError) Error() string {
	ns := ""
	if e.Ref.Namespace != "" {
		ns = fmt.Sprintf(" namespace %q", e.Ref.Namespace)
	}
	shown := e.Checkpoints[:min(len(e.Checkpoints), cycleShown)]
	loop := strings.Join(shown, " → ")
	if len(e.Checkpoints) > len(shown) {
		loop += fmt.Sprintf(" → … (%d checkpoints in all)", len(e.Checkpoints))
	}
	if len(e.Checkpoints) > 0 {
		loop += " → " + e.Checkpoints[0]
	}
	return fmt.Sprintf("thread %q%s: stored parent links loop: checkpoint %s, each the parent of the one before", e.Ref.ThreadID, ns, loop)
}

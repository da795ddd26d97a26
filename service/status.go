package service

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// statusRule maps one kind of error to a status code. The first rule that
// matches wins, so more specific kinds come first.
type statusRule struct {
	code  codes.Code
	match func(error) bool
	// message, when set, is what the caller reads instead of the error's
	// own text: that text can name the database's host, port, role,
	// database, schema or tables, which a tenant has no business knowing,
	// and nothing a caller could act on.
	message string
	// describe, when set, builds what the caller reads from the error, for
	// errors that carry a part the caller may read beside a cause it may
	// not.
	describe func(error) string
	// log, when set, logs the error's own text at this level, so that what
	// the caller is not told is in the operator's log.
	log *slog.Level
	// summarise says such failures come in floods, and are logged by
	// summary (see failureSummary).
	summarise bool
	// field, when set, is the request field an INVALID_ARGUMENT is about,
	// for errors that are not a FieldError: the status carries it as a
	// BadRequest field violation, as a FieldError's does.
	field string
}

func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func as[T error]() func(error) bool {
	return func(err error) bool {
		var t T
		return errors.As(err, &t)
	}
}

func level(l slog.Level) *slog.Level { return &l }

func both(a, b func(error) bool) func(error) bool {
	return func(err error) bool { return a(err) && b(err) }
}

// The messages callers read in place of causes they must not see.
const (
	// MessageUnavailable is UNAVAILABLE's message when the checkpoint
	// store cannot be reached.
	MessageUnavailable = "checkpoint store unavailable; retry"
	// MessageMisconfigured is FAILED_PRECONDITION's message when historyd
	// cannot read the checkpoint tables (none where configured, a missing
	// grant, a login refused): the operator's to fix, the log says what.
	MessageMisconfigured = "checkpoint store misconfigured: historyd cannot read its checkpoint tables; the server logged why"
	// MessageUnorderedPrefixes is FAILED_PRECONDITION's message when the
	// store cannot walk a listing's thread-id prefixes without visiting
	// other threads: the operator's to fix, the log says how.
	MessageUnorderedPrefixes = "this checkpoint store cannot list threads under a thread-id prefix (every listing of a tenant confined to prefixes is one): its thread ids do not sort bytewise and no index sorts them so; the operator can create the index the deploy guide describes (\"Listing threads\"), and the server logged which"
	// MessageStoreTimeout is DEADLINE_EXCEEDED's message when the deadline
	// passed while the checkpoint store itself had not answered.
	MessageStoreTimeout = "deadline exceeded before the checkpoint store answered"
	// MessageDeadline is DEADLINE_EXCEEDED's message when it passed
	// anywhere else (waiting for another call's read of the thread,
	// decoding, sending, a watch that lasted until its deadline).
	MessageDeadline = "deadline exceeded"
	// MessageInternal is INTERNAL's message.
	MessageInternal = "internal error; the server logged the cause"
	// MessageUnknownHead is INVALID_ARGUMENT's message when
	// head_checkpoint_id names a checkpoint the thread does not hold.
	MessageUnknownHead = "head_checkpoint_id: " + reasonUnknownHead
	reasonUnknownHead  = "is not a checkpoint of this thread in checkpoint_ns; pass a head_checkpoint_id or forks[].newest_checkpoint_id that Turns answered, or none to read the thread's head"
)

var statusRules = []statusRule{
	// A field error names the caller's own field and limit.
	{code: codes.InvalidArgument, match: as[*FieldError]()},
	// A head the thread does not hold is the caller's field, and the
	// message depends on the request alone: another tenant's checkpoint id
	// reads exactly as one that never existed (tenant isolation answers it
	// over an empty store, where no id is held).
	{code: codes.InvalidArgument, match: is(store.ErrUnknownHead), field: "head_checkpoint_id", message: MessageUnknownHead},
	// Where the store kept the call waiting, and anywhere else.
	{code: codes.DeadlineExceeded, match: both(is(context.DeadlineExceeded), is(backend.ErrNoAnswer)), message: MessageStoreTimeout},
	{code: codes.DeadlineExceeded, match: is(context.DeadlineExceeded), message: MessageDeadline},
	{code: codes.Canceled, match: is(context.Canceled), message: "call cancelled"},
	// While the store is down every call fails so.
	{code: codes.Unavailable, match: is(backend.ErrUnavailable), message: MessageUnavailable, log: level(slog.LevelWarn), summarise: true},
	// The thread changed twice while it was read; a retry reads it afresh.
	{code: codes.Unavailable, match: is(store.ErrStale), message: "thread changed while it was read; retry"},
	{code: codes.FailedPrecondition, match: is(backend.ErrNotCheckpointStore), message: MessageMisconfigured, log: level(slog.LevelError)},
	{code: codes.FailedPrecondition, match: is(backend.ErrUnorderedPrefixes), message: MessageUnorderedPrefixes, log: level(slog.LevelWarn)},
	// Storage that reports its own files damaged: the caller reads which
	// file it is to historyd, the log where it is and the driver's words.
	{code: codes.DataLoss, match: as[*backend.CorruptError](), describe: damaged, log: level(slog.LevelError)},
	// A value historyd will not decode (pickle, encrypted, delta channels) is
	// a deployment choice, not damage. The message names the caller's own
	// thread, checkpoint and channel, and the format: nothing of the
	// database.
	{code: codes.FailedPrecondition, match: as[*codec.UnsupportedError]()},
	// A blob larger than the server decodes may be perfectly valid: a
	// limit. A value nested deeper than codec.Limits.MaxDepth is not:
	// no LangGraph serializer writes one (lgwrite refuses to), so it is
	// damage, DATA_LOSS like any other value that cannot be decoded.
	{code: codes.ResourceExhausted, match: func(err error) bool {
		var le *codec.LimitError
		return errors.As(err, &le) && le.Limit != "MaxDepth"
	}},
	{code: codes.DataLoss, match: as[*store.DecodeError]()},
	// Parent links that loop: no history can be derived from them.
	{code: codes.DataLoss, match: as[*store.CycleError]()},
	// A value that belongs to another branch (the saver dropped the
	// fork's own): the message names the caller's thread, checkpoint and
	// channel, and no value is served in its place.
	{code: codes.DataLoss, match: is(store.ErrForeignValue)},
}

// damaged is DATA_LOSS's message for storage that reports itself damaged.
func damaged(err error) string {
	var ce *backend.CorruptError
	errors.As(err, &ce)
	return "checkpoint store damaged: " + ce.Role + " reports itself malformed and must be restored; the server logged the cause"
}

// internalRule is what an error no rule knows maps to: the cause (driver
// messages, thread ids) is for the operator's log, which fail writes; the
// caller learns only that it was not their fault.
var internalRule = statusRule{code: codes.Internal, message: MessageInternal, log: level(slog.LevelError)}

// ruleFor returns the rule err maps to.
func ruleFor(err error) statusRule {
	for _, r := range statusRules {
		if r.match(err) {
			return r
		}
	}
	return internalRule
}

// toStatus maps an error from validation or the store to the gRPC status
// the caller sees. It is the only place codes and messages are chosen.
func toStatus(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if s, ok := status.FromError(err); ok {
		return s
	}
	r := ruleFor(err)
	msg := r.message
	if r.describe != nil {
		msg = r.describe(err)
	}
	if msg == "" {
		msg = err.Error()
	}
	st := status.New(r.code, msg)
	var fe *FieldError
	if r.code == codes.InvalidArgument && r.field != "" {
		fe = &FieldError{r.field, strings.TrimPrefix(msg, r.field+": ")}
	} else if r.code == codes.InvalidArgument {
		errors.As(err, &fe)
	}
	if fe != nil {
		if d, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
			Field:       fe.Field,
			Description: fe.Reason,
		}}}); derr == nil {
			st = d
		}
	}
	return st
}

// logCause logs, on one line, the cause of a failed call that the
// caller's status leaves out.
func logCause(ctx context.Context, log *slog.Logger, method string, err error) {
	if err == nil {
		return
	}
	if _, ok := status.FromError(err); ok {
		return
	}
	r := ruleFor(err)
	if r.log == nil {
		return
	}
	log.Log(ctx, *r.log, "call failed; the caller was not told why", "method", method, "code", r.code.String(), "err", oneLine(err.Error()))
}

// oneLine folds text spanning lines or holding tabs into one line, so that
// a log record is one line in any handler.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

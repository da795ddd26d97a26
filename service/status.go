package service

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/lgcodec"
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
	// log, when set, logs the error's own text at this level, so that what
	// the caller is not told is in the operator's log.
	log *slog.Level
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

// The messages callers read in place of causes they must not see.
const (
	// MessageUnavailable is UNAVAILABLE's message when the checkpoint
	// store cannot be reached.
	MessageUnavailable = "checkpoint store unavailable; retry"
	// MessageMisconfigured is FAILED_PRECONDITION's message when historyd
	// cannot read the checkpoint tables (none where configured, a missing
	// grant, a login refused): the operator's to fix, the log says what.
	MessageMisconfigured = "checkpoint store misconfigured: historyd cannot read its checkpoint tables; the server logged why"
	// MessageInternal is INTERNAL's message.
	MessageInternal = "internal error; the server logged the cause"
)

var statusRules = []statusRule{
	// A field error names the caller's own field and limit.
	{code: codes.InvalidArgument, match: as[*FieldError]()},
	{code: codes.DeadlineExceeded, match: is(context.DeadlineExceeded), message: "deadline exceeded before the checkpoint store answered"},
	{code: codes.Canceled, match: is(context.Canceled), message: "call cancelled"},
	{code: codes.Unavailable, match: is(store.ErrUnavailable), message: MessageUnavailable, log: level(slog.LevelWarn)},
	// The thread changed twice while it was read; a retry reads it afresh.
	{code: codes.Unavailable, match: is(store.ErrStale), message: "thread changed while it was read; retry"},
	{code: codes.FailedPrecondition, match: is(store.ErrNotCheckpointStore), message: MessageMisconfigured, log: level(slog.LevelError)},
	// A value historyd will not decode (pickle, encrypted, delta channels) is
	// a deployment choice, not damage. The message names the caller's own
	// thread, checkpoint and channel, and the format: nothing of the
	// database.
	{code: codes.FailedPrecondition, match: as[*lgcodec.UnsupportedError]()},
	{code: codes.ResourceExhausted, match: as[*lgcodec.LimitError]()},
	{code: codes.DataLoss, match: as[*store.DecodeError]()},
	// Parent links that loop: no history can be derived from them.
	{code: codes.DataLoss, match: as[*store.CycleError]()},
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
	if msg == "" {
		msg = err.Error()
	}
	st := status.New(r.code, msg)
	var fe *FieldError
	if r.code == codes.InvalidArgument && errors.As(err, &fe) {
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

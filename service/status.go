package service

import (
	"context"
	"errors"

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

var statusRules = []statusRule{
	{codes.InvalidArgument, as[*FieldError]()},
	{codes.DeadlineExceeded, is(context.DeadlineExceeded)},
	{codes.Canceled, is(context.Canceled)},
	{codes.Unavailable, is(store.ErrUnavailable)},
	// The thread changed twice while it was read; a retry reads it afresh.
	{codes.Unavailable, is(store.ErrStale)},
	{codes.FailedPrecondition, is(store.ErrNotCheckpointStore)},
	// A value historyd will not decode (pickle, encrypted, delta channels) is
	// a deployment choice, not damage.
	{codes.FailedPrecondition, as[*lgcodec.UnsupportedError]()},
	{codes.ResourceExhausted, as[*lgcodec.LimitError]()},
	{codes.DataLoss, as[*store.DecodeError]()},
}

// toStatus maps an error from validation or the store to the gRPC status
// the caller sees. It is the only place codes are chosen. Errors no rule
// knows become Internal with a generic message; the cause goes to the log.
func toStatus(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if s, ok := status.FromError(err); ok {
		return s
	}
	code := codes.Internal
	for _, r := range statusRules {
		if r.match(err) {
			code = r.code
			break
		}
	}
	msg := err.Error()
	if code == codes.Internal {
		// The cause (driver messages, thread ids) is for the operator's log,
		// which fail writes; the caller learns only that it was not their
		// fault.
		msg = "internal error; the server logged the cause"
	}
	st := status.New(code, msg)
	var fe *FieldError
	if code == codes.InvalidArgument && errors.As(err, &fe) {
		if d, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
			Field:       fe.Field,
			Description: fe.Reason,
		}}}); derr == nil {
			st = d
		}
	}
	return st
}

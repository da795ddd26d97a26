package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/lgcodec"
)

func TestToStatus(t *testing.T) {
	where := store.Ref{ThreadID: "t1"}
	tests := []struct {
		name string
		err  error
		code codes.Code
	}{
		{"nil", nil, codes.OK},
		{"field", &FieldError{"thread_id", "is required"}, codes.InvalidArgument},
		{"deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{"canceled", fmt.Errorf("list: %w", context.Canceled), codes.Canceled},
		{"unavailable", fmt.Errorf("list: %w", store.ErrUnavailable), codes.Unavailable},
		{"no tables", fmt.Errorf("ping: %w", store.ErrNotCheckpointStore), codes.FailedPrecondition},
		{"malformed", &store.DecodeError{Ref: where, CheckpointID: "c", Channel: "tool_state", Err: &lgcodec.MalformedError{Reason: "truncated"}}, codes.DataLoss},
		{"unsupported", &store.DecodeError{Ref: where, CheckpointID: "c", Channel: "tool_state", Err: &lgcodec.UnsupportedError{Format: "pickle"}}, codes.FailedPrecondition},
		{"limit", &store.DecodeError{Ref: where, CheckpointID: "c", Channel: "tool_state", Err: &lgcodec.LimitError{Limit: "depth"}}, codes.ResourceExhausted},
		{"status passes through", status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied},
		{"unknown", errors.New("boom"), codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toStatus(tt.err).Code(); got != tt.code {
				t.Errorf("toStatus(%v) = %v, want %v", tt.err, got, tt.code)
			}
		})
	}
}

func TestDecodeErrorNamesWhere(t *testing.T) {
	err := &store.DecodeError{Ref: store.Ref{ThreadID: "t1"}, CheckpointID: "1f0c-0003", Channel: "tool_state", Err: &lgcodec.MalformedError{Reason: "truncated"}}
	msg := toStatus(err).Message()
	for _, want := range []string{`"t1"`, "1f0c-0003", `"tool_state"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not name %s", msg, want)
		}
	}
}

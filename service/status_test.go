package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

func TestToStatus(t *testing.T) {
	where := backend.Ref{ThreadID: "t1"}
	tests := []struct {
		name string
		err  error
		code codes.Code
	}{
		{"nil", nil, codes.OK},
		{"field", &FieldError{"thread_id", "is required"}, codes.InvalidArgument},
		{"deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{"canceled", fmt.Errorf("list: %w", context.Canceled), codes.Canceled},
		{"unavailable", fmt.Errorf("list: %w", backend.ErrUnavailable), codes.Unavailable},
		{"no tables", fmt.Errorf("ping: %w", backend.ErrNotCheckpointStore), codes.FailedPrecondition},
		{"prefixes no index ranges over", fmt.Errorf("list threads: %w", backend.ErrUnorderedPrefixes), codes.FailedPrecondition},
		{"malformed", &store.DecodeError{Ref: where, CheckpointID: "c", Channel: "tool_state", Err: &codec.MalformedError{Reason: "truncated"}}, codes.DataLoss},
		{"damaged storage", fmt.Errorf("list: %w", &backend.CorruptError{Role: "the SQLite checkpoint database", Err: errors.New("database disk image is malformed")}), codes.DataLoss},
		{"damaged PostgreSQL table", fmt.Errorf("list: %w", &backend.CorruptError{Role: "the PostgreSQL checkpoint database", Err: errors.New("postgres: invalid page in block 7 of relation base/16384/24601 (SQLSTATE XX001)")}), codes.DataLoss},
		{"damaged PostgreSQL index", fmt.Errorf("list: %w", &backend.CorruptError{Role: "an index of the PostgreSQL checkpoint tables", Err: errors.New("postgres: index \"checkpoints_pkey\" contains unexpected zero page at block 3 (SQLSTATE XX002)")}), codes.DataLoss},
		{"unsupported", &store.DecodeError{Ref: where, CheckpointID: "c", Channel: "tool_state", Err: &codec.UnsupportedError{Format: "pickle"}}, codes.FailedPrecondition},
		{"size limit", &store.DecodeError{Ref: where, CheckpointID: "c", Channel: "tool_state", Err: &codec.LimitError{Limit: "MaxBytes"}}, codes.ResourceExhausted},
		{"too deep", &store.DecodeError{Ref: where, CheckpointID: "c", Channel: "tool_state", Err: &codec.LimitError{Limit: "MaxDepth"}}, codes.DataLoss},
		{"unknown head", fmt.Errorf("list: %w", store.ErrUnknownHead), codes.InvalidArgument},
		{"value of another branch", fmt.Errorf("thread %q checkpoint %q channel %q: %w", "t1", "c", "messages", store.ErrForeignValue), codes.DataLoss},
		{"parent cycle", fmt.Errorf("list: %w", &store.CycleError{Ref: where, Checkpoints: []string{"a", "b"}}), codes.DataLoss},
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

// An unknown head names the field, as a FieldError does, and nothing but
// the request: the store's own words (which could say whether the id
// exists elsewhere) are not read.
func TestUnknownHeadNamesField(t *testing.T) {
	st := toStatus(fmt.Errorf("thread %q: checkpoint %q: %w", "secret-thread", "1f0c-0009", store.ErrUnknownHead))
	if st.Code() != codes.InvalidArgument || st.Message() != MessageUnknownHead {
		t.Fatalf("status = %v %q, want INVALID_ARGUMENT %q", st.Code(), st.Message(), MessageUnknownHead)
	}
	if strings.Contains(st.Message(), "secret-thread") || strings.Contains(st.Message(), "1f0c-0009") {
		t.Errorf("message %q repeats the store's error", st.Message())
	}
	var field string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) == 1 {
			field = br.FieldViolations[0].Field
		}
	}
	if field != "head_checkpoint_id" {
		t.Errorf("details %v, want a BadRequest naming head_checkpoint_id", st.Details())
	}
}

// A value of another branch is DATA_LOSS naming where it is, never INTERNAL.
func TestForeignValueNamesCheckpoint(t *testing.T) {
	st := toStatus(fmt.Errorf("thread %q checkpoint %q channel %q: %w", "t1", "1f0c-0003", "messages", store.ErrForeignValue))
	if st.Code() != codes.DataLoss || !strings.Contains(st.Message(), "1f0c-0003") {
		t.Errorf("status = %v %q, want DATA_LOSS naming the checkpoint", st.Code(), st.Message())
	}
}

func TestDecodeErrorNamesWhere(t *testing.T) {
	err := &store.DecodeError{Ref: backend.Ref{ThreadID: "t1"}, CheckpointID: "1f0c-0003", Channel: "tool_state", Err: &codec.MalformedError{Reason: "truncated"}}
	msg := toStatus(err).Message()
	for _, want := range []string{`"t1"`, "1f0c-0003", `"tool_state"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not name %s", msg, want)
		}
	}
}

func TestCycleErrorNamesWhere(t *testing.T) {
	loop := make([]string, 12)
	for i := range loop {
		loop[i] = fmt.Sprintf("1f0c-%04d", i)
	}
	for _, tt := range []struct {
		err  *store.CycleError
		want string
	}{
		{&store.CycleError{Ref: backend.Ref{ThreadID: "t1"}, Checkpoints: []string{"1f0c-0003"}},
			`thread "t1": stored parent links loop: checkpoint 1f0c-0003 → 1f0c-0003, each the parent of the one before`},
		{&store.CycleError{Ref: backend.Ref{ThreadID: "t1", Namespace: "sub"}, Checkpoints: loop},
			`thread "t1" namespace "sub": stored parent links loop: checkpoint 1f0c-0000 → 1f0c-0001 → 1f0c-0002 → 1f0c-0003 → 1f0c-0004 → 1f0c-0005 → 1f0c-0006 → 1f0c-0007 → … (12 checkpoints in all) → 1f0c-0000, each the parent of the one before`},
	} {
		if st := toStatus(tt.err); st.Code() != codes.DataLoss || st.Message() != tt.want {
			t.Errorf("toStatus(%+v) = %v %q, want DataLoss %q", tt.err, st.Code(), st.Message(), tt.want)
		}
	}
}

// TestStatusHidesTheDatabase: the statuses whose causes can name the
// database (its host, port, role, database, schema or tables) send a fixed
// message, and the cause goes to the log on one line.
func TestStatusHidesTheDatabase(t *testing.T) {
	const secret = "failed to connect to `user=app_role database=app_db`:\n\t10.1.2.3:6543 (db.internal): dial error: connection refused\n\t[::1]:6543: refused"
	for _, tt := range []struct {
		err  error
		code codes.Code
		log  string
	}{
		{fmt.Errorf("list: %w: %s", backend.ErrUnavailable, secret), codes.Unavailable, "WARN"},
		{fmt.Errorf("%w: role \"app_role\" may not SELECT from \"app_schema\".\"checkpoints\"", backend.ErrNotCheckpointStore), codes.FailedPrecondition, "ERROR"},
		{errors.New("postgres: " + secret), codes.Internal, "ERROR"},
		// The table and its collation are the operator's to read.
		{fmt.Errorf("list threads: %w: in \"app_schema\".\"checkpoints\" of %s", backend.ErrUnorderedPrefixes, secret), codes.FailedPrecondition, "WARN"},
		{fmt.Errorf("%s: %w", secret, context.DeadlineExceeded), codes.DeadlineExceeded, ""},
		{fmt.Errorf("%s: %w", secret, context.Canceled), codes.Canceled, ""},
		{fmt.Errorf("%s: %w", secret, store.ErrStale), codes.Unavailable, ""},
		{fmt.Errorf("list: %w", &backend.CorruptError{Role: "the SQLite checkpoint database", Err: errors.New("sqlite: /srv/app_db/checkpoints\".db: " + secret)}), codes.DataLoss, "ERROR"},
		{fmt.Errorf("list: %w", &backend.CorruptError{Role: "the PostgreSQL checkpoint database", Err: errors.New("postgres: invalid page in block 7 of relation base/16384/24601 of app_db at " + secret + " (SQLSTATE XX001)")}), codes.DataLoss, "ERROR"},
		{fmt.Errorf("list: %w", &backend.CorruptError{Role: "an index of the PostgreSQL checkpoint tables", Err: errors.New("postgres: index \"app_schema\".\"checkpoints_pkey\" of " + secret + " contains unexpected zero page (SQLSTATE XX002)")}), codes.DataLoss, "ERROR"},
	} {
		st := toStatus(tt.err)
		if st.Code() != tt.code {
			t.Errorf("toStatus(%q) = %v, want %v", tt.err, st.Code(), tt.code)
		}
		for _, leak := range []string{"app_role", "app_db", "app_schema", "10.1.2.3", "6543", "db.internal", "checkpoints\""} {
			if strings.Contains(st.Message(), leak) {
				t.Errorf("%v message %q shows %q", st.Code(), st.Message(), leak)
			}
		}
		var buf strings.Builder
		logCause(context.Background(), slog.New(slog.NewTextHandler(&buf, nil)), "Snapshot", tt.err)
		line := buf.String()
		if tt.log == "" {
			if line != "" {
				t.Errorf("%v logged %q; the caller's own deadline or cancellation is not the operator's to read", st.Code(), line)
			}
			continue
		}
		if !strings.Contains(line, "level="+tt.log) || !strings.Contains(line, "method=Snapshot") {
			t.Errorf("%v cause logged as %q; want level %s and the method", st.Code(), line, tt.log)
		}
		if strings.Count(line, "\n") != 1 || strings.Contains(line, `\n`) || strings.Contains(line, `\t`) || strings.Contains(line, "\t") {
			t.Errorf("%v cause not logged as one plain line: %q", st.Code(), line)
		}
		want := "app_role"
		if !strings.Contains(line, want) {
			t.Errorf("%v cause logged as %q; want the cause itself", st.Code(), line)
		}
	}
}

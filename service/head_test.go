package service_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// readingRPCs are the calls that read a thread's state or turns, each made
// with a head_checkpoint_id; each returns its first message's head.
var readingRPCs = map[string]func(ctx context.Context, c historydv1.ThreadHistoryClient, thread, head string) (string, error){
	"Snapshots": func(ctx context.Context, c historydv1.ThreadHistoryClient, thread, head string) (string, error) {
		r, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread, HeadCheckpointId: head})
		return r.GetHeadCheckpointId(), err
	},
	"Snapshot": func(ctx context.Context, c historydv1.ThreadHistoryClient, thread, head string) (string, error) {
		r, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: 1, HeadCheckpointId: head})
		return r.GetHeadCheckpointId(), err
	},
	"Turns": func(ctx context.Context, c historydv1.ThreadHistoryClient, thread, head string) (string, error) {
		r, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread, HeadCheckpointId: head})
		return r.GetHeadCheckpointId(), err
	},
	"Turns with keys_written": func(ctx context.Context, c historydv1.ThreadHistoryClient, thread, head string) (string, error) {
		r, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread, IncludeKeysWritten: true, HeadCheckpointId: head})
		return r.GetHeadCheckpointId(), err
	},
	"Diff": func(ctx context.Context, c historydv1.ThreadHistoryClient, thread, head string) (string, error) {
		r, err := c.Diff(ctx, &historydv1.DiffRequest{ThreadId: thread, HeadCheckpointId: head})
		return r.GetHeadCheckpointId(), err
	},
	"StreamSnapshots": func(ctx context.Context, c historydv1.ThreadHistoryClient, thread, head string) (string, error) {
		s, err := c.StreamSnapshots(ctx, &historydv1.StreamSnapshotsRequest{ThreadId: thread, HeadCheckpointId: head})
		if err != nil {
			return "", err
		}
		first := ""
		for n := 0; ; n++ {
			r, err := s.Recv()
			if err == io.EOF {
				return first, nil
			}
			if err != nil {
				return "", err
			}
			if n == 0 {
				first = r.GetHeadCheckpointId()
			} else if r.GetHeadCheckpointId() != first {
				return "", fmt.Errorf("message %d read on head %q, the first on %q", n, r.GetHeadCheckpointId(), first)
			}
		}
	},
	"WatchTurns": func(ctx context.Context, c historydv1.ThreadHistoryClient, thread, head string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s, err := c.WatchTurns(ctx, &historydv1.WatchTurnsRequest{ThreadId: thread, HeadCheckpointId: head})
		if err != nil {
			return "", err
		}
		r, err := s.Recv()
		return r.GetHeadCheckpointId(), err
	},
}

// Every reading call takes head_checkpoint_id: validated (its limit named),
// read on that head's lineage, a head the thread does not hold refused as
// the caller's field; and every answer names the head it was read on.
func TestHeadCheckpointID(t *testing.T) {
	m := storetest.NewMemory()
	written := storetest.Build(m, backend.Ref{ThreadID: "h"}, demoTurns)
	newest := ""
	for _, w := range written {
		for _, id := range w.IDs {
			newest = max(newest, id)
		}
	}
	c := startServer(t, m)
	ctx := context.Background()
	older := written[1].End

	for name, call := range readingRPCs {
		t.Run(name, func(t *testing.T) {
			if head, err := call(ctx, c, "h", ""); err != nil || head != newest {
				t.Errorf("no head: answered on %q, %v; want the thread's head %q", head, err, newest)
			}
			if head, err := call(ctx, c, "h", older); err != nil || head != older {
				t.Errorf("head %s: answered on %q, %v", older, head, err)
			}

			_, err := call(ctx, c, "h", strings.Repeat("x", service.MaxCheckpointIDBytes+1))
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "head_checkpoint_id: is 257 bytes; the limit is 256" {
				t.Errorf("a head past the limit: %v", err)
			}
			_, err = call(ctx, c, "h", "1f0c-not-held")
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || st.Message() != service.MessageUnknownHead || strings.Contains(st.Message(), "1f0c-not-held") {
				t.Fatalf("an unknown head: %v; want INVALID_ARGUMENT %q", err, service.MessageUnknownHead)
			}
			if len(st.Details()) != 1 || st.Details()[0].(*errdetails.BadRequest).GetFieldViolations()[0].GetField() != "head_checkpoint_id" {
				t.Errorf("an unknown head: details %v, want a BadRequest naming head_checkpoint_id", st.Details())
			}
		})
	}
}

// Another tenant's checkpoint id, given as the head of that tenant's
// thread, reads exactly as a head of a thread that does not exist: the
// same code, message and body, for every reading call.
func TestHeadTenantIsolation(t *testing.T) {
	b, path := twoTenants(t)
	s := serveWith(t, b, service.Options{Auth: newAuth(t, path)})
	c := s.client(t)
	ctxA := withToken(context.Background(), "token-a")
	ctxB := withToken(context.Background(), "token-b")
	r, err := c.Turns(ctxB, &historydv1.TurnsRequest{ThreadId: "b/1"})
	if err != nil || r.GetHeadCheckpointId() == "" {
		t.Fatalf("tenant b's own head: %v, %v", r, err)
	}
	head := r.GetHeadCheckpointId()
	asked := b.asked("b/1")
	for name, call := range readingRPCs {
		got, gotErr := call(ctxA, c, "b/1", head)
		want, wantErr := call(ctxA, c, "a/never", head)
		// A watch of a thread without turns sends nothing: it ends at its
		// deadline, which either side may report first, in its own words.
		sameMsg := name == "WatchTurns" || status.Convert(gotErr).Message() == status.Convert(wantErr).Message()
		if got != want || status.Code(gotErr) != status.Code(wantErr) || !sameMsg {
			t.Errorf("%s: b/1 at b's head answered %q %v; a/never %q %v", name, got, gotErr, want, wantErr)
		}
		if name != "WatchTurns" {
			sameAnswer(t, name, askHead(ctxA, c, name, "b/1", head), askHead(ctxA, c, name, "a/never", head))
		}
	}
	if n := b.asked("b/1"); n != asked {
		t.Errorf("store asked about b/1 %d more times by tenant a", n-asked)
	}
}

// askHead makes a unary or server-streaming call at head and collects its
// whole answer.
func askHead(ctx context.Context, c historydv1.ThreadHistoryClient, rpc, thread, head string) answer {
	var msgs []proto.Message
	var resp proto.Message
	var err error
	switch rpc {
	case "Snapshots":
		resp, err = c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread, HeadCheckpointId: head})
	case "Snapshot":
		resp, err = c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: 1, HeadCheckpointId: head})
	case "Turns":
		resp, err = c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread, HeadCheckpointId: head})
	case "Turns with keys_written":
		resp, err = c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread, IncludeKeysWritten: true, HeadCheckpointId: head})
	case "Diff":
		resp, err = c.Diff(ctx, &historydv1.DiffRequest{ThreadId: thread, HeadCheckpointId: head})
	case "StreamSnapshots":
		msgs, err = readStream(ctx, c, &historydv1.StreamSnapshotsRequest{ThreadId: thread, HeadCheckpointId: head})
	}
	if resp != nil && err == nil {
		msgs = []proto.Message{resp}
	}
	st := status.Convert(err)
	return answer{msgs: msgs, code: st.Code(), msg: st.Message(), det: st.Details()}
}

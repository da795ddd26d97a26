package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// syncBuffer holds the server's JSON log, written from its goroutines.
type syncBuffer struct{ syncbuf.Buffer }

func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// The request log records method, code and duration, and the thread only
// as a salted hash; error texts that name the thread (the handler's own
// log of the cause of an Unavailable or Internal error) carry the hash
// instead.
func TestRequestLogHidesThreadIDs(t *testing.T) {
	const thread = "customer-8812/conversation-0042"
	for _, tt := range []struct {
		mode  service.ThreadIDLogging
		fails error
	}{
		{service.ThreadIDsHashed, backend.ErrUnavailable},
		{service.ThreadIDsHashed, errors.New("driver bug")},
		{service.ThreadIDsOmitted, backend.ErrUnavailable},
	} {
		var buf syncBuffer
		// At debug: the stream's failure, like the unary call's, is left
		// to the failure summary and logged at debug, hidden the same way.
		log := service.RedactThreadIDs(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
		m := storetest.NewMemory()
		m.SetErr(tt.fails)
		salt := []byte("test salt")
		c := serveWith(t, m, service.Options{Logger: log, ThreadIDs: tt.mode, ThreadIDSalt: salt}).client(t)
		_, err := c.Snapshots(context.Background(), &historydv1.SnapshotsRequest{ThreadId: thread})
		if err == nil {
			t.Fatal("call against a failing store succeeded")
		}
		if _, err := readStream(context.Background(), c, &historydv1.StreamSnapshotsRequest{ThreadId: thread}); err == nil {
			t.Fatal("stream against a failing store succeeded")
		}
		if strings.Contains(buf.String(), "conversation-0042") {
			t.Errorf("mode %v, error %v: the log shows the thread id:\n%s", tt.mode, tt.fails, buf.String())
		}
		want := service.ShownThread(service.ThreadIDsHashed, salt, thread)
		var calls []map[string]any
		for _, r := range buf.records(t) {
			if r["msg"] == "finished call" {
				calls = append(calls, r)
			}
		}
		if len(calls) != 2 {
			t.Fatalf("%d request log lines, want 2 (unary and stream):\n%s", len(calls), buf.String())
		}
		for _, finished := range calls {
			for _, k := range []string{"grpc.method", "grpc.code", "grpc.time_ms"} {
				if finished[k] == nil {
					t.Errorf("request log lacks %s: %v", k, finished)
				}
			}
			switch tt.mode {
			case service.ThreadIDsHashed:
				if finished["thread"] != want || !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(want) {
					t.Errorf("%v: thread field = %v, want %s", finished["grpc.method"], finished["thread"], want)
				}
				// The cause of an Unavailable or Internal error is logged on
				// its own line, not sent to the caller; there the thread
				// shows as its hash.
				where := buf.String()
				if !strings.Contains(where, "thread "+want) {
					t.Errorf("%v: error text does not carry the hash in place of the id: %v", finished["grpc.method"], where)
				}
			case service.ThreadIDsOmitted:
				if _, ok := finished["thread"]; ok || strings.Contains(buf.String(), want) {
					t.Errorf("omitted mode logs the thread: %v", finished)
				}
			}
		}
	}
}

// Successful health checks and reflection calls are logged at debug, so
// that probes every few seconds do not drown the calls that matter; a
// failing one, and every ThreadHistory call, is logged at info or above.
func TestOpenServicesLogAtDebug(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "demo"}, storetest.Demo)
	srv := serveWith(t, mem, service.Options{Logger: log})
	conn := srv.conn(t, nil)
	ctx := context.Background()

	health := healthpb.NewHealthClient(conn)
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Fatalf("health check of an unknown service: %v, want NotFound", err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("reflection stream ended with %v", err)
	}
	if _, err := srv.client(t).Turns(ctx, &historydv1.TurnsRequest{ThreadId: "demo"}); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{
		"grpc.health.v1.Health/Check OK":                              "DEBUG",
		"grpc.health.v1.Health/Check NotFound":                        "INFO",
		"grpc.reflection.v1.ServerReflection/ServerReflectionInfo OK": "DEBUG",
		"historyd.v1.ThreadHistory/Turns OK":                          "INFO",
	}
	// Each call's line is written before its answer is sent.
	got := map[string]string{}
	for _, r := range buf.records(t) {
		if r["msg"] == "finished call" {
			got[fmt.Sprintf("%v/%v %v", r["grpc.service"], r["grpc.method"], r["grpc.code"])] = fmt.Sprint(r["level"])
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request log levels %v, want %v", got, want)
	}
}

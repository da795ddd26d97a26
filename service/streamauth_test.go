package service_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
)

// A streaming request from a caller without valid credentials is refused
// UNAUTHENTICATED before its body is read, so that bytes that are no
// message at all get the same answer as any other request of such a
// caller, are logged as a refusal, and never count as INTERNAL.
func TestUnauthenticatedStreamBodyNotRead(t *testing.T) {
	b, path := twoTenants(t)
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: b}, Metrics: true,
		Service: service.Frontend{Auth: newAuth(t, path), Logger: log}})
	conn := srv.Conn(t)
	garbage := []byte{0x0a, 100, 'a', 'b', 'c'} // field 1 announcing 100 bytes, holding 3
	const calls = 20
	for i := range calls {
		method := historydv1.ThreadHistory_StreamSnapshots_FullMethodName
		if i%2 == 1 {
			method = historydv1.ThreadHistory_WatchTurns_FullMethodName
		}
		ctx := context.Background()
		if i%4 >= 2 {
			ctx = withToken(ctx, "not-a-token")
		}
		s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMsg(&garbage); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		_ = s.CloseSend()
		err = s.RecvMsg(&historydv1.StreamSnapshotsResponse{})
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("garbage %s from an unauthenticated caller: %v, want UNAUTHENTICATED", method, err)
		}
	}
	rec := httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	metrics := rec.Body.String()
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "grpc_server_handled_total{") && strings.Contains(line, `grpc_code="Internal"`) && !strings.HasSuffix(line, "} 0") {
			t.Errorf("INTERNAL counted: %s", line)
		}
	}
	for _, m := range []string{"StreamSnapshots", "WatchTurns"} {
		want := `grpc_server_handled_total{grpc_code="Unauthenticated",grpc_method="` + m + `",grpc_service="historyd.v1.ThreadHistory",grpc_type="server_stream"} 10`
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	refused := 0
	for _, r := range buf.records(t) {
		if r["msg"] == "finished call" && r["grpc.code"] == "Unauthenticated" {
			refused++
		}
	}
	if refused != calls {
		t.Errorf("%d refusals in the request log, want %d", refused, calls)
	}
}

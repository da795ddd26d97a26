package metrics_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// Threads, Diff and WatchTurns are counted like every RPC, and the thread
// walk is timed like every store query.
func TestNewRPCsCounted(t *testing.T) {
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "demo"}, storetest.Demo)
	c, _, url := setup(t, mem)
	ctx := context.Background()
	if _, err := c.Threads(ctx, &historydv1.ThreadsRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Diff(ctx, &historydv1.DiffRequest{ThreadId: "demo"}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	stream, err := c.WatchTurns(wctx, &historydv1.WatchTurnsRequest{ThreadId: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	_, _ = stream.Recv()

	code, body := get(t, url+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Threads",grpc_service="historyd.v1.ThreadHistory",grpc_type="unary"} 1`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Diff",grpc_service="historyd.v1.ThreadHistory",grpc_type="unary"} 1`,
		`grpc_server_started_total{grpc_method="WatchTurns",grpc_service="historyd.v1.ThreadHistory",grpc_type="server_stream"} 1`,
		// Turns 1-3 of the demo ended when the next began; turn 4 has no
		// later question and records no updated_channels.
		`grpc_server_msg_sent_total{grpc_method="WatchTurns",grpc_service="historyd.v1.ThreadHistory",grpc_type="server_stream"} 3`,
		`historyd_store_query_duration_seconds_count{method="Threads"} 1`,
		`historyd_store_query_errors_total{method="Threads"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

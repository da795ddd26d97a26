package service_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/historyd/historyd/auth/authtest"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// wireRPC is one method called with raw request bytes: its request type
// (for field numbers), how its answer is decoded, and whether it streams.
type wireRPC struct {
	method string // full method name
	req    proto.Message
	resp   func() proto.Message
	stream bool
}

func threadHistory(method string, req proto.Message, resp func() proto.Message, stream bool) wireRPC {
	return wireRPC{"/" + historydv1.ThreadHistory_ServiceDesc.ServiceName + "/" + method, req, resp, stream}
}

var wireRPCs = []wireRPC{
	threadHistory("Snapshot", &historydv1.SnapshotRequest{}, func() proto.Message { return &historydv1.SnapshotResponse{} }, false),
	threadHistory("Snapshots", &historydv1.SnapshotsRequest{}, func() proto.Message { return &historydv1.SnapshotsResponse{} }, false),
	threadHistory("Turns", &historydv1.TurnsRequest{}, func() proto.Message { return &historydv1.TurnsResponse{} }, false),
	threadHistory("Threads", &historydv1.ThreadsRequest{}, func() proto.Message { return &historydv1.ThreadsResponse{} }, false),
	threadHistory("Diff", &historydv1.DiffRequest{}, func() proto.Message { return &historydv1.DiffResponse{} }, false),
	threadHistory("StreamSnapshots", &historydv1.StreamSnapshotsRequest{}, func() proto.Message { return &historydv1.StreamSnapshotsResponse{} }, true),
	threadHistory("WatchTurns", &historydv1.WatchTurnsRequest{}, func() proto.Message { return &historydv1.WatchTurnsResponse{} }, true),
}

func rpcNamed(t *testing.T, name string) wireRPC {
	t.Helper()
	for _, r := range wireRPCs {
		if strings.HasSuffix(r.method, "/"+name) {
			return r
		}
	}
	t.Fatalf("no rpc %s", name)
	return wireRPC{}
}

// callRaw sends req's bytes as they are and returns the first message of
// the answer, or the call's error. A stream's first message is all that is
// read: WatchTurns stays open, so a call is given a few seconds.
func callRaw(ctx context.Context, conn *grpc.ClientConn, r wireRPC, req []byte) (proto.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp := r.resp()
	if !r.stream {
		err := conn.Invoke(ctx, r.method, &req, resp, grpc.ForceCodecV2(rawCodec{}))
		return resp, err
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, r.method, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return nil, err
	}
	if err := s.SendMsg(&req); err != nil && err != io.EOF {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	if err := s.RecvMsg(resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// badRequestField returns the field a status's BadRequest detail names,
// or "" when it has none, or more than one violation.
func badRequestField(st *status.Status) string {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

// timestampBytes is a google.protobuf.Timestamp's encoding with these
// varints as its seconds and nanos.
func timestampBytes(seconds, nanos uint64) []byte {
	b := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), seconds)
	return protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), nanos)
}

// TestIntegersPastTheirTypeOnTheWire sends turn numbers, and every other
// 32-bit request field, as varints their field's type cannot hold: each is
// refused as INVALID_ARGUMENT naming the field and the limit, never read as
// the smaller number protobuf's decoders truncate it to (2^32+1 would be
// turn 1, and turn 1's state served; 2^63 would be turn 0).
func TestIntegersPastTheirTypeOnTheWire(t *testing.T) {
	m := storetest.NewMemory()
	storetest.Build(m, backend.Ref{ThreadID: "demo"}, demoTurns)
	conn := serveWith(t, m, service.Options{}).conn(t, nil)
	ctx := context.Background()
	const (
		over32 = uint64(1)<<32 + 1 // int32(over32) == 1
		over31 = uint64(1) << 31   // int32(over31) == math.MinInt32
		over63 = uint64(1) << 63   // int32(over63) == 0
	)
	limit := strconv.Itoa(math.MaxInt32)
	cases := []struct {
		rpc, field string
		fields     []any
	}{
		{"Snapshot", "turn", []any{"thread_id", "demo", "turn", over32}},
		{"Snapshot", "turn", []any{"thread_id", "demo", "turn", over31}},
		{"Snapshot", "turn", []any{"thread_id", "demo", "turn", over63}},
		{"Snapshot", "turn", []any{"thread_id", "demo", "turn", uint64(math.MaxUint64 - 1<<32 + 2)}}, // 1 - 2^32 as an int64
		{"Snapshot", "value_format", []any{"thread_id", "demo", "turn", 1, "value_format", uint64(1)<<32 + 2}},
		{"Diff", "to_turn", []any{"thread_id", "demo", "to_turn", uint64(1)<<32 + 2}},
		{"Diff", "from_turn", []any{"thread_id", "demo", "to_turn", 4, "from_turn", over32}},
		{"StreamSnapshots", "from_turn", []any{"thread_id", "demo", "from_turn", uint64(1)<<32 + 3}},
		{"WatchTurns", "after_turn", []any{"thread_id", "demo", "after_turn", uint64(1)<<32 + 3}},
		{"Threads", "page_size", []any{"page_size", over32}},
		{"Threads", "last_activity_after.nanos", []any{"last_activity_after", timestampBytes(1, uint64(1)<<32+5)}},
	}
	for _, tc := range cases {
		r := rpcNamed(t, tc.rpc)
		t.Run(tc.rpc+"/"+tc.field, func(t *testing.T) {
			resp, err := callRaw(ctx, conn, r, wire(t, r.req, tc.fields...))
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), tc.field+": ") || !strings.Contains(st.Message(), limit) {
				t.Fatalf("got %v %q (answer %v), want InvalidArgument naming %s and the limit %s", st.Code(), st.Message(), resp, tc.field, limit)
			}
			if got := badRequestField(st); got != tc.field {
				t.Errorf("BadRequest names %q, want %q", got, tc.field)
			}
		})
	}

	// The message says what was sent and what the field holds.
	snapshot := rpcNamed(t, "Snapshot")
	_, err := callRaw(ctx, conn, snapshot, wire(t, snapshot.req, "thread_id", "demo", "turn", over32))
	if got, want := status.Convert(err).Message(), "turn: is 4294967297, outside the int32 range, -2147483648 to 2147483647"; got != want {
		t.Errorf("turn 2^32+1: %q, want %q", got, want)
	}
	_, err = callRaw(ctx, conn, snapshot, malformedBodies["11-byte varint"])
	if got, want := status.Convert(err).Message(), "turn: is not a valid int32 value: variable length integer overflow"; got != want {
		t.Errorf("an 11-byte turn: %q, want %q", got, want)
	}

	// What the types do hold is read as sent: the largest turn is a turn
	// the thread never had, a negative one (ten bytes, sign-extended) is
	// refused by the rule for turns, and turn 3 is turn 3.
	resp, err := callRaw(ctx, conn, snapshot, wire(t, snapshot.req, "thread_id", "demo", "turn", uint64(math.MaxInt32)))
	if err != nil || resp.(*historydv1.SnapshotResponse).GetNoSuchTurn().GetTurn() != math.MaxInt32 {
		t.Errorf("turn 2^31-1: %v, %v; want no_such_turn for it", resp, err)
	}
	minusOne := -1
	_, err = callRaw(ctx, conn, snapshot, wire(t, snapshot.req, "thread_id", "demo", "turn", minusOne))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "turn: is -1;") {
		t.Errorf("turn -1: %v, want InvalidArgument from the turn rule", err)
	}
	resp, err = callRaw(ctx, conn, snapshot, wire(t, snapshot.req, "thread_id", "demo", "turn", 3))
	if err != nil || resp.(*historydv1.SnapshotResponse).GetState().GetTurn() != 3 {
		t.Errorf("turn 3: %v, %v", resp, err)
	}
}

// malformedBodies are request bodies that are no protobuf message at all.
var malformedBodies = map[string][]byte{
	// Field 1, announcing 100 bytes and holding 3.
	"truncated field": {0x0a, 100, 'a', 'b', 'c'},
	// Field 2 as a varint of eleven bytes: ten is the most there is.
	"11-byte varint": append(protowire.AppendTag(nil, 2, protowire.VarintType), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01),
	// A tag naming field 0, which no message has.
	"field number 0": {0x00, 0x01},
	// A group's end with no start.
	"stray end group": protowire.AppendTag(nil, 3, protowire.EndGroupType),
	// A tag cut short.
	"cut tag": {0xff},
}

// TestMalformedRequestBytes sends every rpc, and health's Check, request
// bodies that do not parse: each is INVALID_ARGUMENT with a BadRequest
// detail, as any other malformed request, not INTERNAL; the request log
// has a line for it and the metrics count it as InvalidArgument, so that
// garbage does not trip the INTERNAL alert.
func TestMalformedRequestBytes(t *testing.T) {
	var logs syncbuf.Buffer
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: storetest.NewMemory()}, Metrics: true,
		Service: service.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	conn := srv.Conn(t)
	ctx := context.Background()
	rpcs := append(wireRPCs, wireRPC{"/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{},
		func() proto.Message { return &healthpb.HealthCheckResponse{} }, false})
	calls := map[string]int{}
	for _, r := range rpcs {
		for name, body := range malformedBodies {
			t.Run(r.method[strings.LastIndexByte(r.method, '/')+1:]+"/"+name, func(t *testing.T) {
				resp, err := callRaw(ctx, conn, r, body)
				st := status.Convert(err)
				if st.Code() != codes.InvalidArgument || badRequestField(st) == "" {
					t.Fatalf("got %v %q (answer %v), want InvalidArgument with a BadRequest detail", st.Code(), st.Message(), resp)
				}
				if !strings.Contains(st.Message(), "not a valid") {
					t.Errorf("message %q does not say the request is not a valid message", st.Message())
				}
			})
			calls[r.method]++
		}
	}

	body := srv.Metrics(t)
	for _, r := range wireRPCs {
		svc, method := splitFull(r.method)
		typ := "unary"
		if r.stream {
			typ = "server_stream"
		}
		want := `grpc_server_handled_total{grpc_code="InvalidArgument",grpc_method="` + method + `",grpc_service="` + svc + `",grpc_type="` + typ + `"} ` + strconv.Itoa(calls[r.method])
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if internal := regexp.MustCompile(`grpc_server_handled_total\{grpc_code="Internal",[^}]*\} [1-9]`).FindString(body); internal != "" {
		t.Errorf("/metrics counts malformed requests as Internal: %s", internal)
	}
	// One request log line per ThreadHistory call, with its code.
	logged := strings.Count(logs.String(), "grpc.code=InvalidArgument")
	want := 0
	for _, r := range wireRPCs {
		want += calls[r.method]
	}
	if logged < want {
		t.Errorf("%d request log lines say InvalidArgument, want at least %d:\n%s", logged, want, logs.String())
	}
}

func splitFull(full string) (svc, method string) {
	full = strings.TrimPrefix(full, "/")
	i := strings.LastIndexByte(full, '/')
	return full[:i], full[i+1:]
}

// TestMalformedRequestBytesWithAuth: without credentials a malformed
// request is UNAUTHENTICATED, as any call is; with them every tenant gets
// the same INVALID_ARGUMENT, one confined to thread-id prefixes as one
// reading every thread (there is no thread to route by).
func TestMalformedRequestBytesWithAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	authtest.WriteFile(t, path, authtest.TokenFile(t,
		authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"token-a"}},
		authtest.Tenant{Name: "ops", AllThreads: true, Tokens: []string{"token-ops"}},
	))
	conn := serveWith(t, storetest.NewMemory(), service.Options{Auth: newAuth(t, path)}).conn(t, nil)
	for _, r := range wireRPCs {
		for name, body := range malformedBodies {
			t.Run(r.method[strings.LastIndexByte(r.method, '/')+1:]+"/"+name, func(t *testing.T) {
				_, err := callRaw(context.Background(), conn, r, body)
				if status.Code(err) != codes.Unauthenticated {
					t.Errorf("without a token: %v, want Unauthenticated", err)
				}
				_, errA := callRaw(withToken(context.Background(), "token-a"), conn, r, body)
				_, errOps := callRaw(withToken(context.Background(), "token-ops"), conn, r, body)
				a, ops := status.Convert(errA), status.Convert(errOps)
				if a.Code() != codes.InvalidArgument || a.Message() != ops.Message() || a.Code() != ops.Code() {
					t.Errorf("tenant a: %v %q; all-threads tenant: %v %q; want the same InvalidArgument", a.Code(), a.Message(), ops.Code(), ops.Message())
				}
			})
		}
	}
}

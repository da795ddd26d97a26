package service_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// startServer serves b with historyd's server (server.New, every default)
// in memory and returns a client connected to it.
func startServer(t *testing.T, b backend.Backend) historydv1.ThreadHistoryClient {
	t.Helper()
	return servertest.Start(t, server.Config{Store: store.Config{Backend: b}}).Client(t)
}

var demoTurns = []storetest.Turn{
	{Question: "sketch the Severn", Writes: map[string]any{"area": 11420.0, "name": "Severn"}},
	{Question: "now the Thames", Writes: map[string]any{"area": 12935.0, "name": "Thames"}},
	{Question: "compare them"},
	{Question: "what was turn 7?"},
}

func TestSnapshots(t *testing.T) {
	m := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "demo"}
	storetest.Build(m, ref, demoTurns)
	c := startServer(t, m)
	ctx := context.Background()

	resp, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Total != 4 || len(resp.Turns) != 4 {
		t.Fatalf("total %d, %d turns; want 4, 4", resp.Total, len(resp.Turns))
	}
	wantArea := map[int32]float64{1: 11420, 2: 12935, 3: 12935, 4: 12935}
	for n, area := range wantArea {
		ts := resp.Turns[n]
		if got := ts.Entries["area"].GetValue().GetNumberValue(); got != area {
			t.Errorf("turn %d area = %v, want %v", n, got, area)
		}
		if ts.Question != demoTurns[n-1].Question {
			t.Errorf("turn %d question = %q", n, ts.Question)
		}
	}
	e := resp.Turns[2].Entries["name"]
	if e.GetTool() != "tool_name" || e.GetTurn() != 2 || e.GetTurnsWritten() != 2 || e.GetSeq() != 4 {
		t.Errorf("turn 2 name entry = %s", protojson.Format(e))
	}

	proj, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "demo", Keys: []string{"name"}})
	if err != nil {
		t.Fatal(err)
	}
	for n, ts := range proj.Turns {
		if len(ts.Entries) != 1 || ts.Entries["name"] == nil {
			t.Errorf("projected turn %d has keys %v", n, keys(ts.Entries))
		}
	}

	unknown, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "nope"})
	if err != nil || unknown.Total != 0 || len(unknown.Turns) != 0 {
		t.Errorf("unknown thread = %v, %v; want total 0 and no turns", unknown, err)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestSnapshotOutcomes(t *testing.T) {
	m := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "pruned"}
	written := storetest.Build(m, ref, demoTurns)
	gone := map[string]bool{}
	for _, w := range written[:2] {
		for _, id := range w.IDs {
			gone[id] = true
		}
	}
	m.Delete(ref, slices.Collect(maps.Keys(gone)))
	c := startServer(t, m)
	ctx := context.Background()

	for _, tt := range []struct {
		turn int32
		want string
	}{{0, "no_such_turn"}, {1, "no_longer_retained"}, {2, "no_longer_retained"}, {3, "state"}, {4, "state"}, {5, "no_such_turn"}} {
		resp, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: "pruned", Turn: tt.turn})
		if err != nil {
			t.Fatalf("turn %d: %v", tt.turn, err)
		}
		var got string
		switch r := resp.Result.(type) {
		case *historydv1.SnapshotResponse_State:
			got = "state"
			if r.State.Turn != tt.turn || r.State.Entries["area"].GetValue().GetNumberValue() != 12935 {
				t.Errorf("turn %d state = %s", tt.turn, protojson.Format(r.State))
			}
		case *historydv1.SnapshotResponse_NoSuchTurn:
			got = "no_such_turn"
			if r.NoSuchTurn.Total != 4 {
				t.Errorf("no_such_turn total = %d", r.NoSuchTurn.Total)
			}
		case *historydv1.SnapshotResponse_NoLongerRetained:
			got = "no_longer_retained"
			if r.NoLongerRetained.Question != demoTurns[tt.turn-1].Question {
				t.Errorf("no_longer_retained question = %q", r.NoLongerRetained.Question)
			}
		}
		if got != tt.want {
			t.Errorf("turn %d: %s, want %s", tt.turn, got, tt.want)
		}
		if resp.Total != 4 || len(resp.RetainedTurns) != 2 || resp.RetainedTurns[0] != 3 || resp.RetainedTurns[1] != 4 {
			t.Errorf("turn %d: total %d retained %v; want 4 [3 4]", tt.turn, resp.Total, resp.RetainedTurns)
		}
	}
}

func TestTurns(t *testing.T) {
	m := storetest.NewMemory()
	written := storetest.Build(m, backend.Ref{ThreadID: "demo"}, demoTurns)
	c := startServer(t, m)
	resp, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "demo", IncludeKeysWritten: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Total != 4 || len(resp.Turns) != 4 {
		t.Fatalf("Turns = %s", protojson.Format(resp))
	}
	for i, ti := range resp.Turns {
		if ti.Number != int32(i+1) || !ti.Retained || ti.CheckpointId != written[i].End || ti.EndedAt == nil {
			t.Errorf("turn %d = %s", i+1, protojson.Format(ti))
		}
	}
	if got := strings.Join(resp.Turns[1].KeysWritten, ","); got != "area,name" {
		t.Errorf("turn 2 keys_written = %q, want area,name", got)
	}
	if len(resp.Turns[2].KeysWritten) != 0 {
		t.Errorf("turn 3 keys_written = %v, want none", resp.Turns[2].KeysWritten)
	}
}

func TestInvalidRequests(t *testing.T) {
	c := startServer(t, storetest.NewMemory())
	ctx := context.Background()
	long := strings.Repeat("x", service.MaxThreadIDBytes+1)
	many := make([]string, service.MaxKeys+1)
	for i := range many {
		many[i] = "k"
	}
	type call func() error
	tests := []struct {
		name  string
		call  call
		field string
	}{
		{"Snapshots empty thread", func() error {
			_, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{})
			return err
		}, "thread_id"},
		{"Snapshots long thread", func() error {
			_, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: long})
			return err
		}, "thread_id"},
		{"Snapshots NUL in thread", func() error {
			_, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "a\x00b"})
			return err
		}, "thread_id"},
		{"Snapshots long namespace", func() error {
			_, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "t", CheckpointNs: long})
			return err
		}, "checkpoint_ns"},
		{"Snapshots too many keys", func() error {
			_, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "t", Keys: many})
			return err
		}, "keys"},
		{"Snapshots empty key", func() error {
			_, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "t", Keys: []string{"a", ""}})
			return err
		}, "keys[1]"},
		{"Snapshot negative turn", func() error {
			_, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: "t", Turn: -1})
			return err
		}, "turn"},
		{"Snapshot empty thread", func() error {
			_, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{Turn: 1})
			return err
		}, "thread_id"},
		{"Snapshot long key", func() error {
			_, err := c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: "t", Turn: 1, Keys: []string{long}})
			return err
		}, "keys[0]"},
		{"Turns empty thread", func() error {
			_, err := c.Turns(ctx, &historydv1.TurnsRequest{})
			return err
		}, "thread_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("code = %v (%v), want InvalidArgument", st.Code(), err)
			}
			if !strings.HasPrefix(st.Message(), tt.field+": ") {
				t.Errorf("message %q does not start with the field %q", st.Message(), tt.field)
			}
			if len(st.Details()) != 1 {
				t.Errorf("details = %v, want one BadRequest", st.Details())
			}
		})
	}
}

func TestStoreDown(t *testing.T) {
	m := storetest.NewMemory()
	m.SetErr(backend.ErrUnavailable)
	c := startServer(t, m)
	_, err := c.Snapshot(context.Background(), &historydv1.SnapshotRequest{ThreadId: "t", Turn: 1})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("code = %v, want Unavailable", status.Code(err))
	}
}

// Health follows the store, and reflection lists the service.
func TestHealthAndReflection(t *testing.T) {
	m := storetest.NewMemory()
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: m}, HealthInterval: 10 * time.Millisecond})
	hc := healthpb.NewHealthClient(srv.Conn(t))
	ctx := t.Context()
	waitFor := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		stream, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: historydv1.ThreadHistory_ServiceDesc.ServiceName})
		if err != nil {
			t.Fatal(err)
		}
		for {
			r, err := stream.Recv()
			if err != nil {
				t.Fatalf("waiting for %v: %v", want, err)
			}
			if r.Status == want {
				return
			}
		}
	}
	waitFor(healthpb.HealthCheckResponse_SERVING)
	if svcs, err := listServices(srv.Conn(t)); err != nil || !strings.Contains(svcs, "historyd.v1.ThreadHistory") {
		t.Errorf("reflection lists %q, %v; want historyd.v1.ThreadHistory", svcs, err)
	}
	m.SetErr(errors.New("down"))
	waitFor(healthpb.HealthCheckResponse_NOT_SERVING)
	m.SetErr(nil)
	waitFor(healthpb.HealthCheckResponse_SERVING)
}

func TestStreamSnapshots(t *testing.T) {
	m := storetest.NewMemory()
	storetest.Build(m, backend.Ref{ThreadID: "demo"}, demoTurns)
	c := startServer(t, m)
	ctx := context.Background()
	read := func(req *historydv1.StreamSnapshotsRequest) ([]*historydv1.StreamSnapshotsResponse, error) {
		stream, err := c.StreamSnapshots(ctx, req)
		if err != nil {
			return nil, err
		}
		var out []*historydv1.StreamSnapshotsResponse
		for {
			r, err := stream.Recv()
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out = append(out, r)
		}
	}
	all, err := read(&historydv1.StreamSnapshotsRequest{ThreadId: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(snaps.Turns) {
		t.Fatalf("streamed %d turns, Snapshots has %d", len(all), len(snaps.Turns))
	}
	for i, r := range all {
		if r.Total != 4 || r.Turn.Turn != int32(i+1) || !proto.Equal(r.Turn, snaps.Turns[r.Turn.Turn]) {
			t.Errorf("message %d = %s", i, protojson.Format(r))
		}
	}
	from, err := read(&historydv1.StreamSnapshotsRequest{ThreadId: "demo", FromTurn: 3, Keys: []string{"area"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(from) != 2 || from[0].Turn.Turn != 3 || len(from[0].Turn.Entries) != 1 {
		t.Errorf("from_turn 3 with keys = %v", from)
	}
	none, err := read(&historydv1.StreamSnapshotsRequest{ThreadId: "unknown"})
	if err != nil || len(none) != 1 || none[0].Turn != nil || none[0].Total != 0 {
		t.Errorf("unknown thread = %v, %v; want one message with total 0", none, err)
	}
	_, err = read(&historydv1.StreamSnapshotsRequest{ThreadId: "demo", FromTurn: -1})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "from_turn: ") {
		t.Errorf("from_turn -1 = %v", err)
	}
}

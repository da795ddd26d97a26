package service_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// An interceptor sees the handlers' entries still encoded, their getters
// unset; Decoded gives it what the client receives.
func TestInterceptorsReadEntriesDecoded(t *testing.T) {
	m := storetest.NewMemory()
	storetest.Build(m, backend.Ref{ThreadID: "demo"}, demoTurns)
	type seen struct {
		raw     *historydv1.StateEntry
		decoded *historydv1.SnapshotResponse
		err     error
	}
	saw := make(chan seen, 1)
	peek := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if r, ok := resp.(*historydv1.SnapshotResponse); ok {
			// proto.Clone keeps unknown fields as they are.
			raw := proto.Clone(r.GetState().GetEntries()["area"]).(*historydv1.StateEntry)
			d, derr := service.Decoded(r)
			saw <- seen{raw, d, derr}
		}
		return resp, err
	}
	c := servertest.Start(t, server.Config{
		Store:       store.Config{Backend: m},
		GRPCOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(peek)},
	}).Client(t)
	got, err := c.Snapshot(context.Background(), &historydv1.SnapshotRequest{ThreadId: "demo", Turn: 2})
	if err != nil {
		t.Fatal(err)
	}
	s := <-saw
	if s.err != nil {
		t.Fatal(s.err)
	}
	if s.raw == nil || s.raw.GetValue() != nil || s.raw.GetTool() != "" || len(s.raw.ProtoReflect().GetUnknown()) == 0 {
		t.Errorf("entry as the handler returns it = %v; want its fields only encoded "+
			"(if handlers now build decoded entries, update toTurnState's and Decoded's docs)", s.raw)
	}
	if !proto.Equal(s.decoded, got) {
		t.Errorf("Decoded = %v\nwant what the client received: %v", s.decoded, got)
	}
	area := s.decoded.GetState().GetEntries()["area"]
	if area.GetValue().GetNumberValue() != 12935 || area.GetTool() != "tool_area" {
		t.Errorf("decoded area entry = %v, want 12935 written by tool_area", area)
	}
}

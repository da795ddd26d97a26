package service

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/auth"
)

// A streaming call whose request was not read ahead (a client or
// bidirectional stream) names no single thread, so only all_threads
// tenants may make it.
func TestIsolationStreamsFailClosed(t *testing.T) {
	iso := newIsolation(New(Options{}))
	info := &grpc.StreamServerInfo{FullMethod: "/historyd.v1.ThreadHistory/Converse", IsClientStream: true, IsServerStream: true}
	called := false
	handler := func(any, grpc.ServerStream) error { called = true; return nil }
	for _, tt := range []struct {
		tenant *auth.Tenant
		code   codes.Code
	}{
		{nil, codes.Unauthenticated},
		{&auth.Tenant{Name: "a", ThreadPrefixes: []string{"a/"}}, codes.PermissionDenied},
		{&auth.Tenant{Name: "ops", AllThreads: true}, codes.OK},
	} {
		called = false
		ctx := context.Background()
		if tt.tenant != nil {
			ctx = auth.WithTenant(ctx, tt.tenant)
		}
		err := iso.stream(nil, fakeStream{ctx}, info, handler)
		if status.Code(err) != tt.code || called != (tt.code == codes.OK) {
			t.Errorf("tenant %v: %v (handler called %v), want %v", tt.tenant, err, called, tt.code)
		}
	}
}

type fakeStream struct{ ctx context.Context }

func (f fakeStream) Context() context.Context   { return f.ctx }
func (fakeStream) SetHeader(metadata.MD) error  { return nil }
func (fakeStream) SendHeader(metadata.MD) error { return nil }
func (fakeStream) SetTrailer(metadata.MD)       {}
func (fakeStream) SendMsg(any) error            { return nil }
func (fakeStream) RecvMsg(any) error            { return nil }

package service

import (
	"context"
	"log/slog"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/historyd/historyd/auth"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

var threadHistoryName = historydv1.ThreadHistory_ServiceDesc.ServiceName

// OpenService reports whether a service is served without credentials:
// health, so that load balancers can probe, and reflection, which only
// describes the API. Everything else requires them, including services
// added later, which then fail closed until someone decides otherwise.
// Open services are also the ones logged at debug when their calls
// succeed, and left out of per-method metrics unless asked for.
func OpenService(name string) bool {
	switch name {
	case "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection":
		return true
	}
	return false
}

func isReflection(name string) bool {
	return strings.HasPrefix(name, "grpc.reflection.")
}

// authenticate wraps a.Authenticate to record the tenant in the request
// log. AddFields changes the fields the logging interceptor already put in
// the context, so the tenant appears on the call's "finished call" line.
func authenticate(a *auth.Authenticator) func(ctx context.Context) (context.Context, error) {
	return func(ctx context.Context) (context.Context, error) {
		ctx, err := a.Authenticate(ctx)
		if err != nil {
			return nil, err
		}
		if t, ok := auth.TenantFromContext(ctx); ok {
			logging.AddFields(ctx, logging.Fields{"tenant", t.Name})
		}
		return ctx, nil
	}
}

// isolation keeps each tenant to its own threads.
//
// A request for a thread outside the tenant's prefixes is answered exactly
// as a thread that does not exist is answered: it runs through the same
// handler, validation included, on unknownThreads, a second Server whose
// store holds no checkpoints. So the code, message and body are those of an
// unknown thread by construction (total 0, no turns; Snapshot says
// no_such_turn with total 0), malformed requests get the same
// InvalidArgument either way, and the checkpoint store is never queried for
// a thread the tenant may not read.
//
// Server-streaming calls are routed the same way (see stream).
//
// What remains observable is that such a request skips the database round
// trip (and so is faster, and unaffected by a store outage). That depends
// only on whether the id matches the tenant's own prefixes, which the
// tenant knows; nothing about other tenants' threads, their existence
// included, can be learned from it.
type isolation struct {
	// unknownThreads answers every denied call: the handlers of handlers.go
	// and stream.go over a store in which no thread exists.
	unknownThreads *Server
}

// newIsolation answers denied calls over an empty store serving the same
// state channels as the deployment's, so that validation, the channel
// included, answers a denied call as it would an allowed one.
func newIsolation(log *slog.Logger, channels []string, watches *Watches) isolation {
	empty := store.New(store.Config{Backend: backend.Empty{}, StateChannels: channels, CacheThreads: -1})
	return isolation{unknownThreads: New(Config{Store: empty, Logger: log, Watches: watches})}
}

func (iso isolation) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	t, ok := auth.TenantFromContext(ctx)
	if !ok {
		// Authentication runs first; reaching here without a tenant is a
		// wiring mistake, and it must not read as "everything allowed".
		return nil, status.Error(codes.Unauthenticated, "call was not authenticated")
	}
	if t.AllThreads {
		return handler(ctx, req)
	}
	svc, method := splitMethod(info.FullMethod)
	if svc != threadHistoryName {
		return nil, status.Errorf(codes.PermissionDenied, "tenant %q may only call %s", t.Name, threadHistoryName)
	}
	if _, ok := req.(*historydv1.ThreadsRequest); ok {
		// Threads names no thread; its handler lists only the tenant's
		// own prefixes (listedPrefixes in threads.go).
		return handler(ctx, req)
	}
	r, ok := req.(threadRequest)
	if !ok {
		return nil, status.Errorf(codes.PermissionDenied, "%s names no thread, so tenant %q may not call it", info.FullMethod, t.Name)
	}
	if t.CanRead(r.GetThreadId()) {
		return handler(ctx, req)
	}
	for _, m := range historydv1.ThreadHistory_ServiceDesc.Methods {
		if m.MethodName == method {
			msg := req.(proto.Message)
			return m.Handler(iso.unknownThreads, ctx, func(into any) error {
				proto.Merge(into.(proto.Message), msg)
				return nil
			}, nil)
		}
	}
	return nil, status.Errorf(codes.PermissionDenied, "%s is not covered by tenant isolation", info.FullMethod)
}

// stream does for server-streaming calls what unary does, using the
// request prefetchStream read: a forbidden thread's stream runs the same
// handler over the empty store, so it carries what an unknown thread's
// carries. Calls whose request was not prefetched (client or bidirectional
// streams) have no single thread to route by, so only all_threads tenants
// may make them.
func (iso isolation) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	t, ok := auth.TenantFromContext(ss.Context())
	if !ok {
		return status.Error(codes.Unauthenticated, "call was not authenticated")
	}
	if t.AllThreads {
		return handler(srv, ss)
	}
	svc, method := splitMethod(info.FullMethod)
	if svc != threadHistoryName {
		return status.Errorf(codes.PermissionDenied, "tenant %q may only call %s", t.Name, threadHistoryName)
	}
	req, _ := streamRequest(ss.Context())
	r, ok := req.(threadRequest)
	if !ok {
		return status.Errorf(codes.PermissionDenied, "%s names no single thread, so tenant %q may not call it", info.FullMethod, t.Name)
	}
	if t.CanRead(r.GetThreadId()) {
		return handler(srv, ss)
	}
	for _, d := range historydv1.ThreadHistory_ServiceDesc.Streams {
		if d.StreamName == method {
			return d.Handler(iso.unknownThreads, ss)
		}
	}
	return status.Errorf(codes.PermissionDenied, "%s is not covered by tenant isolation", info.FullMethod)
}

// reflectionOff answers reflection calls as gRPC answers a service that is
// not registered. Server.Register always registers reflection, so turning
// it off happens here.
func reflectionOff(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if svc, _ := splitMethod(info.FullMethod); isReflection(svc) {
		return status.Errorf(codes.Unimplemented, "unknown service %v", svc)
	}
	return handler(srv, ss)
}

// splitMethod splits "/pkg.Service/Method".
func splitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "", full
}

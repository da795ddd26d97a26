package service

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/historyd/historyd/auth"
)

type streamRequestKey struct{}

// prefetchStream reads the one request of a server-streaming call before
// the rest of the chain runs, and hands the handler a stream that replays
// it. A unary request is known to every interceptor; a stream's arrives
// only when the handler asks for it, too late for what must look at it
// first: tagging its thread so that logs never show the id, and tenant
// isolation, which routes a call by its thread before it starts. gRPC has
// already bounded the message's size (MaxRecvMsgSize), as for unary calls.
//
// A request whose bytes are no valid message is not refused here, before
// authentication, but carried to refuseMalformedStream (see decode.go).
//
// Client- and bidirectional-streaming calls, and open services (health's
// Watch), are not read ahead; their messages are decoded as they are
// received (decodingStream). Isolation refuses the former to tenants
// confined to prefixes.
//
// With a, a caller whose credentials a does not accept has nothing read:
// the call goes on unread to the authentication interceptor, which refuses
// it UNAUTHENTICATED, so that what such a caller sends is never parsed
// and, malformed, cannot make the call fail any other way.
func prefetchStream(tt threadTagger, a *auth.Authenticator) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		svc, method := splitMethod(info.FullMethod)
		if info.IsClientStream || OpenService(svc) {
			return handler(srv, decodingStream{ss})
		}
		if a != nil {
			if _, err := a.Authenticate(ss.Context()); err != nil {
				return handler(srv, decodingStream{ss})
			}
		}
		req, ok := newRequest(svc, method)
		if !ok {
			return handler(srv, decodingStream{ss})
		}
		bad, err := recvRequest(ss, req)
		if err != nil {
			return err
		}
		ctx := tagCall(context.WithValue(ss.Context(), streamRequestKey{}, req), tt, req)
		if bad != nil {
			ctx = context.WithValue(ctx, decodeVerdictKey{}, &decodeVerdict{bad: bad})
		}
		return handler(srv, &replayStream{ServerStream: ss, ctx: ctx, first: req})
	}
}

// newRequest returns an empty request message of the method, found through
// the generated code's registration, or false when it is not registered.
func newRequest(service, method string) (proto.Message, bool) {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil, false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, false
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil, false
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return nil, false
	}
	return mt.New().Interface(), true
}

// streamRequest returns the request prefetchStream read, if it read one.
func streamRequest(ctx context.Context) (proto.Message, bool) {
	m, ok := ctx.Value(streamRequestKey{}).(proto.Message)
	return m, ok
}

// replayStream gives the handler the prefetched request on its first
// RecvMsg.
type replayStream struct {
	grpc.ServerStream
	ctx      context.Context
	first    proto.Message
	replayed bool
}

func (r *replayStream) Context() context.Context { return r.ctx }

func (r *replayStream) RecvMsg(m any) error {
	if r.replayed {
		return r.ServerStream.RecvMsg(m)
	}
	r.replayed = true
	into, ok := m.(proto.Message)
	if !ok || into.ProtoReflect().Descriptor() != r.first.ProtoReflect().Descriptor() {
		return status.Errorf(codes.Internal, "stream handler asked for %T, not the %T it was sent", m, r.first)
	}
	proto.Merge(into, r.first)
	return nil
}

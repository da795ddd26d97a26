package service

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/historyd/historyd/service/wire"
)

// The server's codec (wire.Codec) decodes each request into a
// wire.Request, which holds what is wrong with the bytes instead of
// failing the call as gRPC would, as INTERNAL. What it found is carried
// here to refuseMalformedUnary and refuseMalformedStream, which refuse the
// call as INVALID_ARGUMENT once the caller is authenticated, like any
// other malformed request.

// fieldError is what the codec found wrong with a request, as the
// *FieldError validation reports.
func fieldError(m *wire.Malformed) *FieldError {
	if m == nil {
		return nil
	}
	return &FieldError{Field: m.Field, Reason: m.Reason}
}

// decodeVerdict carries what the codec (wire.Codec) found wrong with a call's
// request from where the request is decoded to where the call is refused.
type decodeVerdict struct{ bad *FieldError }

type decodeVerdictKey struct{}

// malformed returns what is wrong with the bytes of the call's request,
// or nil.
func malformed(ctx context.Context) *FieldError {
	if v, ok := ctx.Value(decodeVerdictKey{}).(*decodeVerdict); ok {
		return v.bad
	}
	return nil
}

// recvRequest receives a request message into m, reporting bytes that are
// no valid encoding of it as a *FieldError rather than as the call's
// failure; err is the stream's own.
func recvRequest(ss grpc.ServerStream, m proto.Message) (bad *FieldError, err error) {
	r := wire.Request{Msg: m}
	if err := ss.RecvMsg(&r); err != nil {
		return nil, err
	}
	return fieldError(r.Bad), nil
}

// decodingService returns sd with each unary method decoding its request
// into a wire.Request, what is wrong with it kept in the call's context for
// refuseMalformedUnary. Called without interceptors, the method refuses
// the call itself.
func decodingService(sd *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *sd
	out.Methods = slices.Clone(sd.Methods)
	for i, m := range out.Methods {
		handler := m.Handler
		out.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			v := &decodeVerdict{}
			ctx = context.WithValue(ctx, decodeVerdictKey{}, v)
			if ic == nil {
				ic = refuseMalformedUnary
			}
			return handler(srv, ctx, func(into any) error {
				m, ok := into.(proto.Message)
				if !ok {
					return dec(into)
				}
				r := wire.Request{Msg: m}
				err := dec(&r)
				v.bad = fieldError(r.Bad)
				return err
			}, ic)
		}
	}
	return &out
}

// decodingStream receives each message through a wire.Request, refusing
// one whose bytes are no valid encoding as INVALID_ARGUMENT. It serves the
// streams whose request prefetchStream does not read.
type decodingStream struct{ grpc.ServerStream }

func (s decodingStream) RecvMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return s.ServerStream.RecvMsg(m)
	}
	bad, err := recvRequest(s.ServerStream, msg)
	if err != nil {
		return err
	}
	if bad != nil {
		return toStatus(bad).Err()
	}
	return nil
}

// refuseMalformedUnary refuses a call whose request bytes were no valid
// encoding of it (see decodingService).
func refuseMalformedUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if bad := malformed(ctx); bad != nil {
		return nil, toStatus(bad).Err()
	}
	return handler(ctx, req)
}

// refuseMalformedStream refuses a server-streaming call whose request
// bytes were no valid encoding of it (see prefetchStream).
func refuseMalformedStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if bad := malformed(ss.Context()); bad != nil {
		return toStatus(bad).Err()
	}
	return handler(srv, ss)
}

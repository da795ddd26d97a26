package service_test

import (
	"context"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/storetest"
)

// rawCodec sends a request as the bytes it is given, so that a test can
// put on the wire what no proto library would encode, and decodes
// responses as proto.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// wire encodes fields of msg by name, each value as it is, valid UTF-8 or
// not; a []string value is a repeated field, an int or uint64 a varint, and
// a []byte value a length-delimited field holding those bytes (a nested
// message's encoding).
func wire(t *testing.T, msg proto.Message, fields ...any) []byte {
	t.Helper()
	desc := msg.ProtoReflect().Descriptor().Fields()
	var b []byte
	for i := 0; i < len(fields); i += 2 {
		fd := desc.ByName(protoreflect.Name(fields[i].(string)))
		if fd == nil {
			t.Fatalf("%s has no field %s", msg.ProtoReflect().Descriptor().FullName(), fields[i])
		}
		switch v := fields[i+1].(type) {
		case string:
			b = protowire.AppendBytes(protowire.AppendTag(b, fd.Number(), protowire.BytesType), []byte(v))
		case []string:
			for _, s := range v {
				b = protowire.AppendBytes(protowire.AppendTag(b, fd.Number(), protowire.BytesType), []byte(s))
			}
		case int:
			b = protowire.AppendVarint(protowire.AppendTag(b, fd.Number(), protowire.VarintType), uint64(v))
		case uint64:
			b = protowire.AppendVarint(protowire.AppendTag(b, fd.Number(), protowire.VarintType), v)
		case []byte:
			b = protowire.AppendBytes(protowire.AppendTag(b, fd.Number(), protowire.BytesType), v)
		default:
			t.Fatalf("wire: %T for %s", v, fd.Name())
		}
	}
	return b
}

// TestInvalidUTF8OnTheWire sends every rpc requests whose thread_id,
// checkpoint_ns or keys hold bytes that are not UTF-8, written on the wire
// as no client library would: each must be refused as INVALID_ARGUMENT
// naming the field, as other malformed requests are, not INTERNAL. A
// request that is not a message at all is still refused.
func TestInvalidUTF8OnTheWire(t *testing.T) {
	conn := serveWith(t, storetest.NewMemory(), service.Frontend{}).conn(t, nil)
	const bad = "thread-\xff\xfe"
	type rpc struct {
		method string
		msg    proto.Message
		stream bool
	}
	rpcs := []rpc{
		{"Snapshot", &historydv1.SnapshotRequest{}, false},
		{"Snapshots", &historydv1.SnapshotsRequest{}, false},
		{"Turns", &historydv1.TurnsRequest{}, false},
		{"StreamSnapshots", &historydv1.StreamSnapshotsRequest{}, true},
	}
	call := func(t *testing.T, r rpc, req []byte) error {
		t.Helper()
		ctx := context.Background()
		name := "/" + historydv1.ThreadHistory_ServiceDesc.ServiceName + "/" + r.method
		if !r.stream {
			return conn.Invoke(ctx, name, &req, &historydv1.SnapshotsResponse{}, grpc.ForceCodecV2(rawCodec{}))
		}
		s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, name, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			return err
		}
		if err := s.SendMsg(&req); err != nil {
			return err
		}
		if err := s.CloseSend(); err != nil {
			return err
		}
		return s.RecvMsg(&historydv1.StreamSnapshotsResponse{})
	}
	for _, r := range rpcs {
		cases := []struct {
			name, field string
			fields      []any
		}{
			{"thread_id", "thread_id", []any{"thread_id", bad}},
			{"checkpoint_ns", "checkpoint_ns", []any{"thread_id", "t", "checkpoint_ns", "ns\xc3"}},
		}
		if r.method != "Turns" {
			cases = append(cases, struct {
				name, field string
				fields      []any
			}{"keys", "keys[1]", []any{"thread_id", "t", "keys", []string{"ok", "k\xe2\x82", "also ok"}}})
		}
		for _, tc := range cases {
			t.Run(r.method+"/"+tc.name, func(t *testing.T) {
				err := call(t, r, wire(t, r.msg, tc.fields...))
				st := status.Convert(err)
				if st.Code() != codes.InvalidArgument || st.Message() != tc.field+": is not valid UTF-8" {
					t.Fatalf("got %v %q, want InvalidArgument %q", st.Code(), st.Message(), tc.field+": is not valid UTF-8")
				}
				var named string
				for _, d := range st.Details() {
					if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 {
						named = br.GetFieldViolations()[0].GetField()
					}
				}
				if named != tc.field {
					t.Errorf("BadRequest names %q, want %q", named, tc.field)
				}
			})
		}
		t.Run(r.method+"/not a message", func(t *testing.T) {
			// A field 1 announcing 100 bytes and holding 3.
			err := call(t, r, []byte{0x0a, 100, 'a', 'b', 'c'})
			if err == nil {
				t.Fatal("a truncated message was accepted")
			}
		})
		t.Run(r.method+"/valid", func(t *testing.T) {
			fields := []any{"thread_id", "thread-ü", "checkpoint_ns", "ns-ü"}
			if r.method != "Turns" {
				fields = append(fields, "keys", []string{"a", "ü"})
			}
			if err := call(t, r, wire(t, r.msg, fields...)); err != nil {
				t.Fatalf("a valid request: %v", err)
			}
		})
	}
}

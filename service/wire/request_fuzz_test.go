package wire

import (
	"math"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// fuzzRequests are the request types FuzzDecodeRequest decodes into.
var fuzzRequests = []proto.Message{
	&historydv1.SnapshotRequest{}, &historydv1.SnapshotsRequest{}, &historydv1.TurnsRequest{},
	&historydv1.StreamSnapshotsRequest{}, &historydv1.ThreadsRequest{}, &historydv1.DiffRequest{},
	&historydv1.WatchTurnsRequest{}, &healthpb.HealthCheckRequest{},
}

// widened holds every request type with its 32-bit integer fields made
// 64-bit and its strings bytes: wire-compatible types that read any varint
// whole and any bytes as sent, an oracle independent of decodeRequest.
var widened = func() *protoregistry.Files {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := 0; i < fd.Imports().Len(); i++ {
			add(fd.Imports().Get(i).FileDescriptor)
		}
		fp := protodesc.ToFileDescriptorProto(fd)
		for _, m := range fp.GetMessageType() {
			widen(m)
		}
		set.File = append(set.File, fp)
	}
	for _, m := range fuzzRequests {
		add(m.ProtoReflect().Descriptor().ParentFile())
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		panic(err)
	}
	return files
}()

func widen(m *descriptorpb.DescriptorProto) {
	for _, f := range m.GetField() {
		switch f.GetType() {
		case descriptorpb.FieldDescriptorProto_TYPE_INT32, descriptorpb.FieldDescriptorProto_TYPE_ENUM:
			f.Type, f.TypeName = descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum(), nil
		case descriptorpb.FieldDescriptorProto_TYPE_SINT32:
			f.Type = descriptorpb.FieldDescriptorProto_TYPE_SINT64.Enum()
		case descriptorpb.FieldDescriptorProto_TYPE_UINT32:
			f.Type = descriptorpb.FieldDescriptorProto_TYPE_UINT64.Enum()
		case descriptorpb.FieldDescriptorProto_TYPE_STRING:
			if !m.GetOptions().GetMapEntry() { // map keys must be strings
				f.Type = descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()
			}
		}
	}
	for _, n := range m.GetNestedType() {
		widen(n)
	}
}

// FuzzDecodeRequest decodes arbitrary bytes as each request type. It must
// never panic; it accepts exactly the bytes that are a valid encoding of
// the type once its 32-bit fields are read as 64-bit and its strings as
// bytes (the widened oracle) and whose every such value, each occurrence
// of a field included, fits its real type; what it accepts holds those
// values; what it refuses leaves the
// message empty and names a field and a reason.
func FuzzDecodeRequest(f *testing.F) {
	add := func(which uint8, b []byte) { f.Add(which, b) }
	add(0, []byte{0x0a, 1, 't', 0x10, 3})
	add(0, protowire.AppendVarint([]byte{0x0a, 1, 't', 0x10}, 1<<32+1))
	add(0, protowire.AppendVarint([]byte{0x10}, math.MaxUint64))
	add(1, []byte{0x0a, 100, 'a', 'b', 'c'})
	add(1, []byte{0x0a, 2, 0xff, 0xfe, 0x1a, 1, 'k'})
	add(4, []byte{0x32, 6, 0x08, 1, 0x10, 0x85, 0x80, 0x80, 0x80, 0x10})
	add(4, []byte{0x18, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	add(5, []byte{0x00})
	add(6, []byte{0x1c})
	add(7, []byte{0x0a, 3, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		m := fuzzRequests[int(which)%len(fuzzRequests)].ProtoReflect().New().Interface()
		md := m.ProtoReflect().Descriptor()
		bad := decodeRequest(mem.BufferSlice{mem.SliceBuffer(b)}, m)

		d, err := widened.FindDescriptorByName(md.FullName())
		if err != nil {
			t.Fatal(err)
		}
		wmd := d.(protoreflect.MessageDescriptor)
		wide := dynamicpb.NewMessage(wmd)
		wideErr := proto.Unmarshal(b, wide)
		fitsAll := wideErr == nil && everyFits(b, md, wmd)

		switch {
		case bad != nil && fitsAll:
			t.Fatalf("%s refused % x (%v), which the widened oracle reads with every value in range", md.FullName(), b, bad)
		case bad == nil && !fitsAll:
			t.Fatalf("%s accepted % x, which the widened oracle refuses (%v) or holds a value past its type", md.FullName(), b, wideErr)
		case bad != nil:
			if bad.Field == "" || bad.Reason == "" {
				t.Fatalf("refusal names no field or reason: %+v", bad)
			}
			if proto.Size(m) != 0 {
				t.Fatalf("a refused request kept %v", m)
			}
		default:
			same(t, m.ProtoReflect(), wide)
		}
	})
}

// everyFits reports whether every value b holds for a 32-bit field of md
// fits it, each occurrence of a field on its own (a decoder keeps only
// the last, but every one was sent): b, a valid encoding of wmd (md
// widened), is cut into its fields, each read alone into wmd, and nested
// messages likewise.
func everyFits(b []byte, md, wmd protoreflect.MessageDescriptor) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		size := protowire.ConsumeFieldValue(num, typ, b[n:])
		one := dynamicpb.NewMessage(wmd)
		if err := proto.Unmarshal(b[:n+size], one); err != nil || !fits(md, one) {
			return false
		}
		if fd := md.Fields().ByNumber(num); fd != nil && fd.Kind() == protoreflect.MessageKind && typ == protowire.BytesType {
			inner, _ := protowire.ConsumeBytes(b[n:])
			if !everyFits(inner, fd.Message(), wmd.Fields().ByNumber(num).Message()) {
				return false
			}
		}
		b = b[n+size:]
	}
	return true
}

// fits reports whether every 32-bit value of wide, read into its widened
// field, fits the field of md it came from.
func fits(md protoreflect.MessageDescriptor, wide protoreflect.Message) bool {
	ok := true
	wide.Range(func(wfd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fd := md.Fields().ByNumber(wfd.Number())
		check := func(v protoreflect.Value) {
			switch fd.Kind() {
			case protoreflect.Int32Kind, protoreflect.EnumKind, protoreflect.Sint32Kind:
				ok = ok && v.Int() >= math.MinInt32 && v.Int() <= math.MaxInt32
			case protoreflect.Uint32Kind:
				ok = ok && v.Uint() <= math.MaxUint32
			case protoreflect.MessageKind:
				ok = ok && fits(fd.Message(), v.Message())
			}
		}
		if fd.IsList() {
			for i := 0; i < v.List().Len(); i++ {
				check(v.List().Get(i))
			}
		} else {
			check(v)
		}
		return ok
	})
	return ok
}

// same fails t unless m holds the values wide holds, field by field.
func same(t *testing.T, m, wide protoreflect.Message) {
	t.Helper()
	wide.Range(func(wfd protoreflect.FieldDescriptor, wv protoreflect.Value) bool {
		fd := m.Descriptor().Fields().ByNumber(wfd.Number())
		one := func(v, wv protoreflect.Value) {
			var eq bool
			switch fd.Kind() {
			case protoreflect.Int32Kind, protoreflect.Sint32Kind:
				eq = v.Int() == wv.Int()
			case protoreflect.EnumKind:
				eq = int64(v.Enum()) == wv.Int()
			case protoreflect.Uint32Kind:
				eq = v.Uint() == wv.Uint()
			case protoreflect.StringKind:
				eq = v.String() == string(wv.Bytes())
			case protoreflect.MessageKind:
				same(t, v.Message(), wv.Message())
				eq = true
			default:
				eq = v.Equal(wv)
			}
			if !eq {
				t.Fatalf("%s holds %v, the oracle %v", fd.FullName(), v, wv)
			}
		}
		if fd.IsList() {
			l, wl := m.Get(fd).List(), wv.List()
			if l.Len() != wl.Len() {
				t.Fatalf("%s holds %d values, the oracle %d", fd.FullName(), l.Len(), wl.Len())
			}
			for i := 0; i < l.Len(); i++ {
				one(l.Get(i), wl.Get(i))
			}
		} else {
			one(m.Get(fd), wv)
		}
		return true
	})
}

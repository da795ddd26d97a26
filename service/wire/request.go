package wire

import (
	"fmt"
	"math"
	"strings"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Requests are decoded here, once, for every service the server runs.
//
// gRPC fails a call whose request its codec cannot decode as INTERNAL,
// before any interceptor runs and whatever error the codec gives, so bytes
// that are no message would read as a server fault, be counted as one, and
// not be logged. And protobuf's decoders read a varint too large for its
// field as its low 32 bits: a turn of 2^32+1 would be turn 1, whose state
// would be served. So Codec decodes a request into a Request, which holds
// what is wrong with the bytes instead of failing, and the service refuses
// the call as INVALID_ARGUMENT naming the field and the limit, once the
// caller is authenticated, like any other malformed request.

// Request is what Codec decodes a request into: the message, and what is
// wrong with its bytes when they are not a valid encoding of it (Bad is
// set and Msg left empty).
type Request struct {
	// Msg is the message decoded into.
	Msg proto.Message
	// Bad says what is wrong with the bytes; nil when they decoded.
	Bad *Malformed
}

// Malformed says which field of a request holds bytes that are no valid
// encoding of it, or a varint its type cannot hold, and why.
type Malformed struct {
	// Field is the field's path, as in the proto ("request" for the
	// message as a whole).
	Field string
	// Reason says what is wrong, including the limit when there is one.
	Reason string
}

// Error returns "field: reason".
func (e *Malformed) Error() string { return e.Field + ": " + e.Reason }

// RequestOf returns the request message a stats handler's payload holds.
func RequestOf(payload any) any {
	if r, ok := payload.(*Request); ok {
		return r.Msg
	}
	return payload
}

// decodeRequest decodes data into m, as proto.Unmarshal does, but for
// what it refuses: bytes that are no encoding of m (a field cut short, an
// eleven-byte varint, a bad tag), and varints of 32-bit fields that their
// type cannot hold, which it would truncate. Strings that are not UTF-8
// are kept as sent (see unmarshalRawStrings), so that request validation
// names the field. m is left empty when anything is wrong.
func decodeRequest(data mem.BufferSlice, m proto.Message) *Malformed {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	md := m.ProtoReflect().Descriptor()
	bad := checkWire(b, md, "")
	if bad == nil {
		err := proto.Unmarshal(b, m)
		if err != nil && unmarshalRawStrings(b, m) != nil {
			bad = &Malformed{"request", fmt.Sprintf("is not a valid %s: %v", md.FullName(), err)}
		}
	}
	if bad != nil {
		proto.Reset(m)
	}
	return bad
}

// checkWire walks b, an encoding of a message of type md reached by the
// field path prefix, and returns the first field whose bytes are no
// valid encoding, or whose varint its 32-bit type cannot hold. Nested
// messages are walked too; unknown fields only for their structure.
func checkWire(b []byte, md protoreflect.MessageDescriptor, prefix string) *Malformed {
	whole := prefix
	if whole == "" {
		whole = "request"
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return &Malformed{whole, fmt.Sprintf("is not a valid %s: %s", md.FullName(), wireError(n))}
		}
		size := protowire.ConsumeFieldValue(num, typ, b[n:])
		fd := md.Fields().ByNumber(num)
		if fd != nil && !wireTypeOf(fd, typ) {
			fd = nil // decoders keep it as an unknown field
		}
		if size < 0 {
			if fd == nil {
				return &Malformed{whole, fmt.Sprintf("is not a valid %s: field %d: %s", md.FullName(), num, wireError(size))}
			}
			return &Malformed{joinField(prefix, fd), fmt.Sprintf("is not a valid %s value: %s", fd.Kind(), wireError(size))}
		}
		if fd != nil {
			if bad := checkField(fd, typ, b[n:n+size], joinField(prefix, fd)); bad != nil {
				return bad
			}
		}
		b = b[n+size:]
	}
	return nil
}

// wireError says what protowire's negative length n means, without the
// "proto: " some of its errors start with (its space is at random a
// no-break space, to keep callers from matching the text).
func wireError(n int) string {
	msg := protowire.ParseError(n).Error()
	if rest, ok := strings.CutPrefix(msg, "proto:"); ok {
		msg = strings.TrimLeft(rest, " \u00a0")
	}
	return msg
}

// wireTypeOf reports whether typ is a wire type field fd is sent with.
// Under any other the value is no value of fd: decoders keep it aside as
// an unknown field.
func wireTypeOf(fd protoreflect.FieldDescriptor, typ protowire.Type) bool {
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return typ == protowire.BytesType
	case protoreflect.GroupKind:
		return typ == protowire.StartGroupType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return typ == protowire.Fixed32Type || fd.IsList() && typ == protowire.BytesType
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return typ == protowire.Fixed64Type || fd.IsList() && typ == protowire.BytesType
	}
	return typ == protowire.VarintType || fd.IsList() && typ == protowire.BytesType
}

// checkField checks one occurrence of field fd, value its bytes as sent
// with wire type typ, one of fd's (see wireTypeOf), already known to be
// well formed.
func checkField(fd protoreflect.FieldDescriptor, typ protowire.Type, value []byte, name string) *Malformed {
	switch {
	case typ == protowire.VarintType:
		v, _ := protowire.ConsumeVarint(value)
		return checkWidth(fd.Kind(), v, name)
	case typ != protowire.BytesType:
		return nil
	case fd.Kind() == protoreflect.MessageKind:
		v, _ := protowire.ConsumeBytes(value)
		return checkWire(v, fd.Message(), name)
	case fd.IsList() && bits32[fd.Kind()] != "":
		// A packed list of varints.
		v, _ := protowire.ConsumeBytes(value)
		for i := 0; len(v) > 0; i++ {
			x, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return &Malformed{name, fmt.Sprintf("is not a valid packed %s list: %s", fd.Kind(), wireError(n))}
			}
			if bad := checkWidth(fd.Kind(), x, fmt.Sprintf("%s[%d]", name, i)); bad != nil {
				return bad
			}
			v = v[n:]
		}
	}
	return nil
}

// bits32 names the range of each varint kind narrower than a varint.
var bits32 = map[protoreflect.Kind]string{
	protoreflect.Int32Kind:  "the int32 range, -2147483648 to 2147483647",
	protoreflect.Sint32Kind: "the sint32 range, -2147483648 to 2147483647",
	protoreflect.EnumKind:   "the range of an enum, -2147483648 to 2147483647",
	protoreflect.Uint32Kind: "the uint32 range, 0 to 4294967295",
}

// checkWidth refuses a varint v of a field of kind k that k cannot hold,
// where a decoder would keep only its low 32 bits. An int32 or enum varint
// is read as an int64, as protobuf sends negative numbers (sign-extended
// to ten bytes).
func checkWidth(k protoreflect.Kind, v uint64, name string) *Malformed {
	var n int64
	var fits bool
	switch k {
	case protoreflect.Int32Kind, protoreflect.EnumKind:
		n = int64(v)
		fits = n >= math.MinInt32 && n <= math.MaxInt32
	case protoreflect.Sint32Kind:
		n = protowire.DecodeZigZag(v)
		fits = n >= math.MinInt32 && n <= math.MaxInt32
	case protoreflect.Uint32Kind:
		if v <= math.MaxUint32 {
			return nil
		}
		return &Malformed{name, fmt.Sprintf("is %d, outside %s", v, bits32[k])}
	default:
		return nil
	}
	if fits {
		return nil
	}
	return &Malformed{name, fmt.Sprintf("is %d, outside %s", n, bits32[k])}
}

func joinField(prefix string, fd protoreflect.FieldDescriptor) string {
	if prefix == "" {
		return string(fd.Name())
	}
	return prefix + "." + string(fd.Name())
}

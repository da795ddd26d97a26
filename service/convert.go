package service

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/service/wire"
)

// encoderFor returns the encoder of a request's value_format, which
// checkValueFormat has accepted.
func encoderFor(f historydv1.ValueFormat) wire.Encoder {
	return wire.Encoder{JSON: f == historydv1.ValueFormat_VALUE_FORMAT_JSON}
}

// Decoded returns a copy of a ThreadHistory response in which every state
// entry's fields are decoded. The handlers' responses carry entries as
// their encodings (see wire.TurnState), so that on the server side, in an
// interceptor say, an entry's getters read as unset; read them from
// Decoded's copy instead, and send the original. The copy costs encoding
// and decoding the whole response.
func Decoded[M proto.Message](m M) (M, error) {
	out := m.ProtoReflect().New().Interface().(M)
	b, err := proto.Marshal(m)
	if err == nil {
		err = proto.Unmarshal(b, out)
	}
	if err != nil {
		var zero M
		return zero, fmt.Errorf("decode %T: %w", m, err)
	}
	return out, nil
}

package codec

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/historyd/historyd/langgraph/codec/internal/mptoken"
	"github.com/historyd/historyd/langgraph/format"
)

func decodeMsgpack(data []byte, lim Limits) (any, error) {
	data = snapshotPayload(data)
	d := newMsgpackDecoder(data, lim)
	v, err := d.decodeValue(0)
	if err != nil {
		return nil, err
	}
	if d.Pos != d.End {
		return nil, d.Malformed(d.Pos, "%d trailing bytes after the value", d.End-d.Pos)
	}
	return v, nil
}

// decodeValue decodes the value at pos. depth is the nesting level of the
// value's parent: a list, map or extension payload read here sits at
// depth+1.
func (d *mpDecoder) decodeValue(depth int) (any, error) {
	d.Started()
	t, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case mptoken.Nil:
		return nil, nil
	case mptoken.Bool:
		return t.B, nil
	case mptoken.Int:
		return t.I, nil
	case mptoken.Uint:
		return t.U, nil
	case mptoken.Float:
		return t.F, nil
	case mptoken.Str:
		return validString(d.Buf[t.Start : t.Start+t.N]), nil
	case mptoken.Bin:
		return append([]byte{}, d.Buf[t.Start:t.Start+t.N]...), nil
	case mptoken.Array:
		if depth+1 > d.maxDepth {
			return nil, depthError(d.maxDepth, depth+1, t.Off)
		}
		out := make([]any, t.N)
		for i := range out {
			if out[i], err = d.decodeValue(depth + 1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case mptoken.Map:
		if depth+1 > d.maxDepth {
			return nil, depthError(d.maxDepth, depth+1, t.Off)
		}
		out := make(map[string]any, min(t.N, 64))
		for range t.N {
			keyAt := d.Pos
			k, err := d.decodeValue(depth + 1)
			if err != nil {
				return nil, err
			}
			key, err := d.keys.text(k, keyAt)
			if err != nil {
				return nil, err
			}
			v, err := d.decodeValue(depth + 1)
			if err != nil {
				return nil, err
			}
			out[key] = v
		}
		return out, nil
	default:
		return d.decodeExt(t, depth)
	}
}

// validString converts msgpack str bytes, replacing invalid UTF-8: the text
// is still worth showing, and Go strings handed to JSON encoders should be
// valid.
func validString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func (d *mpDecoder) unsupportedExt(t mptoken.Token) error {
	if t.Code == extDeltaSnapshot {
		return &UnsupportedError{Format: format.TypeMsgpack, Feature: "ext 7 (delta snapshot)", Offset: t.Off,
			Reason: "a DeltaChannel snapshot inside a value; LangGraph only stores one as a channel's whole value"}
	}
	return &UnsupportedError{Format: format.TypeMsgpack, Feature: fmt.Sprintf("ext %d", t.Code), Offset: t.Off,
		Reason: "extension code not written by LangGraph's serializer"}
}

// enterExt makes the extension payload the decoder's whole input until
// leaveExt, so nothing inside it can read past its declared length.
func (d *mpDecoder) enterExt(t mptoken.Token) (savedEnd, savedPending int, err error) {
	payloadEnd := t.Start + t.N
	// Values still announced by outer containers come after the payload.
	if d.Pending > d.End-payloadEnd {
		return 0, 0, d.Malformed(t.Off, "containers announce %d more values but only %d bytes follow the extension", d.Pending, d.End-payloadEnd)
	}
	savedEnd, savedPending = d.End, d.Pending
	d.Pos, d.End, d.Pending = t.Start, payloadEnd, 0
	return savedEnd, savedPending, nil
}

func (d *mpDecoder) leaveExt(t mptoken.Token, savedEnd, savedPending int) error {
	if d.Pos != d.End {
		return d.Malformed(d.Pos, "%d trailing bytes in ext %d payload", d.End-d.Pos, t.Code)
	}
	d.End, d.Pending = savedEnd, savedPending
	return nil
}

// decodeExt turns one of Python's extension values into its data.
func (d *mpDecoder) decodeExt(t mptoken.Token, depth int) (any, error) {
	if t.Code < extConstructorSingleArg || t.Code > extNumpyArray {
		return nil, d.unsupportedExt(t)
	}
	savedEnd, savedPending, err := d.enterExt(t)
	if err != nil {
		return nil, err
	}
	payload, err := d.decodeValue(depth)
	if err != nil {
		return nil, err
	}
	if err := d.leaveExt(t, savedEnd, savedPending); err != nil {
		return nil, err
	}
	tup, ok := payload.([]any)
	if t.Code == extNumpyArray {
		if !ok || len(tup) != 4 {
			return nil, d.Malformed(t.Off, "ext 6 (numpy) payload is not a (dtype, shape, order, buffer) tuple")
		}
		return d.decodeNumpy(t, tup, depth)
	}
	if !ok || len(tup) < 3 {
		return nil, d.Malformed(t.Off, "ext %d payload is not a (module, class, data, ...) tuple", t.Code)
	}
	if t.Code == extConstructorSingleArg && isSecretClass(tup[0], tup[1]) {
		return secretMask(tup[2]), nil
	}
	return renderPython(tup[0], tup[1], tup[2]), nil
}

// isSecretClass recognises pydantic's secret types, whose payload holds the
// secret in clear.
func isSecretClass(module, class any) bool {
	m, _ := module.(string)
	c, _ := class.(string)
	return strings.HasPrefix(m, "pydantic") && strings.HasPrefix(c, "Secret")
}

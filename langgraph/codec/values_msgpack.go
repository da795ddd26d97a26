package codec

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/historyd/historyd/langgraph/format"
)

func decodeMsgpack(data []byte, lim Limits) (any, error) {
	data = snapshotPayload(data)
	d := newMsgpackDecoder(data, lim)
	v, err := d.decodeValue(0)
	if err != nil {
		return nil, err
	}
	if d.pos != d.end {
		return nil, d.malformed(d.pos, "%d trailing bytes after the value", d.end-d.pos)
	}
	return v, nil
}

// decodeValue decodes the value at pos. depth is the nesting level of the
// value's parent: a list, map or extension payload read here sits at
// depth+1.
func (d *mpDecoder) decodeValue(depth int) (any, error) {
	d.started()
	t, err := d.readToken()
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case mpNil:
		return nil, nil
	case mpBool:
		return t.b, nil
	case mpInt:
		return t.i, nil
	case mpUint:
		return t.u, nil
	case mpFloat:
		return t.f, nil
	case mpStr:
		return validString(d.buf[t.start : t.start+t.n]), nil
	case mpBin:
		return append([]byte{}, d.buf[t.start:t.start+t.n]...), nil
	case mpArray:
		if depth+1 > d.maxDepth {
			return nil, depthError(d.maxDepth, depth+1, t.off)
		}
		out := make([]any, t.n)
		for i := range out {
			if out[i], err = d.decodeValue(depth + 1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case mpMap:
		if depth+1 > d.maxDepth {
			return nil, depthError(d.maxDepth, depth+1, t.off)
		}
		out := make(map[string]any, min(t.n, 64))
		for range t.n {
			keyAt := d.pos
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

func (d *mpDecoder) unsupportedExt(t mpToken) error {
	if t.code == extDeltaSnapshot {
		return &UnsupportedError{Format: format.TypeMsgpack, Feature: "ext 7 (delta snapshot)", Offset: t.off,
			Reason: "a DeltaChannel snapshot inside a value; LangGraph only stores one as a channel's whole value"}
	}
	return &UnsupportedError{Format: format.TypeMsgpack, Feature: fmt.Sprintf("ext %d", t.code), Offset: t.off,
		Reason: "extension code not written by LangGraph's serializer"}
}

// enterExt makes the extension payload the decoder's whole input until
// leaveExt, so nothing inside it can read past its declared length.
func (d *mpDecoder) enterExt(t mpToken) (savedEnd, savedPending int, err error) {
	payloadEnd := t.start + t.n
	// Values still announced by outer containers come after the payload.
	if d.pending > d.end-payloadEnd {
		return 0, 0, d.malformed(t.off, "containers announce %d more values but only %d bytes follow the extension", d.pending, d.end-payloadEnd)
	}
	savedEnd, savedPending = d.end, d.pending
	d.pos, d.end, d.pending = t.start, payloadEnd, 0
	return savedEnd, savedPending, nil
}

func (d *mpDecoder) leaveExt(t mpToken, savedEnd, savedPending int) error {
	if d.pos != d.end {
		return d.malformed(d.pos, "%d trailing bytes in ext %d payload", d.end-d.pos, t.code)
	}
	d.end, d.pending = savedEnd, savedPending
	return nil
}

// decodeExt turns one of Python's extension values into its data.
func (d *mpDecoder) decodeExt(t mpToken, depth int) (any, error) {
	if t.code < extConstructorSingleArg || t.code > extNumpyArray {
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
	if t.code == extNumpyArray {
		if !ok || len(tup) != 4 {
			return nil, d.malformed(t.off, "ext 6 (numpy) payload is not a (dtype, shape, order, buffer) tuple")
		}
		return d.decodeNumpy(t, tup, depth)
	}
	if !ok || len(tup) < 3 {
		return nil, d.malformed(t.off, "ext %d payload is not a (module, class, data, ...) tuple", t.code)
	}
	if t.code == extConstructorSingleArg && isSecretClass(tup[0], tup[1]) {
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

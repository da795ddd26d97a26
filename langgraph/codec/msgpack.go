package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/historyd/historyd/langgraph/format"
)

// Python's extension codes (langgraph.checkpoint.serde.jsonplus).
const (
	extConstructorSingleArg = 0
	extConstructorPosArgs   = 1
	extConstructorKwArgs    = 2
	extMethodSingleArg      = 3
	extPydanticV1           = 4
	extPydanticV2           = 5
	extNumpyArray           = 6
	extDeltaSnapshot        = 7
)

type mpKind uint8

const (
	mpNil mpKind = iota
	mpBool
	mpInt
	mpUint
	mpFloat
	mpStr
	mpBin
	mpArray
	mpMap
	mpExt
)

// mpToken is one msgpack header. For str, bin and ext the payload is
// buf[start:start+n] and has already been stepped over; for arrays and maps
// n is the element or pair count and the elements follow.
type mpToken struct {
	kind  mpKind
	off   int // offset of the header byte
	b     bool
	i     int64
	u     uint64
	f     float64
	n     int
	start int
	code  int8
}

// mpDecoder reads msgpack from buf[pos:end]. end moves in and out while an
// extension payload is decoded, so offsets in errors are always offsets in
// the whole blob.
type mpDecoder struct {
	buf      []byte
	pos      int
	end      int
	maxDepth int
	// pending counts the values that open containers have announced but
	// that have not been started yet. Every value takes at least one byte,
	// so pending must never exceed the bytes left; checking that before
	// allocating keeps a chain of huge length headers from reserving more
	// memory than the blob could ever fill.
	pending int
	keys    keyBudget
	// mode is what the messages scan keeps of each message.
	mode ReadMode
	// known, when set, names human messages the scan need not read beyond
	// their id (ReadMessagesKnowing).
	known func(id string) bool
}

func newMsgpackDecoder(data []byte, lim Limits) *mpDecoder {
	return &mpDecoder{buf: data, end: len(data), maxDepth: lim.MaxDepth, keys: newKeyBudget(format.TypeMsgpack, len(data))}
}

func (d *mpDecoder) malformed(off int, reason string, args ...any) error {
	return &MalformedError{Format: format.TypeMsgpack, Offset: off, Reason: fmt.Sprintf(reason, args...)}
}

func (d *mpDecoder) truncated(off, need int) error {
	return d.malformed(off, "unexpected end of data: need %d more bytes, %d left", need, d.end-d.pos)
}

// take steps over n bytes and returns where they start.
func (d *mpDecoder) take(off, n int) (int, error) {
	if n < 0 || n > d.end-d.pos {
		return 0, d.truncated(off, n)
	}
	p := d.pos
	d.pos += n
	return p, nil
}

func (d *mpDecoder) uintN(off, size int) (uint64, error) {
	p, err := d.take(off, size)
	if err != nil {
		return 0, err
	}
	b := d.buf[p : p+size]
	switch size {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), nil
	default:
		return binary.BigEndian.Uint64(b), nil
	}
}

// announce records that a container holds items more values, refusing
// counts the remaining bytes cannot hold.
func (d *mpDecoder) announce(off int, items uint64) error {
	left := uint64(d.end - d.pos)
	if items > left {
		return d.malformed(off, "container announces %d values but only %d bytes are left", items, left)
	}
	if uint64(d.pending)+items > left {
		return d.malformed(off, "container announces %d values and enclosing ones %d more, but only %d bytes are left", items, d.pending, left)
	}
	d.pending += int(items)
	return nil
}

// started notes that one announced value is being read.
func (d *mpDecoder) started() {
	if d.pending > 0 {
		d.pending--
	}
}

// readToken reads one header. Containers are announced here, so callers
// must call started before reading each of their values.
func (d *mpDecoder) readToken() (mpToken, error) {
	off := d.pos
	if d.pos >= d.end {
		return mpToken{}, d.malformed(off, "unexpected end of data: expected a value")
	}
	c := d.buf[d.pos]
	d.pos++
	t := mpToken{off: off}
	var err error
	switch {
	case c <= 0x7f:
		t.kind, t.i = mpInt, int64(c)
		return t, nil
	case c >= 0xe0:
		t.kind, t.i = mpInt, int64(int8(c))
		return t, nil
	case c >= 0x80 && c <= 0x8f:
		return d.container(t, mpMap, uint64(c&0x0f))
	case c >= 0x90 && c <= 0x9f:
		return d.container(t, mpArray, uint64(c&0x0f))
	case c >= 0xa0 && c <= 0xbf:
		return d.bytesToken(t, mpStr, int(c&0x1f))
	}
	switch c {
	case 0xc0:
		t.kind = mpNil
	case 0xc2, 0xc3:
		t.kind, t.b = mpBool, c == 0xc3
	case 0xc4, 0xc5, 0xc6:
		var n uint64
		if n, err = d.uintN(off, 1<<(c-0xc4)); err != nil {
			return t, err
		}
		return d.bytesToken(t, mpBin, clampLen(n))
	case 0xc7, 0xc8, 0xc9:
		var n uint64
		if n, err = d.uintN(off, 1<<(c-0xc7)); err != nil {
			return t, err
		}
		return d.extToken(t, clampLen(n))
	case 0xca:
		var u uint64
		if u, err = d.uintN(off, 4); err != nil {
			return t, err
		}
		t.kind, t.f = mpFloat, float64(math.Float32frombits(uint32(u)))
	case 0xcb:
		var u uint64
		if u, err = d.uintN(off, 8); err != nil {
			return t, err
		}
		t.kind, t.f = mpFloat, math.Float64frombits(u)
	case 0xcc, 0xcd, 0xce, 0xcf:
		var u uint64
		if u, err = d.uintN(off, 1<<(c-0xcc)); err != nil {
			return t, err
		}
		if u > math.MaxInt64 {
			t.kind, t.u = mpUint, u
		} else {
			t.kind, t.i = mpInt, int64(u)
		}
	case 0xd0, 0xd1, 0xd2, 0xd3:
		size := 1 << (c - 0xd0)
		var u uint64
		if u, err = d.uintN(off, size); err != nil {
			return t, err
		}
		t.kind = mpInt
		switch size {
		case 1:
			t.i = int64(int8(u))
		case 2:
			t.i = int64(int16(u))
		case 4:
			t.i = int64(int32(u))
		default:
			t.i = int64(u)
		}
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return d.extToken(t, 1<<(c-0xd4))
	case 0xd9, 0xda, 0xdb:
		var n uint64
		if n, err = d.uintN(off, 1<<(c-0xd9)); err != nil {
			return t, err
		}
		return d.bytesToken(t, mpStr, clampLen(n))
	case 0xdc, 0xdd:
		var n uint64
		if n, err = d.uintN(off, 2<<(c-0xdc)); err != nil {
			return t, err
		}
		return d.container(t, mpArray, n)
	case 0xde, 0xdf:
		var n uint64
		if n, err = d.uintN(off, 2<<(c-0xde)); err != nil {
			return t, err
		}
		return d.container(t, mpMap, n)
	default: // 0xc1 is reserved and never written
		return t, d.malformed(off, "invalid msgpack type byte 0x%02x", c)
	}
	return t, nil
}

// clampLen keeps a 32-bit length in int range on 32-bit platforms; take
// then rejects it as longer than the data.
func clampLen(n uint64) int {
	if n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}

func (d *mpDecoder) container(t mpToken, kind mpKind, n uint64) (mpToken, error) {
	items := n
	if kind == mpMap {
		items = 2 * n
	}
	if err := d.announce(t.off, items); err != nil {
		return t, err
	}
	t.kind, t.n = kind, int(n)
	return t, nil
}

func (d *mpDecoder) bytesToken(t mpToken, kind mpKind, n int) (mpToken, error) {
	p, err := d.take(t.off, n)
	if err != nil {
		return t, err
	}
	t.kind, t.start, t.n = kind, p, n
	return t, nil
}

func (d *mpDecoder) extToken(t mpToken, n int) (mpToken, error) {
	p, err := d.take(t.off, 1)
	if err != nil {
		return t, err
	}
	t.code = int8(d.buf[p])
	p, err = d.take(t.off, n)
	if err != nil {
		return t, err
	}
	t.kind, t.start, t.n = mpExt, p, n
	return t, nil
}

// snapshotPayload returns the value a DeltaChannel snapshot holds when data
// is one (extension 7 around the whole value: a snapshot stores the
// channel's value), and data itself otherwise. Offsets in errors are then
// offsets in the payload.
func snapshotPayload(data []byte) []byte {
	d := newMsgpackDecoder(data, Limits{}.withDefaults())
	if len(data) == 0 || !(data[0] >= 0xc7 && data[0] <= 0xc9 || data[0] >= 0xd4 && data[0] <= 0xd8) {
		return data
	}
	d.started()
	t, err := d.readToken()
	if err != nil || t.kind != mpExt || t.code != extDeltaSnapshot || d.pos != len(data) {
		return data
	}
	return data[t.start : t.start+t.n]
}

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

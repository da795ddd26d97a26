package codec

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/historyd/historyd/langgraph/format"
)

// This file is the msgpack token reader that values, the checkpoint
// envelope, messages and projection all read through: one header at a
// time, bounded by Limits, with the offsets errors carry.

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

// skipValues steps over n values at slot depth without building them. It
// keeps its own stack instead of recursing, and checks MaxDepth as decoding
// would, so a blob ScanMessages accepts is never deeper than Decode allows.
func (d *mpDecoder) skipValues(n int, depth int) error {
	var small [16]int
	stack := small[:0]
	remaining := n
	for {
		for remaining == 0 {
			if len(stack) == 0 {
				return nil
			}
			remaining = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
		}
		remaining--
		d.started()
		t, err := d.readToken()
		if err != nil {
			return err
		}
		if t.kind != mpArray && t.kind != mpMap {
			continue
		}
		level := depth + len(stack) + 1
		if level > d.maxDepth {
			return depthError(d.maxDepth, level, t.off)
		}
		items := t.n
		if t.kind == mpMap {
			items *= 2
		}
		stack = append(stack, remaining)
		remaining = items
	}
}

// tokenKind names a token's kind for error messages.
func tokenKind(t mpToken) string {
	switch t.kind {
	case mpNil:
		return "null"
	case mpBool:
		return "a boolean"
	case mpInt, mpUint, mpFloat:
		return "a number"
	case mpStr:
		return "a string"
	case mpBin:
		return "bytes"
	case mpArray:
		return "a list"
	case mpMap:
		return "a map"
	}
	return "an extension value"
}

// Package mptoken reads msgpack one header at a time: the token reader
// under every job of langgraph/codec (values, the checkpoint envelope,
// messages, projection). It checks each announced length against the bytes
// left before anything is allocated, and reports offsets in the whole blob.
package mptoken

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Kind is the kind of value a Token heads.
type Kind uint8

const (
	// The kinds, one per msgpack family.
	Nil Kind = iota
	Bool
	Int
	Uint
	Float
	Str
	Bin
	Array
	Map
	Ext
)

// Token is one msgpack header. For str, bin and ext the payload is
// Buf[Start:Start+N] and has already been stepped over; for arrays and maps
// N is the element or pair count and the elements follow.
type Token struct {
	// Kind is what the header heads.
	Kind Kind
	// Off is the offset of the header byte.
	Off int
	// B is a Bool's value.
	B bool
	// I is an Int's value: every integer up to math.MaxInt64.
	I int64
	// U is a Uint's value: only integers above math.MaxInt64.
	U uint64
	// F is a Float's value.
	F float64
	// N is the payload length of a Str, Bin or Ext, and the element or
	// pair count of an Array or Map.
	N int
	// Start is the payload's offset for a Str, Bin or Ext.
	Start int
	// Code is an Ext's extension code.
	Code int8
}

// Decoder reads msgpack from Buf[Pos:End]. End moves in and out while an
// extension payload is decoded, so offsets in errors are always offsets in
// the whole blob.
type Decoder struct {
	// Buf is the whole blob.
	Buf []byte
	// Pos is the offset of the next byte to read.
	Pos int
	// End is where the value being read ends: len(Buf), or the end of the
	// extension payload being read.
	End int
	// Pending counts the values that open containers have announced but
	// that have not been started yet. Every value takes at least one byte,
	// so Pending must never exceed the bytes left; checking that before
	// allocating keeps a chain of huge length headers from reserving more
	// memory than the blob could ever fill.
	Pending int
	// NewError makes the error for malformed data at off, so that the
	// reader's callers keep their own error type.
	NewError func(off int, reason string) error
}

// Malformed is the error for malformed data at off, reason formatted as by
// fmt.Sprintf.
func (d *Decoder) Malformed(off int, reason string, args ...any) error {
	return d.NewError(off, fmt.Sprintf(reason, args...))
}

func (d *Decoder) truncated(off, need int) error {
	return d.Malformed(off, "unexpected end of data: need %d more bytes, %d left", need, d.End-d.Pos)
}

// take steps over n bytes and returns where they start.
func (d *Decoder) take(off, n int) (int, error) {
	if n < 0 || n > d.End-d.Pos {
		return 0, d.truncated(off, n)
	}
	p := d.Pos
	d.Pos += n
	return p, nil
}

func (d *Decoder) uintN(off, size int) (uint64, error) {
	p, err := d.take(off, size)
	if err != nil {
		return 0, err
	}
	b := d.Buf[p : p+size]
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
func (d *Decoder) announce(off int, items uint64) error {
	left := uint64(d.End - d.Pos)
	if items > left {
		return d.Malformed(off, "container announces %d values but only %d bytes are left", items, left)
	}
	if uint64(d.Pending)+items > left {
		return d.Malformed(off, "container announces %d values and enclosing ones %d more, but only %d bytes are left", items, d.Pending, left)
	}
	d.Pending += int(items)
	return nil
}

// Started notes that one announced value is being read.
func (d *Decoder) Started() {
	if d.Pending > 0 {
		d.Pending--
	}
}

// ReadToken reads one header. Containers are announced here, so callers
// must call Started before reading each of their values.
//
// It is one function because it is one switch over msgpack's header bytes,
// in the format's order, on the hottest path of every read.
func (d *Decoder) ReadToken() (Token, error) {
	off := d.Pos
	if d.Pos >= d.End {
		return Token{}, d.Malformed(off, "unexpected end of data: expected a value")
	}
	c := d.Buf[d.Pos]
	d.Pos++
	t := Token{Off: off}
	var err error
	switch {
	case c <= 0x7f:
		t.Kind, t.I = Int, int64(c)
		return t, nil
	case c >= 0xe0:
		t.Kind, t.I = Int, int64(int8(c))
		return t, nil
	case c >= 0x80 && c <= 0x8f:
		return d.container(t, Map, uint64(c&0x0f))
	case c >= 0x90 && c <= 0x9f:
		return d.container(t, Array, uint64(c&0x0f))
	case c >= 0xa0 && c <= 0xbf:
		return d.bytesToken(t, Str, int(c&0x1f))
	}
	switch c {
	case 0xc0:
		t.Kind = Nil
	case 0xc2, 0xc3:
		t.Kind, t.B = Bool, c == 0xc3
	case 0xc4, 0xc5, 0xc6:
		var n uint64
		if n, err = d.uintN(off, 1<<(c-0xc4)); err != nil {
			return t, err
		}
		return d.bytesToken(t, Bin, clampLen(n))
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
		t.Kind, t.F = Float, float64(math.Float32frombits(uint32(u)))
	case 0xcb:
		var u uint64
		if u, err = d.uintN(off, 8); err != nil {
			return t, err
		}
		t.Kind, t.F = Float, math.Float64frombits(u)
	case 0xcc, 0xcd, 0xce, 0xcf:
		var u uint64
		if u, err = d.uintN(off, 1<<(c-0xcc)); err != nil {
			return t, err
		}
		if u > math.MaxInt64 {
			t.Kind, t.U = Uint, u
		} else {
			t.Kind, t.I = Int, int64(u)
		}
	case 0xd0, 0xd1, 0xd2, 0xd3:
		size := 1 << (c - 0xd0)
		var u uint64
		if u, err = d.uintN(off, size); err != nil {
			return t, err
		}
		t.Kind = Int
		switch size {
		case 1:
			t.I = int64(int8(u))
		case 2:
			t.I = int64(int16(u))
		case 4:
			t.I = int64(int32(u))
		default:
			t.I = int64(u)
		}
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return d.extToken(t, 1<<(c-0xd4))
	case 0xd9, 0xda, 0xdb:
		var n uint64
		if n, err = d.uintN(off, 1<<(c-0xd9)); err != nil {
			return t, err
		}
		return d.bytesToken(t, Str, clampLen(n))
	case 0xdc, 0xdd:
		var n uint64
		if n, err = d.uintN(off, 2<<(c-0xdc)); err != nil {
			return t, err
		}
		return d.container(t, Array, n)
	case 0xde, 0xdf:
		var n uint64
		if n, err = d.uintN(off, 2<<(c-0xde)); err != nil {
			return t, err
		}
		return d.container(t, Map, n)
	default: // 0xc1 is reserved and never written
		return t, d.Malformed(off, "invalid msgpack type byte 0x%02x", c)
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

func (d *Decoder) container(t Token, kind Kind, n uint64) (Token, error) {
	items := n
	if kind == Map {
		items = 2 * n
	}
	if err := d.announce(t.Off, items); err != nil {
		return t, err
	}
	t.Kind, t.N = kind, int(n)
	return t, nil
}

func (d *Decoder) bytesToken(t Token, kind Kind, n int) (Token, error) {
	p, err := d.take(t.Off, n)
	if err != nil {
		return t, err
	}
	t.Kind, t.Start, t.N = kind, p, n
	return t, nil
}

func (d *Decoder) extToken(t Token, n int) (Token, error) {
	p, err := d.take(t.Off, 1)
	if err != nil {
		return t, err
	}
	t.Code = int8(d.Buf[p])
	p, err = d.take(t.Off, n)
	if err != nil {
		return t, err
	}
	t.Kind, t.Start, t.N = Ext, p, n
	return t, nil
}

// What names a token's kind for error messages: "null", "a map", ...
func What(t Token) string {
	switch t.Kind {
	case Nil:
		return "null"
	case Bool:
		return "a boolean"
	case Int, Uint, Float:
		return "a number"
	case Str:
		return "a string"
	case Bin:
		return "bytes"
	case Array:
		return "a list"
	case Map:
		return "a map"
	}
	return "an extension value"
}

package wire

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/historyd/historyd/store"
)

// Field numbers of StateEntry and of its map entries. Every one is below
// 16, so each tag is one byte.
const (
	stateEntryValue        protowire.Number = 1
	stateEntryTool         protowire.Number = 2
	stateEntrySeq          protowire.Number = 3
	stateEntryTurn         protowire.Number = 4
	stateEntryTurnsWritten protowire.Number = 5
	stateEntryInputs       protowire.Number = 6
	stateEntryExtra        protowire.Number = 7
	stateEntryValueJSON    protowire.Number = 8

	mapKey   protowire.Number = 1
	mapValue protowire.Number = 2

	tagSize = 1
)

// encodeEntry encodes e as a StateEntry message; the value mapping is
// appendProtoValue's, documented on StateEntry. Bookkeeping
// integers that do not fit the wire's int32 are kept in extra rather than
// truncated. The message's size is computed first and the encoding written
// into one buffer of exactly that size: an entry can be megabytes of
// coordinates, and growing a buffer by appending would allocate about
// twice that on the way. A value left encoded by codec.EachEntry (an
// codec.Raw) is re-encoded straight from the stored bytes. With asJSON
// the value is written as JSON text in value_json instead of value.
//
// It is one function because sizing and writing the message must visit the
// fields in the same order: kept side by side, they cannot drift apart.
func encodeEntry(e store.Entry, asJSON bool) ([]byte, error) {
	extra := e.Extra
	keep := func(k string, v int64) {
		if extra == nil {
			extra = map[string]any{}
		} else if len(extra) == len(e.Extra) {
			extra = maps.Clone(extra) // e.Extra belongs to the caller
		}
		extra[k] = v
	}
	var turn, turnsWritten *int32
	if e.Turn != nil {
		if n, ok := int32Of(*e.Turn); ok {
			turn = &n
		} else {
			keep("turn", *e.Turn)
		}
	}
	if e.TurnsWritten != nil {
		if n, ok := int32Of(*e.TurnsWritten); ok {
			turnsWritten = &n
		} else {
			keep("turns_written", *e.TurnsWritten)
		}
	}
	inputs := slices.Sorted(maps.Keys(e.Inputs))

	var (
		valueSize int
		err       error
	)
	if asJSON {
		// Sized like the Value: one pass counting, one writing in place.
		if valueSize, err = jsonValueSize(e.Value); err != nil {
			return nil, err
		}
	} else if valueSize, err = protoValueSize(e.Value); err != nil {
		return nil, err
	}
	size := sizeNested(valueSize)
	if e.Tool != nil {
		size += tagSize + protowire.SizeBytes(len(validUTF8(*e.Tool)))
	}
	if e.Seq != nil {
		size += tagSize + protowire.SizeVarint(uint64(*e.Seq))
	}
	if turn != nil {
		size += tagSize + protowire.SizeVarint(uint64(int64(*turn)))
	}
	if turnsWritten != nil {
		size += tagSize + protowire.SizeVarint(uint64(int64(*turnsWritten)))
	}
	for _, k := range inputs {
		size += sizeNested(tagSize + protowire.SizeBytes(len(validUTF8(k))) + tagSize + protowire.SizeBytes(len(validUTF8(e.Inputs[k]))))
	}
	extraSize := 0
	if len(extra) > 0 {
		if extraSize, err = protoStructSize(extra); err != nil {
			return nil, err
		}
		size += sizeNested(extraSize)
	}

	b := make([]byte, 0, size)
	if asJSON {
		b = appendHeader(b, stateEntryValueJSON, valueSize)
		start := len(b)
		if b, err = appendJSONValue(b, e.Value); err != nil {
			return nil, err
		}
		if len(b)-start != valueSize {
			return nil, fmt.Errorf("value_json: sized %d bytes, wrote %d", valueSize, len(b)-start)
		}
	} else {
		b = appendHeader(b, stateEntryValue, valueSize)
		if b, err = appendProtoValue(b, e.Value); err != nil {
			return nil, err
		}
	}
	if e.Tool != nil {
		b = protowire.AppendTag(b, stateEntryTool, protowire.BytesType)
		b = protowire.AppendString(b, validUTF8(*e.Tool))
	}
	if e.Seq != nil {
		b = protowire.AppendTag(b, stateEntrySeq, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(*e.Seq))
	}
	if turn != nil {
		b = protowire.AppendTag(b, stateEntryTurn, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(*turn)))
	}
	if turnsWritten != nil {
		b = protowire.AppendTag(b, stateEntryTurnsWritten, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(*turnsWritten)))
	}
	for _, k := range inputs {
		key, val := validUTF8(k), validUTF8(e.Inputs[k])
		b = appendHeader(b, stateEntryInputs, tagSize+protowire.SizeBytes(len(key))+tagSize+protowire.SizeBytes(len(val)))
		b = protowire.AppendTag(b, mapKey, protowire.BytesType)
		b = protowire.AppendString(b, key)
		b = protowire.AppendTag(b, mapValue, protowire.BytesType)
		b = protowire.AppendString(b, val)
	}
	if len(extra) > 0 {
		b = appendHeader(b, stateEntryExtra, extraSize)
		if b, err = appendProtoStruct(b, extra); err != nil {
			return nil, err
		}
	}
	if len(b) != size {
		// The sizes above and the writes below are kept in step by the
		// tests; a mismatch would send a corrupt message.
		return nil, fmt.Errorf("state entry encoded to %d bytes, sized %d", len(b), size)
	}
	return b, nil
}

// appendStateValue appends StateEntry.value holding v.
func appendStateValue(b []byte, v any) ([]byte, error) {
	n, err := protoValueSize(v)
	if err != nil {
		return nil, err
	}
	return appendProtoValue(appendHeader(b, stateEntryValue, n), v)
}

// appendHeader appends the tag and length of field num holding n bytes.
func appendHeader(b []byte, num protowire.Number, n int) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.BytesType), uint64(n))
}

func int32Of(v int64) (int32, bool) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

// sizeNested is the size of a one-byte-tagged field holding a message of n
// bytes.
func sizeNested(n int) int { return tagSize + protowire.SizeVarint(uint64(n)) + n }

// validUTF8 keeps proto3's promise that strings are UTF-8: the decoder
// already replaces invalid bytes, and this holds whatever reaches the wire.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

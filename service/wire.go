package service

import (
	"encoding/base64"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/historyd/historyd/store"
)

// Field numbers of google.protobuf.Value, Struct and ListValue, and of
// StateEntry.value.
const (
	valueNull   protowire.Number = 1
	valueNumber protowire.Number = 2
	valueString protowire.Number = 3
	valueBool   protowire.Number = 4
	valueStruct protowire.Number = 5
	valueList   protowire.Number = 6

	structFields protowire.Number = 1
	entryKey     protowire.Number = 1
	entryValue   protowire.Number = 2
	listValues   protowire.Number = 1

	stateEntryValue        protowire.Number = 1
	stateEntryTool         protowire.Number = 2
	stateEntrySeq          protowire.Number = 3
	stateEntryTurn         protowire.Number = 4
	stateEntryTurnsWritten protowire.Number = 5
	stateEntryInputs       protowire.Number = 6
	stateEntryExtra        protowire.Number = 7

	mapKey   protowire.Number = 1
	mapValue protowire.Number = 2
)

// Every field number above is below 16, so each tag is one byte.
const tagSize = 1

// encodeEntry encodes e as a StateEntry message. Bookkeeping integers that
// do not fit the wire's int32 are kept in extra rather than truncated. The
// message's size is computed first, so the encoding is written into one
// buffer of exactly that size: a state entry can be megabytes of
// coordinates, and growing a buffer by appending would allocate about
// twice that on the way.
func encodeEntry(e store.Entry) []byte {
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

	size := sizeNested(sizeValue(e.Value))
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
		size += sizeNested(sizeMapEntry(k, e.Inputs[k]))
	}
	if len(extra) > 0 {
		size += sizeNested(sizeStruct(extra))
	}

	b := make([]byte, 0, size)
	b = appendStateValue(b, e.Value)
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
		b = appendNested(b, stateEntryInputs, func(b []byte) []byte {
			b = protowire.AppendTag(b, mapKey, protowire.BytesType)
			b = protowire.AppendString(b, validUTF8(k))
			b = protowire.AppendTag(b, mapValue, protowire.BytesType)
			return protowire.AppendString(b, validUTF8(e.Inputs[k]))
		})
	}
	if len(extra) > 0 {
		b = appendStruct(b, stateEntryExtra, extra)
	}
	return b
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

func sizeMapEntry(k, v string) int {
	return tagSize + protowire.SizeBytes(len(validUTF8(k))) + tagSize + protowire.SizeBytes(len(validUTF8(v)))
}

// sizeValue is the size of the fields appendValue appends for v.
func sizeValue(v any) int {
	switch x := v.(type) {
	case nil, bool:
		return tagSize + 1
	case string:
		return sizeString(x)
	case int64:
		if x >= -maxExactInt && x <= maxExactInt {
			return tagSize + 8
		}
		return sizeString(strconv.FormatInt(x, 10))
	case uint64:
		if x <= maxExactInt {
			return tagSize + 8
		}
		return sizeString(strconv.FormatUint(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			return sizeString("NaN")
		case math.IsInf(x, 1):
			return sizeString("Infinity")
		case math.IsInf(x, -1):
			return sizeString("-Infinity")
		}
		return tagSize + 8
	case []byte:
		return tagSize + protowire.SizeBytes(base64.StdEncoding.EncodedLen(len(x)))
	case []any:
		n := 0
		for _, e := range x {
			n += sizeNested(sizeValue(e))
		}
		return sizeNested(n)
	case map[string]any:
		return sizeNested(sizeStruct(x))
	default:
		return sizeString(fmt.Sprint(x))
	}
}

// sizeStruct is the size of the fields of a google.protobuf.Struct
// holding m.
func sizeStruct(m map[string]any) int {
	n := 0
	for k, v := range m {
		n += sizeNested(tagSize + protowire.SizeBytes(len(validUTF8(k))) + sizeNested(sizeValue(v)))
	}
	return n
}

func sizeString(s string) int { return tagSize + protowire.SizeBytes(len(validUTF8(s))) }

// maxExactInt is the largest integer a JSON number (an IEEE double) holds
// exactly; larger integers are sent as decimal strings.
const maxExactInt = 1 << 53

// appendStateValue appends StateEntry.value, encoded straight from decoded
// data. A state value can be megabytes of coordinates: as a tree of
// google.protobuf.Value messages it would take several times its size in
// memory before being encoded anyway, so it is encoded directly, to the same
// bytes. This is the one place the mapping documented on StateEntry is
// applied: numbers within ±2^53 stay numbers, larger integers become decimal
// strings, NaN and ±Infinity strings, bytes base64, lists and maps nest.
func appendStateValue(b []byte, v any) []byte {
	return appendNested(b, stateEntryValue, func(b []byte) []byte { return appendValue(b, v) })
}

// appendNested appends field num holding the message enc writes. The length
// goes in front of the message, so one byte is reserved for it (the common
// case) and the message is moved along when its length needs more.
func appendNested(b []byte, num protowire.Number, enc func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	start := len(b)
	b = enc(append(b, 0))
	n := len(b) - start - 1
	if size := protowire.SizeVarint(uint64(n)); size > 1 {
		b = append(b, make([]byte, size-1)...)
		copy(b[start+size:], b[start+1:start+1+n])
	}
	protowire.AppendVarint(b[:start], uint64(n))
	return b
}

// appendValue appends the fields of a google.protobuf.Value holding v.
func appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		b = protowire.AppendTag(b, valueNull, protowire.VarintType)
		return protowire.AppendVarint(b, 0)
	case bool:
		b = protowire.AppendTag(b, valueBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(x))
	case string:
		return appendString(b, x)
	case int64:
		if x >= -maxExactInt && x <= maxExactInt {
			return appendNumber(b, float64(x))
		}
		return appendString(b, strconv.FormatInt(x, 10))
	case uint64:
		if x <= maxExactInt {
			return appendNumber(b, float64(x))
		}
		return appendString(b, strconv.FormatUint(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			return appendString(b, "NaN")
		case math.IsInf(x, 1):
			return appendString(b, "Infinity")
		case math.IsInf(x, -1):
			return appendString(b, "-Infinity")
		}
		return appendNumber(b, x)
	case []byte:
		return appendString(b, base64.StdEncoding.EncodeToString(x))
	case []any:
		return appendNested(b, valueList, func(b []byte) []byte {
			for _, e := range x {
				b = appendNested(b, listValues, func(b []byte) []byte { return appendValue(b, e) })
			}
			return b
		})
	case map[string]any:
		return appendStruct(b, valueStruct, x)
	default:
		return appendString(b, fmt.Sprint(x))
	}
}

// appendStruct appends field num holding m as a google.protobuf.Struct,
// its keys sorted so that equal values encode to equal bytes.
func appendStruct(b []byte, num protowire.Number, m map[string]any) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return appendNested(b, num, func(b []byte) []byte {
		for _, k := range keys {
			b = appendNested(b, structFields, func(b []byte) []byte {
				b = protowire.AppendTag(b, entryKey, protowire.BytesType)
				b = protowire.AppendString(b, validUTF8(k))
				return appendNested(b, entryValue, func(b []byte) []byte { return appendValue(b, m[k]) })
			})
		}
		return b
	})
}

func appendNumber(b []byte, f float64) []byte {
	b = protowire.AppendTag(b, valueNumber, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(f))
}

func appendString(b []byte, s string) []byte {
	b = protowire.AppendTag(b, valueString, protowire.BytesType)
	return protowire.AppendString(b, validUTF8(s))
}

// validUTF8 keeps proto3's promise that strings are UTF-8: the decoder
// already replaces invalid bytes, and this holds whatever reaches the wire.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

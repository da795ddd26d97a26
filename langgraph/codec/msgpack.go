package codec

import (
	"github.com/historyd/historyd/langgraph/codec/internal/mptoken"
	"github.com/historyd/historyd/langgraph/format"
)

// This file is what values, the checkpoint envelope, messages and
// projection share of msgpack: the token reader (internal/mptoken) with
// their own state, and stepping over values unread.

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

// mpDecoder is the token reader with what the reading jobs keep while they
// read: the depth limit, the key text budget and the messages scan's
// settings.
type mpDecoder struct {
	mptoken.Decoder
	maxDepth int
	keys     keyBudget
	// mode is what the messages scan keeps of each message.
	mode ReadMode
	// known, when set, names human messages the scan need not read beyond
	// their id (ReadMessagesKnowing).
	known func(id string) bool
}

func newMsgpackDecoder(data []byte, lim Limits) *mpDecoder {
	return &mpDecoder{Decoder: mptoken.Decoder{Buf: data, End: len(data), NewError: msgpackMalformed},
		maxDepth: lim.MaxDepth, keys: newKeyBudget(format.TypeMsgpack, len(data))}
}

// msgpackMalformed is the error for malformed msgpack at off: every
// msgpack error of the token reader is one.
func msgpackMalformed(off int, reason string) error {
	return &MalformedError{Format: format.TypeMsgpack, Offset: off, Reason: reason}
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
	d.Started()
	t, err := d.ReadToken()
	if err != nil || t.Kind != mptoken.Ext || t.Code != extDeltaSnapshot || d.Pos != len(data) {
		return data
	}
	return data[t.Start : t.Start+t.N]
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
		d.Started()
		t, err := d.ReadToken()
		if err != nil {
			return err
		}
		if t.Kind != mptoken.Array && t.Kind != mptoken.Map {
			continue
		}
		level := depth + len(stack) + 1
		if level > d.maxDepth {
			return depthError(d.maxDepth, level, t.Off)
		}
		items := t.N
		if t.Kind == mptoken.Map {
			items *= 2
		}
		stack = append(stack, remaining)
		remaining = items
	}
}

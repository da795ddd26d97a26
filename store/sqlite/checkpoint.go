package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/historyd/historyd/store/lgcodec"
)

// The serializers a SqliteSaver names in the type column. The whole
// checkpoint is encoded with one of them.
const (
	typeMsgpack = "msgpack" // Python's JsonPlusSerializer
	typeJSON    = "json"    // LangChain.js, and Python before msgpack
)

// blobType names the serializer of a row. A NULL or empty type is read as
// JSON, as the JavaScript saver itself reads it: such rows predate the type
// column and were written as JSON.
func blobType(t *string) string {
	if t == nil || *t == "" {
		return typeJSON
	}
	return *t
}

// header is what Checkpoints needs from a serialized checkpoint: everything
// but the channel values.
type header struct {
	ts       time.Time
	versions map[string]string
}

// parseHeader reads ts and channel_versions out of a serialized checkpoint
// without decoding its channel values, which hold the whole conversation and
// are most of the bytes. Errors are lgcodec errors, so that the layers above
// tell damage from a format historyd refuses to read.
func parseHeader(typ string, data []byte) (header, error) {
	switch typ {
	case typeMsgpack:
		return mpHeader(data)
	case typeJSON:
		return jsonHeader(data)
	}
	return header{}, unsupported(typ)
}

// channelValue returns the encoded channel_values[channel] of a serialized
// checkpoint, still in the checkpoint's own serializer, as a sub-slice of
// data. ok is false when the checkpoint holds no value for the channel.
func channelValue(typ string, data []byte, channel string) (val []byte, ok bool, err error) {
	switch typ {
	case typeMsgpack:
		return mpChannelValue(data, channel)
	case typeJSON:
		return jsonChannelValue(data, channel)
	}
	return nil, false, unsupported(typ)
}

// unsupported refuses a checkpoint serialized in a way historyd does not
// read. The reason says what the name means, so an operator knows which
// saver setting is behind it.
func unsupported(typ string) error {
	reason := "unknown serializer"
	switch {
	case typ == "pickle":
		reason = "the checkpoint was pickled (the saver's pickle fallback); only Python can read it"
	case strings.Contains(typ, "+"):
		reason = "the checkpoint is encrypted; historyd holds no keys"
	}
	return &lgcodec.UnsupportedError{Format: typ, Offset: -1, Reason: "whole checkpoint: " + reason}
}

func parseTS(s string) time.Time {
	// Python writes "2026-11-30T07:30:08.817845+00:00", JavaScript
	// "2026-11-30T07:30:54.173Z"; both are RFC 3339. A timestamp that is not
	// is left out rather than failing the listing: turns only show it.
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// --- JSON ---

func jsonHeader(data []byte) (header, error) {
	// channel_values has no field here, so the decoder skips it without
	// keeping any of it.
	var c struct {
		TS              json.RawMessage            `json:"ts"`
		ChannelVersions map[string]json.RawMessage `json:"channel_versions"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return header{}, jsonMalformed(err)
	}
	h := header{versions: make(map[string]string, len(c.ChannelVersions))}
	var ts string
	if json.Unmarshal(c.TS, &ts) == nil {
		h.ts = parseTS(ts)
	}
	for ch, raw := range c.ChannelVersions {
		v, ok, err := jsonVersion(raw)
		if err != nil {
			return header{}, &lgcodec.MalformedError{Format: typeJSON, Offset: -1,
				Reason: fmt.Sprintf("channel_versions[%q]: %v", ch, err)}
		}
		if ok {
			h.versions[ch] = v
		}
	}
	return h, nil
}

// jsonVersion reads one channel version. LangChain.js numbers versions
// 1, 2, 3…; Python writes strings. A number is kept as its JSON text. A null
// version names no value, as if the channel were absent.
func jsonVersion(raw json.RawMessage) (string, bool, error) {
	if len(raw) == 0 {
		return "", false, nil
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, err
		}
		return s, true, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return string(raw), true, nil
	case string(raw) == "null":
		return "", false, nil
	}
	return "", false, fmt.Errorf("version is neither a string nor a number: %.40s", raw)
}

func jsonChannelValue(data []byte, channel string) ([]byte, bool, error) {
	var c struct {
		ChannelValues map[string]json.RawMessage `json:"channel_values"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, false, jsonMalformed(err)
	}
	v, ok := c.ChannelValues[channel]
	return v, ok, nil
}

// jsonMalformed turns a decoding failure into the lgcodec error the layers
// above map to data loss, keeping the offset where JSON knows it.
func jsonMalformed(err error) error {
	off := -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = int(syn.Offset)
	case errors.As(err, &typ):
		off = int(typ.Offset)
	}
	return &lgcodec.MalformedError{Format: typeJSON, Offset: off, Reason: "checkpoint: " + err.Error()}
}

// --- msgpack ---
//
// A msgpack checkpoint is walked by its headers alone: every value has its
// size in its first bytes, so the values around the few we read are stepped
// over without being decoded. The walk is iterative (mpSkip counts the
// values still owed instead of recursing), so a corrupt or hostile blob
// cannot exhaust the stack however deeply it nests; the recursive Skip of
// the msgpack library could.

// mpItem is the head of one msgpack value.
type mpItem struct {
	kind byte  // 'm' map, 'a' array, 's' str, 'n' nil, 'x' anything else
	size int   // bytes of the value without its elements: header and payload
	hdr  int   // bytes of the header alone (for a str, where the text starts)
	n    int64 // entries of a map, elements of an array
}

func mpTruncated(off int) error {
	return &lgcodec.MalformedError{Format: typeMsgpack, Offset: off, Reason: "checkpoint: truncated"}
}

// mpHead reads the head of the value at off. Payloads (str, bin, ext) are
// checked to lie within data; elements of maps and arrays are not.
func mpHead(data []byte, off int) (mpItem, error) {
	if off >= len(data) {
		return mpItem{}, mpTruncated(off)
	}
	c := data[off]
	// length reads an n-byte big-endian length after the code byte.
	length := func(n int) (int64, error) {
		if off+1+n > len(data) {
			return 0, mpTruncated(off)
		}
		var l int64
		for _, b := range data[off+1 : off+1+n] {
			l = l<<8 | int64(b)
		}
		return l, nil
	}
	// payload builds a str/bin/ext item: hdr header bytes, then l bytes.
	payload := func(kind byte, hdr int, l int64) (mpItem, error) {
		if l > int64(len(data)-off-hdr) {
			return mpItem{}, mpTruncated(off)
		}
		return mpItem{kind: kind, hdr: hdr, size: hdr + int(l)}, nil
	}
	switch {
	case c <= 0x7f, c >= 0xe0: // positive and negative fixint
		return mpItem{kind: 'x', size: 1, hdr: 1}, nil
	case c <= 0x8f:
		return mpItem{kind: 'm', size: 1, hdr: 1, n: int64(c & 0x0f)}, nil
	case c <= 0x9f:
		return mpItem{kind: 'a', size: 1, hdr: 1, n: int64(c & 0x0f)}, nil
	case c <= 0xbf:
		return payload('s', 1, int64(c&0x1f))
	}
	switch c {
	case 0xc0:
		return mpItem{kind: 'n', size: 1, hdr: 1}, nil
	case 0xc2, 0xc3:
		return mpItem{kind: 'x', size: 1, hdr: 1}, nil
	case 0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb: // bin 8/16/32, str 8/16/32
		w := 1 << ((c - 0xc4) % 3)
		kind := byte('x')
		if c >= 0xd9 {
			w = 1 << (c - 0xd9)
			kind = 's'
		}
		l, err := length(w)
		if err != nil {
			return mpItem{}, err
		}
		return payload(kind, 1+w, l)
	case 0xc7, 0xc8, 0xc9: // ext 8/16/32: length, type byte, payload
		w := 1 << (c - 0xc7)
		l, err := length(w)
		if err != nil {
			return mpItem{}, err
		}
		return payload('x', 1+w+1, l)
	case 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3:
		size := 1 + [...]int{4, 8, 1, 2, 4, 8, 1, 2, 4, 8}[c-0xca]
		if off+size > len(data) {
			return mpItem{}, mpTruncated(off)
		}
		return mpItem{kind: 'x', size: size, hdr: size}, nil
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16
		return payload('x', 2, int64(1)<<(c-0xd4))
	case 0xdc, 0xdd, 0xde, 0xdf: // array 16/32, map 16/32
		w := 2 << ((c - 0xdc) % 2)
		l, err := length(w)
		if err != nil {
			return mpItem{}, err
		}
		kind := byte('a')
		if c >= 0xde {
			kind = 'm'
		}
		return mpItem{kind: kind, size: 1 + w, hdr: 1 + w, n: l}, nil
	}
	return mpItem{}, &lgcodec.MalformedError{Format: typeMsgpack, Offset: off,
		Reason: fmt.Sprintf("checkpoint: invalid msgpack code 0x%02x", c)}
}

// mpSkip returns the offset just past the value that starts at off.
func mpSkip(data []byte, off int) (int, error) {
	owed := int64(1) // values still to step over
	for owed > 0 {
		// Every value takes at least one byte: owing more than is left
		// means a count that lies, found before any loop over it.
		if owed > int64(len(data)-off) {
			return 0, mpTruncated(off)
		}
		it, err := mpHead(data, off)
		if err != nil {
			return 0, err
		}
		off += it.size
		owed--
		switch it.kind {
		case 'a':
			owed += it.n
		case 'm':
			owed += 2 * it.n
		}
	}
	return off, nil
}

// mpEntries calls fn with the span [start, end) of the value of each entry
// of the map at off whose key is a string. Entries under other keys are
// stepped over: only string keys name checkpoint fields and channels.
func mpEntries(data []byte, off int, what string, fn func(key []byte, start, end int) error) error {
	it, err := mpHead(data, off)
	if err != nil {
		return err
	}
	if it.kind != 'm' {
		return &lgcodec.MalformedError{Format: typeMsgpack, Offset: off, Reason: what + " is not a map"}
	}
	if 2*it.n > int64(len(data)-off-it.size) {
		return mpTruncated(off)
	}
	off += it.size
	for i := int64(0); i < it.n; i++ {
		k, err := mpHead(data, off)
		if err != nil {
			return err
		}
		var key []byte
		start := off + k.size
		if k.kind == 's' {
			key = data[off+k.hdr : start]
		} else if start, err = mpSkip(data, off); err != nil {
			return err
		}
		end, err := mpSkip(data, start)
		if err != nil {
			return err
		}
		if key != nil {
			if err := fn(key, start, end); err != nil {
				return err
			}
		}
		off = end
	}
	return nil
}

func mpHeader(data []byte) (header, error) {
	var h header
	err := mpEntries(data, 0, "checkpoint", func(key []byte, start, end int) error {
		switch string(key) {
		case "ts":
			if s, ok := mpText(data, start); ok {
				h.ts = parseTS(s)
			}
		case "channel_versions":
			// A repeated key replaces the earlier one, as in the dict
			// Python would decode.
			h.versions = map[string]string{}
			if it, err := mpHead(data, start); err == nil && it.kind == 'n' {
				return nil
			}
			return mpEntries(data, start, "channel_versions", func(ch []byte, start, end int) error {
				v, ok, err := mpVersion(data[start:end])
				if err != nil {
					return &lgcodec.MalformedError{Format: typeMsgpack, Offset: start,
						Reason: fmt.Sprintf("channel_versions[%q]: %v", ch, err)}
				}
				if ok {
					h.versions[string(ch)] = v
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return header{}, err
	}
	if h.versions == nil {
		h.versions = map[string]string{}
	}
	return h, nil
}

// mpText returns the str at off, if that is what is there.
func mpText(data []byte, off int) (string, bool) {
	it, err := mpHead(data, off)
	if err != nil || it.kind != 's' {
		return "", false
	}
	return string(data[off+it.hdr : off+it.size]), true
}

// mpVersion reads one encoded channel version: a string in current Python,
// an integer in old Python, conceivably a float. Numbers are kept as their
// decimal text. A nil version names no value.
func mpVersion(raw []byte) (string, bool, error) {
	it, err := mpHead(raw, 0)
	if err != nil {
		return "", false, err
	}
	switch it.kind {
	case 's':
		return string(raw[it.hdr:it.size]), true, nil
	case 'n':
		return "", false, nil
	case 'x':
		// A scalar: the library decodes it without recursing.
		var v any
		if err := msgpack.Unmarshal(raw, &v); err != nil {
			return "", false, err
		}
		switch n := v.(type) {
		case int8, int16, int32, int64:
			return fmt.Sprint(n), true, nil
		case uint8, uint16, uint32, uint64:
			return fmt.Sprint(n), true, nil
		case float32:
			return strconv.FormatFloat(float64(n), 'g', -1, 32), true, nil
		case float64:
			return strconv.FormatFloat(n, 'g', -1, 64), true, nil
		}
	}
	return "", false, errors.New("version is neither a string nor a number")
}

func mpChannelValue(data []byte, channel string) ([]byte, bool, error) {
	var (
		val   []byte
		found bool
	)
	err := mpEntries(data, 0, "checkpoint", func(key []byte, start, end int) error {
		if string(key) != "channel_values" {
			return nil
		}
		val, found = nil, false
		if it, err := mpHead(data, start); err == nil && it.kind == 'n' {
			return nil
		}
		return mpEntries(data, start, "channel_values", func(ch []byte, start, end int) error {
			if string(ch) == channel {
				val, found = data[start:end], true
			}
			return nil
		})
	})
	if err != nil {
		return nil, false, err
	}
	return val, found, nil
}

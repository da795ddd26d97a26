// Package lgcodec decodes the values LangGraph checkpointers store: Python's
// msgpack serializer with its extension types, LangChain.js JSON, and the raw
// blob types, into plain Go data that historyd can serve as JSON.
//
// Decoded values use only these Go types: nil, bool, int64, uint64 (only for
// integers above math.MaxInt64), float64, string, []byte, []any and
// map[string]any. Map keys that are not strings are turned into their JSON
// text (1 → "1", true → "true", nil → "null").
//
// # Blob types
//
// "msgpack" is Python's JsonPlusSerializer; "json" is LangChain.js, or a very
// old Python checkpoint; "bytes" and "bytearray" are returned as []byte;
// "null" is nil; "empty" means the channel has no value. "pickle", encrypted
// types ("msgpack+aes" and any other "type+cipher" name) and unknown types
// are refused with an *UnsupportedError rather than guessed at.
//
// # msgpack
//
// str becomes string (invalid UTF-8 is replaced with U+FFFD rather than
// failing, since the text is still worth showing), bin becomes []byte.
// Unsigned integers up to math.MaxInt64 become int64. Map keys: a string key
// stays as is, a bin key becomes its standard padded base64, a key whose
// decoded value is a string (such as an extension-encoded UUID, in its
// dashed form) becomes that string, and any other key becomes its JSON text: 1 → "1", true → "true",
// nil → "null", 1.5 → "1.5", (1, 2) → "[1,2]". Floats are written the way
// JavaScript prints numbers, and NaN and ±Inf as NaN, Infinity, -Infinity.
// When two keys end up with the same text the later one wins, as a dict
// would keep it.
//
// Extension types carry (module, class, data, ...) tuples; each becomes its
// data, because that is the part a reader without Python can show, except
// for the classes a Python host's own JSON tools (pydantic's
// to_jsonable_python, which FastAPI and LangGraph's API server build on)
// render otherwise: those are rendered as pydantic renders them, since
// hosts compare what historyd serves with what they stored.
//
//   - datetime.datetime: its ISO-8601 text as pydantic writes it, "Z" for a
//     UTC offset of zero and ±HH:MM otherwise (seconds of an offset
//     dropped): "2026-03-14T09:28:27.577701Z"; a naive one has no offset.
//   - datetime.date: "2026-03-14".
//   - datetime.time: "09:28:27", ".ffffff" when there are microseconds,
//     and the offset of a fixed-offset tzinfo ("Z", "+02:00"); a ZoneInfo
//     gives a time no offset, as in Python.
//   - datetime.timedelta: the ISO-8601 duration pydantic writes: a sign,
//     then years of 365 days, days, hours, minutes and seconds with their
//     fraction, each only when not zero: "P1DT5S", "-PT23H", "PT0.5S",
//     "P1Y36DT2H1M1.5S", "PT0S".
//   - uuid.UUID: the canonical dashed form,
//     "12345678-1234-5678-1234-567812345678" (the serializer stores 32 hex
//     digits).
//   - pathlib paths: their text, "/tmp/x" ("." for an empty path, and
//     backslashes for Windows paths).
//   - re.compile patterns: the pattern text (its flags are dropped, as
//     pydantic drops them).
//   - pydantic secrets (SecretStr, SecretBytes, ...): "**********", or ""
//     for an empty one, as pydantic shows them: the serializer stores the
//     secret in clear, and a history API must not hand it out.
//
// Where pydantic renders nothing (it cannot serialize the value), the
// rendering is historyd's own: datetime.timezone gives the offset
// isoformat() appends for it ("+02:00", "+00:00" for UTC, ":SS" when it
// has seconds), its name dropped; ZoneInfo gives its key; Send
// [node, arg]. Everything else is its data, which is what pydantic renders
// too:
//
//   - 0 (constructor, one argument): the argument. Decimals and IP
//     addresses their text, enums their value, sets, frozensets and deques
//     a list.
//   - 1 (positional arguments): the argument list, for classes not named
//     above.
//   - 2 (keyword arguments): the keyword map (dataclasses, LangGraph's
//     Interrupt and Command). Namedtuples too, though pydantic renders them
//     as lists: the serializer stores them exactly as it stores
//     dataclasses, so they cannot be told apart.
//   - 3 (class method, one argument): the argument.
//   - 4 and 5 (pydantic v1 and v2 models): the model's field map, each
//     field rendered as above. LangChain messages are such models and keep
//     their "type" field.
//   - 6 (numpy array): see below.
//   - 7 (delta snapshot) and every other code: *UnsupportedError.
//
// testdata/python_golden.json holds, beside values the real serializer
// wrote, what to_jsonable_python gives for each, and the tests hold the
// decoder to it but for the cases named above.
//
// numpy arrays of dtype bool, int8..int64, uint8..uint64 and float16..float64,
// in C or Fortran order, become nested lists of bool, int64 (uint64 above
// math.MaxInt64) and float64, one level per dimension, exactly as
// ndarray.tolist() would give them; a zero-dimensional array becomes its
// single value. Any other array (strings, complex, datetimes, records,
// objects) becomes a map {"dtype": "<U5", "shape": [2], "order": "C",
// "data": []byte} holding the raw buffer, which keeps every byte without
// guessing at a layout historyd does not interpret.
//
// # JSON
//
// Numbers that are integer literals become int64 (uint64 above
// math.MaxInt64, float64 beyond uint64); other numbers become float64.
// Python's NaN, Infinity and -Infinity literals are accepted. Invalid UTF-8
// is replaced with U+FFFD. Serialized LangChain objects become plain data:
//
//   - {"lc": 1, "type": "constructor", "id": [..., "Class"], "kwargs": {...}}
//     becomes its kwargs, with keys as stored (LangChain.js writes them in
//     snake_case). For message classes a missing "type" is filled in from
//     the class name with the Python names: HumanMessage "human", AIMessage
//     "ai", ToolMessage "tool", SystemMessage "system", FunctionMessage
//     "function", ChatMessage "chat", RemoveMessage "remove", and chunk
//     classes their own class name ("AIMessageChunk"), so that a message
//     reads the same whichever language wrote it. Inside kwargs, user maps
//     escaped as {"__lc_escaped__": {...}} are unwrapped and kept as stored.
//   - {"lc": 1, "type": "secret"} becomes nil: the secret is not in the blob.
//   - {"lc": 1, "type": "not_implemented"} becomes its "repr" text when it
//     has one (Python writes it), else nil.
//   - LangChain.js {"lc": 2} records: "undefined" becomes nil; Set a list;
//     Map a map keyed like msgpack maps (string keys as is, others by JSON
//     text); Uint8Array []byte; RegExp [source, flags]; Error its message;
//     "delta_snapshot" *UnsupportedError. Other records are kept as stored,
//     as LangChain.js itself leaves them. JavaScript Dates need no record:
//     they are stored as ISO-8601 strings already, which is what
//     JSON.stringify writes for them. Where JSON.stringify writes {} (Set,
//     Map, RegExp, Error) or an index map (Uint8Array), a JavaScript host's
//     own JSON would lose the value, so historyd renders it as above, as
//     for the Python counterparts; testdata/js_golden.json records
//     JSON.stringify's rendering of each value, and the tests hold the
//     decoder to it but for these.
//   - Old Python {"lc": 2, "type": "constructor", "id": [module..., Class],
//     "method"?, "args"?, "kwargs"?} records become what the msgpack
//     extension for the same class would give, rendered the same way
//     (datetimes, dates, times, timedeltas, timezones, UUIDs, paths and
//     patterns as above): a single argument unwrapped (Decimal text, set as
//     list), the keyword map for models, dataclasses and Send (which
//     msgpack writes as [node, arg]), and bytes rebuilt from their hex. A
//     record with both arguments and keywords of any other class becomes
//     {"args": [...], "kwargs": {...}}. (Namedtuples need no record there:
//     Python's json module writes them as lists.)
//
// Map keys built from maps (a map used as a key of a map used as a key)
// double in text at each level; past a budget of eight times the blob's
// size such a blob is a *MalformedError, since no serializer writes one.
package codec

import (
	"strconv"
	"strings"

	"github.com/historyd/historyd/langgraph/format"
)

// Limits bound what one decode may cost, so a crafted blob cannot exhaust
// memory or stack.
type Limits struct {
	// MaxDepth is the deepest nesting of lists, maps and extension payloads
	// allowed: a top-level list is at depth 1, a map inside it at depth 2,
	// and an extension's (module, class, data) tuple counts as one level,
	// as does each dimension of a numpy array. Zero or negative means
	// format.DefaultMaxDepth. Decoding recurses once per level, so keep it modest.
	MaxDepth int
	// MaxBytes is the largest encoded blob accepted. Zero or negative means
	// DefaultMaxBytes. Decoded data can take several times the blob's size
	// in memory (a one-byte msgpack nil is a 16-byte interface value), so
	// this is the knob that bounds memory.
	MaxBytes int
}

// DefaultMaxBytes is the blob size limit used when Limits.MaxBytes is
// zero: 256 MiB.
const DefaultMaxBytes = 256 << 20

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = format.DefaultMaxDepth
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Decode decodes one stored value of the given LangGraph blob type into plain data.
// ok is false when the type is "empty" (the channel has no value).
//
// The result never aliases data, so callers may reuse their buffer.
func Decode(blobType string, data []byte, lim Limits) (v any, ok bool, err error) {
	lim = lim.withDefaults()
	switch blobType {
	case format.TypeEmpty:
		return nil, false, nil
	case format.TypeNull:
		return nil, true, nil
	}
	if err := checkDecodable(blobType, data, lim); err != nil {
		return nil, false, err
	}
	switch blobType {
	case format.TypeMsgpack:
		v, err = decodeMsgpack(data, lim)
	case format.TypeJSON:
		v, err = decodeJSON(data, lim)
	default: // bytes, bytearray
		v = append([]byte{}, data...)
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// checkDecodable refuses blob types that are never decoded and blobs over
// MaxBytes, before any byte of the blob is looked at.
func checkDecodable(blobType string, data []byte, lim Limits) error {
	switch blobType {
	case format.TypeMsgpack, format.TypeJSON, format.TypeBytes, format.TypeBytearray:
	case format.TypePickle:
		return &UnsupportedError{Format: blobType, Offset: -1,
			Reason: "pickle can only be read by running Python code; historyd does not decode it"}
	default:
		if i := strings.IndexByte(blobType, '+'); i >= 0 {
			return &UnsupportedError{Format: blobType, Offset: -1,
				Reason: "encrypted with cipher " + strconv.Quote(blobType[i+1:]) + "; historyd holds no keys"}
		}
		return &UnsupportedError{Format: blobType, Offset: -1, Reason: "unknown blob type"}
	}
	if len(data) > lim.MaxBytes {
		return &LimitError{Limit: "MaxBytes", Max: lim.MaxBytes, Got: len(data), Offset: -1}
	}
	return nil
}

// ScanMessages reads a messages channel value (a list of LangChain
// messages) and counts messages and human messages without building the
// others: in msgpack they are stepped over, only their "type" read, and for
// human messages their text.
//
// A message is human when its "type" is "human" (after the JSON mapping of
// Decode, which gives LangChain.js messages their type from the class name).
// Its text is LangChain's BaseMessage.text: string content as is, or the
// concatenation of the string blocks and the {"type": "text", "text": "..."}
// blocks of list content.
//
// An "empty" blob (the channel has no value yet) has no messages; a
// DeltaChannel snapshot reads as the list it holds. Any other value that is
// not a list is a *MalformedError. Skipped messages are only checked for
// well-formed structure, so ScanMessages may accept a blob that Decode
// rejects, never the other way round. JSON has no lengths to skip by, so a
// "json" value is decoded whole (as Decode would) and then read.
func ScanMessages(blobType string, data []byte, lim Limits) (Messages, error) {
	return ReadMessages(blobType, data, lim, Humans)
}

// CountMessages is ScanMessages without the texts: Humans stays nil and
// HumanCount says how many there are. No human message's content is
// decoded, so counting every checkpoint of a long thread builds no text.
func CountMessages(blobType string, data []byte, lim Limits) (Messages, error) {
	return ReadMessages(blobType, data, lim, CountOnly)
}

// ReadMessages reads a messages channel value as ScanMessages does, keeping
// what mode asks for in Messages.List.
func ReadMessages(blobType string, data []byte, lim Limits, mode ReadMode) (Messages, error) {
	return ReadMessagesKnowing(blobType, data, lim, mode, nil)
}

// ReadMessagesKnowing is ReadMessages for a reader that already knows some
// human messages by id: a human message whose id known reports is kept
// with Known set and neither its text nor its marks read. A long thread's
// every messages version holds every earlier question again, so turn
// derivation reads each question's text once, not once per version.
// known may be nil; it is only consulted for msgpack values (JSON has no
// lengths to skip by and is decoded whole).
func ReadMessagesKnowing(blobType string, data []byte, lim Limits, mode ReadMode, known func(id string) bool) (Messages, error) {
	lim = lim.withDefaults()
	switch blobType {
	case format.TypeEmpty:
		return Messages{}, nil
	case format.TypeNull:
		return Messages{}, &MalformedError{Format: blobType, Offset: 0, Reason: "messages value is null, not a list"}
	}
	if err := checkDecodable(blobType, data, lim); err != nil {
		return Messages{}, err
	}
	switch blobType {
	case format.TypeMsgpack:
		return scanMsgpackMessages(data, lim, mode, known)
	case format.TypeJSON:
		v, err := decodeJSON(data, lim)
		if err != nil {
			return Messages{}, err
		}
		return messagesFromValue(blobType, v, mode)
	default:
		return Messages{}, &MalformedError{Format: blobType, Offset: 0, Reason: "messages value is raw bytes, not a list"}
	}
}

// messagesFromValue derives Messages from an already decoded value.
func messagesFromValue(format string, v any, mode ReadMode) (Messages, error) {
	list, ok := v.([]any)
	if !ok {
		return Messages{}, &MalformedError{Format: format, Offset: 0,
			Reason: "messages value is " + kindOf(v) + ", not a list"}
	}
	out := Messages{Count: len(list)}
	for _, item := range list {
		m, _ := item.(map[string]any)
		out.add(decodedMessage(m), mode)
	}
	return out, nil
}

// messageText is LangChain's BaseMessage.text over decoded content.
func messageText(content any) string {
	switch c := content.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, block := range c {
			switch blk := block.(type) {
			case string:
				b.WriteString(blk)
			case map[string]any:
				if t, _ := blk["type"].(string); t == "text" {
					if s, ok := blk["text"].(string); ok {
						b.WriteString(s)
					}
				}
			}
		}
		return b.String()
	}
	return ""
}

// kindOf names a decoded value's kind for error messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int64, uint64, float64:
		return "a number"
	case string:
		return "a string"
	case []byte:
		return "bytes"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return "an unknown value"
}

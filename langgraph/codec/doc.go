// Package codec decodes the values LangGraph checkpointers store: Python's
// msgpack serializer with its extension types, LangChain.js JSON, and the raw
// blob types, into plain Go data that historyd can serve as JSON.
//
// The reader has four jobs:
//
//   - values: Decode turns one stored value into plain data, as described
//     below (files values*.go).
//   - the checkpoint envelope: ParseCheckpoint, ChannelValue, Field,
//     NormalizeVersion and ParseMetadata read a checkpoint's bookkeeping
//     (timestamps, channel versions, metadata) without its values
//     (checkpoint*.go).
//   - messages: ScanMessages, CountMessages, ReadMessages, AppendReader and
//     ReadMessageWrite read a messages channel without building every
//     message (messages*.go).
//   - projection: EachKey, EachEntry and Walk hand a value's parts to the
//     caller as they are read, so that it can be served without being
//     built (project*.go).
//
// All four read msgpack through one token reader (internal/mptoken) and
// report failures as the errors in errors.go. The blob type names and the
// nesting limit they share with the writers are langgraph/format's.
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

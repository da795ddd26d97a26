package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/historyd/historyd/langgraph/codec/internal/mptoken"
	"github.com/historyd/historyd/langgraph/format"
)

// Checkpoint is what historyd reads of a serialized checkpoint besides its
// channel values: when it was written and which version of each channel it
// holds.
type Checkpoint struct {
	// TS is the checkpoint's "ts"; zero when it has none or it is not
	// RFC 3339 (turns only show it, so an odd one does not fail a read).
	TS time.Time
	// Versions maps each channel to its version, normalized by the one
	// rule historyd has for versions (see NormalizeVersion). A channel whose
	// version is null or absent has no entry.
	Versions map[string]string
	// Updated lists the checkpoint's "updated_channels": the channels the
	// step that wrote it updated. Checkpoint format 4 (Python LangGraph)
	// records it; UpdatedKnown is false where it is absent (LangGraph.js,
	// older formats) or not a list of strings.
	Updated      []string
	UpdatedKnown bool
}

// AtRest reports whether LangGraph has nothing left to run from the
// checkpoint: the step that wrote it triggered no node. known is false when
// the checkpoint does not record its updated channels.
//
// LangGraph runs a node when a channel it is triggered by was updated;
// StateGraph and the functional API trigger nodes only through channels of
// their own, named "__start__" (the graph's input), "branch:to:<node>"
// (edges), "join:<sources>:<node>" (edges waiting on several nodes) and
// "__pregel_tasks" (Send and tasks), so a step that updated none of them
// ends the run. A run stopped by an interrupt is not at rest: its pending
// node is triggered still.
func (c Checkpoint) AtRest() (rest, known bool) {
	if !c.UpdatedKnown {
		return false, false
	}
	for _, ch := range c.Updated {
		if ch == "__start__" || ch == "__pregel_tasks" || strings.HasPrefix(ch, "branch:to:") || strings.HasPrefix(ch, "join:") {
			return false, true
		}
	}
	return true, true
}

// ParseCheckpoint reads "ts" and "channel_versions" out of a serialized
// checkpoint without decoding its channel values, which hold the whole
// conversation and are most of the bytes. blobType is the serializer the
// checkpoint was written with: format.TypeMsgpack (Python's SqliteSaver) or
// format.TypeJSON (LangChain.js's SqliteSaver, and the projection of a
// PostgresSaver checkpoint row that store/postgres selects). Only the
// versions of the channels keep accepts are kept; nil keeps all.
//
// msgpack is walked by its headers alone, without recursion, so a corrupt
// or hostile blob cannot exhaust the stack however deeply it nests.
func ParseCheckpoint(blobType string, data []byte, keep func(channel string) bool) (Checkpoint, error) {
	if keep == nil {
		keep = func(string) bool { return true }
	}
	switch blobType {
	case format.TypeMsgpack:
		return msgpackCheckpoint(data, keep)
	case format.TypeJSON:
		return jsonCheckpoint(data, keep)
	}
	return Checkpoint{}, unsupportedCheckpoint(blobType)
}

// ChannelValue returns the encoded channel_values[channel] of a serialized
// checkpoint, still in the checkpoint's own serializer, as a sub-slice of
// data. ok is false when the checkpoint holds no value for the channel. A
// repeated key counts as Python's dict would keep it: the last one.
func ChannelValue(blobType string, data []byte, channel string) (val []byte, ok bool, err error) {
	switch blobType {
	case format.TypeMsgpack:
		return msgpackChannelValue(data, channel)
	case format.TypeJSON:
		var c struct {
			ChannelValues map[string]json.RawMessage `json:"channel_values"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, false, jsonMalformed("checkpoint", err)
		}
		v, ok := c.ChannelValues[channel]
		return v, ok, nil
	}
	return nil, false, unsupportedCheckpoint(blobType)
}

// NormalizeVersion is historyd's one rule for channel versions, whichever
// saver wrote them. v is a version as Decode yields it: Python writes
// strings ("00000000000000000000000000000004.0.51847..."), LangChain.js and
// old Python numbers (1, 2, 3). A string is kept as it is; an integer
// becomes its decimal text and any other number its shortest round-trip
// decimal text, so 3 and 3.0 are one version, "3"; nil means the channel
// has no version (ok false), as if it were absent. Anything else is an
// error: no saver writes it.
func NormalizeVersion(v any) (version string, ok bool, err error) {
	switch x := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return x, true, nil
	case int64:
		return strconv.FormatInt(x, 10), true, nil
	case uint64:
		return strconv.FormatUint(x, 10), true, nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true, nil
	}
	return "", false, fmt.Errorf("version is %s, neither a string nor a number", kindOf(v))
}

// parseVersions reads a channel_versions map on its own, as a JSON object
// (how PostgreSQL's jsonb holds it), through NormalizeVersion. Empty data
// and JSON null are a checkpoint without versions.
func parseVersions(data []byte, keep func(channel string) bool) (map[string]string, error) {
	if keep == nil {
		keep = func(string) bool { return true }
	}
	if len(data) == 0 || string(data) == "null" {
		return map[string]string{}, nil
	}
	out := map[string]string{}
	err := withJSONDecoder(data, func(d *jsontext.Decoder) error {
		if err := readJSONVersions(d, keep, out); err != nil {
			return err
		}
		return fieldsEnd(d, "channel_versions")
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Metadata is what historyd reads of a checkpoint's metadata.
type Metadata struct {
	// Step is LangGraph's super-step number (-1 for the input checkpoint
	// of a run, -2 for the stub of a durability="exit" run); HasStep is
	// false when the metadata has none.
	Step    int64
	HasStep bool
	// Source is what made the checkpoint: "input", "loop", "update",
	// "fork"; empty when not recorded.
	Source string
	// Delta says the metadata marks a graph with DeltaChannel channels
	// ("counters_since_delta_snapshot" or "delta_writes_versioned"), whose
	// values are rebuilt from writes rather than stored at every
	// checkpoint.
	Delta bool
}

// ParseMetadata reads a checkpoint's metadata: JSON (PostgreSQL's jsonb,
// current SqliteSaver files) or msgpack (older Python SqliteSaver files).
// An empty blobType says the format is not recorded, as in SqliteSaver's
// metadata column: it is then told by the first byte, since a JSON object
// starts with "{" and a msgpack map never does. Empty data is metadata with
// nothing recorded.
func ParseMetadata(blobType string, data []byte) (Metadata, error) {
	if len(data) == 0 {
		return Metadata{}, nil
	}
	if blobType == "" {
		blobType = format.TypeMsgpack
		if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
			blobType = format.TypeJSON
		}
	}
	var fields map[string]any
	switch blobType {
	case format.TypeJSON:
		fields = make(map[string]any, 4)
		err := eachJSONField(data, "metadata", func(d *jsontext.Decoder, name string) (bool, error) {
			switch name {
			case "step", "source":
				v, err := readJSONValue(d, fmt.Sprintf("metadata %q", name))
				fields[name] = v
				return false, err
			case deltaMarkers[0], deltaMarkers[1]:
				fields[name] = true
			}
			return true, nil
		})
		if err != nil {
			return Metadata{}, err
		}
	case format.TypeMsgpack:
		var err error
		if fields, err = msgpackMetadata(data); err != nil {
			return Metadata{}, err
		}
	default:
		return Metadata{}, &UnsupportedError{Format: blobType, Offset: -1, Reason: "checkpoint metadata: unknown serializer"}
	}
	var md Metadata
	switch s := fields["step"].(type) {
	case int64:
		md.Step, md.HasStep = s, true
	case float64:
		md.Step, md.HasStep = int64(s), s == float64(int64(s))
	}
	md.Source, _ = fields["source"].(string)
	for _, k := range deltaMarkers {
		if _, ok := fields[k]; ok {
			md.Delta = true
		}
	}
	return md, nil
}

// deltaMarkers are the metadata keys LangGraph writes for graphs with
// DeltaChannel channels.
var deltaMarkers = []string{"counters_since_delta_snapshot", "delta_writes_versioned"}

// unsupportedCheckpoint refuses a checkpoint serialized in a way historyd
// does not read. The reason says what the name means, so an operator knows
// which saver setting is behind it.
func unsupportedCheckpoint(typ string) error {
	reason := "unknown serializer"
	switch {
	case typ == format.TypePickle:
		reason = "the checkpoint was pickled (the saver's pickle fallback); only Python can read it"
	case strings.Contains(typ, "+"):
		reason = "the checkpoint is encrypted; historyd holds no keys"
	}
	return &UnsupportedError{Format: typ, Offset: -1, Reason: "whole checkpoint: " + reason}
}

// parseTS reads a checkpoint timestamp. Python writes
// "2026-11-30T07:30:08.817845+00:00", JavaScript "2026-11-30T07:30:54.173Z";
// both are RFC 3339.
func parseTS(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// --- JSON ---

func jsonCheckpoint(data []byte, keep func(string) bool) (Checkpoint, error) {
	// channel_values is stepped over unread.
	out := Checkpoint{Versions: map[string]string{}}
	err := eachJSONField(data, "checkpoint", func(d *jsontext.Decoder, name string) (bool, error) {
		switch name {
		case "ts":
			out.TS = time.Time{}
			if d.PeekKind() != '"' {
				return true, nil
			}
			tok, err := d.ReadToken()
			if err != nil {
				return false, fieldsMalformed("checkpoint ts", err)
			}
			out.TS = parseTS(tok.String())
			return false, nil
		case "channel_versions":
			clear(out.Versions)
			return false, readJSONVersions(d, keep, out.Versions)
		case "updated_channels":
			list, ok, err := readJSONStrings(d, "updated_channels")
			out.Updated, out.UpdatedKnown = list, ok
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return Checkpoint{}, err
	}
	return out, nil
}

// jsonMalformed turns a decoding failure of part what into the error the
// layers above map to data loss, keeping the offset where JSON knows it.
func jsonMalformed(what string, err error) error {
	off := -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = int(syn.Offset)
	case errors.As(err, &typ):
		off = int(typ.Offset)
	}
	return &MalformedError{Format: format.TypeJSON, Offset: off, Reason: what + ": " + err.Error()}
}

// --- msgpack ---

// checkpointLimits bound the walk over a whole serialized checkpoint: its
// size is what the saver wrote, so only nesting is limited.
var checkpointLimits = Limits{MaxBytes: 1<<31 - 1}.withDefaults()

// eachField walks the map at pos, at slot depth, calling fn with the key of
// each entry whose key is a string. fn either reads the entry's value
// (returning true) or leaves it to be stepped over. Entries under other
// keys are stepped over: only string keys name checkpoint fields and
// channels.
func (d *mpDecoder) eachField(depth int, what string, fn func(key []byte) (bool, error)) error {
	d.Started()
	t, err := d.ReadToken()
	if err != nil {
		return err
	}
	if t.Kind != mptoken.Map {
		return d.Malformed(t.Off, "%s is %s, not a map", what, mptoken.What(t))
	}
	if depth+1 > d.maxDepth {
		return depthError(d.maxDepth, depth+1, t.Off)
	}
	for range t.N {
		if !d.atStr() {
			if err := d.skipFree(2); err != nil {
				return err
			}
			continue
		}
		d.Started()
		k, err := d.ReadToken()
		if err != nil {
			return err
		}
		read, err := fn(d.Buf[k.Start : k.Start+k.N])
		if err != nil {
			return err
		}
		if !read {
			if err := d.skipFree(1); err != nil {
				return err
			}
		}
	}
	return nil
}

// skipFree steps over n values by their headers alone, counting the values
// still owed instead of keeping a stack: a value nested far deeper than any
// decoder would go costs no memory to step over. The values historyd reads
// out of it are decoded with the usual limits.
func (d *mpDecoder) skipFree(n int) error {
	for owed := n; owed > 0; owed-- {
		d.Started()
		t, err := d.ReadToken()
		if err != nil {
			return err
		}
		switch t.Kind {
		case mptoken.Array:
			owed += t.N
		case mptoken.Map:
			owed += 2 * t.N
		}
	}
	return nil
}

// atStr reports whether the value at pos is a str.
func (d *mpDecoder) atStr() bool {
	if d.Pos >= d.End {
		return false
	}
	c := d.Buf[d.Pos]
	return (c >= 0xa0 && c <= 0xbf) || (c >= 0xd9 && c <= 0xdb)
}

// atNil reports whether the value at pos is nil.
func (d *mpDecoder) atNil() bool { return d.Pos < d.End && d.Buf[d.Pos] == 0xc0 }

// atArray reports whether the value at pos is an array.
func (d *mpDecoder) atArray() bool {
	if d.Pos >= d.End {
		return false
	}
	c := d.Buf[d.Pos]
	return (c >= 0x90 && c <= 0x9f) || c == 0xdc || c == 0xdd
}

func msgpackCheckpoint(data []byte, keep func(string) bool) (Checkpoint, error) {
	d := newMsgpackDecoder(data, checkpointLimits)
	var out Checkpoint
	err := d.eachField(0, "checkpoint", func(key []byte) (bool, error) {
		switch string(key) {
		case "ts":
			if !d.atStr() {
				return false, nil
			}
			d.Started()
			t, err := d.ReadToken()
			if err != nil {
				return true, err
			}
			out.TS = parseTS(string(d.Buf[t.Start : t.Start+t.N]))
			return true, nil
		case "updated_channels":
			if !d.atArray() {
				return false, nil
			}
			v, err := d.decodeValue(1)
			if err != nil {
				return true, err
			}
			out.Updated, out.UpdatedKnown = nil, true
			for _, ch := range v.([]any) {
				name, ok := ch.(string)
				if !ok {
					out.Updated, out.UpdatedKnown = nil, false
					break
				}
				out.Updated = append(out.Updated, name)
			}
			return true, nil
		case "channel_versions":
			// A repeated key replaces the earlier one, as in the dict
			// Python would decode.
			out.Versions = map[string]string{}
			if d.atNil() {
				return false, nil
			}
			return true, d.eachField(1, "channel_versions", func(ch []byte) (bool, error) {
				if !keep(string(ch)) {
					return false, nil
				}
				at := d.Pos
				v, err := d.decodeValue(2)
				if err != nil {
					return true, err
				}
				version, ok, err := NormalizeVersion(v)
				if err != nil {
					return true, d.Malformed(at, "channel_versions[%q]: %v", ch, err)
				}
				if ok {
					out.Versions[string(ch)] = version
				}
				return true, nil
			})
		}
		return false, nil
	})
	if err == nil && d.Pos != d.End {
		err = d.Malformed(d.Pos, "%d trailing bytes after the checkpoint", d.End-d.Pos)
	}
	if err != nil {
		return Checkpoint{}, err
	}
	if out.Versions == nil {
		out.Versions = map[string]string{}
	}
	return out, nil
}

func msgpackChannelValue(data []byte, channel string) ([]byte, bool, error) {
	d := newMsgpackDecoder(data, checkpointLimits)
	var (
		val   []byte
		found bool
	)
	err := d.eachField(0, "checkpoint", func(key []byte) (bool, error) {
		if string(key) != "channel_values" {
			return false, nil
		}
		val, found = nil, false
		if d.atNil() {
			return false, nil
		}
		return true, d.eachField(1, "channel_values", func(ch []byte) (bool, error) {
			if string(ch) != channel {
				return false, nil
			}
			start := d.Pos
			if err := d.skipFree(1); err != nil {
				return true, err
			}
			val, found = data[start:d.Pos], true
			return true, nil
		})
	})
	if err != nil {
		return nil, false, err
	}
	return val, found, nil
}

func msgpackMetadata(data []byte) (map[string]any, error) {
	d := newMsgpackDecoder(data, checkpointLimits)
	fields := map[string]any{}
	err := d.eachField(0, "metadata", func(key []byte) (bool, error) {
		k := string(key)
		switch k {
		case "step", "source":
			v, err := d.decodeValue(1)
			fields[k] = v
			return true, err
		}
		for _, m := range deltaMarkers {
			if k == m {
				fields[k] = true
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return fields, nil
}

// Field returns the encoded value of a map's entry under key: the stored
// value in data (of blobType, as Decode takes it), still encoded, as a
// value of the same type. ok is false when the value is not a map (or
// JSON object), or has no such key; the last of repeated keys counts, as
// Python's dict would keep it. The value's other entries are stepped over
// by their headers, not decoded. A msgpack result is a sub-slice of data.
func Field(blobType string, data []byte, key string) (val []byte, ok bool, err error) {
	switch blobType {
	case format.TypeMsgpack:
		if len(data) == 0 {
			return nil, false, nil
		}
		if c := data[0]; !(c >= 0x80 && c <= 0x8f) && c != 0xde && c != 0xdf {
			return nil, false, nil // not a map
		}
		d := newMsgpackDecoder(data, checkpointLimits)
		err = d.eachField(0, "value", func(k []byte) (bool, error) {
			if string(k) != key {
				return false, nil
			}
			start := d.Pos
			if err := d.skipFree(1); err != nil {
				return true, err
			}
			val, ok = data[start:d.Pos], true
			return true, nil
		})
	case format.TypeJSON:
		if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			return nil, false, nil
		}
		err = eachJSONField(data, "value", func(d *jsontext.Decoder, name string) (bool, error) {
			if name != key {
				return true, nil
			}
			v, err := d.ReadValue()
			if err != nil {
				return false, fieldsMalformed("value", err)
			}
			val, ok = bytes.Clone(v), true
			return false, nil
		})
	case format.TypeEmpty, format.TypeNull:
		return nil, false, nil
	default:
		return nil, false, checkDecodable(blobType, data, Limits{}.withDefaults())
	}
	if err != nil {
		return nil, false, err
	}
	return val, ok, nil
}

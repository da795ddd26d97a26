package client

import (
	"fmt"

	gojson "github.com/goccy/go-json"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// ValueFormat is how state values travel from historyd to the client.
type ValueFormat int

const (
	// JSONValues, the default, has historyd send each value as JSON text
	// (StateEntry.value_json), produced on the server straight from the
	// stored bytes, which the client parses with a fast JSON parser
	// (github.com/goccy/go-json). It is several times cheaper for both
	// sides than a google.protobuf.Value tree, and gives the same values.
	JSONValues ValueFormat = iota
	// ProtoValues has historyd send each value as a google.protobuf.Value
	// (StateEntry.value), as servers that predate value_json do: what a
	// client talking to such a server needs.
	ProtoValues
)

// String returns the format's name.
func (f ValueFormat) String() string {
	switch f {
	case JSONValues:
		return "json"
	case ProtoValues:
		return "proto"
	}
	return fmt.Sprintf("ValueFormat(%d)", int(f))
}

// wireFormat is the value_format to ask for.
func (o ReadConfig) wireFormat() historydv1.ValueFormat {
	if o.ValueFormat == ProtoValues {
		return historydv1.ValueFormat_VALUE_FORMAT_PROTO
	}
	return historydv1.ValueFormat_VALUE_FORMAT_JSON
}

// entryValue fills out's Value (and JSON) from a wire entry, as o asks. A
// missing value (a server that sent the entry without one) reads as null,
// as protobuf's own JSON mapping does.
func entryValue(e *historydv1.StateEntry, o ReadConfig, out *Entry) error {
	if raw := e.GetValueJson(); raw != nil {
		out.JSON = raw
		if o.RawValues {
			return nil
		}
		if err := gojson.Unmarshal(raw, &out.Value); err != nil {
			return fmt.Errorf("value_json does not parse: %w", err)
		}
		return nil
	}
	if v := e.GetValue(); v != nil {
		out.Value = v.AsInterface()
	}
	return nil
}

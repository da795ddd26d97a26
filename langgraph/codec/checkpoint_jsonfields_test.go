package codec

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/historyd/historyd/langgraph/format"
)

// referenceJSONCheckpoint reads a JSON checkpoint the plain way, decoding
// it into Go maps with encoding/json: the oracle ParseCheckpoint's
// token walk is held to.
func referenceJSONCheckpoint(data []byte) (Checkpoint, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return Checkpoint{}, err
	}
	out := Checkpoint{Versions: map[string]string{}}
	var ts string
	if json.Unmarshal(top["ts"], &ts) == nil {
		out.TS = parseTS(ts)
	}
	if raw, ok := top["updated_channels"]; ok {
		var list []string
		if json.Unmarshal(raw, &list) == nil && list != nil {
			out.Updated, out.UpdatedKnown = list, true
		}
	}
	if raw, ok := top["channel_versions"]; ok {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return Checkpoint{}, err
		}
		for ch, r := range m {
			v, err := decodeJSON(r, Limits{}.withDefaults())
			if err != nil {
				return Checkpoint{}, err
			}
			version, ok, err := NormalizeVersion(v)
			if err != nil {
				return Checkpoint{}, err
			}
			if ok {
				out.Versions[ch] = version
			}
		}
	}
	return out, nil
}

// FuzzParseCheckpointJSON holds the token walk over JSON checkpoints to
// encoding/json's reading of the same bytes: the same error or not, and
// the same timestamp, versions and updated channels.
func FuzzParseCheckpointJSON(f *testing.F) {
	for _, seed := range []string{
		`{"v":4,"ts":"2026-11-30T07:30:08.817845+00:00","id":"1","channel_values":{"messages":[{"a":[1,2,{"b":null}]}]},"channel_versions":{"messages":"00000000000000000000000000000004.0.5","tool_state":3,"x":null,"y":2.0},"updated_channels":["messages","branch:to:agent"]}`,
		`{"ts":17,"channel_versions":{"a":"1","a":null},"updated_channels":null}`,
		`{"channel_versions":null,"updated_channels":["a",1]}`,
		`{"channel_versions":{"a":true}}`,
		`{"channel_versions":{"a":1e400}}`,
		`{"ts":"x","ts":"2026-11-30T07:30:54.173Z"} `,
		`null`,
		`[1]`,
		`{"a":1}x`,
		`{"channel_versions":{"a":"1"`,
		"{\"channel_versions\":{\"\xff\":\"1\"}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseCheckpoint(format.TypeJSON, data, nil)
		want, wantErr := referenceJSONCheckpoint(data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v; encoding/json's reading: %v", data, err, wantErr)
		}
		if err != nil {
			if _, ok := err.(*MalformedError); !ok {
				t.Fatalf("%q: %T %v; want a MalformedError", data, err, err)
			}
			return
		}
		if !got.TS.Equal(want.TS) || !maps.Equal(got.Versions, want.Versions) || got.UpdatedKnown != want.UpdatedKnown ||
			(got.UpdatedKnown && !slices.Equal(got.Updated, want.Updated)) {
			t.Fatalf("%q:\n got %+v\nwant %+v", data, got, want)
		}
	})
}

// TestParseMetadataJSONFields checks the metadata walk: step and source
// read, the DeltaChannel markers seen whatever their value, everything
// else stepped over, a repeated field's last value counting.
func TestParseMetadataJSONFields(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Metadata
	}{
		{`{"source":"loop","step":3,"writes":{"agent":{"messages":[1,2,3]}},"parents":{}}`, Metadata{Step: 3, HasStep: true, Source: "loop"}},
		{`{"step":-1,"source":"input","counters_since_delta_snapshot":{"messages":2}}`, Metadata{Step: -1, HasStep: true, Source: "input", Delta: true}},
		{`{"step":2.5,"delta_writes_versioned":null}`, Metadata{Step: 2, Delta: true}}, // not a whole step: HasStep false
		{`{"step":1,"step":4,"source":7}`, Metadata{Step: 4, HasStep: true}},
		{`null`, Metadata{}},
	} {
		got, err := ParseMetadata(format.TypeJSON, []byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("ParseMetadata(%s) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`{"step":`, `[1]`, `{"step":1}}`, `{"source":"a\u00"}`} {
		var me *MalformedError
		if _, err := ParseMetadata(format.TypeJSON, []byte(bad)); err == nil || !asMalformed(err, &me) {
			t.Errorf("ParseMetadata(%s): %v; want a MalformedError", bad, err)
		}
	}
}

func asMalformed(err error, me **MalformedError) bool {
	m, ok := err.(*MalformedError)
	*me = m
	return ok
}

package client

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// benchState is a 4 kB state of four keys, as the benchmark's small
// threads hold, in both value formats.
func benchState(b *testing.B, asJSON bool) []byte {
	ts := &historydv1.TurnState{Turn: 3, CheckpointId: "1f0c-000012", Question: "q", Entries: map[string]*historydv1.StateEntry{}}
	for k := range 4 {
		var coords []any
		for i := range 40 {
			coords = append(coords, []any{-3.1 + float64(i)/1000, 52.4 + float64(i)/3000})
		}
		v := map[string]any{"type": "Polygon", "coordinates": []any{coords}}
		e := &historydv1.StateEntry{Tool: proto.String("sketch"), Seq: proto.Int64(int64(k)), Turn: proto.Int32(3)}
		if asJSON {
			e.ValueJson = []byte(fmt.Sprintf(`{"type":"Polygon","coordinates":[%s]}`, mustJSON(coords)))
		} else {
			e.Value, _ = structpb.NewValue(v)
		}
		ts.Entries[fmt.Sprintf("k%d", k)] = e
	}
	out, err := proto.Marshal(&historydv1.SnapshotResponse{Result: &historydv1.SnapshotResponse_State{State: ts}, Total: 3})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func mustJSON(coords []any) string {
	s := "["
	for i, c := range coords {
		if i > 0 {
			s += ","
		}
		p := c.([]any)
		s += fmt.Sprintf("[%v,%v]", p[0], p[1])
	}
	return s + "]"
}

// BenchmarkDecodeAnswer is what a Snapshot answer costs the Go client to
// read: unmarshal the response, then convert the turn, in each format.
func BenchmarkDecodeAnswer(b *testing.B) {
	for _, f := range []struct {
		name string
		json bool
		cfg  ReadConfig
	}{{"json", true, ReadConfig{}}, {"json-raw", true, ReadConfig{RawValues: true}}, {"proto", false, ReadConfig{ValueFormat: ProtoValues}}} {
		b.Run(f.name, func(b *testing.B) {
			wire := benchState(b, f.json)
			b.SetBytes(int64(len(wire)))
			b.ReportAllocs()
			for range b.N {
				var r historydv1.SnapshotResponse
				if err := proto.Unmarshal(wire, &r); err != nil {
					b.Fatal(err)
				}
				if _, err := fromTurnState(r.GetState(), r.GetNumbering(), f.cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package client_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// Both value formats give the same values; raw values give the JSON text.
func TestValueFormats(t *testing.T) {
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "demo"}, demo)
	c := serve(t, mem).dial(t)
	ctx := context.Background()

	asJSON, err := c.Snapshots(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	asProto, err := c.Snapshots(ctx, "demo", client.WithValueFormat(client.ProtoValues))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := c.Snapshots(ctx, "demo", client.WithRawValues())
	if err != nil {
		t.Fatal(err)
	}
	if len(asJSON.Turns) != 4 || len(asProto.Turns) != 4 || len(raw.Turns) != 4 {
		t.Fatalf("turns: %d, %d, %d; want 4 each", len(asJSON.Turns), len(asProto.Turns), len(raw.Turns))
	}
	for i := range asJSON.Turns {
		for k, want := range asProto.Turns[i].State {
			got := asJSON.Turns[i].State[k]
			if !reflect.DeepEqual(got.Value, want.Value) || got.Seq != want.Seq || got.Tool != want.Tool || got.Turn != want.Turn {
				t.Errorf("turn %d key %q: JSON %+v, proto %+v", i+1, k, got, want)
			}
			if want.JSON != nil || got.JSON == nil {
				t.Errorf("turn %d key %q: JSON text %q with proto values, %q with JSON values", i+1, k, want.JSON, got.JSON)
			}
			r := raw.Turns[i].State[k]
			var parsed any
			if r.Value != nil || json.Unmarshal(r.JSON, &parsed) != nil || !reflect.DeepEqual(parsed, want.Value) {
				t.Errorf("turn %d key %q: raw value %v, text %q; want no value and text of %v", i+1, k, r.Value, r.JSON, want.Value)
			}
		}
	}
	shape := asJSON.Turns[3].State["shape"].Value
	if !reflect.DeepEqual(shape, map[string]any{"type": "Point", "coordinates": []any{-2.7, 51.6}}) {
		t.Errorf("turn 4 shape = %#v", shape)
	}
}

package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// checkValueFormats asks for every retained turn of a thread's channel in
// both value formats and holds them equal: each entry's value_json, parsed,
// is its value, and every other field is the same. Every thread the
// conformance tests serve goes through it, so the two formats are proven
// equal on the whole corpus of real LangGraph threads.
func checkValueFormats(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread, channel string) {
	t.Helper()
	asProto, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread, Channel: channel})
	if err != nil {
		t.Fatalf("Snapshots: %v", err)
	}
	asJSON, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread, Channel: channel,
		ValueFormat: historydv1.ValueFormat_VALUE_FORMAT_JSON})
	if err != nil {
		t.Fatalf("Snapshots(value_format: JSON): %v", err)
	}
	if len(asJSON.GetTurns()) != len(asProto.GetTurns()) || asJSON.GetTotal() != asProto.GetTotal() {
		t.Fatalf("value_format JSON: %d turns of %d; the default: %d of %d",
			len(asJSON.GetTurns()), asJSON.GetTotal(), len(asProto.GetTurns()), asProto.GetTotal())
	}
	entries := 0
	for n, want := range asProto.GetTurns() {
		got := asJSON.GetTurns()[n]
		if got == nil {
			t.Errorf("turn %d: missing with value_format JSON", n)
			continue
		}
		if len(got.GetEntries()) != len(want.GetEntries()) {
			t.Errorf("turn %d: %d entries with value_format JSON, %d without", n, len(got.GetEntries()), len(want.GetEntries()))
		}
		for k, we := range want.GetEntries() {
			ge := got.GetEntries()[k]
			if err := sameEntry(ge, we); err != nil {
				t.Errorf("turn %d key %q: %v", n, k, err)
			}
			entries++
		}
	}
	if entries == 0 && len(asProto.GetTurns()) > 0 {
		t.Logf("%s: no entries to compare in %d turns", channel, len(asProto.GetTurns()))
	}
}

// sameEntry reports how got, an entry sent with value_format JSON, differs
// from want, the same entry sent as a google.protobuf.Value.
func sameEntry(got, want *historydv1.StateEntry) error {
	if got == nil {
		return fmt.Errorf("missing with value_format JSON")
	}
	if got.GetValue() != nil {
		return fmt.Errorf("value_format JSON sent value %v", got.GetValue())
	}
	var parsed any
	if err := json.Unmarshal(got.GetValueJson(), &parsed); err != nil {
		return fmt.Errorf("value_json %q does not parse: %v", shorten(string(got.GetValueJson())), err)
	}
	v, err := structpb.NewValue(parsed)
	if err != nil {
		return err
	}
	if !proto.Equal(v, want.GetValue()) {
		return fmt.Errorf("value_json %s, value %v", shorten(string(got.GetValueJson())), shorten(want.GetValue().String()))
	}
	rest := proto.Clone(got).(*historydv1.StateEntry)
	rest.ValueJson = nil
	wantRest := proto.Clone(want).(*historydv1.StateEntry)
	wantRest.Value = nil
	if !proto.Equal(rest, wantRest) {
		return fmt.Errorf("the other fields differ: %v, want %v", rest, wantRest)
	}
	return nil
}

package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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
	checkDiffFormats(t, ctx, c, thread, channel, slices.Sorted(maps.Keys(asProto.GetTurns())))
}

// checkDiffFormats holds Diff's two value formats equal the same way, for
// each retained turn against the one before it (at most maxDiffs pairs a
// thread): the same changes, entries as sameEntry compares them, and each
// patch value's JSON text, parsed, its Value.
func checkDiffFormats(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, thread, channel string, retained []int32) {
	t.Helper()
	const maxDiffs = 12
	for i, n := range retained {
		if i >= maxDiffs {
			break
		}
		req := &historydv1.DiffRequest{ThreadId: thread, Channel: channel, ToTurn: n, FromTurn: max(n-1, 1), IncludeUnchanged: true}
		asProto, err := c.Diff(ctx, req)
		if err != nil {
			t.Fatalf("Diff %d: %v", n, err)
		}
		req.ValueFormat = historydv1.ValueFormat_VALUE_FORMAT_JSON
		asJSON, err := c.Diff(ctx, req)
		if err != nil {
			t.Fatalf("Diff %d (value_format: JSON): %v", n, err)
		}
		if len(asJSON.GetChanges()) != len(asProto.GetChanges()) {
			t.Errorf("Diff %d: %d changes with value_format JSON, %d without", n, len(asJSON.GetChanges()), len(asProto.GetChanges()))
			continue
		}
		for j, want := range asProto.GetChanges() {
			got := asJSON.GetChanges()[j]
			if got.GetKey() != want.GetKey() || got.GetKind() != want.GetKind() || len(got.GetPatch()) != len(want.GetPatch()) {
				t.Errorf("Diff %d: change %v with value_format JSON, %v without", n, got, want)
				continue
			}
			for _, side := range [][2]*historydv1.StateEntry{{got.GetFromEntry(), want.GetFromEntry()}, {got.GetToEntry(), want.GetToEntry()}} {
				if side[1] == nil {
					if side[0] != nil {
						t.Errorf("Diff %d key %q: an entry with value_format JSON only", n, want.GetKey())
					}
					continue
				}
				if err := sameEntry(side[0], side[1]); err != nil {
					t.Errorf("Diff %d key %q: %v", n, want.GetKey(), err)
				}
			}
			for k, wop := range want.GetPatch() {
				gop := got.GetPatch()[k]
				if gop.GetOp() != wop.GetOp() || gop.GetPath() != wop.GetPath() || gop.GetValue() != nil {
					t.Errorf("Diff %d key %q: patch %v with value_format JSON, %v without", n, want.GetKey(), gop, wop)
					continue
				}
				if wop.GetValue() == nil {
					continue // remove
				}
				var parsed any
				if err := json.Unmarshal(gop.GetValueJson(), &parsed); err != nil {
					t.Errorf("Diff %d key %q: patch value_json %q: %v", n, want.GetKey(), shorten(string(gop.GetValueJson())), err)
					continue
				}
				if v, err := structpb.NewValue(parsed); err != nil || !proto.Equal(v, wop.GetValue()) {
					t.Errorf("Diff %d key %q: patch value_json %s, value %v", n, want.GetKey(), shorten(string(gop.GetValueJson())), shorten(wop.GetValue().String()))
				}
			}
		}
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

package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/wI2L/jsondiff"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

const diffAdvice = "ask for fewer keys with `keys`"

// Diff implements historyd.v1.ThreadHistory.Diff. Calls denied by tenant
// isolation reach it too, over an empty store (see handlers.go).
func (s *Handlers) Diff(ctx context.Context, req *historydv1.DiffRequest) (*historydv1.DiffResponse, error) {
	if err := firstError(checkThread(req.GetThreadId(), req.GetCheckpointNs()), checkTurnField("to_turn", req.GetToTurn()),
		checkTurnField("from_turn", req.GetFromTurn()), checkKeys(req.GetKeys()), s.checkChannel(req.GetChannel()),
		checkValueFormat(req.GetValueFormat()), checkHead(req.GetHeadCheckpointId())); err != nil {
		return nil, s.fail(ctx, "Diff", err)
	}
	ref := refOf(req.GetThreadId(), req.GetCheckpointNs(), req.GetHeadCheckpointId())
	var from, to int
	h, turns, states, err := s.store.ReadEncoded(ctx, ref, req.GetChannel(), func(h *store.History) []store.Turn {
		from, to = diffTurns(h, req)
		var out []store.Turn
		for _, n := range []int{from, to} {
			if t, o := h.Turn(n); o == store.Found && (len(out) == 0 || out[0].N != n) {
				out = append(out, t)
			}
		}
		return out
	}, req.GetKeys(), encoderFor(req.GetValueFormat()))
	if err != nil {
		return nil, s.fail(ctx, "Diff", err)
	}
	resp := &historydv1.DiffResponse{Total: clampInt32(h.Total), RetainedTurns: retained(h), Numbering: numbering(h.Numbering),
		HeadCheckpointId: h.Head}
	read := map[int]store.EncodedState{}
	for i, t := range turns {
		if states[i].Lost {
			// Rebuilt from writes of deleted checkpoints: as gone as if
			// the turn's own checkpoints were (see Snapshot).
			resp.RetainedTurns = slices.DeleteFunc(resp.RetainedTurns, func(r int32) bool { return r == int32(t.N) })
			continue
		}
		read[t.N] = states[i]
	}
	resp.FromTurn, resp.ToTurn = diffTurn(h, from, read), diffTurn(h, to, read)
	fromState, okFrom := read[from]
	toState, okTo := read[to]
	if okFrom && okTo {
		if resp.Changes, err = changes(fromState, toState, req.GetIncludeUnchanged(), req.GetValueFormat() == historydv1.ValueFormat_VALUE_FORMAT_JSON); err != nil {
			return nil, s.fail(ctx, "Diff", err)
		}
	}
	if err := checkResponseSize(ctx, resp, diffAdvice); err != nil {
		return nil, err
	}
	return resp, nil
}

// diffTurns resolves a Diff request's turns: to_turn 0 is the newest turn,
// from_turn 0 the one before to_turn.
func diffTurns(h *store.History, req *historydv1.DiffRequest) (from, to int) {
	to = int(req.GetToTurn())
	if to == 0 {
		to = h.Total
	}
	from = int(req.GetFromTurn())
	if from == 0 {
		from = max(to-1, 0)
	}
	return from, to
}

// diffTurn says what became of turn n: found (its state is in read),
// no_such_turn or no_longer_retained.
func diffTurn(h *store.History, n int, read map[int]store.EncodedState) *historydv1.DiffTurn {
	t, o := h.Turn(n)
	if _, ok := read[n]; o == store.Found && !ok {
		o = store.NoLongerRetained
	}
	switch o {
	case store.NoSuchTurn:
		return &historydv1.DiffTurn{Result: &historydv1.DiffTurn_NoSuchTurn{NoSuchTurn: &historydv1.NoSuchTurn{Turn: clampInt32(n), Total: clampInt32(h.Total)}}}
	case store.NoLongerRetained:
		return &historydv1.DiffTurn{Result: &historydv1.DiffTurn_NoLongerRetained{NoLongerRetained: &historydv1.NoLongerRetained{Turn: clampInt32(n), Question: t.Question}}}
	}
	info := &historydv1.TurnInfo{Number: int32(t.N), Question: t.Question, Retained: true, CheckpointId: t.End.ID, AnsweredWith: int32s(t.AnsweredWith)}
	if !t.End.TS.IsZero() {
		info.EndedAt = timestamppb.New(t.End.TS)
	}
	return &historydv1.DiffTurn{Result: &historydv1.DiffTurn_Found{Found: info}}
}

// changes compares two states key by key. Entries are compared as their
// encodings first (equal bytes are an equal entry) and decoded only where
// those differ. asJSON says the entries carry value_json, and the patch
// values are sent the same way.
func changes(from, to store.EncodedState, unchanged, asJSON bool) ([]*historydv1.KeyChange, error) {
	at := func(st store.EncodedState) map[string][]byte {
		m := make(map[string][]byte, len(st.Entries))
		for _, e := range st.Entries {
			m[e.Key] = e.Data
		}
		return m
	}
	before, after := at(from), at(to)
	keys := make([]string, 0, len(before)+len(after))
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []*historydv1.KeyChange
	for _, k := range keys {
		b, inFrom := before[k]
		a, inTo := after[k]
		c := &historydv1.KeyChange{Key: k}
		switch {
		case !inFrom:
			c.Kind, c.ToEntry = historydv1.KeyChangeKind_KEY_CHANGE_KIND_ADDED, encodedEntry(a)
		case !inTo:
			c.Kind, c.FromEntry = historydv1.KeyChangeKind_KEY_CHANGE_KIND_REMOVED, encodedEntry(b)
		default:
			patch, same, err := entryPatch(k, b, a, asJSON)
			if err != nil {
				return nil, err
			}
			if same && !unchanged {
				continue
			}
			c.Kind, c.FromEntry, c.ToEntry, c.Patch = historydv1.KeyChangeKind_KEY_CHANGE_KIND_CHANGED, encodedEntry(b), encodedEntry(a), patch
			if same {
				c.Kind, c.Patch = historydv1.KeyChangeKind_KEY_CHANGE_KIND_UNCHANGED, nil
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// encodedEntry is a StateEntry carried as its cached encoding (see
// wire.TurnState).
func encodedEntry(data []byte) *historydv1.StateEntry {
	se := &historydv1.StateEntry{}
	se.ProtoReflect().SetUnknown(data)
	return se
}

// entryPatch compares two encoded entries of key k: same when they are
// equal, and otherwise the JSON Patch from the first's value to the
// second's (empty when only the bookkeeping differs), its values as JSON
// text when asJSON.
func entryPatch(k string, before, after []byte, asJSON bool) (patch []*historydv1.JsonPatchOperation, same bool, err error) {
	if bytes.Equal(before, after) {
		return nil, true, nil
	}
	var b, a historydv1.StateEntry
	if err := proto.Unmarshal(before, &b); err != nil {
		return nil, false, fmt.Errorf("key %q: decode entry: %w", k, err)
	}
	if err := proto.Unmarshal(after, &a); err != nil {
		return nil, false, fmt.Errorf("key %q: decode entry: %w", k, err)
	}
	bv, err := entryValueOf(&b)
	if err != nil {
		return nil, false, fmt.Errorf("key %q: %w", k, err)
	}
	av, err := entryValueOf(&a)
	if err != nil {
		return nil, false, fmt.Errorf("key %q: %w", k, err)
	}
	ops, err := jsondiff.CompareWithoutMarshal(bv, av)
	if err != nil {
		return nil, false, fmt.Errorf("key %q: compare values: %w", k, err)
	}
	// Equal values need not be equal bytes: JSON text keeps a map's keys in
	// the order they were stored, which two versions of a value may not
	// share. The values are compared as values, the rest field by field.
	if len(ops) == 0 && sameBookkeeping(&b, &a) {
		return nil, true, nil
	}
	for _, op := range ops {
		p := &historydv1.JsonPatchOperation{Op: op.Type, Path: proto.String(op.Path)}
		if op.Type != jsondiff.OperationRemove {
			if asJSON {
				p.ValueJson, err = patchJSON(op.Value)
			} else {
				p.Value, err = structpb.NewValue(op.Value)
			}
			if err != nil {
				return nil, false, fmt.Errorf("key %q: patch value at %q: %w", k, op.Path, err)
			}
		}
		patch = append(patch, p)
	}
	return patch, false, nil
}

// sameBookkeeping reports whether two entries agree on everything but
// their values.
func sameBookkeeping(b, a *historydv1.StateEntry) bool {
	b, a = proto.CloneOf(b), proto.CloneOf(a)
	b.Value, b.ValueJson, a.Value, a.ValueJson = nil, nil, nil, nil
	return proto.Equal(b, a)
}

// entryValueOf is an entry's value as encoding/json's generic types, from
// whichever form it was encoded in: value_json, or value.
func entryValueOf(e *historydv1.StateEntry) (any, error) {
	if raw := e.GetValueJson(); raw != nil {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("decode value_json: %w", err)
		}
		return v, nil
	}
	return e.GetValue().AsInterface(), nil
}

// patchJSON writes a patch value as JSON text, without the HTML escaping
// encoding/json applies by default (the text is data, not markup).
func patchJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func checkTurnField(field string, turn int32) *FieldError {
	if turn < 0 {
		return &FieldError{field, fmt.Sprintf("is %d; turns are counted from 1, and 0 means the default", turn)}
	}
	return nil
}

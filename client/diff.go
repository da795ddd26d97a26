package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	gojson "github.com/goccy/go-json"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// DiffEnd is one turn of a Diff and what became of it, with the same
// three outcomes as a Snapshot.
type DiffEnd struct {
	// Outcome says whether the turn's state was found and compared.
	Outcome Outcome
	// Turn is the turn number.
	Turn int
	// Question is the turn's question: when Found, and for
	// NoLongerRetained when still known.
	Question string
	// CheckpointID is the checkpoint the turn ended on. Found only.
	CheckpointID string
	// EndedAt is when that checkpoint was written. Found only; zero when it
	// has no timestamp.
	EndedAt time.Time
}

// ChangeKind says how a key changed between two turns.
type ChangeKind int

const (
	// Added means the key is only in the later (To) turn's state.
	Added ChangeKind = iota + 1
	// Removed means the key is only in the From turn's state.
	Removed
	// Changed means the key's entry differs: its value, or any recorded
	// field.
	Changed
	// Unchanged means the key's entry is the same in both.
	Unchanged
)

// String returns the kind as the CLI prints it: "added", "removed",
// "changed" or "unchanged".
func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "added"
	case Removed:
		return "removed"
	case Changed:
		return "changed"
	case Unchanged:
		return "unchanged"
	}
	return fmt.Sprintf("ChangeKind(%d)", int(k))
}

// PatchOp is one operation of an RFC 6902 JSON Patch. It marshals to JSON
// as the RFC writes it.
type PatchOp struct {
	// Op is "add", "remove" or "replace".
	Op string
	// Path is the JSON Pointer into the value; "" is the whole value.
	Path string
	// Value is the value added or put in place (nil for JSON null); none
	// for remove.
	Value any
}

// MarshalJSON writes the operation as RFC 6902 does: "value" for every
// operation but remove, null included.
func (op PatchOp) MarshalJSON() ([]byte, error) {
	if op.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{op.Op, op.Path})
	}
	return json.Marshal(struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}{op.Op, op.Path, op.Value})
}

// KeyChange is what became of one key.
type KeyChange struct {
	// Key is the state key.
	Key string
	// Kind says how it changed.
	Kind ChangeKind
	// From and To are its entries in the two turns' states; nil where it
	// is absent.
	From, To *Entry
	// Patch turns From's value into To's, for Changed; empty when only the
	// bookkeeping changed.
	Patch []PatchOp
}

// Diff is what changed between the ends of two turns of a thread.
type Diff struct {
	// From and To are the two turns and what became of each.
	From, To DiffEnd
	// Changes lists the keys that changed, sorted by key; empty unless
	// both turns were Found.
	Changes []KeyChange
	// Total is how many turns the thread has had.
	Total int
	// Retained lists the turns whose state can still be read, ascending.
	Retained []int
	// Head is the checkpoint whose lineage the turns are numbered on.
	Head string
}

// Diff compares the state two turns of a thread ended on, key by key: the
// changes lead from the end of turn from to the end of turn to. A to of 0
// is the thread's newest turn, a from of 0 the turn before to; past
// MaxTurn or negative, either is refused with InvalidArgument before
// anything is sent. Either turn may be a miss (NoSuchTurn,
// NoLongerRetained), which its DiffEnd says; nothing is compared then. An
// unknown thread is not an error: both ends are NoSuchTurn with a total of
// 0.
//
// WithNamespace, WithChannel, WithHead, WithKeys (compare only these keys),
// WithIncludeUnchanged and WithValueFormat apply; Diff ignores the other
// ReadOptions.
func (c *Client) Diff(ctx context.Context, threadID string, from, to int, opts ...ReadOption) (*Diff, error) {
	o := NewReadConfig(opts...)
	wireTo, err := wireTurn("to_turn", to)
	if err != nil {
		return nil, c.fail("Diff", threadID, err)
	}
	wireFrom, err := wireTurn("from_turn", from)
	if err != nil {
		return nil, c.fail("Diff", threadID, err)
	}
	ctx, cancel, err := c.begin(ctx)
	if err != nil {
		return nil, c.fail("Diff", threadID, err)
	}
	defer cancel()
	// Entries are parsed whatever WithRawValues says, as patches are.
	rc := ReadConfig{ValueFormat: o.ValueFormat}
	resp, err := c.rpc.Diff(ctx, &historydv1.DiffRequest{ThreadId: threadID, CheckpointNs: o.Namespace, ToTurn: wireTo, FromTurn: wireFrom,
		Keys: o.Keys, Channel: o.Channel, IncludeUnchanged: o.IncludeUnchanged, ValueFormat: rc.wireFormat(), HeadCheckpointId: o.Head})
	if err != nil {
		return nil, c.fail("Diff", threadID, err)
	}
	d := &Diff{Total: int(resp.GetTotal()), Head: resp.GetHeadCheckpointId()}
	for _, n := range resp.GetRetainedTurns() {
		d.Retained = append(d.Retained, int(n))
	}
	if d.From, err = diffEnd(resp.GetFromTurn()); err == nil {
		d.To, err = diffEnd(resp.GetToTurn())
	}
	if err != nil {
		return nil, c.fail("Diff", threadID, err)
	}
	for _, ch := range resp.GetChanges() {
		kc := KeyChange{Key: ch.GetKey()}
		switch ch.GetKind() {
		case historydv1.KeyChangeKind_KEY_CHANGE_KIND_ADDED:
			kc.Kind = Added
		case historydv1.KeyChangeKind_KEY_CHANGE_KIND_REMOVED:
			kc.Kind = Removed
		case historydv1.KeyChangeKind_KEY_CHANGE_KIND_CHANGED:
			kc.Kind = Changed
		case historydv1.KeyChangeKind_KEY_CHANGE_KIND_UNCHANGED:
			kc.Kind = Unchanged
		default:
			return nil, c.fail("Diff", threadID, status.Errorf(codes.Internal, "key %q: unknown change kind %v", ch.GetKey(), ch.GetKind()))
		}
		for _, side := range []struct {
			wire *historydv1.StateEntry
			into **Entry
		}{{ch.GetFromEntry(), &kc.From}, {ch.GetToEntry(), &kc.To}} {
			if side.wire == nil {
				continue
			}
			e, err := fromEntry(side.wire, rc)
			if err != nil {
				return nil, c.fail("Diff", threadID, status.Errorf(codes.Internal, "key %q: %v", ch.GetKey(), err))
			}
			*side.into = &e
		}
		for _, op := range ch.GetPatch() {
			p := PatchOp{Op: op.GetOp(), Path: op.GetPath(), Value: op.GetValue().AsInterface()}
			if raw := op.GetValueJson(); raw != nil {
				if err := gojson.Unmarshal(raw, &p.Value); err != nil {
					return nil, c.fail("Diff", threadID, status.Errorf(codes.Internal, "key %q: patch value at %q: %v", ch.GetKey(), op.GetPath(), err))
				}
			}
			kc.Patch = append(kc.Patch, p)
		}
		d.Changes = append(d.Changes, kc)
	}
	return d, nil
}

func diffEnd(t *historydv1.DiffTurn) (DiffEnd, error) {
	switch r := t.GetResult().(type) {
	case *historydv1.DiffTurn_Found:
		e := DiffEnd{Outcome: Found, Turn: int(r.Found.GetNumber()), Question: r.Found.GetQuestion(), CheckpointID: r.Found.GetCheckpointId()}
		if r.Found.GetEndedAt() != nil {
			e.EndedAt = r.Found.GetEndedAt().AsTime()
		}
		return e, nil
	case *historydv1.DiffTurn_NoSuchTurn:
		return DiffEnd{Outcome: NoSuchTurn, Turn: int(r.NoSuchTurn.GetTurn())}, nil
	case *historydv1.DiffTurn_NoLongerRetained:
		return DiffEnd{Outcome: NoLongerRetained, Turn: int(r.NoLongerRetained.GetTurn()), Question: r.NoLongerRetained.GetQuestion()}, nil
	}
	// As for Snapshot: guessing would be the one wrong answer.
	return DiffEnd{}, status.Error(codes.Internal, "a turn of the diff carries none of found, no_such_turn or no_longer_retained")
}

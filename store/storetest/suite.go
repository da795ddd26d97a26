package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/lgcodec"
)

// Open returns a fresh, empty backend and a Writer into its storage. The
// backend must only see what the Writer wrote.
type Open func(t *testing.T) (store.Backend, Writer)

// Demo is the conversation the suite writes: a key rewritten in turn 2, a
// turn without writes, and a non-ASCII question.
var Demo = []Turn{
	{Question: "sketch a rough boundary around the Severn catchment and call it Severn",
		Writes: map[string]any{"sketch-ops/sketch_area/area_km2": 11420.0, "sketch-ops/sketch_area/name": "Severn"}},
	{Question: "now sketch one around the Thames and call it Thames",
		Writes: map[string]any{"sketch-ops/sketch_area/area_km2": 12935.0, "sketch-ops/sketch_area/name": "Thames"}},
	{Question: "confirm from state what area each of the two sketches came out at"},
	{Question: "Wie groß ist die Themse? 🌊", Writes: map[string]any{"notes/lang": "de"}},
}

// Run runs the suite every backend must pass, through store.Store, so the
// backend is judged by the answers historyd gives.
func Run(t *testing.T, open Open) {
	ctx := context.Background()
	t.Run("Turns and state", func(t *testing.T) {
		b, w := open(t)
		ref := store.Ref{ThreadID: "suite-demo"}
		written := Build(w, ref, Demo)
		st := store.New(store.Config{Backend: b})
		h, err := st.History(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if h.Total != len(Demo) {
			t.Fatalf("total = %d, want %d", h.Total, len(Demo))
		}
		for i, turn := range h.Turns {
			if !turn.Retained || turn.End.ID != written[i].End || turn.Question != Demo[i].Question {
				t.Errorf("turn %d = %+v; want retained, end %s, question %q", turn.N, turn, written[i].End, Demo[i].Question)
			}
			if turn.End.TS.IsZero() {
				t.Errorf("turn %d has no timestamp", turn.N)
			}
		}
		states, err := st.States(ctx, ref, h.Turns, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, got := range states {
			checkState(t, i+1, got, written[i].State)
		}
		proj, err := st.States(ctx, ref, h.Turns[1:2], []string{"sketch-ops/sketch_area/name", "absent"})
		if err != nil {
			t.Fatal(err)
		}
		if len(proj[0]) != 1 || proj[0]["sketch-ops/sketch_area/name"].Value != "Thames" {
			t.Errorf("projection of turn 2 = %+v", proj[0])
		}
	})
	t.Run("Unknown thread", func(t *testing.T) {
		b, _ := open(t)
		h, err := store.New(store.Config{Backend: b}).History(ctx, store.Ref{ThreadID: "never-written"})
		if err != nil || h.Total != 0 || len(h.Turns) != 0 {
			t.Errorf("History = %+v, %v; want total 0", h, err)
		}
	})
	t.Run("Namespaces and similar thread ids are kept apart", func(t *testing.T) {
		b, w := open(t)
		Build(w, store.Ref{ThreadID: "t'1\"; --"}, Demo[:1])
		Build(w, store.Ref{ThreadID: "t'1\"; --", Namespace: "sub:1"}, Demo)
		Build(w, store.Ref{ThreadID: "t'1"}, Demo[:2])
		st := store.New(store.Config{Backend: b})
		for ref, want := range map[store.Ref]int{
			{ThreadID: "t'1\"; --"}: 1, {ThreadID: "t'1\"; --", Namespace: "sub:1"}: 4, {ThreadID: "t'1"}: 2, {ThreadID: "t"}: 0,
		} {
			h, err := st.History(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if h.Total != want {
				t.Errorf("%+v: total %d, want %d", ref, h.Total, want)
			}
		}
	})
	t.Run("Pruned turns are no longer retained", func(t *testing.T) {
		b, w := open(t)
		ref := store.Ref{ThreadID: "suite-pruned"}
		written := Build(w, ref, Demo)
		w.Delete(ref, append(append([]string{}, written[0].IDs...), written[1].IDs...))
		st := store.New(store.Config{Backend: b})
		h, err := st.History(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if h.Total != len(Demo) {
			t.Errorf("total after pruning = %d, want %d", h.Total, len(Demo))
		}
		if got, want := h.Retained(), []int{3, 4}; !reflect.DeepEqual(got, want) {
			t.Errorf("retained = %v, want %v", got, want)
		}
		if _, l := h.Turn(1); l != store.NoLongerRetained {
			t.Errorf("turn 1 = %v, want NoLongerRetained", l)
		}
		states, err := st.States(ctx, ref, h.Turns[2:], nil)
		if err != nil {
			t.Fatal(err)
		}
		checkState(t, 3, states[0], written[2].State)
	})
	t.Run("Values tell a missing checkpoint from a missing channel", func(t *testing.T) {
		b, w := open(t)
		ref := store.Ref{ThreadID: "suite-missing"}
		written := Build(w, ref, Demo[:1])
		blobs, err := b.Values(ctx, ref, "tool_state", []string{"no-such-checkpoint", written[0].IDs[0], written[0].End})
		if err != nil {
			t.Fatal(err)
		}
		// The question's checkpoint precedes any tool write: no value yet.
		if len(blobs) != 3 || blobs[0].Type != store.BlobMissing || blobs[1].Type != "empty" || blobs[2].Type == "empty" || blobs[2].Type == store.BlobMissing {
			t.Errorf("Values = %+v, want missing, empty, a value", blobs)
		}
	})
	t.Run("Cached history follows new and deleted checkpoints", func(t *testing.T) {
		b, w := open(t)
		ref := store.Ref{ThreadID: "suite-cache"}
		bld := NewBuilder(w, ref)
		var wrote []Written
		turn := func(tt Turn) Written {
			wr := bld.Turn(tt)
			wrote = append(wrote, wr)
			return wr
		}
		first := turn(Demo[0])
		st := store.New(store.Config{Backend: b})
		// read is how the service reads: the history and every retained
		// turn's state together, states from the cache when it has them.
		read := func() *store.History {
			t.Helper()
			h, turns, states, err := st.ReadEncoded(ctx, ref, retained, nil, jsonEncoder{})
			if err != nil {
				t.Fatal(err)
			}
			for i, turn := range turns {
				checkEncoded(t, turn.N, states[i], wrote[turn.N-1].State)
			}
			return h
		}
		if h := read(); h.Total != 1 || h.Turns[0].End.ID != first.End {
			t.Fatalf("after one turn: %+v", h)
		}
		second := turn(Demo[1])
		h := read()
		if h.Total != 2 || h.Turns[1].End.ID != second.End || h.Turns[1].Question != Demo[1].Question {
			t.Fatalf("after two turns: %+v", h)
		}
		// Turn 1's checkpoints go, but not the thread's first (empty) one:
		// the oldest id is unchanged, and reading turn 1 must still notice.
		w.Delete(ref, first.IDs)
		h = read()
		if h.Total != 2 || h.Turns[0].Retained {
			t.Fatalf("after deleting turn 1: %+v; want total 2, turn 1 not retained", h)
		}
		// A deletion and an addition between two reads leave the count as
		// it was; the cache must still notice.
		third := turn(Demo[2])
		w.Delete(ref, second.IDs[:len(third.IDs)])
		h = read()
		if h.Total != 3 || h.Turns[2].End.ID != third.End || !h.Turns[1].Retained || h.Turns[1].End.ID != second.End {
			t.Fatalf("after turn 3 and partial deletion of turn 2: %+v", h)
		}
		w.Delete(ref, second.IDs)
		if h := read(); h.Turns[1].Retained {
			t.Fatalf("turn 2 still retained after all its checkpoints went: %+v", h)
		}
		// The oldest checkpoint going is noticed by the history alone.
		w.Delete(ref, []string{"1f0c-000000"})
		fourth := turn(Demo[3])
		hist, err := st.History(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if hist.Total != 4 || hist.Turns[3].End.ID != fourth.End || hist.Turns[0].Retained || hist.Turns[1].Retained {
			t.Fatalf("after deleting the oldest checkpoint and adding turn 4: %+v", hist)
		}
	})
	t.Run("Cached state of a deleted turn is never served", func(t *testing.T) {
		b, w := open(t)
		ref := store.Ref{ThreadID: "suite-state-cache"}
		written := Build(w, ref, Demo)
		// No recount within the test: only the read itself can notice.
		st := store.New(store.Config{Backend: b, RecountEvery: time.Hour})
		turn := func(n int) func(*store.History) []store.Turn {
			return func(h *store.History) []store.Turn {
				if tt, found := h.Turn(n); found == store.Found {
					return []store.Turn{tt}
				}
				return nil
			}
		}
		for range 2 { // the second round is served from the cache
			for n := 1; n <= len(Demo); n++ {
				_, turns, states, err := st.ReadEncoded(ctx, ref, turn(n), nil, jsonEncoder{})
				if err != nil || len(turns) != 1 {
					t.Fatalf("turn %d: %v, %v", n, turns, err)
				}
				checkEncoded(t, n, states[0], written[n-1].State)
			}
		}
		// Turn 2 goes, the thread's oldest checkpoint stays: the cached
		// index and the cached state both still hold turn 2.
		w.Delete(ref, written[1].IDs)
		h, turns, _, err := st.ReadEncoded(ctx, ref, turn(2), nil, jsonEncoder{})
		if err != nil {
			t.Fatal(err)
		}
		if len(turns) != 0 || h.Turns[1].Retained || h.Total != len(Demo) {
			t.Fatalf("after deleting turn 2: turns %+v, history %+v; want turn 2 no longer retained", turns, h)
		}
		// Turn 3 shares turn 2's state version and is still served.
		_, turns, states, err := st.ReadEncoded(ctx, ref, turn(3), []string{"sketch-ops/sketch_area/name"}, jsonEncoder{})
		if err != nil || len(turns) != 1 {
			t.Fatalf("turn 3 after deleting turn 2: %v, %v", turns, err)
		}
		if len(states[0].Entries) != 1 || string(states[0].Entries[0].Data) != `{"turn":2,"value":"Thames"}` {
			t.Errorf("turn 3, one key: %+v", states[0].Entries)
		}
	})
	// Test doubles may list whole threads only; real backends list
	// incrementally (each asserts it at compile time).
	if b, w := open(t); isIncremental(b) {
		t.Run("Incremental listing checks what still exists", func(t *testing.T) {
			inc := b.(store.Incremental)
			ref := store.Ref{ThreadID: "suite-verify"}
			written := Build(w, ref, Demo[:2])
			w.Delete(ref, written[0].IDs[:1])
			verify := []string{written[0].IDs[0], written[0].End, "absent", written[1].End}
			census, newer, err := inc.CheckpointsSince(ctx, ref, store.Since{After: written[1].End, Count: true, Verify: verify})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(census.Present)
			want := []string{written[0].End, written[1].End}
			if !slices.Equal(census.Present, want) || len(newer) != 0 || census.MinID != "1f0c-000000" {
				t.Errorf("census %+v, %d newer; want present %v, none newer, oldest 1f0c-000000", census, len(newer), want)
			}
			if census, _, err := inc.CheckpointsSince(ctx, ref, store.Since{After: written[1].End}); err != nil || census.Present != nil || census.Count != -1 {
				t.Errorf("nothing to verify, no count: %+v, %v", census, err)
			}
		})
	}
	t.Run("A deletion sparing the oldest checkpoint is counted", func(t *testing.T) {
		b, w := open(t)
		ref := store.Ref{ThreadID: "suite-recount"}
		written := Build(w, ref, Demo[:3])
		st := store.New(store.Config{Backend: b, RecountEvery: 20 * time.Millisecond})
		if h, err := st.History(ctx, ref); err != nil || !h.Turns[1].Retained {
			t.Fatalf("before: %+v, %v", h, err)
		}
		w.Delete(ref, written[1].IDs)
		time.Sleep(30 * time.Millisecond)
		h, err := st.History(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if h.Total != 3 || h.Turns[1].Retained {
			t.Errorf("history %s after the recount interval: %+v; want turn 2 not retained", "suite-recount", h)
		}
	})
	t.Run("Reads while a writer appends turns", func(t *testing.T) {
		b, w := open(t)
		ref := store.Ref{ThreadID: "suite-concurrent"}
		bld := NewBuilder(w, ref)
		st := store.New(store.Config{Backend: b})
		const turns = 8
		done := make(chan []Written)
		go func() {
			var ws []Written
			for i := range turns {
				ws = append(ws, bld.Turn(Turn{Question: fmt.Sprintf("q%d", i+1), Writes: map[string]any{"k": float64(i + 1)}}))
			}
			done <- ws
		}()
		var written []Written
		last := 0
		for written == nil {
			select {
			case written = <-done:
			default:
			}
			h, err := st.History(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if h.Total < last {
				t.Fatalf("total went back from %d to %d", last, h.Total)
			}
			last = h.Total
			for _, turn := range h.Turns {
				if !turn.Retained || turn.Question != fmt.Sprintf("q%d", turn.N) {
					t.Fatalf("torn history: %+v", turn)
				}
			}
			// Turn 1 is finished, and its state final, once turn 2 began.
			if h.Total > 1 {
				states, err := st.States(ctx, ref, h.Turns[:1], nil)
				if err != nil {
					t.Fatal(err)
				}
				if v := states[0]["k"].Value; mustJSON(t, v) != "1" {
					t.Fatalf("turn 1 state while writing = %v", v)
				}
			}
			// Every turn read through the state cache holds what it
			// wrote, however far the writer has got.
			_, turns, enc, err := st.ReadEncoded(ctx, ref, retained, nil, jsonEncoder{})
			if err != nil {
				t.Fatal(err)
			}
			for i, turn := range turns {
				final := fmt.Sprintf(`{"turn":%d,"value":%d}`, turn.N, turn.N)
				// The newest turn may not have run its tool yet.
				running := fmt.Sprintf(`{"turn":%d,"value":%d}`, turn.N-1, turn.N-1)
				got := ""
				if len(enc[i].Entries) == 1 {
					got = string(enc[i].Entries[0].Data)
				}
				newest := i == len(turns)-1
				if got != final && !(newest && (got == running || (turn.N == 1 && len(enc[i].Entries) == 0))) {
					t.Fatalf("turn %d state while writing = %+v", turn.N, enc[i].Entries)
				}
			}
		}
		h, err := st.History(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		for i, turn := range h.Turns {
			if turn.End.ID != written[i].End {
				t.Errorf("turn %d ends at %s, want %s", turn.N, turn.End.ID, written[i].End)
			}
		}
	})
	t.Run("Ping", func(t *testing.T) {
		b, _ := open(t)
		if err := b.Ping(ctx); err != nil {
			t.Errorf("Ping: %v", err)
		}
	})
}

func isIncremental(b store.Backend) bool {
	_, ok := b.(store.Incremental)
	return ok
}

// retained picks every retained turn.
func retained(h *store.History) []store.Turn {
	var out []store.Turn
	for _, turn := range h.Turns {
		if turn.Retained {
			out = append(out, turn)
		}
	}
	return out
}

// jsonEncoder encodes an entry's value and turn as JSON, enough to tell
// entries apart.
type jsonEncoder struct{}

func (jsonEncoder) Encode(e store.Entry) ([]byte, error) {
	v := e.Value
	if raw, ok := v.(lgcodec.Raw); ok {
		var err error
		if v, err = raw.Decode(); err != nil {
			return nil, err
		}
	}
	return json.Marshal(map[string]any{"value": v, "turn": e.Turn})
}

// checkEncoded compares a turn's encoded entries with what was written.
func checkEncoded(t *testing.T, n int, got store.EncodedState, want map[string]map[string]any) {
	t.Helper()
	if len(got.Entries) != len(want) {
		t.Errorf("turn %d: %d encoded keys, want %d", n, len(got.Entries), len(want))
	}
	for i, e := range got.Entries {
		if i > 0 && got.Entries[i-1].Key >= e.Key {
			t.Errorf("turn %d: keys out of order: %q then %q", n, got.Entries[i-1].Key, e.Key)
		}
		w, ok := want[e.Key]
		if !ok {
			t.Errorf("turn %d: unexpected key %q", n, e.Key)
			continue
		}
		x, _ := json.Marshal(map[string]any{"value": w["value"], "turn": w["turn"]})
		if string(e.Data) != string(x) {
			t.Errorf("turn %d key %q: %s, want %s", n, e.Key, e.Data, x)
		}
	}
}

// checkState compares a turn's entries with what Build wrote, value and
// bookkeeping.
func checkState(t *testing.T, n int, got map[string]store.Entry, want map[string]map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("turn %d: %d keys, want %d", n, len(got), len(want))
	}
	for k, w := range want {
		e, ok := got[k]
		if !ok {
			t.Errorf("turn %d: key %q missing", n, k)
			continue
		}
		// Compared as JSON: a backend storing JSON cannot tell 11420.0 from
		// 11420, and need not.
		if g, x := mustJSON(t, e.Value), mustJSON(t, w["value"]); g != x {
			t.Errorf("turn %d key %q: value %s, want %s", n, k, g, x)
		}
		if e.Turn == nil || *e.Turn != int64(w["turn"].(int)) || e.TurnsWritten == nil || *e.TurnsWritten != int64(w["turns_written"].(int)) {
			t.Errorf("turn %d key %q: bookkeeping %+v, want %v", n, k, e, w)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %#v: %v", v, err)
	}
	return string(b)
}

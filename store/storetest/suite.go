package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// Open returns a fresh, empty backend and a Writer into its storage. The
// backend must only see what the Writer wrote.
type Open func(t *testing.T) (backend.Backend, Writer)

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

// Case is one named case of the suite: what every backend must do, judged
// by the answers a Store over it gives through the path the server takes
// (ReadEncoded), or by the backend contract itself.
type Case struct {
	// Name names the case as a subtest.
	Name string
	// Run runs the case; it opens what it needs.
	Run func(t *testing.T, open Open)
}

// Run runs every case of Cases, the fork cases and ThreadsCases against the backends open
// returns.
func Run(t *testing.T, open Open) {
	for _, c := range slices.Concat(Cases, forkCases, cycleCases, runsCases, ThreadsCases) {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, open) })
	}
}

// RunThreads runs ThreadsCases only: for a backend whose thread listing
// depends on more than the rest of the suite does, such as PostgreSQL's
// collation of thread ids.
func RunThreads(t *testing.T, open Open) {
	for _, c := range ThreadsCases {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, open) })
	}
}

// Cases are the suite's cases, in the order they run.
var Cases = []Case{
	{"Turns and state", turnsAndState},
	{"Unknown thread", unknownThread},
	{"Namespaces and similar thread ids are kept apart", namespacesApart},
	{"Pruned turns are no longer retained", prunedTurns},
	{"Values tell a missing checkpoint from a missing channel", missingVersusEmpty},
	{"Parents are listed as written", parentsListed},
	{"Channel versions: null, missing, integer, float and string", versionForms},
	{"Writes are read by channel and checkpoint", writesRead},
	{"DeltaChannel values are rebuilt from writes", deltaRebuilt},
	{"Cached history follows new and deleted checkpoints", cacheFollows},
	{"Cached state of a deleted turn is never served", cachedStateOfDeletedTurn},
	{"Incremental listing checks what still exists", incrementalCensus},
	{"A deletion sparing the oldest checkpoint is counted", deletionCounted},
	{"Reads while a writer appends turns", readsWhileWriting},
	{"Shared probes never answer with what was there before the read began", probesNeverStale},
	{"Newest checkpoints hold every channel's version", newest},
	{"Ping", ping},
}

func turnsAndState(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-demo"}
	written := Build(w, ref, Demo)
	st := store.New(store.Config{Backend: b})
	h, turns, states := Read(t, st, ref, Retained, nil)
	if h.Total != len(Demo) || len(turns) != len(Demo) {
		t.Fatalf("total = %d, %d turns read; want %d", h.Total, len(turns), len(Demo))
	}
	for i, turn := range h.Turns {
		if !turn.Retained || turn.End.ID != written[i].End || turn.Question != Demo[i].Question {
			t.Errorf("turn %d = %+v; want retained, end %s, question %q", turn.N, turn, written[i].End, Demo[i].Question)
		}
		if turn.End.TS.IsZero() {
			t.Errorf("turn %d has no timestamp", turn.N)
		}
		CheckState(t, turn.N, states[i], written[i].State)
	}
	_, _, proj := Read(t, st, ref, Only(2), []string{"sketch-ops/sketch_area/name", "absent"})
	if len(proj[0]) != 1 || proj[0]["sketch-ops/sketch_area/name"]["value"] != "Thames" {
		t.Errorf("projection of turn 2 = %+v", proj[0])
	}
}

func unknownThread(t *testing.T, open Open) {
	b, _ := open(t)
	h, turns, _ := Read(t, store.New(store.Config{Backend: b}), backend.Ref{ThreadID: "never-written"}, Retained, nil)
	if h.Total != 0 || len(h.Turns) != 0 || len(turns) != 0 {
		t.Errorf("history = %+v; want total 0", h)
	}
}

func namespacesApart(t *testing.T, open Open) {
	b, w := open(t)
	Build(w, backend.Ref{ThreadID: "t'1\"; --"}, Demo[:1])
	Build(w, backend.Ref{ThreadID: "t'1\"; --", Namespace: "sub:1"}, Demo)
	Build(w, backend.Ref{ThreadID: "t'1"}, Demo[:2])
	st := store.New(store.Config{Backend: b})
	for ref, want := range map[backend.Ref]int{
		{ThreadID: "t'1\"; --"}: 1, {ThreadID: "t'1\"; --", Namespace: "sub:1"}: 4, {ThreadID: "t'1"}: 2, {ThreadID: "t"}: 0,
	} {
		h, turns, _ := Read(t, st, ref, Retained, nil)
		if h.Total != want || len(turns) != want {
			t.Errorf("%+v: total %d, %d turns read; want %d", ref, h.Total, len(turns), want)
		}
	}
}

func prunedTurns(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-pruned"}
	written := Build(w, ref, Demo)
	w.Delete(ref, append(slices.Clone(written[0].IDs), written[1].IDs...))
	st := store.New(store.Config{Backend: b})
	h, turns, states := Read(t, st, ref, Retained, nil)
	if h.Total != len(Demo) {
		t.Errorf("total after pruning = %d, want %d", h.Total, len(Demo))
	}
	if got, want := h.Retained(), []int{3, 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("retained = %v, want %v", got, want)
	}
	if _, o := h.Turn(1); o != store.NoLongerRetained {
		t.Errorf("turn 1 = %v, want %v", o, store.NoLongerRetained)
	}
	if _, o := h.Turn(5); o != store.NoSuchTurn {
		t.Errorf("turn 5 = %v, want %v", o, store.NoSuchTurn)
	}
	if len(turns) != 2 {
		t.Fatalf("read %d turns, want 2", len(turns))
	}
	CheckState(t, 3, states[0], written[2].State)
}

func missingVersusEmpty(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-missing"}
	written := Build(w, ref, Demo[:1])
	blobs, err := backend.Values(context.Background(), b, ref, "tool_state", []string{"no-such-checkpoint", written[0].IDs[0], written[0].End})
	if err != nil {
		t.Fatal(err)
	}
	// The question's checkpoint precedes any tool write: no value yet.
	if len(blobs) != 3 || !blobs[0].Missing || blobs[1].Missing || blobs[1].Type != format.TypeEmpty ||
		blobs[2].Missing || blobs[2].Type == format.TypeEmpty {
		t.Errorf("Values = %+v; want missing, empty, a value", blobs)
	}
}

func parentsListed(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-parents"}
	written := Build(w, ref, Demo[:2])
	parents := map[string]string{}
	_, err := b.List(context.Background(), ref, backend.Query{}, func(r backend.Row) error {
		parents[r.ID] = r.Parent
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := append(append([]string{"1f0c-000000"}, written[0].IDs...), written[1].IDs...)
	if len(parents) != len(ids) {
		t.Fatalf("listed %d checkpoints, want %d", len(parents), len(ids))
	}
	for i, id := range ids {
		want := ""
		if i > 0 {
			want = ids[i-1]
		}
		if got, ok := parents[id]; !ok || got != want {
			t.Errorf("parent of %s = %q (listed %v), want %q", id, got, ok, want)
		}
	}
}

// newest samples the newest checkpoints of one thread and of every
// thread: newest first for a thread, only checkpoints that exist, as many
// as asked at most, and each with every channel's version, also of
// channels the store does not read.
func newest(t *testing.T, open Open) {
	b, w := open(t)
	ctx := context.Background()
	a, other := backend.Ref{ThreadID: "suite-newest"}, backend.Ref{ThreadID: "suite-newest-other"}
	written := Build(w, a, Demo[:2])
	Build(w, other, Demo[:1])
	last := written[len(written)-1].End
	w.Put(a, saver.Checkpoint{ID: "1f0c-900000", Parent: last, TS: Base.Add(time.Hour),
		Values:   write.Map{{Key: "messages", Value: []any{write.Human("h", "q")}}, {Key: "notes", Value: "kept apart"}},
		Metadata: write.Map{{Key: "source", Value: "update"}, {Key: "step", Value: 99}}})
	all := map[string]backend.Ref{}
	for _, ref := range []backend.Ref{a, other} {
		if _, err := b.List(ctx, ref, backend.Query{}, func(r backend.Row) error {
			all[r.ID+"\x00"+ref.ThreadID] = ref
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	sample := func(ref *backend.Ref, limit int) (ids []string, channels map[string]int) {
		t.Helper()
		channels = map[string]int{}
		err := b.Newest(ctx, ref, limit, func(r backend.Row) error {
			cp, err := codec.ParseCheckpoint(r.Checkpoint.Type, r.Checkpoint.Data, nil)
			if err != nil {
				return fmt.Errorf("checkpoint %s: %w", r.ID, err)
			}
			for ch := range cp.Versions {
				channels[ch]++
			}
			ids = append(ids, r.ID)
			return nil
		})
		if err != nil {
			t.Fatalf("Newest(%v, %d): %v", ref, limit, err)
		}
		return ids, channels
	}

	ids, channels := sample(&a, 3)
	if len(ids) != 3 || ids[0] != "1f0c-900000" || !slices.IsSortedFunc(ids, func(x, y string) int { return strings.Compare(y, x) }) {
		t.Errorf("Newest of %s, 3 = %v; want its 3 newest, 1f0c-900000 first, newest first", a.ThreadID, ids)
	}
	for _, id := range ids {
		if all[id+"\x00"+a.ThreadID] != a {
			t.Errorf("Newest of %s lists %s, not one of its checkpoints", a.ThreadID, id)
		}
	}
	if channels["notes"] != 1 || channels["messages"] != 3 {
		t.Errorf("Newest of %s: channel counts %v; want notes in 1, messages in 3", a.ThreadID, channels)
	}

	ids, channels = sample(nil, 1000)
	if len(ids) != len(all) {
		t.Errorf("Newest of every thread, 1000: %d checkpoints, want all %d", len(ids), len(all))
	}
	if channels["notes"] != 1 || channels["tool_state"] == 0 || channels["messages"] != len(all) {
		t.Errorf("Newest of every thread: channel counts %v; want notes in 1, tool_state in some, messages in all %d", channels, len(all))
	}
	if ids, _ := sample(nil, 2); len(ids) == 0 || len(ids) > 2 {
		t.Errorf("Newest of every thread, 2: %v", ids)
	}
	if ids, _ := sample(&a, 0); len(ids) != 0 {
		t.Errorf("Newest with limit 0: %v", ids)
	}
	if ids, _ := sample(&backend.Ref{ThreadID: "suite-newest-unknown"}, 5); len(ids) != 0 {
		t.Errorf("Newest of an unknown thread: %v", ids)
	}
}

// versionForms writes a thread whose checkpoints hold every form of
// channel version a saver writes or a damaged row could hold: the store
// must read each through the one normalizer, identically on every backend.
func versionForms(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-versions"}
	human := func(n int) write.Message {
		return write.Human(fmt.Sprintf("h%d", n), fmt.Sprintf("question %d", n))
	}
	entry := func(v any) map[string]any { return map[string]any{"value": v, "turn": 1} }
	ts := func(i int) time.Time { return Base.Add(time.Duration(i) * time.Second) }
	cps := []saver.Checkpoint{
		// An integer version (LangChain.js).
		{ID: "v-1", TS: ts(1), Values: write.Map{{Key: "messages", Value: []any{human(1)}}, {Key: "tool_state", Value: map[string]any{"k": entry("one")}}},
			Versions: write.Map{{Key: "messages", Value: 1}, {Key: "tool_state", Value: 1}}},
		// A float version, and a null one: the state has no value here.
		{ID: "v-2", Parent: "v-1", TS: ts(2), Values: write.Map{{Key: "messages", Value: []any{human(1), human(2)}}},
			Versions: write.Map{{Key: "messages", Value: 2.5}, {Key: "tool_state", Value: nil}}},
		// A string version (Python), and a state channel with no version.
		{ID: "v-3", Parent: "v-2", TS: ts(3), Values: write.Map{{Key: "messages", Value: []any{human(1), human(2), human(3)}}},
			Versions: write.Map{{Key: "messages", Value: "00000000000000000000000000000003.0.25"}}},
		// The same string version again: the same value, read once.
		{ID: "v-4", Parent: "v-3", TS: ts(4), Values: write.Map{{Key: "messages", Value: []any{human(1), human(2), human(3)}}, {Key: "tool_state", Value: map[string]any{"k": entry("four")}}},
			Versions: write.Map{{Key: "messages", Value: "00000000000000000000000000000003.0.25"}, {Key: "tool_state", Value: "s4"}}},
	}
	for _, cp := range cps {
		w.Put(ref, cp)
	}
	st := store.New(store.Config{Backend: b})
	h, turns, states := Read(t, st, ref, Retained, nil)
	if h.Total != 3 || len(turns) != 3 {
		t.Fatalf("history %+v; want 3 turns", h)
	}
	for i, want := range []struct {
		end, version, state string
		value               any
	}{
		{"v-1", "1", "1", "one"},
		{"v-2", "2.5", "", nil},
		{"v-4", "00000000000000000000000000000003.0.25", "s4", "four"},
	} {
		turn := h.Turns[i]
		if turn.End.ID != want.end || turn.End.Version != want.version || turn.End.State("tool_state") != want.state {
			t.Errorf("turn %d ends at %s, messages version %q, state version %q; want %s, %q, %q",
				turn.N, turn.End.ID, turn.End.Version, turn.End.State("tool_state"), want.end, want.version, want.state)
		}
		if turn.Question != fmt.Sprintf("question %d", i+1) {
			t.Errorf("turn %d question %q", turn.N, turn.Question)
		}
		switch {
		case want.value == nil && len(states[i]) != 0:
			t.Errorf("turn %d state %v; want none (null version)", turn.N, states[i])
		case want.value != nil && (len(states[i]) != 1 || states[i]["k"]["value"] != want.value):
			t.Errorf("turn %d state %v; want k = %v", turn.N, states[i], want.value)
		}
	}
}

// writesRead checks EachWrite: a channel's writes at the asked checkpoints,
// and nothing else.
func writesRead(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-writes"}
	task := "1ef4f797-8335-6428-8001-8a1503f9b875"
	w.Put(ref, saver.Checkpoint{ID: "w-1", TS: Base, Values: write.Map{{Key: "messages", Value: []any{}}},
		Writes: []saver.Write{
			{TaskID: "00000000-0000-0000-0000-000000000000", Idx: 0, Channel: "messages", Value: []any{write.Human("h1", "first")}},
			{TaskID: task, TaskPath: "~__pregel_pull, agent", Idx: 0, Channel: "messages", Value: []any{write.AI("a1", "reply")}},
			{TaskID: task, TaskPath: "~__pregel_pull, agent", Idx: 1, Channel: "files", Value: map[string]any{"/a.md": "x"}},
		}})
	w.Put(ref, saver.Checkpoint{ID: "w-2", Parent: "w-1", TS: Base.Add(time.Second), Values: write.Map{{Key: "messages", Value: []any{}}},
		Writes: []saver.Write{{TaskID: task, Idx: 0, Channel: "messages", Value: []any{write.Human("h2", "second")}}}})
	keepsPath := true
	if sw, ok := w.(interface{ Saver() saver.Saver }); ok {
		keepsPath = sw.Saver().Python()
	}
	type got struct {
		checkpoint, task, path string
		idx                    int
		ids                    string
	}
	var all []got
	err := b.EachWrite(context.Background(), ref, "messages", []string{"w-1", "no-such"}, func(wr backend.Write) error {
		v, _, err := codec.Decode(wr.Value.Type, wr.Value.Data, codec.Limits{})
		if err != nil {
			return err
		}
		ids := ""
		for _, m := range v.([]any) {
			ids += m.(map[string]any)["id"].(string)
		}
		all = append(all, got{wr.CheckpointID, wr.TaskID, wr.TaskPath, wr.Idx, ids})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(all, func(a, b got) int { return strings.Compare(a.task+a.ids, b.task+b.ids) })
	path := "~__pregel_pull, agent"
	if !keepsPath {
		path = ""
	}
	want := []got{{"w-1", "00000000-0000-0000-0000-000000000000", "", 0, "h1"}, {"w-1", task, path, 0, "a1"}}
	if !reflect.DeepEqual(all, want) {
		t.Errorf("writes = %+v\nwant %+v", all, want)
	}
}

// deltaThread writes a thread whose messages and files channels are
// DeltaChannels: most checkpoints store neither, the writes attached to
// each checkpoint hold the changes, and one checkpoint stores snapshots.
func deltaThread(w Writer, ref backend.Ref) {
	ts := func(i int) time.Time { return Base.Add(time.Duration(i) * time.Second) }
	ws := func(ch string, v any) saver.Write {
		return saver.Write{TaskID: "t", TaskPath: "~__pregel_pull, node", Channel: ch, Value: v}
	}
	h1, a1, h2, a2 := write.Human("h1", "first question"), write.AI("a1", "one"), write.Human("h2", "second question"), write.AI("a2", "two")
	for _, cp := range []saver.Checkpoint{
		// The input's write hangs on the thread's first checkpoint.
		{ID: "d-0", TS: ts(0), Writes: []saver.Write{ws("messages", []any{h1})}},
		{ID: "d-1", Parent: "d-0", TS: ts(1), Versions: write.Map{{Key: "messages", Value: 1}},
			Writes: []saver.Write{ws("messages", []any{a1}), {TaskID: "t", TaskPath: "~__pregel_pull, node", Idx: 1, Channel: "files", Value: map[string]any{"/a.md": "v1"}}}},
		{ID: "d-2", Parent: "d-1", TS: ts(2), Versions: write.Map{{Key: "messages", Value: 2}, {Key: "files", Value: 1}},
			Writes: []saver.Write{ws("messages", []any{h2})}},
		{ID: "d-3", Parent: "d-2", TS: ts(3),
			Values: write.Map{
				{Key: "messages", Value: write.DeltaSnapshot{Value: []any{h1, a1, h2}}},
				{Key: "files", Value: write.DeltaSnapshot{Value: map[string]any{"/a.md": "v1"}}},
			},
			Versions: write.Map{{Key: "messages", Value: 3}, {Key: "files", Value: 2}},
			Writes:   []saver.Write{ws("files", map[string]any{"/a.md": "v2", "/b.md": "b"}), {TaskID: "t", TaskPath: "~__pregel_pull, node", Idx: 1, Channel: "messages", Value: []any{a2}}}},
		{ID: "d-4", Parent: "d-3", TS: ts(4), Versions: write.Map{{Key: "messages", Value: 4}, {Key: "files", Value: 3}},
			Writes: []saver.Write{ws("messages", []any{write.Remove("h1")}), {TaskID: "u", Channel: "files", Value: map[string]any{"/b.md": nil}}}},
		{ID: "d-5", Parent: "d-4", TS: ts(5), Versions: write.Map{{Key: "messages", Value: 5}, {Key: "files", Value: 4}}},
	} {
		cp.Metadata = write.Map{{Key: "source", Value: "loop"}, {Key: "counters_since_delta_snapshot", Value: write.Map{}}}
		w.Put(ref, cp)
	}
}

// deltaRebuilt reads a DeltaChannel thread as LangGraph rebuilds it: the
// messages (for turns) and a state channel (files, key by key) at
// checkpoints storing neither, through the snapshot and the writes since;
// then the same with the oldest checkpoints pruned.
func deltaRebuilt(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-delta"}
	deltaThread(w, ref)
	st := store.New(store.Config{Backend: b, StateChannels: []string{"tool_state", "files"}})
	read := func(want map[int]map[string]any) *store.History {
		t.Helper()
		h, turns, enc, err := st.ReadEncoded(context.Background(), ref, "files", Retained, nil, EntryEncoder{})
		if err != nil {
			t.Fatal(err)
		}
		for i, turn := range turns {
			got := map[string]any{}
			for _, e := range enc[i].Entries {
				var m map[string]any
				if err := json.Unmarshal(e.Data, &m); err != nil {
					t.Fatal(err)
				}
				got[e.Key] = m["value"]
			}
			if !reflect.DeepEqual(got, want[turn.N]) {
				t.Errorf("turn %d files = %v, want %v", turn.N, got, want[turn.N])
			}
		}
		return h
	}
	h := read(map[int]map[string]any{1: {"/a.md": "v1"}, 2: {"/a.md": "v2"}})
	if h.Total != 2 || h.Turns[0].End.ID != "d-2" || h.Turns[1].End.ID != "d-5" || h.Numbering != store.Complete ||
		h.Turns[0].Question != "first question" || h.Turns[1].Question != "second question" {
		t.Errorf("history %+v; want turn 1 ending at d-2, turn 2 at d-5 (a removed question still counts)", h.Turns)
	}
	// Pruned up to the snapshot: the rest rebuilds from it.
	w.Delete(ref, []string{"d-0", "d-1", "d-2"})
	h = read(map[int]map[string]any{2: {"/a.md": "v2"}})
	if h.Total != 2 || h.Turns[0].Retained || !h.Turns[1].Retained || h.Numbering != store.Counted {
		t.Errorf("after pruning: %+v, numbering %v; want turn 1 no longer retained, 2 served, numbering counted", h.Turns, h.Numbering)
	}
}

func cacheFollows(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-cache"}
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
		h, turns, states := Read(t, st, ref, Retained, nil)
		for i, turn := range turns {
			CheckState(t, turn.N, states[i], wrote[turn.N-1].State)
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
	hist, err := st.History(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if hist.Total != 4 || hist.Turns[3].End.ID != fourth.End || hist.Turns[0].Retained || hist.Turns[1].Retained {
		t.Fatalf("after deleting the oldest checkpoint and adding turn 4: %+v", hist)
	}
}

func cachedStateOfDeletedTurn(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-state-cache"}
	written := Build(w, ref, Demo)
	// No recount within the test: only the read itself can notice.
	st := store.New(store.Config{Backend: b, RecountEvery: time.Hour})
	for range 2 { // the second round is served from the cache
		for n := 1; n <= len(Demo); n++ {
			_, turns, states := Read(t, st, ref, Only(n), nil)
			if len(turns) != 1 {
				t.Fatalf("turn %d: %v", n, turns)
			}
			CheckState(t, n, states[0], written[n-1].State)
		}
	}
	if s := st.CacheStats(); s.StateHits == 0 {
		t.Errorf("cache stats %+v: the second round should have been served from the state cache", s)
	}
	// Turn 2 goes, the thread's oldest checkpoint stays: the cached
	// index and the cached state both still hold turn 2.
	w.Delete(ref, written[1].IDs)
	h, turns, _ := Read(t, st, ref, Only(2), nil)
	if len(turns) != 0 || h.Turns[1].Retained || h.Total != len(Demo) {
		t.Fatalf("after deleting turn 2: turns %+v, history %+v; want turn 2 no longer retained", turns, h)
	}
	// Turn 3 shares turn 2's state version and is still served.
	_, turns, states := Read(t, st, ref, Only(3), []string{"sketch-ops/sketch_area/name"})
	if len(turns) != 1 {
		t.Fatalf("turn 3 after deleting turn 2: %v", turns)
	}
	if e := states[0]["sketch-ops/sketch_area/name"]; len(states[0]) != 1 || e["value"] != "Thames" || e["turn"] != 2.0 {
		t.Errorf("turn 3, one key: %+v", states[0])
	}
}

func incrementalCensus(t *testing.T, open Open) {
	b, w := open(t)
	ctx := context.Background()
	ref := backend.Ref{ThreadID: "suite-verify"}
	written := Build(w, ref, Demo[:2])
	w.Delete(ref, written[0].IDs[:1])
	verify := []string{written[0].IDs[0], written[0].End, "absent", written[1].End}
	var newer int
	census, err := b.List(ctx, ref, backend.Query{After: written[1].End, Count: true, Verify: verify}, func(backend.Row) error { newer++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(census.Present)
	want := []string{written[0].End, written[1].End}
	total := 1 + len(written[0].IDs) - 1 + len(written[1].IDs)
	if !slices.Equal(census.Present, want) || newer != 0 || census.MinID != "1f0c-000000" || census.Count != total {
		t.Errorf("census %+v, %d newer; want present %v, none newer, oldest 1f0c-000000, count %d", census, newer, want, total)
	}
	census, err = b.List(ctx, ref, backend.Query{After: written[1].End}, func(backend.Row) error { return nil })
	if err != nil || census.Present != nil || census.Count != -1 {
		t.Errorf("nothing to verify, no count: %+v, %v", census, err)
	}
	// Newer checkpoints are listed after the one given.
	var ids []string
	if _, err := b.List(ctx, ref, backend.Query{After: written[1].IDs[0]}, func(r backend.Row) error { ids = append(ids, r.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, written[1].IDs[1:]) {
		t.Errorf("after %s: %v, want %v", written[1].IDs[0], ids, written[1].IDs[1:])
	}
}

func deletionCounted(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-recount"}
	written := Build(w, ref, Demo[:3])
	st := store.New(store.Config{Backend: b, RecountEvery: 20 * time.Millisecond})
	if h, err := st.History(context.Background(), ref); err != nil || !h.Turns[1].Retained {
		t.Fatalf("before: %+v, %v", h, err)
	}
	w.Delete(ref, written[1].IDs)
	time.Sleep(30 * time.Millisecond)
	h, err := st.History(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if h.Total != 3 || h.Turns[1].Retained {
		t.Errorf("history after the recount interval: %+v; want turn 2 not retained", h)
	}
}

func readsWhileWriting(t *testing.T, open Open) {
	b, w := open(t)
	ref := backend.Ref{ThreadID: "suite-concurrent"}
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
		// Every turn read holds what it wrote, however far the writer has
		// got; turn 1 is finished, and its state final, once turn 2 began.
		h, turns, states := Read(t, st, ref, Retained, nil)
		if h.Total < last {
			t.Fatalf("total went back from %d to %d", last, h.Total)
		}
		last = h.Total
		for i, turn := range turns {
			if !turn.Retained || turn.Question != fmt.Sprintf("q%d", turn.N) {
				t.Fatalf("torn history: %+v", turn)
			}
			got, ok := states[i]["k"]
			final := ok && got["value"] == float64(turn.N) && got["turn"] == float64(turn.N)
			// The newest turn may not have run its tool yet.
			running := i == len(turns)-1 && (!ok && turn.N == 1 || ok && got["value"] == float64(turn.N-1))
			if !final && !running {
				t.Fatalf("turn %d state while writing = %+v", turn.N, states[i])
			}
		}
	}
	h, err := st.History(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	for i, turn := range h.Turns {
		if turn.End.ID != written[i].End {
			t.Errorf("turn %d ends at %s, want %s", turn.N, turn.End.ID, written[i].End)
		}
	}
}

// probesNeverStale races readers of several threads, whose warm reads
// share probes, against a writer appending turns and a deleter pruning
// them: a read that begins after a turn was written sees it, and one that
// begins after checkpoints were deleted never ends a turn on one of them;
// every state read is the one its turn wrote.
//
// It is one function because the writer, the deleter and the readers share
// the record of what was written and deleted when, which every check reads.
func probesNeverStale(t *testing.T, open Open) {
	b, w := open(t)
	const threads, turns, readers = 4, 6, 8
	refs := make([]backend.Ref, threads)
	builders := make([]*Builder, threads)
	for i := range refs {
		refs[i] = backend.Ref{ThreadID: fmt.Sprintf("suite-probes-%d", i)}
		builders[i] = NewBuilder(w, refs[i])
	}
	st := store.New(store.Config{Backend: b})
	var mu sync.Mutex
	written := make([]int, threads)             // turns written, by thread
	deleted := make([]map[string]bool, threads) // checkpoint ids deleted, by thread
	for i := range deleted {
		deleted[i] = map[string]bool{}
	}
	snapshot := func(i int) (int, map[string]bool) {
		mu.Lock()
		defer mu.Unlock()
		return written[i], maps.Clone(deleted[i])
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var answered, stale atomic.Int64
	errs := make(chan error, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (r + n) % threads
				before, gone := snapshot(i)
				h, picked, states, err := st.ReadEncoded(context.Background(), refs[i], "", Retained, nil, EntryEncoder{})
				if errors.Is(err, store.ErrStale) {
					// The thread changed under both tries: a refusal, not a
					// stale answer, and what a deleter every 2ms may cause.
					stale.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				answered.Add(1)
				if h.Total < before {
					errs <- fmt.Errorf("thread %d: total %d, though %d turns were written before the read began", i, h.Total, before)
					return
				}
				for k, turn := range picked {
					if gone[turn.End.ID] {
						errs <- fmt.Errorf("thread %d turn %d ends at %s, deleted before the read began", i, turn.N, turn.End.ID)
						return
					}
					for _, e := range states[k].Entries {
						var m map[string]any
						if err := json.Unmarshal(e.Data, &m); err != nil {
							errs <- err
							return
						}
						// The newest turn may not have run its tool yet.
						running := k == len(picked)-1 && m["turn"] == float64(turn.N-1)
						if e.Key == "k" && m["turn"] != float64(turn.N) && !running {
							errs <- fmt.Errorf("thread %d turn %d (end %s): entry written in turn %v; history %+v", i, turn.N, turn.End.ID, m["turn"], h)
							return
						}
					}
				}
			}
		}()
	}
	var all [][]Written
	for range threads {
		all = append(all, nil)
	}
	for n := 1; n <= turns; n++ {
		for i := range refs {
			wt := builders[i].Turn(Turn{Question: fmt.Sprintf("q%d", n), Writes: map[string]any{"k": float64(n)}})
			all[i] = append(all[i], wt)
			mu.Lock()
			written[i] = n
			mu.Unlock()
			if n >= 3 {
				// Prune the oldest turn still there.
				old := all[i][n-3]
				w.Delete(refs[i], old.IDs)
				mu.Lock()
				for _, id := range old.IDs {
					deleted[i][id] = true
				}
				mu.Unlock()
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Refusals must stay the exception, or the checks above checked nothing.
	n, r := answered.Load(), stale.Load()
	t.Logf("%d reads answered, %d refused as stale", n, r)
	if n == 0 || r > n/10 {
		t.Errorf("%d reads answered, %d refused as stale: want answers, and at most one refusal in ten", n, r)
	}
}

func ping(t *testing.T, open Open) {
	b, _ := open(t)
	if err := b.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// Retained picks every retained turn (History.RetainedTurns).
func Retained(h *store.History) []store.Turn { return h.RetainedTurns() }

// Only picks turn n when it is retained.
func Only(n int) func(*store.History) []store.Turn {
	return func(h *store.History) []store.Turn {
		if turn, o := h.Turn(n); o == store.Found {
			return []store.Turn{turn}
		}
		return nil
	}
}

// Read reads the thread as the server does, through ReadEncoded, and
// returns each picked turn's state as entry maps in JSON form: key →
// {"value", "tool", "seq", "turn", "turns_written", "inputs", "extra"}, the
// fields a host recorded.
func Read(t testing.TB, st *store.Store, ref backend.Ref, pick func(*store.History) []store.Turn, keys []string) (*store.History, []store.Turn, []map[string]map[string]any) {
	t.Helper()
	h, turns, enc, err := st.ReadEncoded(context.Background(), ref, "", pick, keys, EntryEncoder{})
	if err != nil {
		t.Fatal(err)
	}
	states := make([]map[string]map[string]any, len(enc))
	for i, s := range enc {
		states[i] = map[string]map[string]any{}
		for j, e := range s.Entries {
			if j > 0 && s.Entries[j-1].Key >= e.Key {
				t.Errorf("turn %d: keys out of order: %q then %q", turns[i].N, s.Entries[j-1].Key, e.Key)
			}
			var m map[string]any
			if err := json.Unmarshal(e.Data, &m); err != nil {
				t.Fatalf("turn %d key %q: %v", turns[i].N, e.Key, err)
			}
			states[i][e.Key] = m
		}
	}
	return h, turns, states
}

// EntryEncoder encodes a whole entry as JSON, so tests see every field the
// store read.
type EntryEncoder struct{}

// Encode implements store.Encoder.
func (EntryEncoder) Encode(e store.Entry) ([]byte, error) {
	v := e.Value
	if raw, ok := v.(codec.Raw); ok {
		var err error
		if v, err = raw.Decode(); err != nil {
			return nil, err
		}
	}
	m := map[string]any{"value": v}
	put := func(k string, p any, set bool) {
		if set {
			m[k] = p
		}
	}
	put("tool", e.Tool, e.Tool != nil)
	put("seq", e.Seq, e.Seq != nil)
	put("turn", e.Turn, e.Turn != nil)
	put("turns_written", e.TurnsWritten, e.TurnsWritten != nil)
	put("inputs", e.Inputs, e.Inputs != nil)
	put("extra", e.Extra, e.Extra != nil)
	return json.Marshal(m)
}

// CheckState compares a turn's entries, as Read returns them, with what
// Build wrote, value and bookkeeping.
func CheckState(t testing.TB, n int, got map[string]map[string]any, want map[string]map[string]any) {
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
		for _, f := range []string{"value", "tool", "seq", "turn", "turns_written"} {
			if g, x := mustJSON(t, e[f]), mustJSON(t, w[f]); g != x {
				t.Errorf("turn %d key %q: %s %s, want %s", n, k, f, g, x)
			}
		}
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %#v: %v", v, err)
	}
	return string(b)
}

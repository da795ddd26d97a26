package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/sqlite"
	"github.com/historyd/historyd/store/storetest"
)

func writeDemo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "var", "demo.db")
	if err := Write(context.Background(), path); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return path
}

func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path)}
	db, err := sql.Open("sqlite", u.String()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// dbRow is one checkpoints row, decoded.
type dbRow struct {
	id, parent string
	cp         map[string]any
	values     map[string]any
	metadata   map[string]any
	messages   []any
	humans     int
	toolState  map[string]any
}

// readThread reads a thread's checkpoints in id order and decodes each
// with the decoder historyd serves from.
func readThread(t *testing.T, db *sql.DB, thread string) []dbRow {
	t.Helper()
	rows, err := db.Query(`SELECT checkpoint_id, COALESCE(parent_checkpoint_id, ''), type, checkpoint, metadata
FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id`, thread)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []dbRow
	for rows.Next() {
		var r dbRow
		var typ string
		var blob, meta []byte
		if err := rows.Scan(&r.id, &r.parent, &typ, &blob, &meta); err != nil {
			t.Fatal(err)
		}
		v, ok, err := codec.Decode(typ, blob, codec.Limits{})
		if err != nil || !ok {
			t.Fatalf("checkpoint %s: Decode(%q) = %v, %v", r.id, typ, ok, err)
		}
		r.cp = v.(map[string]any)
		r.values = r.cp["channel_values"].(map[string]any)
		r.messages, _ = r.values["messages"].([]any)
		for _, m := range r.messages {
			if m.(map[string]any)["type"] == "human" {
				r.humans++
			}
		}
		r.toolState, _ = r.values["tool_state"].(map[string]any)
		if err := json.Unmarshal(meta, &r.metadata); err != nil {
			t.Fatalf("checkpoint %s: metadata %q: %v", r.id, meta, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// turnEnds applies the turn rules: a turn ends at its checkpoint with the
// most messages, the greater id among equals.
func turnEnds(rows []dbRow) map[int]dbRow {
	ends := map[int]dbRow{}
	for _, r := range rows {
		if r.humans == 0 {
			continue
		}
		held, ok := ends[r.humans]
		if !ok || len(r.messages) > len(held.messages) || len(r.messages) == len(held.messages) && r.id > held.id {
			ends[r.humans] = r
		}
	}
	return ends
}

// wantEntry is what a key's entry must hold at the end of a turn.
type wantEntry struct {
	value        any
	seq, turn    int64
	turnsWritten int64
}

// wantState is the state each turn ends on: Severn's after turn 1, and
// Thames's, written in turn 2, from then on.
func wantState(turn int) map[string]wantEntry {
	if turn == 1 {
		return map[string]wantEntry{
			KeyArea: {11420.0, 1, 1, 1},
			KeyName: {"Severn", 2, 1, 1},
		}
	}
	return map[string]wantEntry{
		KeyArea: {12935.0, 4, 2, 2},
		KeyName: {"Thames", 5, 2, 2},
	}
}

func checkEntry(t *testing.T, where string, raw any, want wantEntry) {
	t.Helper()
	e, ok := raw.(map[string]any)
	if !ok {
		t.Fatalf("%s: entry is %T", where, raw)
	}
	wantInputs := map[string]any{"name": "model", "region": "model"}
	if e["value"] != want.value || e["tool"] != "sketch_area" || e["seq"] != want.seq ||
		e["turn"] != want.turn || e["turns_written"] != want.turnsWritten || !reflect.DeepEqual(e["inputs"], wantInputs) {
		t.Errorf("%s: entry %v, want value %v seq %d turn %d turns_written %d inputs %v",
			where, e, want.value, want.seq, want.turn, want.turnsWritten, wantInputs)
	}
}

// checkFeature checks a stored GeoJSON feature: a closed, counterclockwise
// ring of a few hundred points inside the box, named name.
func checkFeature(t *testing.T, where string, raw any, name string, points int, box [4]float64) {
	t.Helper()
	f := raw.(map[string]any)["value"].(map[string]any)
	if f["type"] != "Feature" || !reflect.DeepEqual(f["properties"], map[string]any{"name": name}) {
		t.Errorf("%s: feature %v %v", where, f["type"], f["properties"])
	}
	geom := f["geometry"].(map[string]any)
	rings := geom["coordinates"].([]any)
	if geom["type"] != "Polygon" || len(rings) != 1 {
		t.Fatalf("%s: geometry %v with %d rings", where, geom["type"], len(rings))
	}
	ring := rings[0].([]any)
	if len(ring) != points || !reflect.DeepEqual(ring[0], ring[len(ring)-1]) {
		t.Errorf("%s: ring of %d points, closed %v; want %d, closed", where, len(ring), reflect.DeepEqual(ring[0], ring[len(ring)-1]), points)
	}
	var twice float64
	for i := 0; i+1 < len(ring); i++ {
		p, q := ring[i].([]any), ring[i+1].([]any)
		lon, lat := p[0].(float64), p[1].(float64)
		if lon < box[0] || lat < box[1] || lon > box[2] || lat > box[3] {
			t.Fatalf("%s: point %d (%v, %v) outside %v", where, i, lon, lat, box)
		}
		twice += lon*q[1].(float64) - q[0].(float64)*lat
	}
	if twice <= 0 {
		t.Errorf("%s: ring is clockwise; GeoJSON exterior rings go counterclockwise", where)
	}
}

// TestWriteDecodes reads the file back with database/sql and lgcodec: the
// rows SqliteSaver would hold, and each turn's session state.
func TestWriteDecodes(t *testing.T) {
	db := openDB(t, writeDemo(t))
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; SqliteSaver leaves its files in WAL mode", mode, err)
	}
	var ddl []string
	rows, err := db.Query("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		ddl = append(ddl, s)
	}
	rows.Close()
	saverDDL := saver.SQLitePython.DDL("")
	if !slices.Equal(ddl, []string{storedDDL(saverDDL[0]), storedDDL(saverDDL[1])}) {
		t.Errorf("tables: %q", ddl)
	}

	full := readThread(t, db, Thread)
	if len(full) != 16 {
		t.Errorf("%s has %d checkpoints, want 16 (5 per turn with a tool call, 3 without)", Thread, len(full))
	}
	for i, r := range full {
		where := fmt.Sprintf("%s checkpoint %d (%s)", Thread, i, r.id)
		if r.cp["v"] != int64(4) || r.cp["id"] != r.id {
			t.Errorf("%s: v %v, id %v", where, r.cp["v"], r.cp["id"])
		}
		if _, err := time.Parse("2006-01-02T15:04:05.999999-07:00", r.cp["ts"].(string)); err != nil {
			t.Errorf("%s: ts: %v", where, err)
		}
		if r.id[14] != '6' {
			t.Errorf("%s: id is not a version 6 UUID", where)
		}
		wantParent := ""
		if i > 0 {
			wantParent = full[i-1].id
			if r.id <= full[i-1].id {
				t.Errorf("%s: ids not increasing", where)
			}
		}
		if r.parent != wantParent {
			t.Errorf("%s: parent %q, want %q", where, r.parent, wantParent)
		}
		if r.metadata["step"] != float64(i-1) || r.metadata["generated_by"] != "historyd demo" {
			t.Errorf("%s: metadata %v", where, r.metadata)
		}
		// Every message of the channel is kept whole.
		for _, m := range r.messages {
			msg := m.(map[string]any)
			if msg["id"] == nil || msg["content"] == nil {
				t.Errorf("%s: message %v", where, msg)
			}
		}
	}

	ends := turnEnds(full)
	wantMessages := []int{4, 8, 10, 12}
	for n := 1; n <= Turns; n++ {
		end, ok := ends[n]
		if !ok {
			t.Fatalf("turn %d has no checkpoint", n)
		}
		where := fmt.Sprintf("end of turn %d", n)
		if len(end.messages) != wantMessages[n-1] {
			t.Errorf("%s: %d messages, want %d", where, len(end.messages), wantMessages[n-1])
		}
		if len(end.toolState) != 3 {
			t.Errorf("%s: tool_state has %d keys, want 3", where, len(end.toolState))
		}
		for key, want := range wantState(n) {
			checkEntry(t, where+" "+key, end.toolState[key], want)
		}
		if n == 1 {
			checkFeature(t, where, end.toolState[KeyFeature], "Severn", 361, [4]float64{-4.2, 51.3, -1.4, 53.2})
		} else {
			checkFeature(t, where, end.toolState[KeyFeature], "Thames", 421, [4]float64{-2.6, 50.9, 0.8, 52.4})
		}
		var human map[string]any
		for _, m := range end.messages {
			if m.(map[string]any)["type"] == "human" {
				human = m.(map[string]any)
			}
		}
		if human["content"] != Questions()[n-1] {
			t.Errorf("%s: last question %q", where, human["content"])
		}
	}

	// The pruned thread keeps only the checkpoints of turns 3 and 4, the
	// same conversation under other ids.
	pruned := readThread(t, db, PrunedThread)
	pends := turnEnds(pruned)
	for _, r := range pruned {
		if r.humans <= PrunedThrough {
			t.Errorf("%s keeps checkpoint %s of turn %d", PrunedThread, r.id, r.humans)
		}
		if slices.ContainsFunc(full, func(f dbRow) bool { return f.id == r.id }) {
			t.Errorf("%s shares checkpoint id %s with %s", PrunedThread, r.id, Thread)
		}
	}
	for n := PrunedThrough + 1; n <= Turns; n++ {
		end, ok := pends[n]
		if !ok {
			t.Fatalf("%s: turn %d has no checkpoint", PrunedThread, n)
		}
		for key, want := range wantState(n) {
			checkEntry(t, fmt.Sprintf("%s turn %d %s", PrunedThread, n, key), end.toolState[key], want)
		}
	}

	// Pending writes: every row names a checkpoint of its thread, and the
	// pruned checkpoints' writes went with them.
	var orphans, demoWrites, prunedWrites int
	if err := db.QueryRow(`SELECT
  (SELECT count(*) FROM writes w WHERE NOT EXISTS (SELECT 1 FROM checkpoints c
     WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)),
  (SELECT count(*) FROM writes WHERE thread_id = ?),
  (SELECT count(*) FROM writes WHERE thread_id = ?)`, Thread, PrunedThread).Scan(&orphans, &demoWrites, &prunedWrites); err != nil {
		t.Fatal(err)
	}
	// Each task writes: __start__ 2, agent with a call 2, tools 3, agent
	// answering 1. Turns 1-2: 2+2+3+1 each; turns 3-4: 2+1 each. The pruned
	// thread lost turn 3's input checkpoint and with it the __start__
	// task's 2.
	if orphans != 0 || demoWrites != 22 || prunedWrites != 4 {
		t.Errorf("writes: %d orphans, %d in %s (want 22), %d in %s (want 4)",
			orphans, demoWrites, Thread, prunedWrites, PrunedThread)
	}

	infos, err := Threads()
	if err != nil {
		t.Fatal(err)
	}
	want := []ThreadInfo{
		{ID: Thread, Turns: 4, Retained: []int{1, 2, 3, 4}, Checkpoints: len(full)},
		{ID: PrunedThread, Turns: 4, Retained: []int{3, 4}, Checkpoints: len(pruned)},
	}
	if !reflect.DeepEqual(infos, want) {
		t.Errorf("Threads() = %+v, want %+v", infos, want)
	}
}

// TestWriteServes reads the file through historyd's own SQLite backend and
// store: the turns, totals, questions and state a client would be served.
func TestWriteServes(t *testing.T) {
	b, err := sqlite.Open(context.Background(), sqlite.Config{Path: writeDemo(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	checkServes(t, b)
}

// checkServes reads the demo through a backend and historyd's store: the
// turns, totals, questions and state a client would be served.
func checkServes(t *testing.T, b backend.Backend) {
	t.Helper()
	ctx := context.Background()
	s := store.New(store.Config{Backend: b})

	h, err := s.History(ctx, backend.Ref{ThreadID: Thread})
	if err != nil {
		t.Fatal(err)
	}
	if h.Total != Turns || !slices.Equal(h.Retained(), []int{1, 2, 3, 4}) {
		t.Fatalf("%s: total %d, retained %v", Thread, h.Total, h.Retained())
	}
	_, _, states := storetest.Read(t, s, h.Ref, storetest.Retained, nil)
	for i, turn := range h.Turns {
		if turn.Question != Questions()[i] {
			t.Errorf("turn %d question %q", turn.N, turn.Question)
		}
		area := states[i][KeyArea]
		want := wantState(turn.N)[KeyArea]
		if area["value"] != want.value || area["turn"] != float64(want.turn) ||
			area["turns_written"] != float64(want.turnsWritten) || area["seq"] != float64(want.seq) {
			t.Errorf("turn %d: %s = %+v, want %v", turn.N, KeyArea, area, want)
		}
		if got := states[i][KeyName]["value"]; got != wantState(turn.N)[KeyName].value {
			t.Errorf("turn %d: %s = %v", turn.N, KeyName, got)
		}
		if len(states[i]) != 3 {
			t.Errorf("turn %d: %d keys", turn.N, len(states[i]))
		}
	}

	ph, err := s.History(ctx, backend.Ref{ThreadID: PrunedThread})
	if err != nil {
		t.Fatal(err)
	}
	if ph.Total != Turns || !slices.Equal(ph.Retained(), []int{3, 4}) {
		t.Fatalf("%s: total %d, retained %v; want 4 and [3 4]", PrunedThread, ph.Total, ph.Retained())
	}
	for n := 1; n <= PrunedThrough; n++ {
		turn, look := ph.Turn(n)
		if look != store.NoLongerRetained || turn.Question != Questions()[n-1] {
			t.Errorf("%s turn %d: %v, question %q", PrunedThread, n, look, turn.Question)
		}
	}
	if _, look := ph.Turn(7); look != store.NoSuchTurn {
		t.Errorf("%s turn 7: %v, want NoSuchTurn", PrunedThread, look)
	}
	_, kept, pstates := storetest.Read(t, s, ph.Ref, storetest.Retained, []string{KeyArea})
	if len(kept) != 2 {
		t.Fatalf("%s: read %d turns, want 2", PrunedThread, len(kept))
	}
	for i, st := range pstates {
		if v := st[KeyArea]["value"]; v != 12935.0 || len(st) != 1 {
			t.Errorf("%s turn %d: %v", PrunedThread, kept[i].N, st)
		}
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestWriteReproducible checks that the file is the same, byte for byte,
// however often and wherever it is written, and that writing over the demo
// leaves it untouched.
func TestWriteReproducible(t *testing.T) {
	a, b := writeDemo(t), writeDemo(t)
	if fileSum(t, a) != fileSum(t, b) {
		t.Error("two writes of the demo differ")
	}
	before, _ := os.Stat(a)
	sum := fileSum(t, a)
	time.Sleep(20 * time.Millisecond)
	if err := Write(context.Background(), a); err != nil {
		t.Fatalf("second Write: %v", err)
	}
	after, _ := os.Stat(a)
	if fileSum(t, a) != sum || !after.ModTime().Equal(before.ModTime()) {
		t.Error("writing the demo over itself changed the file")
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(a + suffix); err == nil {
			t.Errorf("%s left behind", suffix)
		}
	}
}

// TestWriteConcurrent checks that writers racing on one path leave the
// demo there: the check and the write happen under one write lock.
func TestWriteConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() { errs <- Write(context.Background(), path) }()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Errorf("Write: %v", err)
		}
	}
	if fileSum(t, path) != fileSum(t, writeDemo(t)) {
		t.Error("racing writers left something other than the demo")
	}
}

// TestWriteRefuses checks that only demo files are overwritten.
func TestWriteRefuses(t *testing.T) {
	ctx := context.Background()
	exec1 := func(t *testing.T, path, stmt string) {
		t.Helper()
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(path)}
		db, err := sql.Open("sqlite", u.String())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	refusals := []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{"text file", func(t *testing.T, path string) {
			os.WriteFile(path, []byte("my notes, not a database\n"), 0o644)
		}},
		{"other tables", func(t *testing.T, path string) {
			exec1(t, path, "CREATE TABLE notes (body TEXT)")
		}},
		{"another thread", func(t *testing.T, path string) {
			if err := Write(ctx, path); err != nil {
				t.Fatal(err)
			}
			exec1(t, path, `INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, metadata)
VALUES ('customer-42', '', '1f0', 'msgpack', x'80', '{"generated_by": "historyd demo"}')`)
		}},
		{"unmarked demo thread", func(t *testing.T, path string) {
			if err := Write(ctx, path); err != nil {
				t.Fatal(err)
			}
			exec1(t, path, `UPDATE checkpoints SET metadata = '{"source": "loop"}' WHERE rowid = 3`)
		}},
		{"other writes", func(t *testing.T, path string) {
			if err := Write(ctx, path); err != nil {
				t.Fatal(err)
			}
			exec1(t, path, `UPDATE writes SET thread_id = 'customer-42' WHERE rowid = 1`)
		}},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			c.prepare(t, path)
			sum := fileSum(t, path)
			err := Write(ctx, path)
			if !errors.Is(err, ErrNotDemo) {
				t.Fatalf("Write = %v, want ErrNotDemo", err)
			}
			if fileSum(t, path) != sum {
				t.Error("the refused file was changed")
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		if err := Write(ctx, t.TempDir()); err == nil {
			t.Error("Write over a directory succeeded")
		}
	})

	fresh := writeDemo(t)
	rewrites := []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{"empty file", func(t *testing.T, path string) { os.WriteFile(path, nil, 0o644) }},
		{"older demo", func(t *testing.T, path string) {
			if err := Write(ctx, path); err != nil {
				t.Fatal(err)
			}
			exec1(t, path, "DELETE FROM checkpoints WHERE rowid > 7")
		}},
		{"older schema", func(t *testing.T, path string) {
			exec1(t, path, "CREATE TABLE checkpoints (thread_id TEXT, checkpoint_id TEXT, metadata BLOB)")
		}},
	}
	for _, c := range rewrites {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			c.prepare(t, path)
			if err := Write(ctx, path); err != nil {
				t.Fatalf("Write: %v", err)
			}
			db := openDB(t, path)
			if got, want := readThread(t, db, Thread), readThread(t, openDB(t, fresh), Thread); !reflect.DeepEqual(got, want) {
				t.Error("the rewritten file does not hold the demo")
			}
		})
	}
}

// encodeTranscript writes the conversation for the LangGraph check: what
// each turn's user, model and tool said, as msgpack that Python loads into
// real LangChain messages.
func encodeTranscript(t *testing.T) []byte {
	t.Helper()
	threads, err := build()
	if err != nil {
		t.Fatal(err)
	}
	var list []any
	for _, th := range threads {
		var turns []any
		for _, turn := range th.transcript {
			var steps []any
			for _, s := range turn.steps {
				step := write.Map{{Key: "ai", Value: s.ai}, {Key: "update", Value: nil}, {Key: "reply", Value: nil}}
				if s.reply != nil {
					step = step.Set("update", s.update).Set("reply", *s.reply)
				}
				steps = append(steps, step)
			}
			turns = append(turns, write.Map{{Key: "human", Value: turn.human}, {Key: "steps", Value: steps}})
		}
		through := 0
		if th.id == PrunedThread {
			through = PrunedThrough
		}
		list = append(list, write.Map{{Key: "id", Value: th.id}, {Key: "prune_through", Value: through}, {Key: "turns", Value: turns}})
	}
	b, err := write.EncodeMsgpack(write.Map{
		{Key: "metadata", Value: write.Map{{Key: generatedByKey, Value: generatedByDemo}}},
		{Key: "threads", Value: list},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// langGraphReport is what testdata/langgraph_check.py finds.
type langGraphReport struct {
	Versions map[string]string `json:"versions"`
	Read     map[string]json.RawMessage
	Ours     fileReport `json:"ours"`
	LG       fileReport `json:"langgraph"`
}

type fileReport struct {
	Schema      [][]string                   `json:"schema"`
	JournalMode string                       `json:"journal_mode"`
	Threads     map[string][]json.RawMessage `json:"threads"`
	Problems    []string                     `json:"problems"`
}

type readReport struct {
	List []struct {
		ID             string         `json:"id"`
		Parent         *string        `json:"parent"`
		V              int            `json:"v"`
		Metadata       map[string]any `json:"metadata"`
		Messages       int            `json:"messages"`
		Humans         int            `json:"humans"`
		MessageClasses []string       `json:"message_classes"`
		ToolState      any            `json:"tool_state"`
		PendingWrites  int            `json:"pending_writes"`
	} `json:"list"`
	History []struct {
		ID        string   `json:"id"`
		Messages  int      `json:"messages"`
		Humans    int      `json:"humans"`
		ToolState any      `json:"tool_state"`
		Next      []string `json:"next"`
		Step      int      `json:"step"`
	} `json:"history"`
}

// asJSON maps a decoded value to what encoding/json reads back from its
// text, so values from both sides compare alike.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// nextNodes is what LangGraph runs after a checkpoint of the demo graph:
// the node whose trigger channel holds a value.
func nextNodes(values map[string]any) []string {
	next := []string{}
	for ch, node := range map[string]string{chanStart: chanStart, chanToAgent: nodeAgent, chanToTools: nodeTools} {
		if _, ok := values[ch]; ok {
			next = append(next, node)
		}
	}
	return next
}

// TestLangGraphReadsDemo is the proof that the file is in the real format:
// LangGraph's own SqliteSaver and graph read every checkpoint as the Go
// decoder does and can continue the thread, and the same conversation
// played through LangGraph and SqliteSaver gives the same rows, byte for
// byte, up to ids, times and random version suffixes.
func TestLangGraphReadsDemo(t *testing.T) {
	py := testPython(t)
	path := writeDemo(t)
	sum := fileSum(t, path)
	work := t.TempDir()
	check := filepath.Join(work, "ours.db")
	data, _ := os.ReadFile(path)
	os.WriteFile(check, data, 0o644)
	rep := runLangGraphCheck(t, py, "sqlite", check, writeTranscript(t, work), work)
	if fileSum(t, path) != sum {
		t.Fatal("the check changed the demo file")
	}
	db := openDB(t, path)
	checkLangGraphReport(t, rep, func(t *testing.T, thread string) []dbRow { return readThread(t, db, thread) })
}

// testPython is the venv python the LangGraph checks run with.
func testPython(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: runs real LangGraph")
	}
	py := os.Getenv("HISTORYD_TEST_PYTHON")
	if py == "" {
		t.Fatal("HISTORYD_TEST_PYTHON is not set: point it at the python of the venv scripts/pyenv.sh builds " +
			"(.cache/venv/bin/python, with langgraph, langgraph-checkpoint-sqlite and langgraph-checkpoint-postgres), " +
			"or run scripts/test.sh, which sets it; use -short to skip this test")
	}
	return py
}

// writeTranscript writes the conversation for the LangGraph check into
// dir and returns its path.
func writeTranscript(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "transcript.msgpack")
	if err := os.WriteFile(path, encodeTranscript(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runLangGraphCheck runs testdata/langgraph_check.py with args (the
// report's path is added last) and returns its report.
func runLangGraphCheck(t *testing.T, py string, args ...string) langGraphReport {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	script, _ := filepath.Abs(filepath.Join("testdata", "langgraph_check.py"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append(append([]string{script}, args...), out)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", py, script, err, stderr.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep langGraphReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("checked with %v", rep.Versions)
	return rep
}

// checkLangGraphReport holds the demo to what LangGraph reported: the
// rows its saver writes for the same conversation, what it reads from
// each checkpoint compared with the Go decoding of the rows (rows lists a
// thread's, in id order), and a fifth turn resumed on a copy.
func checkLangGraphReport(t *testing.T, rep langGraphReport, rows func(t *testing.T, thread string) []dbRow) {
	t.Run("format", func(t *testing.T) {
		for _, f := range []fileReport{rep.Ours, rep.LG} {
			for _, p := range f.Problems {
				t.Error(p)
			}
		}
		if len(rep.Ours.Schema) == 0 || !reflect.DeepEqual(rep.Ours.Schema, rep.LG.Schema) {
			t.Errorf("schema:\nours:      %q\nlanggraph: %q", rep.Ours.Schema, rep.LG.Schema)
		}
		if rep.Ours.JournalMode != rep.LG.JournalMode {
			t.Errorf("journal mode: ours %q, langgraph %q", rep.Ours.JournalMode, rep.LG.JournalMode)
		}
		for _, thread := range demoThreads {
			ours, lg := rep.Ours.Threads[thread], rep.LG.Threads[thread]
			if len(ours) != len(lg) || len(ours) == 0 {
				t.Errorf("%s: %d checkpoints, LangGraph wrote %d", thread, len(ours), len(lg))
			}
			for i := range min(len(ours), len(lg)) {
				if !jsonEqual(ours[i], lg[i]) {
					t.Errorf("%s checkpoint %d differs from LangGraph's:\nours:      %s\nlanggraph: %s",
						thread, i, clip(ours[i]), clip(lg[i]))
				}
			}
		}
	})

	for _, thread := range demoThreads {
		t.Run("read/"+thread, func(t *testing.T) {
			var got readReport
			if err := json.Unmarshal(rep.Read[thread], &got); err != nil {
				t.Fatal(err)
			}
			rows := rows(t, thread)
			slices.Reverse(rows) // LangGraph lists newest first
			if len(got.List) != len(rows) || len(got.History) != len(rows) {
				t.Fatalf("LangGraph lists %d checkpoints and %d states, the store has %d", len(got.List), len(got.History), len(rows))
			}
			for i, r := range rows {
				l, h := got.List[i], got.History[i]
				where := fmt.Sprintf("checkpoint %s", r.id)
				var parent string
				if l.Parent != nil {
					parent = *l.Parent
				}
				if l.ID != r.id || h.ID != r.id || parent != r.parent || l.V != 4 {
					t.Errorf("%s: LangGraph lists id %s / %s, parent %q, v %d", where, l.ID, h.ID, parent, l.V)
				}
				if !reflect.DeepEqual(asJSON(t, l.Metadata), asJSON(t, r.metadata)) {
					t.Errorf("%s: metadata %v, Go reads %v", where, l.Metadata, r.metadata)
				}
				if l.Messages != len(r.messages) || h.Messages != len(r.messages) || l.Humans != r.humans || h.Humans != r.humans {
					t.Errorf("%s: LangGraph counts %d/%d messages, %d/%d human; Go %d, %d",
						where, l.Messages, h.Messages, l.Humans, h.Humans, len(r.messages), r.humans)
				}
				for j, class := range l.MessageClasses {
					if want := map[string]string{"human": "HumanMessage", "ai": "AIMessage", "tool": "ToolMessage"}[r.messages[j].(map[string]any)["type"].(string)]; class != want {
						t.Errorf("%s: message %d revived as %s, want %s", where, j, class, want)
					}
				}
				// Before the first write the checkpoint has no tool_state; the
				// graph's state still shows the reducer channel's empty dict.
				var want any
				wantState := any(map[string]any{})
				if r.toolState != nil {
					want = asJSON(t, r.toolState)
					wantState = want
				}
				if !reflect.DeepEqual(l.ToolState, want) || !reflect.DeepEqual(h.ToolState, wantState) {
					t.Errorf("%s: LangGraph's tool_state differs from Go's: listed %.200v, in history %.200v, Go %.200v", where, l.ToolState, h.ToolState, want)
				}
				if want := nextNodes(r.values); !slices.Equal(h.Next, want) {
					t.Errorf("%s: LangGraph would run %v next, want %v", where, h.Next, want)
				}
				if i == 0 && l.PendingWrites != 0 {
					t.Errorf("%s: the newest checkpoint has %d pending writes", where, l.PendingWrites)
				}
			}
		})
	}

	t.Run("resume", func(t *testing.T) {
		var got struct {
			NewCheckpoints int      `json:"new_checkpoints"`
			Humans         int      `json:"humans"`
			Messages       int      `json:"messages"`
			ToolState      any      `json:"tool_state"`
			Next           []string `json:"next"`
			NewSteps       []int    `json:"new_steps"`
		}
		if err := json.Unmarshal(rep.Read["resume"], &got); err != nil {
			t.Fatal(err)
		}
		rows := rows(t, Thread)
		last := rows[len(rows)-1]
		step := int(last.metadata["step"].(float64))
		if got.NewCheckpoints != 3 || !slices.Equal(got.NewSteps, []int{step + 1, step + 2, step + 3}) ||
			got.Humans != 5 || got.Messages != len(last.messages)+2 || len(got.Next) != 0 {
			t.Errorf("a fifth turn on the demo thread: %+v; want 3 new checkpoints (input, __start__, agent) at steps %d..%d, 5 questions, %d messages, nothing left to run",
				got, step+1, step+3, len(last.messages)+2)
		}
		if !reflect.DeepEqual(got.ToolState, asJSON(t, last.toolState)) {
			t.Error("the fifth turn changed tool_state")
		}
	})
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// clip keeps a failure message readable: long hex and coordinate lists are
// cut.
func clip(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 6000 {
		s = s[:3000] + " … " + s[len(s)-3000:]
	}
	return strings.ReplaceAll(s, "\n", "")
}

func TestPythonFloat016(t *testing.T) {
	cases := map[float64]string{
		0.8660817051498665:  "0.8660817051498665",
		0.09085832161486951: "0.09085832161486951",
		0.5:                 "00000000000000.5",
		0:                   "00000000000000.0",
		5.2e-05:             "0000000005.2e-05",
	}
	for f, want := range cases {
		if got := pythonFloat016(f); got != want {
			t.Errorf("pythonFloat016(%v) = %q, want %q", f, got, want)
		}
	}
	if got := channelVersion(4, 0.6604440435506272); got != "00000000000000000000000000000004.0.6604440435506272" {
		t.Errorf("channelVersion = %q", got)
	}
}

func TestCheckpointID(t *testing.T) {
	// A checkpoint LangGraph wrote: its time, step and node give its id.
	ts := time.Date(2026, 11, 30, 7, 53, 0, 729232000, time.UTC)
	id := checkpointID(ts, 0, 0x99da454529e9)
	if !strings.HasPrefix(id, "1f1ec931-08e1-6") || !strings.HasSuffix(id, "-8000-99da454529e9") {
		t.Errorf("checkpointID = %s, want 1f1ec931-08e1-6…-8000-99da454529e9", id)
	}
	if id := checkpointID(ts, -1, 1); !strings.Contains(id, "-bfff-") {
		t.Errorf("step -1 gives %s, want clock sequence bfff", id)
	}
	if len(id) != 36 {
		t.Errorf("id %q is not 36 characters", id)
	}
}

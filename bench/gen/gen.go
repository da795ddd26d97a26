// Package gen writes synthetic LangGraph threads into PostgreSQL in the
// format Python's PostgresSaver writes: one row per checkpoint in
// `checkpoints` (the checkpoint map as JSONB, primitives inline in
// channel_values), one `checkpoint_blobs` row per channel version holding
// the value as JsonPlusSerializer msgpack, and the pending writes of each
// step's task in `checkpoint_writes`.
//
// A thread is shaped like an agent built with a StateGraph of two nodes,
// `agent` and `tools` (START → agent ⇄ tools), over two state channels:
// `messages` (a list of LangChain messages, reduced by add_messages) and
// `tool_state` (key → entry in the mcp-toolsets-runtime convention). Each
// turn is:
//
//	input   the question arrives on __start__ (metadata source "input")
//	loop    the question is appended to messages
//	loop    agent: an AIMessage calling a tool          ┐ repeated
//	loop    tools: a ToolMessage, tool_state rewritten   ┘ per tool round
//	loop    agent: the final AIMessage answer
//
// so a turn has 3 + 2·rounds checkpoints. The first tool round of turn 1
// writes every state key; every later round rewrites one key (round robin)
// with a fresh value of the same size, so the state stays near the asked
// size for the whole thread. Values are GeoJSON polygons whose coordinate
// rings set their size.
//
// The rows are lgsaver's (its PostgresPython layout), loaded with COPY.
// The tables must exist; the bench creates them with LangGraph's own
// PostgresSaver.setup().
package gen

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
)

// Params shape one thread.
type Params struct {
	// Turns is the number of user questions (T).
	Turns int
	// CheckpointsPerTurn is C: odd and at least 5 (input, question, one
	// agent/tools round per extra pair, answer).
	CheckpointsPerTurn int
	// Keys is the number of tool_state keys (K), at least 1.
	Keys int
	// StateBytes is the approximate encoded size of the whole tool_state
	// value (S), split evenly between the keys.
	StateBytes int
	// Seed makes coordinates and ids reproducible.
	Seed uint64
	// Forks is how many times the thread was rewound: at Forks turns
	// spread over the thread (ForkTurns), a question was asked and
	// answered, then abandoned, the turn asked again from the end of the
	// turn before it, as time travel does. The lineage is the thread
	// without forks; each fork adds one abandoned turn.
	Forks int
}

// ForkTurns returns the turns asked again after an abandoned one: Forks
// of them, spread evenly, none the first.
func (p Params) ForkTurns() []int {
	var out []int
	for i := range p.Forks {
		out = append(out, 2+(i+1)*(p.Turns-1)/(p.Forks+1))
	}
	return out
}

// Validate reports the first parameter out of range.
func (p Params) Validate() error {
	switch {
	case p.Turns < 1:
		return fmt.Errorf("turns %d: want at least 1", p.Turns)
	case p.CheckpointsPerTurn < 5 || p.CheckpointsPerTurn%2 == 0:
		return fmt.Errorf("checkpoints per turn %d: want an odd number ≥ 5 (input, question, agent/tools rounds, answer)", p.CheckpointsPerTurn)
	case p.Keys < 1:
		return fmt.Errorf("keys %d: want at least 1", p.Keys)
	case p.StateBytes < 64*p.Keys:
		return fmt.Errorf("state bytes %d: want at least 64 per key (%d)", p.StateBytes, 64*p.Keys)
	case p.Forks < 0 || p.Forks > 0 && p.Forks >= p.Turns:
		return fmt.Errorf("forks %d: want 0 to %d (fewer than the turns)", p.Forks, p.Turns-1)
	}
	return nil
}

// Name is a thread id that spells out the parameters.
func (p Params) Name(prefix string) string {
	name := fmt.Sprintf("%s-T%d-C%d-K%d-S%d", prefix, p.Turns, p.CheckpointsPerTurn, p.Keys, p.StateBytes)
	if p.Forks > 0 {
		name += fmt.Sprintf("-F%d", p.Forks)
	}
	return name
}

// Checkpoint is what the generator wrote at one checkpoint, for checks.
type Checkpoint struct {
	ID string
	// Step is the checkpoint's metadata step.
	Step int
	// Types are the message types of the messages channel, in order.
	Types []string
	// Humans is the number of human messages.
	Humans int
	// State is the tool_state value as plain JSON-like data (nil before
	// the first write).
	State map[string]any
	// Writes is the number of checkpoint_writes rows of the checkpoint.
	Writes int
}

// Summary describes a written thread.
type Summary struct {
	ThreadID    string
	Params      Params
	Checkpoints []Checkpoint // in id order
	// TurnEnds maps each turn to the checkpoint it ends on, by historyd's
	// rules (most messages, then greatest id).
	TurnEnds map[int]string
	// StateBlobBytes is the encoded size of the largest tool_state blob.
	StateBlobBytes int
	// TotalBlobBytes is the sum of every blob and write written.
	TotalBlobBytes int64
	// Rows counts rows per table.
	Rows map[string]int
}

// Options tune Write.
type Options struct {
	// KeepDetail keeps each checkpoint's state and message types in the
	// Summary (for tests; costly for large threads).
	KeepDetail bool
	// Start is the time of the first checkpoint; zero means Turns minutes
	// before now.
	Start time.Time
}

// Exists reports whether the thread already holds exactly the checkpoints
// Write would give it.
func Exists(ctx context.Context, conn *pgx.Conn, threadID string, p Params) (bool, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = ''`, threadID).Scan(&n)
	if err != nil {
		return false, err
	}
	return n == (p.Turns+p.Forks)*p.CheckpointsPerTurn, nil
}

// TablesExist reports whether LangGraph's checkpoint tables are in the
// connection's search_path.
func TablesExist(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT to_regclass('checkpoints') IS NOT NULL AND to_regclass('checkpoint_blobs') IS NOT NULL AND to_regclass('checkpoint_writes') IS NOT NULL`).Scan(&ok)
	return ok, err
}

// Write replaces the thread threadID with a generated one, in one
// transaction, and returns what it wrote.
func Write(ctx context.Context, conn *pgx.Conn, threadID string, p Params, opt Options) (*Summary, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var sum *Summary
	err := replace(ctx, conn, threadID, func(w *writer) (err error) {
		sum, err = build(ctx, threadID, p, opt, w.row)
		return err
	})
	return sum, err
}

// replace deletes the thread's rows and has fill write the new ones
// through one writer, in one transaction.
func replace(ctx context.Context, conn *pgx.Conn, threadID string, fill func(w *writer) error) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit this is a no-op
	for _, table := range copyOrder {
		if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE thread_id = $1`, threadID); err != nil {
			return fmt.Errorf("clear %s: %w", table, err)
		}
	}
	w := &writer{tx: tx, tables: map[string]*copyTable{}}
	if err := fill(w); err != nil {
		return err
	}
	if err := w.flush(ctx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// writer loads the rows lgsaver's writer makes (saver.Rows) with COPY,
// in the caller's transaction, buffering up to flushBytes of them at a
// time.
type writer struct {
	tx       pgx.Tx
	tables   map[string]*copyTable
	buffered int
}

// copyTable is the rows of one table not copied yet.
type copyTable struct {
	cols []string
	rows [][]any
}

// copyOrder is the order tables are copied in: blobs before the
// checkpoints that name their versions, writes after their checkpoints.
var copyOrder = []string{"checkpoint_blobs", "checkpoints", "checkpoint_writes"}

const flushBytes = 16 << 20

// row buffers one row, and copies what is buffered once it is flushBytes.
func (w *writer) row(ctx context.Context, r saver.Row) error {
	t := w.tables[r.Table]
	if t == nil {
		if !slices.Contains(copyOrder, r.Table) {
			return fmt.Errorf("a row of table %s, which is not one of %v", r.Table, copyOrder)
		}
		t = &copyTable{cols: r.Columns}
		w.tables[r.Table] = t
	}
	t.rows = append(t.rows, r.Values)
	for _, v := range r.Values {
		switch x := v.(type) {
		case string:
			w.buffered += len(x)
		case []byte:
			w.buffered += len(x)
		}
	}
	if w.buffered >= flushBytes {
		return w.flush(ctx)
	}
	return nil
}

func (w *writer) flush(ctx context.Context) error {
	for _, table := range copyOrder {
		t := w.tables[table]
		if t == nil || len(t.rows) == 0 {
			continue
		}
		if _, err := w.tx.CopyFrom(ctx, pgx.Identifier{table}, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
			return fmt.Errorf("copy into %s: %w", table, err)
		}
		t.rows = t.rows[:0]
	}
	w.buffered = 0
	return nil
}

// thread is the state of generating one thread.
type thread struct {
	ctx   context.Context
	id    string
	p     Params
	opt   Options
	saver *saver.Writer // in Python's PostgresSaver layout
	err   error         // the first the saver returned
	rng   *mrand.Rand
	node  [6]byte

	// pending are the blob-stored channel values given a new version
	// since the last checkpoint, for the next one: the saver stores a
	// value once per version, so that is the checkpoint it reads them
	// from.
	pending write.Map
	// blobMax is the size of the largest blob stored, per channel.
	blobMax map[string]int

	now      time.Time
	step     int
	versions map[string]string
	counter  int
	seen     map[string]map[string]string
	lastID   string

	updated []string

	msgs   [][]byte // each message's msgpack
	types  []string
	humans int

	keys     []string
	entries  map[string][]byte // key → entry msgpack
	plain    map[string]any    // key → entry as plain data (KeepDetail only)
	written  map[string]int    // key → turns_written
	lastTurn map[string]int    // key → turn of last write
	seq      int
	rr       int
	state    bool // tool_state has a value

	sum *Summary
}

// newThread starts generating the thread id, its checkpoints' rows handed
// to rows (none when nil); turns and stream seed its random numbers with
// the parameters' seed.
func newThread(ctx context.Context, id string, opt Options, turns int, seed, stream uint64, rows saver.Rows) (*thread, error) {
	start := opt.Start
	if start.IsZero() {
		start = time.Now().UTC().Add(-time.Duration(turns) * time.Minute).Truncate(time.Microsecond)
	}
	t := &thread{
		ctx: ctx, id: id, opt: opt,
		rng:      mrand.New(mrand.NewPCG(seed, stream)),
		now:      start,
		step:     -1,
		versions: map[string]string{},
		seen:     map[string]map[string]string{"__input__": {}},
		blobMax:  map[string]int{},
		sum:      &Summary{ThreadID: id, TurnEnds: map[int]string{}, Rows: map[string]int{}},
	}
	t.saver = saver.NewRowWriter(saver.PostgresPython, func(ctx context.Context, r saver.Row) error {
		t.sum.Rows[r.Table]++
		switch r.Table {
		case "checkpoint_blobs":
			n := len(r.Values[5].([]byte))
			ch := r.Values[2].(string)
			t.blobMax[ch] = max(t.blobMax[ch], n)
			t.sum.TotalBlobBytes += int64(n)
		case "checkpoint_writes":
			t.sum.TotalBlobBytes += int64(len(r.Values[len(r.Values)-1].([]byte)))
		}
		if rows == nil {
			return nil
		}
		return rows(ctx, r)
	})
	if _, err := rand.Read(t.node[:]); err != nil {
		return nil, err
	}
	t.node[0] |= 0x01 // multicast bit, as a random node id sets it
	return t, nil
}

func build(ctx context.Context, threadID string, p Params, opt Options, rows saver.Rows) (*Summary, error) {
	t, err := newThread(ctx, threadID, opt, p.Turns, p.Seed, uint64(p.Turns)<<32|uint64(p.Keys), rows)
	if err != nil {
		return nil, err
	}
	t.p = p
	t.sum.Params = p
	t.entries, t.plain, t.written, t.lastTurn = map[string][]byte{}, map[string]any{}, map[string]int{}, map[string]int{}
	for k := range p.Keys {
		t.keys = append(t.keys, fmt.Sprintf("geo-ops/sketch_polygon/region_%03d", k))
	}
	rounds := (p.CheckpointsPerTurn - 3) / 2
	forks := p.ForkTurns()
	for n := 1; n <= p.Turns; n++ {
		if slices.Contains(forks, n) {
			// Turn n is asked, answered and abandoned: the thread is
			// rewound to turn n-1's end and turn n asked again from there.
			at := t.mark()
			if err := t.turn(n, rounds); err != nil {
				return nil, err
			}
			t.rewind(at)
		}
		if err := t.turn(n, rounds); err != nil {
			return nil, err
		}
	}
	if t.err != nil {
		return nil, t.err
	}
	t.sum.StateBlobBytes = t.blobMax["tool_state"]
	return t.sum, nil
}

// threadAt is what a thread was at one checkpoint, to rewind to.
type threadAt struct {
	step              int
	versions          map[string]string
	seen              map[string]map[string]string
	lastID            string
	msgs              [][]byte
	types             []string
	humans            int
	entries           map[string][]byte
	plain             map[string]any
	written, lastTurn map[string]int
	seq, rr           int
	state             bool
	turnEnds          map[int]string
}

// mark records the thread as it is now.
func (t *thread) mark() threadAt {
	return threadAt{step: t.step, versions: maps.Clone(t.versions), seen: maps.Clone(t.seen), lastID: t.lastID,
		msgs: slices.Clone(t.msgs), types: slices.Clone(t.types), humans: t.humans, entries: maps.Clone(t.entries),
		plain: maps.Clone(t.plain), written: maps.Clone(t.written), lastTurn: maps.Clone(t.lastTurn), seq: t.seq, rr: t.rr,
		state: t.state, turnEnds: maps.Clone(t.sum.TurnEnds)}
}

// rewind makes the next checkpoint a child of the one at marks, with the
// thread as it was there; time, ids and version counters go on.
func (t *thread) rewind(at threadAt) {
	t.step, t.versions, t.seen, t.lastID = at.step, at.versions, at.seen, at.lastID
	t.msgs, t.types, t.humans, t.entries, t.plain = at.msgs, at.types, at.humans, at.entries, at.plain
	t.written, t.lastTurn, t.seq, t.rr, t.state = at.written, at.lastTurn, at.seq, at.rr, at.state
	t.sum.TurnEnds = at.turnEnds
}

// turn writes the checkpoints of turn n.
func (t *thread) turn(n, rounds int) error {
	t.now = t.now.Add(45 * time.Second)
	question := fmt.Sprintf("Turn %d: how does the region outline compare with the one you found earlier?", n)
	human, err := write.EncodeMsgpack(write.HumanMessage(t.uuid4(), question))
	if err != nil {
		return err
	}
	const agentPath, toolsPath = "~__pregel_pull, agent", "~__pregel_pull, tools"

	// input: the question arrives on __start__; its task appends it.
	t.bump("__start__")
	t.blob("__start__", concat(mapHeader(1), mustEncode("messages"), arrayHeader(1), human))
	t.emit("input", nil, task{"~__pregel_pull, __start__", []pendingWrite{
		{"messages", concat(arrayHeader(1), human)},
		{"branch:to:agent", nil},
	}})
	if n > 1 {
		// The input checkpoint holds the previous turn's messages and a
		// greater id than its last step: by the rules it is where the
		// previous turn ends.
		t.sum.TurnEnds[n-1] = t.lastID
	}
	t.seen["__start__"] = map[string]string{"__start__": t.versions["__start__"]}
	t.appendMessage("human", human)
	t.bump("__start__", "branch:to:agent", "messages") // __start__ consumed: a version, no value
	t.putMessages()
	inline := none("branch:to:agent")

	for r := range rounds {
		call := fmt.Sprintf("call_%d_%d_%s", n, r, t.hex(6))
		target := []string{t.keys[t.rr%len(t.keys)]}
		if n == 1 && r == 0 {
			target = slices.Clone(t.keys)
		} else {
			t.rr++
		}
		args := write.Map{{Key: "regions", Value: target}, {Key: "vertices", Value: t.points()}}
		aiCall, err := write.EncodeMsgpack(write.AIMessageWith("lc_run--"+t.uuid4(), "",
			[]write.ToolCall{{Name: "sketch_polygon", Args: args, ID: call}},
			write.Map{{Key: "model_name", Value: "bench-model"}, {Key: "finish_reason", Value: "tool_calls"}},
			write.Map{{Key: "input_tokens", Value: 900 + 40*n}, {Key: "output_tokens", Value: 32}, {Key: "total_tokens", Value: 932 + 40*n}}))
		if err != nil {
			return err
		}
		// agent is triggered: it calls the tool.
		t.emit("loop", inline, task{agentPath, []pendingWrite{
			{"messages", concat(arrayHeader(1), aiCall)},
			{"branch:to:tools", nil},
		}})
		t.seen["agent"] = map[string]string{"branch:to:agent": t.versions["branch:to:agent"]}
		t.appendMessage("ai", aiCall)
		t.bump("branch:to:tools", "messages")
		t.putMessages()

		// tools is triggered: it answers and rewrites tool_state.
		toolMsg, err := write.EncodeMsgpack(write.ToolMessage(t.uuid4(), "[state updated: "+joinKeys(target)+"]", "sketch_polygon", call))
		if err != nil {
			return err
		}
		update, apply, err := t.rewrite(n, target)
		if err != nil {
			return err
		}
		t.emit("loop", none("branch:to:tools"), task{toolsPath, []pendingWrite{
			{"messages", concat(arrayHeader(1), toolMsg)},
			{"tool_state", update},
			{"branch:to:agent", nil},
		}})
		t.seen["tools"] = map[string]string{"branch:to:tools": t.versions["branch:to:tools"]}
		t.appendMessage("tool", toolMsg)
		apply()
		t.bump("branch:to:agent", "messages", "tool_state")
		t.putMessages()
		t.blob("tool_state", t.stateBlob())
		t.state = true
	}

	// agent is triggered: it answers.
	answer, err := write.EncodeMsgpack(write.AIMessageWith("lc_run--"+t.uuid4(),
		fmt.Sprintf("Turn %d: the outline now has %d vertices; the earlier one is still in session state.", n, t.points()), nil,
		write.Map{{Key: "model_name", Value: "bench-model"}, {Key: "finish_reason", Value: "stop"}},
		write.Map{{Key: "input_tokens", Value: 1000 + 40*n}, {Key: "output_tokens", Value: 24}, {Key: "total_tokens", Value: 1024 + 40*n}}))
	if err != nil {
		return err
	}
	t.emit("loop", inline, task{agentPath, []pendingWrite{{"messages", concat(arrayHeader(1), answer)}}})
	t.seen["agent"] = map[string]string{"branch:to:agent": t.versions["branch:to:agent"]}
	t.appendMessage("ai", answer)
	t.bump("messages")
	t.putMessages()
	t.emit("loop", nil, task{})
	t.sum.TurnEnds[n] = t.lastID
	return nil
}

// bump gives the channels one new version, as a step does for every
// channel it updates, and records them as the next checkpoint's
// updated_channels.
func (t *thread) bump(channels ...string) string {
	v := t.nextVersion()
	for _, c := range channels {
		t.versions[c] = v
	}
	t.updated = channels
	return v
}

// blob gives the next checkpoint the value of a channel the step before
// it updated (its version is new), msgpack encoded: one Python's
// PostgresSaver stores as a blob.
func (t *thread) blob(channel string, data []byte) {
	t.pending = append(t.pending, write.Field{Key: channel, Value: write.Raw(data)})
}

// none is the channels with the value None, inline in a checkpoint: the
// trigger channels a step wrote.
func none(channels ...string) write.Map {
	m := make(write.Map, len(channels))
	for i, c := range channels {
		m[i] = write.Field{Key: c}
	}
	return m
}

// task is one task's pending writes, numbered from 0.
type task struct {
	path   string
	writes []pendingWrite
}

// pendingWrite is one write of a task: msgpack data, or None when nil.
type pendingWrite struct {
	channel string
	data    []byte
}

// value is the write's value as the saver takes it.
func (w pendingWrite) value() any {
	if w.data == nil {
		return nil
	}
	return write.Raw(w.data)
}

// emit writes one checkpoint with the current versions, its metadata and
// the writes of the task that runs from it.
func (t *thread) emit(source string, inline write.Map, tk task) {
	id, step := t.put(source, inline, nil, []task{tk})
	c := Checkpoint{ID: id, Step: step, Humans: t.humans, Writes: len(tk.writes)}
	if t.opt.KeepDetail {
		c.Types = slices.Clone(t.types)
		if t.state {
			c.State = map[string]any{}
			for k, v := range t.plain {
				c.State[k] = v
			}
		}
	}
	t.sum.Checkpoints = append(t.sum.Checkpoints, c)
}

// put writes one checkpoint through the saver, the plain generator's and
// the deepagents one's alike: the current versions and versions_seen, the
// channels the step before it updated, values (inline ones and
// DeltaChannel snapshots) with the pending blobs, metadata (its step and
// source, then meta), and the writes of the tasks that run from it. It
// returns the checkpoint's id and step.
func (t *thread) put(source string, values, meta write.Map, tasks []task) (string, int) {
	updated := t.updated
	if updated == nil {
		updated = []string{}
	}
	slices.Sort(updated)
	t.now = t.now.Add(time.Duration(900+t.rng.IntN(2200)) * time.Microsecond)
	id, step := t.uuid6(t.now, t.step), t.step
	versions := make(write.Map, 0, len(t.versions))
	for _, k := range slices.Sorted(maps.Keys(t.versions)) {
		versions = append(versions, write.Field{Key: k, Value: t.versions[k]})
	}
	cp := saver.Checkpoint{
		ID: id, Parent: t.lastID, TS: t.now,
		Values:          append(slices.Clone(values), t.pending...),
		Versions:        versions,
		VersionsSeen:    t.seen,
		UpdatedChannels: updated,
		Metadata:        append(write.Map{{Key: "step", Value: step}, {Key: "source", Value: source}, {Key: "parents", Value: map[string]any{}}}, meta...),
	}
	// Each task's writes, numbered from 0.
	for _, tk := range tasks {
		taskID := t.uuid4()
		for i, w := range tk.writes {
			cp.Writes = append(cp.Writes, saver.Write{TaskID: taskID, TaskPath: tk.path, Idx: i, Channel: w.channel, Value: w.value()})
		}
	}
	if err := t.saver.Put(t.ctx, t.id, "", cp); err != nil && t.err == nil {
		t.err = err
	}
	t.pending = nil
	t.lastID = id
	t.step++
	t.updated = nil
	return id, step
}

func (t *thread) appendMessage(typ string, enc []byte) {
	t.msgs = append(t.msgs, enc)
	t.types = append(t.types, typ)
	if typ == "human" {
		t.humans++
	}
}

// putMessages stores the messages list under its current version.
func (t *thread) putMessages() {
	size := 5
	for _, m := range t.msgs {
		size += len(m)
	}
	b := make([]byte, 0, size)
	b = append(b, arrayHeader(len(t.msgs))...)
	for _, m := range t.msgs {
		b = append(b, m...)
	}
	t.blob("messages", b)
}

// rewrite gives each key in target a fresh value written in turn n. It
// returns the msgpack of the update the tool task writes, and a function
// that applies the update to the thread's state once the checkpoint before
// it has been written.
func (t *thread) rewrite(n int, target []string) ([]byte, func(), error) {
	upd := mapHeader(len(target))
	type change struct {
		key   string
		enc   []byte
		plain map[string]any
		turns int
	}
	var changes []change
	seq := t.seq
	for _, k := range target {
		seq++
		turns := t.written[k]
		if t.lastTurn[k] != n {
			turns++
		}
		feature := t.feature(k, n)
		entry := write.Map{
			{Key: "value", Value: feature},
			{Key: "tool", Value: "sketch_polygon"},
			{Key: "seq", Value: seq},
			{Key: "inputs", Value: write.Map{{Key: "region", Value: "model"}, {Key: "vertices", Value: "model"}}},
			{Key: "turn", Value: n},
			{Key: "turns_written", Value: turns},
		}
		enc, err := write.EncodeMsgpack(entry)
		if err != nil {
			return nil, nil, err
		}
		c := change{key: k, enc: enc, turns: turns}
		if t.opt.KeepDetail {
			c.plain = map[string]any{
				"value":         plainFeature(feature),
				"tool":          "sketch_polygon",
				"seq":           seq,
				"inputs":        map[string]any{"region": "model", "vertices": "model"},
				"turn":          n,
				"turns_written": turns,
			}
		}
		changes = append(changes, c)
		upd = append(upd, mustEncode(k)...)
		upd = append(upd, enc...)
	}
	apply := func() {
		t.seq = seq
		for _, c := range changes {
			t.entries[c.key] = c.enc
			t.written[c.key] = c.turns
			t.lastTurn[c.key] = n
			if c.plain != nil {
				t.plain[c.key] = c.plain
			}
		}
	}
	return upd, apply, nil
}

// stateBlob is the whole tool_state map, keys in first-write order.
func (t *thread) stateBlob() []byte {
	var held []string
	for _, k := range t.keys {
		if _, ok := t.entries[k]; ok {
			held = append(held, k)
		}
	}
	size := 5
	for _, k := range held {
		size += len(k) + 5 + len(t.entries[k])
	}
	b := make([]byte, 0, size)
	b = append(b, mapHeader(len(held))...)
	for _, k := range held {
		b = append(b, mustEncode(k)...)
		b = append(b, t.entries[k]...)
	}
	return b
}

// points is the ring length that makes one key's entry about
// StateBytes/Keys bytes: a [lon, lat] pair of Python floats is 19 bytes of
// msgpack, and the rest of an entry about 240.
func (t *thread) points() int {
	per := t.p.StateBytes/t.p.Keys - 240
	return max(4, per/19)
}

// feature is a closed GeoJSON polygon of points() vertices around a
// centre that depends on the key and the turn.
func (t *thread) feature(key string, n int) write.Map {
	pts := t.points()
	ring := make([][2]float64, pts)
	lon0 := -3 + 6*t.rng.Float64()
	lat0 := 50 + 4*t.rng.Float64()
	for i := range pts - 1 {
		a := 2 * math.Pi * float64(i) / float64(pts-1)
		r := 1 + 0.1*math.Sin(5*a) + 0.02*t.rng.Float64()
		ring[i] = [2]float64{round7(lon0 + 1.2*r*math.Cos(a)), round7(lat0 + 0.5*r*math.Sin(a))}
	}
	ring[pts-1] = ring[0]
	return write.Map{
		{Key: "type", Value: "Feature"},
		{Key: "properties", Value: write.Map{{Key: "name", Value: key}, {Key: "turn", Value: n}, {Key: "vertices", Value: pts}}},
		{Key: "geometry", Value: write.Map{{Key: "type", Value: "Polygon"}, {Key: "coordinates", Value: [][][2]float64{ring}}}},
	}
}

func round7(f float64) float64 { return math.Round(f*1e7) / 1e7 }

// plainFeature is a feature as JSON-like data.
func plainFeature(m write.Map) map[string]any {
	out := map[string]any{}
	for _, f := range m {
		switch v := f.Value.(type) {
		case write.Map:
			out[f.Key] = plainFeature(v)
		case [][][2]float64:
			rings := make([]any, len(v))
			for i, ring := range v {
				pts := make([]any, len(ring))
				for j, p := range ring {
					pts[j] = []any{p[0], p[1]}
				}
				rings[i] = pts
			}
			out[f.Key] = rings
		default:
			out[f.Key] = v
		}
	}
	return out
}

// nextVersion is LangGraph's next channel version: a 32-digit counter and
// a random fraction, the same for every channel a step updates.
func (t *thread) nextVersion() string {
	t.counter++
	frac := strconv.FormatFloat(0.001+0.998*t.rng.Float64(), 'f', -1, 64)
	for len(frac) < 16 {
		frac = "0" + frac
	}
	return fmt.Sprintf("%032d.%s", t.counter, frac)
}

// uuid6 is a version-6 UUID for time ts with the step as clock sequence,
// as LangGraph mints checkpoint ids: their text sorts in time order.
func (t *thread) uuid6(ts time.Time, step int) string {
	const gregorianOffset = 0x01B21DD213814000 // 100 ns intervals from 1582-10-15 to 1970-01-01
	ticks := uint64(ts.UnixNano()/100) + gregorianOffset
	high := uint32(ticks >> 28)
	mid := uint16(ticks >> 12)
	low := uint16(ticks&0x0fff) | 0x6000
	seq := uint16(step)&0x3fff | 0x8000
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", high, mid, low, seq, t.node[:])
}

// uuid4 is a random version-4 UUID text.
func (t *thread) uuid4() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], t.rng.Uint64())
	binary.BigEndian.PutUint64(b[8:], t.rng.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (t *thread) hex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(t.rng.UintN(256))
	}
	return fmt.Sprintf("%x", b)
}

func joinKeys(keys []string) string {
	if len(keys) > 3 {
		return fmt.Sprintf("%s, … (%d keys)", keys[0], len(keys))
	}
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += k
	}
	return s
}

// msgpack framing for values assembled from pre-encoded parts.

func arrayHeader(n int) []byte {
	switch {
	case n <= 15:
		return []byte{0x90 | byte(n)}
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16([]byte{0xdc}, uint16(n))
	}
	return binary.BigEndian.AppendUint32([]byte{0xdd}, uint32(n))
}

func mapHeader(n int) []byte {
	switch {
	case n <= 15:
		return []byte{0x80 | byte(n)}
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16([]byte{0xde}, uint16(n))
	}
	return binary.BigEndian.AppendUint32([]byte{0xdf}, uint32(n))
}

func mustEncode(v any) []byte {
	b, err := write.EncodeMsgpack(v)
	if err != nil {
		panic(err)
	}
	return b
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ErrNoTables says LangGraph's tables are missing.
var ErrNoTables = errors.New("the checkpoint tables do not exist: create them with LangGraph's PostgresSaver.setup() (bench gen --python does)")

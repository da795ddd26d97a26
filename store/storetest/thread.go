package storetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store/backend"
)

// Writer puts checkpoints into a backend's storage in that backend's own
// format, so one suite can run against every backend.
type Writer interface {
	// Put stores one checkpoint of ref, as the saver's put and put_writes
	// would.
	Put(ref backend.Ref, cp saver.Checkpoint)
	// Delete removes checkpoints of ref, as pruning would.
	Delete(ref backend.Ref, ids []string)
}

// SaverWriter is a Writer storing checkpoints in a real saver's layout
// (lgsaver), failing the test on any error until Close.
type SaverWriter struct {
	t      testing.TB
	w      *saver.Writer
	closed atomic.Bool
}

// NewSaverWriter returns a Writer through w that fails t on errors.
func NewSaverWriter(t testing.TB, w *saver.Writer) *SaverWriter {
	return &SaverWriter{t: t, w: w}
}

// Saver returns the layout the writer stores.
func (w *SaverWriter) Saver() saver.Saver { return w.w.Saver() }

// Close makes later errors silent: a writer goroutine a test leaves
// running then stops failing it.
func (w *SaverWriter) Close() { w.closed.Store(true) }

// Put implements Writer.
func (w *SaverWriter) Put(ref backend.Ref, cp saver.Checkpoint) {
	if err := w.w.Put(context.Background(), ref.ThreadID, ref.Namespace, cp); err != nil && !w.closed.Load() {
		w.t.Error(err)
	}
}

// Delete implements Writer.
func (w *SaverWriter) Delete(ref backend.Ref, ids []string) {
	if err := w.w.Delete(context.Background(), ref.ThreadID, ref.Namespace, ids...); err != nil && !w.closed.Load() {
		w.t.Error(err)
	}
}

// Turn scripts one turn of a conversation: the question, and the state
// writes made while answering it (key → value).
type Turn struct {
	Question string
	Writes   map[string]any
}

// Written is what Build recorded about one turn's end.
type Written struct {
	// End is the id of the turn's last checkpoint.
	End string
	// IDs are all checkpoint ids of the turn.
	IDs []string
	// State is the tool_state the turn ended on, in the tool_state
	// convention.
	State map[string]map[string]any
}

// Build writes a conversation into w the way LangGraph would: an empty
// checkpoint first, then per turn a checkpoint with the question, one with
// the model's tool call, one with the tool result and the state writes (when
// there are writes), and one with the answer, each the child of the one
// before. Entries carry value, tool, seq, turn and turns_written. It returns
// what was written per turn: element i is turn i+1.
func Build(w Writer, ref backend.Ref, turns []Turn) []Written {
	b := NewBuilder(w, ref)
	out := make([]Written, len(turns))
	for i, t := range turns {
		out[i] = b.Turn(t)
	}
	return out
}

// Builder writes a conversation turn by turn, for tests that add turns
// while something reads.
type Builder struct {
	w      Writer
	ref    backend.Ref
	prefix string
	step   int
	seq    int
	turns  int
	parent string
	msgs   []any
	state  map[string]map[string]any
	// counted says versions are numbered per lineage, 1, 2, 3, … from the
	// parent's, as LangGraph.js numbers them; versions holds them, and
	// values what each was last given, as of parent.
	counted  bool
	versions map[string]int
	values   map[string]string
	// at holds what the conversation was at each checkpoint written, for
	// From.
	at map[string]builderAt
	// forked says From was called: message ids then name their step.
	forked bool
}

// builderAt is a Builder's conversation as of one checkpoint.
type builderAt struct {
	seq, turns int
	msgs       []any
	state      map[string]map[string]any
	versions   map[string]int
	values     map[string]string
}

// NewBuilder writes the thread's first, empty checkpoint and returns a
// Builder for its turns. Checkpoint ids are 1f0c-000000, 1f0c-000001, ….
func NewBuilder(w Writer, ref backend.Ref) *Builder { return NewBuilderWithPrefix(w, ref, "1f0c") }

// NewBuilderWithPrefix is NewBuilder with checkpoint ids starting with
// prefix instead of 1f0c: a thread written again after being deleted gets
// new ids, as LangGraph's time-ordered ones are, by a prefix that sorts
// later.
func NewBuilderWithPrefix(w Writer, ref backend.Ref, prefix string) *Builder {
	b := &Builder{w: w, ref: ref, prefix: prefix, msgs: []any{}, state: map[string]map[string]any{},
		versions: map[string]int{}, values: map[string]string{}, at: map[string]builderAt{}}
	if sw, ok := w.(*SaverWriter); ok && !sw.Saver().Python() {
		b.counted = true
	}
	b.put(nil, "input")
	return b
}

// From makes the next checkpoint a child of checkpoint id, which the
// Builder wrote, with the conversation as it was there: time travel, a run
// started from an older checkpoint. Checkpoints after it are a branch; ids
// keep growing. Versions are numbered from id's where the saver numbers
// them per lineage (LangGraph.js), so a branch produces again the version
// numbers the one it left produced.
func (b *Builder) From(id string) {
	a, ok := b.at[id]
	if !ok {
		panic(fmt.Sprintf("storetest: From(%s): not written by this Builder", id))
	}
	b.parent, b.seq, b.turns, b.forked = id, a.seq, a.turns, true
	b.msgs, b.state = slices.Clone(a.msgs), maps.Clone(a.state)
	b.versions, b.values = maps.Clone(a.versions), maps.Clone(a.values)
}

// Update writes a checkpoint as update_state does (source "update"): the
// state writes merged into the state, the messages as they are.
func (b *Builder) Update(writes map[string]any) Written {
	var w Written
	b.write(writes, b.turns)
	b.put(&w, "update")
	w.State = b.state
	return w
}

// lineVersions returns the channel versions of a checkpoint holding
// values, numbered per lineage, and records them.
func (b *Builder) lineVersions(values write.Map) write.Map {
	var out write.Map
	for _, f := range values {
		enc := fmt.Sprintf("%#v", f.Value)
		if b.values[f.Key] != enc || b.versions[f.Key] == 0 {
			b.versions[f.Key]++
			b.values[f.Key] = enc
		}
		out = append(out, write.Field{Key: f.Key, Value: b.versions[f.Key]})
	}
	return out
}

// Base is the time of a Builder's first checkpoint; each later one is a
// second after the one before.
var Base = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func (b *Builder) put(into *Written, source string) {
	id := fmt.Sprintf("%s-%06d", b.prefix, b.step)
	values := write.Map{{Key: "messages", Value: slices.Clone(b.msgs)}}
	if len(b.state) > 0 {
		values = append(values, write.Field{Key: "tool_state", Value: b.state})
	}
	var versions write.Map
	if b.counted {
		versions = b.lineVersions(values)
	}
	b.w.Put(b.ref, saver.Checkpoint{
		ID: id, Parent: b.parent, TS: Base.Add(time.Duration(b.step) * time.Second), Values: values, Versions: versions,
		Metadata: write.Map{{Key: "source", Value: source}, {Key: "step", Value: b.step - 1}},
	})
	if into != nil {
		into.IDs = append(into.IDs, id)
		into.End = id
	}
	b.at[id] = builderAt{seq: b.seq, turns: b.turns, msgs: slices.Clone(b.msgs), state: b.state,
		versions: maps.Clone(b.versions), values: maps.Clone(b.values)}
	b.parent = id
	b.step++
}

// message appends a message with a fresh id: a branch's messages are
// not the ones the branch it left held at the same place.
func (b *Builder) message(m write.Message) {
	m.ID = fmt.Sprintf("%s-msg-%d", b.prefix, len(b.msgs))
	if b.forked {
		m.ID = fmt.Sprintf("%s-msg-%d-%d", b.prefix, b.step, len(b.msgs))
	}
	b.msgs = append(b.msgs, m)
}

// Turn writes one more turn and returns what it wrote.
func (b *Builder) Turn(t Turn) Written {
	b.turns++
	n := b.turns
	var w Written
	b.message(write.Human("", t.Question))
	b.put(&w, "input")
	b.message(write.AI("", "calling tools"))
	b.put(&w, "loop")
	if len(t.Writes) > 0 {
		b.write(t.Writes, n)
		b.message(write.Tool("", "done", "tool", "call"))
		b.put(&w, "loop")
	}
	b.message(write.AI("", "answer"))
	b.put(&w, "loop")
	w.State = b.state
	return w
}

// write merges writes into the state as tool calls of turn n make them.
func (b *Builder) write(writes map[string]any, n int) {
	next := make(map[string]map[string]any, len(b.state)+len(writes))
	maps.Copy(next, b.state)
	// Sorted, so seq numbers do not depend on map order.
	for _, k := range slices.Sorted(maps.Keys(writes)) {
		b.seq++
		tw := 1
		if old, ok := b.state[k]; ok {
			tw = old["turns_written"].(int) + 1
		}
		next[k] = map[string]any{"value": writes[k], "tool": "tool_" + k, "seq": b.seq, "turn": n, "turns_written": tw}
	}
	b.state = next
}

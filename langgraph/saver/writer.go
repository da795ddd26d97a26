package saver

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/langgraph/pyjson"
	"github.com/historyd/historyd/langgraph/write"
)

// Checkpoint is one checkpoint as LangGraph's loop hands it to a saver.
type Checkpoint struct {
	// ID is the checkpoint id; ids must be time-ordered, as LangGraph's
	// uuid6 ids are.
	ID string
	// Parent is the parent checkpoint's id; empty for a thread's first.
	Parent string
	// TS is when the checkpoint was written.
	TS time.Time
	// Values are the channel values, in channel order: plain data,
	// write.Message, write.DeltaSnapshot, … A channel left out has no
	// value at this checkpoint (a DeltaChannel between snapshots, or a
	// channel never written).
	Values write.Map
	// Versions are the channel versions as stored (a string, a number, or
	// nil for JSON null). When nil, the writer numbers them as the saver's
	// get_next_version does: a channel in Values gets a new version when its
	// value differs from the one it last had, and keeps its version
	// otherwise.
	Versions write.Map
	// VersionsSeen is the checkpoint's versions_seen; nil writes an empty
	// map.
	VersionsSeen any
	// UpdatedChannels, when not nil, is written as the checkpoint's
	// updated_channels (Python's format 4 keeps it).
	UpdatedChannels []string
	// Metadata is the checkpoint's metadata; nil writes an empty map.
	Metadata write.Map
	// Writes are the writes of the tasks that ran from this checkpoint,
	// stored as put_writes stores them.
	Writes []Write
}

// Write is one task's write to a channel.
type Write struct {
	// TaskID is the writing task's id.
	TaskID string
	// TaskPath is its path; only Python's savers keep it.
	TaskPath string
	// Idx is the write's index within the task.
	Idx int
	// Channel is the channel written.
	Channel string
	// Value is the value written.
	Value any
}

// Exec runs one statement with arguments, e.g. a pgxpool.Pool's Exec or a
// database/sql DB's ExecContext wrapped to drop the result.
type Exec func(ctx context.Context, query string, args ...any) error

// Row is one row a Writer stores: its table, unqualified, and the values
// of its columns, in column order. Every row of one table from one Writer
// has the same columns.
type Row struct {
	Table   string
	Columns []string
	Values  []any
}

// Rows receives the rows a Writer made by NewRowWriter stores, in the
// order the saver's statements would store them.
type Rows func(ctx context.Context, r Row) error

// Writer stores checkpoints in one saver's layout through Exec. It keeps,
// per thread, each channel's last version and value, to number versions as
// the saver does and to store blobs only for new versions. It is safe for
// concurrent use; a thread's checkpoints must be put in order.
type Writer struct {
	saver  Saver
	exec   Exec
	rows   Rows
	schema string

	mu       sync.Mutex
	channels map[threadKey]map[string]*channelState
}

type threadKey struct{ thread, ns string }

// channelState is what a Writer remembers of one channel of one thread.
type channelState struct {
	n       int    // how many versions it had
	version any    // its current version, as stored
	value   string // the encoding of its current value
	// stored are the versions it had so far, as stored: a version comes
	// back when a fork continues from an older checkpoint, and its value
	// is stored already.
	stored map[string]bool
}

// remember records version as stored and reports whether it is new.
func (st *channelState) remember(version any) bool {
	v := versionText(version)
	if st.stored[v] {
		return false
	}
	if st.stored == nil {
		st.stored = map[string]bool{}
	}
	st.stored[v] = true
	return true
}

// NewWriter returns a Writer in saver's layout. schema qualifies
// PostgreSQL tables as in DDL; it is ignored for SQLite.
func NewWriter(saver Saver, exec Exec, schema string) *Writer {
	return &Writer{saver: saver, exec: exec, schema: schema, channels: map[threadKey]map[string]*channelState{}}
}

// NewRowWriter returns a Writer in saver's layout that hands each row to
// rows instead of running a statement, for loading rows in bulk (COPY)
// into tables that hold none of the thread's rows yet: rows never get a
// row twice, so no conflicts arise. Its Delete fails.
func NewRowWriter(saver Saver, rows Rows) *Writer {
	return &Writer{saver: saver, rows: rows, channels: map[threadKey]map[string]*channelState{}}
}

// Saver returns the layout the writer stores.
func (w *Writer) Saver() Saver { return w.saver }

func (w *Writer) table(name string) string {
	if w.saver.Postgres() && w.schema != "" {
		return w.schema + "." + name
	}
	return name
}

// placeholders returns the saver's parameter markers for n arguments.
func (w *Writer) placeholders(n int) string {
	ps := make([]string, n)
	for i := range ps {
		if w.saver.Postgres() {
			ps[i] = "$" + strconv.Itoa(i+1)
		} else {
			ps[i] = "?"
		}
	}
	return strings.Join(ps, ", ")
}

// Put stores cp as the saver's put (and put_writes, for cp.Writes) would.
func (w *Writer) Put(ctx context.Context, thread, ns string, cp Checkpoint) error {
	versions, fresh, err := w.versions(thread, ns, cp)
	if err != nil {
		return err
	}
	switch w.saver {
	case PostgresPython:
		err = w.putPostgresPython(ctx, thread, ns, cp, versions, fresh)
	case PostgresJS:
		err = w.putPostgresJS(ctx, thread, ns, cp, versions, fresh)
	case SQLitePython, SQLiteJS:
		err = w.putSQLite(ctx, thread, ns, cp, versions)
	default:
		err = fmt.Errorf("saver: unknown saver %v", w.saver)
	}
	if err != nil {
		return fmt.Errorf("saver: %v: put checkpoint %s: %w", w.saver, cp.ID, err)
	}
	for _, wr := range cp.Writes {
		if err := w.putWrite(ctx, thread, ns, cp.ID, wr); err != nil {
			return fmt.Errorf("saver: %v: put write %s/%d of checkpoint %s: %w", w.saver, wr.TaskID, wr.Idx, cp.ID, err)
		}
	}
	return nil
}

// versions returns cp's channel versions as the saver stores them, and the
// channels whose version is new to the thread (put stores blobs for those).
func (w *Writer) versions(thread, ns string, cp Checkpoint) (write.Map, map[string]bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := threadKey{thread, ns}
	chans := w.channels[key]
	if chans == nil {
		chans = map[string]*channelState{}
		w.channels[key] = chans
	}
	fresh := map[string]bool{}
	if cp.Versions != nil {
		for _, f := range cp.Versions {
			st := chans[f.Key]
			if st == nil {
				st = &channelState{}
				chans[f.Key] = st
			}
			if st.remember(f.Value) {
				fresh[f.Key] = true
			}
			st.version = f.Value
		}
		return cp.Versions, fresh, nil
	}
	for _, f := range cp.Values {
		enc, err := w.saver.encode(f.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("saver: channel %q: %w", f.Key, err)
		}
		st := chans[f.Key]
		if st == nil {
			st = &channelState{}
			chans[f.Key] = st
		}
		if st.n == 0 || st.value != string(enc) {
			st.n++
			st.value = string(enc)
			st.version = w.nextVersion(f.Key, st.n)
			st.remember(st.version)
			fresh[f.Key] = true
		}
	}
	// Channels keep their versions when this checkpoint holds no value
	// for them; list every versioned channel, in first-write order.
	var out write.Map
	for _, f := range cp.Values {
		out = append(out, write.Field{Key: f.Key, Value: chans[f.Key].version})
	}
	for _, ch := range slices.Sorted(maps.Keys(chans)) {
		if _, ok := out.Get(ch); !ok {
			out = append(out, write.Field{Key: ch, Value: chans[ch].version})
		}
	}
	return out, fresh, nil
}

// nextVersion is the n-th version of channel as the saver's
// get_next_version numbers it: Python pads the counter to 32 digits and
// adds a random fraction (made deterministic here), LangChain.js counts.
func (w *Writer) nextVersion(channel string, n int) any {
	if !w.saver.Python() {
		return n
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", channel, n)
	return fmt.Sprintf("%032d.0.%016d", n, h.Sum64()%1e16)
}

// isPrimitive reports whether Python's PostgresSaver keeps v inline in the
// checkpoint's jsonb: None, str, int, float and bool.
func isPrimitive(v any) bool {
	switch v.(type) {
	case nil, string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return true
	}
	return false
}

// pythonBlob is a value as dumps_typed stores it: None as an empty "null",
// bytes as they are, anything else as msgpack.
func pythonBlob(v any) (string, []byte, error) {
	switch x := v.(type) {
	case nil:
		return "null", []byte{}, nil
	case []byte:
		return "bytes", x, nil
	}
	data, err := write.EncodeMsgpack(v)
	return "msgpack", data, err
}

func (w *Writer) putPostgresPython(ctx context.Context, thread, ns string, cp Checkpoint, versions write.Map, fresh map[string]bool) error {
	inline := write.Map{}
	for _, f := range cp.Values {
		var blob any
		switch v := f.Value.(type) {
		case write.DeltaSnapshot:
			// The snapshot goes to a blob; the checkpoint keeps a marker.
			inline = append(inline, write.Field{Key: f.Key, Value: true})
			blob = v
		default:
			if isPrimitive(v) {
				inline = append(inline, f)
				continue
			}
			blob = v
		}
		if !fresh[f.Key] {
			continue
		}
		version, _ := versions.Get(f.Key)
		typ, data, err := pythonBlob(blob)
		if err != nil {
			return fmt.Errorf("channel %q: %w", f.Key, err)
		}
		if err := w.insert(ctx, "INSERT", "checkpoint_blobs", blobColumns, blobConflict,
			thread, ns, f.Key, versionText(version), typ, data); err != nil {
			return err
		}
	}
	doc := write.Map{
		{Key: "v", Value: 4}, {Key: "ts", Value: write.IsoFormat(cp.TS)}, {Key: "id", Value: cp.ID},
		{Key: "channel_values", Value: inline}, {Key: "channel_versions", Value: versions},
		{Key: "versions_seen", Value: orEmpty(cp.VersionsSeen)},
	}
	if cp.UpdatedChannels != nil {
		doc = append(doc, write.Field{Key: "updated_channels", Value: stringsAny(cp.UpdatedChannels)})
	}
	return w.putPostgresRow(ctx, thread, ns, cp, doc)
}

func (w *Writer) putPostgresJS(ctx context.Context, thread, ns string, cp Checkpoint, versions write.Map, fresh map[string]bool) error {
	for _, f := range versions {
		if !fresh[f.Key] {
			continue
		}
		typ, data := format.TypeEmpty, []byte(nil)
		if v, ok := cp.Values.Get(f.Key); ok {
			var err error
			if data, err = write.EncodeJSON(v); err != nil {
				return fmt.Errorf("channel %q: %w", f.Key, err)
			}
			typ = "json"
		}
		if err := w.insert(ctx, "INSERT", "checkpoint_blobs", blobColumns, blobConflict,
			thread, ns, f.Key, versionText(f.Value), typ, data); err != nil {
			return err
		}
	}
	// The checkpoint is stored without its channel values.
	doc := write.Map{
		{Key: "v", Value: 4}, {Key: "id", Value: cp.ID}, {Key: "ts", Value: cp.TS},
		{Key: "channel_versions", Value: versions}, {Key: "versions_seen", Value: orEmpty(cp.VersionsSeen)},
	}
	return w.putPostgresRow(ctx, thread, ns, cp, doc)
}

func (w *Writer) putPostgresRow(ctx context.Context, thread, ns string, cp Checkpoint, doc write.Map) error {
	checkpoint, err := write.EncodeJSON(doc)
	if err != nil {
		return err
	}
	metadata, err := write.EncodeJSON(orEmptyMap(cp.Metadata))
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	return w.insert(ctx, "INSERT", "checkpoints", postgresCheckpointColumns, `
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata`,
		thread, ns, cp.ID, nullable(cp.Parent), string(checkpoint), string(metadata))
}

func (w *Writer) putSQLite(ctx context.Context, thread, ns string, cp Checkpoint, versions write.Map) error {
	var (
		data []byte
		err  error
	)
	if w.saver == SQLitePython {
		doc := write.Map{
			{Key: "v", Value: 4}, {Key: "ts", Value: write.IsoFormat(cp.TS)}, {Key: "id", Value: cp.ID},
			{Key: "channel_values", Value: orEmptyMap(cp.Values)}, {Key: "channel_versions", Value: versions},
			{Key: "versions_seen", Value: orEmpty(cp.VersionsSeen)},
		}
		if cp.UpdatedChannels != nil {
			doc = append(doc, write.Field{Key: "updated_channels", Value: stringsAny(cp.UpdatedChannels)})
		}
		data, err = write.EncodeMsgpack(doc)
	} else {
		data, err = write.EncodeJSON(write.Map{
			{Key: "v", Value: 4}, {Key: "id", Value: cp.ID}, {Key: "ts", Value: cp.TS},
			{Key: "channel_values", Value: orEmptyMap(cp.Values)}, {Key: "channel_versions", Value: versions},
			{Key: "versions_seen", Value: orEmpty(cp.VersionsSeen)},
		})
	}
	if err != nil {
		return err
	}
	metadata, err := w.metadata(cp.Metadata)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	return w.insert(ctx, "INSERT OR REPLACE", "checkpoints", sqliteCheckpointColumns, "",
		thread, ns, cp.ID, nullable(cp.Parent), w.saver.Serializer(), data, metadata)
}

// metadata is the metadata column as the SqliteSaver writes it: Python's
// json.dumps text, LangChain.js's JSON.stringify.
func (w *Writer) metadata(md write.Map) ([]byte, error) {
	if w.saver.Python() {
		return pyjson.Marshal(orEmptyMap(md))
	}
	return write.EncodeJSON(orEmptyMap(md))
}

func (w *Writer) putWrite(ctx context.Context, thread, ns, checkpoint string, wr Write) error {
	var (
		typ  string
		data []byte
		err  error
	)
	if w.saver.Python() {
		typ, data, err = pythonBlob(wr.Value)
	} else {
		typ = "json"
		data, err = write.EncodeJSON(wr.Value)
	}
	if err != nil {
		return err
	}
	const writeConflict = ` ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING`
	switch w.saver {
	case PostgresPython:
		return w.insert(ctx, "INSERT", "checkpoint_writes", []string{"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path", "idx", "channel", "type", "blob"}, writeConflict,
			thread, ns, checkpoint, wr.TaskID, wr.TaskPath, wr.Idx, wr.Channel, typ, data)
	case PostgresJS:
		return w.insert(ctx, "INSERT", "checkpoint_writes", []string{"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type", "blob"}, writeConflict,
			thread, ns, checkpoint, wr.TaskID, wr.Idx, wr.Channel, typ, data)
	case SQLitePython:
		return w.insert(ctx, "INSERT OR IGNORE", "writes", []string{"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path", "idx", "channel", "type", "value"}, "",
			thread, ns, checkpoint, wr.TaskID, wr.TaskPath, wr.Idx, wr.Channel, typ, data)
	default:
		return w.insert(ctx, "INSERT OR IGNORE", "writes", []string{"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type", "value"}, "",
			thread, ns, checkpoint, wr.TaskID, wr.Idx, wr.Channel, typ, data)
	}
}

// The columns of the rows a Writer stores, where they are the same in more
// than one place.
var (
	blobColumns               = []string{"thread_id", "checkpoint_ns", "channel", "version", "type", "blob"}
	postgresCheckpointColumns = []string{"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "checkpoint", "metadata"}
	sqliteCheckpointColumns   = []string{"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type", "checkpoint", "metadata"}
)

// blobConflict is what the PostgresSavers do with a blob stored already.
const blobConflict = ` ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING`

// insert stores one row of table (unqualified): handed to the writer's
// Rows, or run as `verb INTO table (columns) VALUES (…)` followed by
// suffix, the statement's conflict clause.
func (w *Writer) insert(ctx context.Context, verb, table string, columns []string, suffix string, args ...any) error {
	if w.rows != nil {
		return w.rows(ctx, Row{Table: table, Columns: columns, Values: args})
	}
	return w.exec(ctx, verb+` INTO `+w.table(table)+` (`+strings.Join(columns, ", ")+`) VALUES (`+w.placeholders(len(columns))+`)`+suffix, args...)
}

// Delete deletes the thread's checkpoints with these ids, as a retention
// job would: their blobs and writes stay.
func (w *Writer) Delete(ctx context.Context, thread, ns string, ids ...string) error {
	if w.exec == nil {
		return fmt.Errorf("lgsaver: %v: a row writer cannot delete", w.saver)
	}
	for _, id := range ids {
		if err := w.exec(ctx, `DELETE FROM `+w.table("checkpoints")+` WHERE thread_id = `+w.placeholder(1)+` AND checkpoint_ns = `+w.placeholder(2)+` AND checkpoint_id = `+w.placeholder(3),
			thread, ns, id); err != nil {
			return fmt.Errorf("saver: %v: delete checkpoint %s: %w", w.saver, id, err)
		}
	}
	return nil
}

func (w *Writer) placeholder(i int) string {
	if w.saver.Postgres() {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}

// versionText is a version as the blob table's text column holds it, which
// is what LangGraph's own read joins on (jsonb ->> text).
func versionText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func orEmpty(v any) any {
	if v == nil {
		return write.Map{}
	}
	return v
}

func orEmptyMap(m write.Map) write.Map {
	if m == nil {
		return write.Map{}
	}
	return m
}

func stringsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

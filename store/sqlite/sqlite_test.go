package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/lgcodec"
	"github.com/historyd/historyd/store/storetest"
)

// pythonDDL is the schema Python's SqliteSaver.setup() creates, and
// jsDDL the one LangChain.js's SqliteSaver creates; they differ only in the
// writes table. Both savers switch the file to WAL first.
const (
	pythonDDL = `PRAGMA journal_mode=WAL;
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint BLOB,
    metadata BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE TABLE IF NOT EXISTS writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    value BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);`
	jsDDL = `PRAGMA journal_mode=WAL;
CREATE TABLE IF NOT EXISTS checkpoints (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL DEFAULT '',
  checkpoint_id TEXT NOT NULL,
  parent_checkpoint_id TEXT,
  type TEXT,
  checkpoint BLOB,
  metadata BLOB,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE TABLE IF NOT EXISTS writes (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL DEFAULT '',
  checkpoint_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  channel TEXT NOT NULL,
  type TEXT,
  value BLOB,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);`
)

// saverWriter writes checkpoints into an SQLite file the way a SqliteSaver
// does, through its own read-write connection: the whole checkpoint in one
// row, JSON text as LangChain.js writes it or msgpack as Python does.
type saverWriter struct {
	t      testing.TB
	db     *sql.DB
	format string // "json" or "msgpack"

	mu sync.Mutex
	// Per thread: each channel's version counter and last value, so that a
	// channel gets a new version exactly when its value changes, and the
	// last checkpoint id (the next one's parent).
	versions map[store.Ref]map[string]*channelVersion
	parent   map[store.Ref]string
	// closed is set when the test is over: a writer goroutine the test
	// left running then stops failing it.
	closed atomic.Bool
}

type channelVersion struct {
	n    int
	last string
}

var _ storetest.Writer = (*saverWriter)(nil)

// newSaverFile creates a checkpoint file in a fresh directory with the DDL
// of the saver that writes format.
func newSaverFile(t testing.TB, format string) (string, *saverWriter) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	// Not synced: the tests need no durability, and a sync per commit
	// would make them slow.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=synchronous(OFF)")
	if err != nil {
		t.Fatal(err)
	}
	// One connection: the writer side of the file is a single agent host.
	db.SetMaxOpenConns(1)
	w := &saverWriter{t: t, db: db, format: format,
		versions: map[store.Ref]map[string]*channelVersion{}, parent: map[store.Ref]string{}}
	t.Cleanup(func() {
		w.closed.Store(true)
		db.Close()
	})
	ddl := jsDDL
	if format == typeMsgpack {
		ddl = pythonDDL
	}
	if _, err := db.Exec(ddl); err != nil {
		t.Fatal(err)
	}
	return path, w
}

func openBackend(t testing.TB, path string) *Backend {
	t.Helper()
	b, err := Open(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// Put implements storetest.Writer.
func (w *saverWriter) Put(ref store.Ref, id string, ts time.Time, values map[string]any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.versions[ref] == nil {
		w.versions[ref] = map[string]*channelVersion{}
	}
	versions := map[string]*channelVersion{}
	for ch, v := range values {
		enc, err := json.Marshal(v)
		if err != nil {
			w.t.Fatal(err)
		}
		cv := w.versions[ref][ch]
		if cv == nil {
			cv = &channelVersion{}
			w.versions[ref][ch] = cv
		}
		if cv.n == 0 || cv.last != string(enc) {
			cv.n, cv.last = cv.n+1, string(enc)
		}
		versions[ch] = cv
	}
	var data []byte
	switch w.format {
	case typeJSON:
		data = jsCheckpoint(w.t, id, ts, values, versions)
	case typeMsgpack:
		data = pyCheckpoint(w.t, id, ts, values, versions)
	}
	var parent any
	if p := w.parent[ref]; p != "" {
		parent = p
	}
	w.insert(ref, id, parent, w.format, data)
	w.parent[ref] = id
}

func (w *saverWriter) insert(ref store.Ref, id string, parent any, typ any, data []byte) {
	w.t.Helper()
	_, err := w.db.Exec(`INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		ref.ThreadID, ref.Namespace, id, parent, typ, data, []byte(`{"source":"loop","step":1}`))
	if err != nil && !w.closed.Load() {
		w.t.Fatal(err)
	}
}

// Delete implements storetest.Writer.
func (w *saverWriter) Delete(ref store.Ref, ids []string) {
	for _, id := range ids {
		if _, err := w.db.Exec(`DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?`,
			ref.ThreadID, ref.Namespace, id); err != nil && !w.closed.Load() {
			w.t.Fatal(err)
		}
	}
}

// jsCheckpoint serializes a checkpoint as LangChain.js's SqliteSaver does:
// JSON of {v, id, ts, channel_values, channel_versions, versions_seen},
// numbered versions, an ISO timestamp with milliseconds and "Z", and the
// bookkeeping channels LangGraph.js keeps among the values.
func jsCheckpoint(t testing.TB, id string, ts time.Time, values map[string]any, versions map[string]*channelVersion) []byte {
	cv := map[string]any{"__pregel_tasks": []any{}, "branch:to:agent": nil}
	for ch, v := range values {
		cv[ch] = v
	}
	vers := map[string]int{}
	for ch, v := range versions {
		vers[ch] = v.n
	}
	data, err := json.Marshal(struct {
		V               int            `json:"v"`
		ID              string         `json:"id"`
		TS              string         `json:"ts"`
		ChannelValues   map[string]any `json:"channel_values"`
		ChannelVersions map[string]int `json:"channel_versions"`
		VersionsSeen    map[string]any `json:"versions_seen"`
	}{4, id, ts.UTC().Format("2006-01-02T15:04:05.000Z07:00"), cv, vers, map[string]any{"__input__": map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// pyCheckpoint serializes a checkpoint as Python's SqliteSaver does: one
// msgpack map in Python's key order, channel_values before
// channel_versions, string versions, an isoformat timestamp, and
// LangChain messages as pydantic v2 models (extension 5).
func pyCheckpoint(t testing.TB, id string, ts time.Time, values map[string]any, versions map[string]*channelVersion) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	vers := map[string]string{}
	for ch, v := range versions {
		vers[ch] = fmt.Sprintf("%032d.0.%d", v.n, 1000+v.n)
	}
	must(enc.EncodeMapLen(7))
	must(enc.EncodeMulti("v", 4, "ts", ts.UTC().Format("2006-01-02T15:04:05.000000-07:00"), "id", id))
	must(enc.EncodeString("channel_values"))
	must(enc.EncodeMapLen(len(values) + 1))
	must(enc.EncodeMulti("branch:to:agent", nil))
	for _, ch := range sortedKeys(values) {
		must(enc.EncodeString(ch))
		must(encodePy(enc, values[ch]))
	}
	must(enc.EncodeMulti("channel_versions", vers))
	must(enc.EncodeMulti("versions_seen", map[string]any{"__input__": map[string]any{}}))
	must(enc.EncodeMulti("updated_channels", sortedKeys(values)))
	return buf.Bytes()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pyMessageTypes gives the Python module suffix and type field of the
// LangChain message classes the suite writes.
var pyMessageTypes = map[string]string{"HumanMessage": "human", "AIMessage": "ai", "ToolMessage": "tool", "SystemMessage": "system"}

// encodePy encodes v as Python's serializer would the same data, turning
// the LangChain.js message records storetest builds into the extension-5
// models Python writes for messages.
func encodePy(enc *msgpack.Encoder, v any) error {
	switch v := v.(type) {
	case []any:
		if err := enc.EncodeArrayLen(len(v)); err != nil {
			return err
		}
		for _, e := range v {
			if err := encodePy(enc, e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if v["lc"] == 1 && v["type"] == "constructor" {
			ids, _ := v["id"].([]string)
			class := ids[len(ids)-1]
			typ := pyMessageTypes[class]
			kwargs, _ := v["kwargs"].(map[string]any)
			fields := map[string]any{"content": kwargs["content"], "additional_kwargs": map[string]any{},
				"response_metadata": map[string]any{}, "type": typ, "name": nil, "id": nil}
			payload, err := msgpack.Marshal([]any{"langchain_core.messages." + typ, class, fields, "model_validate_json"})
			if err != nil {
				return err
			}
			if err := enc.EncodeExtHeader(5, len(payload)); err != nil {
				return err
			}
			_, err = enc.Writer().Write(payload)
			return err
		}
		if err := enc.EncodeMapLen(len(v)); err != nil {
			return err
		}
		for _, k := range sortedKeys(v) {
			if err := enc.EncodeString(k); err != nil {
				return err
			}
			if err := encodePy(enc, v[k]); err != nil {
				return err
			}
		}
		return nil
	}
	return enc.Encode(v)
}

// TestSuite runs the shared backend suite over files in both savers'
// formats.
func TestSuite(t *testing.T) {
	for _, format := range []string{typeJSON, typeMsgpack} {
		t.Run(format, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) (store.Backend, storetest.Writer) {
				path, w := newSaverFile(t, format)
				return openBackend(t, path), w
			})
		})
	}
}

// TestValuesAreRawSubValues checks that a value comes back as the exact
// bytes the saver wrote for it, typed as the checkpoint is, and that lists
// and ids are handled as the interface says: duplicates, unknown ids,
// unknown channels, more ids than one statement binds.
func TestValuesAreRawSubValues(t *testing.T) {
	ctx := context.Background()
	for _, format := range []string{typeJSON, typeMsgpack} {
		t.Run(format, func(t *testing.T) {
			path, w := newSaverFile(t, format)
			ref := store.Ref{ThreadID: "raw"}
			state := map[string]any{"k": map[string]any{"value": 1.5, "turn": 1, "turns_written": 1}}
			var ids []string
			for i := range idsPerQuery + 20 {
				id := fmt.Sprintf("1f0c-%05d", i)
				w.Put(ref, id, time.Unix(int64(i), 0), map[string]any{"tool_state": state, "n": i})
				ids = append(ids, id)
			}
			b := openBackend(t, path)
			ask := append([]string{"missing", ids[3], ids[3]}, ids...)
			blobs, err := b.Values(ctx, ref, "tool_state", ask)
			if err != nil {
				t.Fatal(err)
			}
			if len(blobs) != len(ask) || blobs[0].Type != store.BlobMissing {
				t.Fatalf("got %d blobs, first %+v; want %d, first missing", len(blobs), blobs[0], len(ask))
			}
			var want []byte
			if format == typeJSON {
				want, _ = json.Marshal(state)
			} else {
				var buf bytes.Buffer
				enc := msgpack.NewEncoder(&buf)
				enc.UseCompactInts(true)
				enc.SetSortMapKeys(true)
				if err := encodePy(enc, state); err != nil {
					t.Fatal(err)
				}
				want = buf.Bytes()
			}
			for i, bl := range blobs[1:] {
				if bl.Type != format || !bytes.Equal(bl.Data, want) {
					t.Fatalf("blob %d = %s %x, want %s %x", i+1, bl.Type, bl.Data, format, want)
				}
			}
			v, ok, err := lgcodec.Decode(blobs[1].Type, blobs[1].Data, lgcodec.Limits{})
			if err != nil || !ok {
				t.Fatalf("decode: %v, %v", ok, err)
			}
			if got, _ := json.Marshal(v); string(got) != `{"k":{"turn":1,"turns_written":1,"value":1.5}}` {
				t.Errorf("decoded %s", got)
			}
			blobs, err = b.Values(ctx, ref, "no_such_channel", ids[:2])
			if err != nil || blobs[0].Type != "empty" || blobs[1].Type != "empty" {
				t.Errorf("unknown channel: %+v, %v", blobs, err)
			}
			// The null branch channel is a value, not an absence.
			blobs, err = b.Values(ctx, ref, "branch:to:agent", ids[:1])
			if err != nil || blobs[0].Type != format {
				t.Errorf("null channel: %+v, %v", blobs, err)
			}
			cps, err := b.Checkpoints(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if len(cps) != len(ids) || cps[0].Versions["tool_state"] == "" || cps[0].Versions["n"] == cps[1].Versions["n"] ||
				cps[0].Versions["tool_state"] != cps[1].Versions["tool_state"] || !cps[5].TS.Equal(time.Unix(5, 0)) {
				t.Errorf("checkpoints: %d, first two %+v %+v", len(cps), cps[0], cps[1])
			}
		})
	}
}

func TestOpenMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope", "checkpoints.db")
	_, err := Open(context.Background(), Config{Path: path})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open = %v; want fs.ErrNotExist naming %s", err, path)
	}
	path = filepath.Join(t.TempDir(), "checkpoints.db")
	if _, err := Open(context.Background(), Config{Path: path}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open = %v; want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open created %s", path)
	}
}

func TestOpenWithoutCheckpointTable(t *testing.T) {
	dir := t.TempDir()
	for name, setup := range map[string]string{
		"empty database":  ``,
		"other tables":    `CREATE TABLE things (id INTEGER PRIMARY KEY); INSERT INTO things VALUES (1);`,
		"another schema":  `CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, body TEXT);`,
		"not a database":  "",
		"zero-byte file":  "",
		"postgres schema": `CREATE TABLE checkpoint_blobs (thread_id TEXT);`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".db")
			switch name {
			case "not a database":
				if err := os.WriteFile(path, bytes.Repeat([]byte("not sqlite at all\n"), 300), 0o644); err != nil {
					t.Fatal(err)
				}
			case "zero-byte file":
				if err := os.WriteFile(path, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			default:
				db, err := sql.Open("sqlite", path)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec(`PRAGMA user_version = 1; ` + setup); err != nil {
					t.Fatal(err)
				}
				db.Close()
			}
			_, err := Open(context.Background(), Config{Path: path})
			if !errors.Is(err, store.ErrNotCheckpointStore) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open = %v; want ErrNotCheckpointStore naming the file", err)
			}
		})
	}
}

// TestReadWhileWriting reads a thread over and over while another
// connection keeps adding turns to it in WAL mode, as an agent host does.
func TestReadWhileWriting(t *testing.T) {
	for _, format := range []string{typeJSON, typeMsgpack} {
		t.Run(format, func(t *testing.T) {
			path, w := newSaverFile(t, format)
			ref := store.Ref{ThreadID: "busy"}
			storetest.Build(w, ref, storetest.Demo[:1])
			st := store.New(store.Config{Backend: openBackend(t, path)})
			ctx := context.Background()

			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each round rewrites the thread with one more turn, as
				// fast as the writer can.
				for n := 2; ; n++ {
					select {
					case <-done:
						return
					default:
					}
					turns := slices.Repeat(storetest.Demo, n/len(storetest.Demo)+1)[:n]
					storetest.Build(w, store.Ref{ThreadID: fmt.Sprintf("other-%d", n%3)}, storetest.Demo[:2])
					storetest.Build(w, ref, turns)
				}
			}()
			deadline := time.Now().Add(1500 * time.Millisecond)
			reads, last := 0, 0
			for time.Now().Before(deadline) {
				h, err := st.History(ctx, ref)
				if err != nil {
					t.Fatalf("read %d: %v", reads, err)
				}
				if h.Total < last {
					t.Fatalf("read %d: %d turns after %d", reads, h.Total, last)
				}
				last = h.Total
				if _, err := st.States(ctx, ref, h.Turns[len(h.Turns)-1:], nil); err != nil {
					t.Fatalf("read %d: states: %v", reads, err)
				}
				reads++
			}
			close(done)
			wg.Wait()
			t.Logf("%d reads, last saw %d turns", reads, last)
			if reads < 10 || last < 2 {
				t.Errorf("%d reads, last saw %d turns; want the reads to overlap the writes", reads, last)
			}
		})
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// TestReadOnly checks that the backend's own connections refuse writes and
// that reading leaves the database file as it was.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	path, w := newSaverFile(t, typeJSON)
	ref := store.Ref{ThreadID: "ro"}
	storetest.Build(w, ref, storetest.Demo)
	// Fold the writer's log into the file, so that the file alone holds
	// every page and a change by the reader would show in its bytes.
	if _, err := w.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	before := fileSum(t, path)
	info, _ := os.Stat(path)

	b := openBackend(t, path)
	st := store.New(store.Config{Backend: b})
	h, err := st.History(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.States(ctx, ref, h.Turns, nil); err != nil {
		t.Fatal(err)
	}
	db, err := b.pool()
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`DELETE FROM checkpoints`,
		`INSERT INTO checkpoints (thread_id, checkpoint_id) VALUES ('x', 'y')`,
		`CREATE TABLE mine (x)`,
		`VACUUM`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err == nil {
			t.Errorf("%s through the backend's connection succeeded", stmt)
		}
	}
	b.Close()
	if fileSum(t, path) != before {
		t.Error("the database file changed")
	}
	if after, _ := os.Stat(path); !after.ModTime().Equal(info.ModTime()) {
		t.Error("the database file's modification time changed")
	}
	var n int
	if err := w.db.QueryRow(`SELECT count(*) FROM checkpoints`).Scan(&n); err != nil || n == 0 {
		t.Errorf("checkpoints left: %d, %v", n, err)
	}
}

// TestCorruptCheckpoint checks that a checkpoint that cannot be read is a
// DecodeError naming it, malformed or refused as appropriate, and that the
// other checkpoints of other threads still read.
func TestCorruptCheckpoint(t *testing.T) {
	ctx := context.Background()
	empty := map[string]any{"tool_state": map[string]any{}}
	good := map[string][]byte{
		typeJSON:    jsCheckpoint(t, "c", time.Now(), empty, nil),
		typeMsgpack: pyCheckpoint(t, "c", time.Now(), empty, nil),
	}
	cases := []struct {
		name, typ   string
		data        []byte
		unsupported bool
		listOnly    bool // only the versions are bad, which Values never reads
	}{
		{"truncated msgpack", "msgpack", good["msgpack"][:len(good["msgpack"])-3], false, false},
		{"msgpack garbage", "msgpack", []byte{0xc1, 0x00}, false, false},
		{"msgpack not a map", "msgpack", []byte{0x93, 1, 2, 3}, false, false},
		{"msgpack lying length", "msgpack", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'v'}, false, false},
		{"truncated json", "json", good["json"][:len(good["json"])-3], false, false},
		{"json array", "json", []byte(`[1,2]`), false, false},
		{"json versions not a map", "json", []byte(`{"channel_versions":[1],"channel_values":{}}`), false, true},
		{"json version a map", "json", []byte(`{"channel_versions":{"tool_state":{}},"channel_values":{}}`), false, true},
		{"NULL type read as json", "", good["msgpack"], false, false},
		{"pickle", "pickle", []byte("\x80\x04."), true, false},
		{"encrypted", "msgpack+aes", []byte("sealed"), true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, w := newSaverFile(t, typeJSON)
			storetest.Build(w, store.Ref{ThreadID: "fine"}, storetest.Demo[:1])
			ref := store.Ref{ThreadID: "broken", Namespace: "ns"}
			storetest.Build(w, ref, storetest.Demo[:1])
			var typ any = c.typ
			if c.typ == "" {
				typ = nil
			}
			w.insert(ref, "1f0c-9999", nil, typ, c.data)
			b := openBackend(t, path)
			_, err := store.New(store.Config{Backend: b}).History(ctx, ref)
			checkDecodeError(t, "History", err, ref, c.unsupported)
			if !c.listOnly {
				_, err = b.Values(ctx, ref, "tool_state", []string{"1f0c-0001", "1f0c-9999"})
				checkDecodeError(t, "Values", err, ref, c.unsupported)
			}
			if h, err := store.New(store.Config{Backend: b}).History(ctx, store.Ref{ThreadID: "fine"}); err != nil || h.Total != 1 {
				t.Errorf("other thread: %+v, %v", h, err)
			}
		})
	}
}

func checkDecodeError(t *testing.T, what string, err error, ref store.Ref, unsupported bool) {
	t.Helper()
	var de *store.DecodeError
	if !errors.As(err, &de) || de.CheckpointID != "1f0c-9999" || de.Channel != "checkpoint" || de.Ref != ref {
		t.Fatalf("%s error = %v; want a DecodeError for checkpoint 1f0c-9999", what, err)
	}
	var ue *lgcodec.UnsupportedError
	var me *lgcodec.MalformedError
	switch {
	case unsupported && !errors.As(err, &ue):
		t.Errorf("%s error = %v; want an UnsupportedError", what, err)
	case !unsupported && !errors.As(err, &me):
		t.Errorf("%s error = %v; want a MalformedError", what, err)
	}
}

// TestFileGoneAndBack checks that a deleted file is reported unavailable
// rather than read through connections still holding it, and that a file
// recreated at the path is read afresh.
func TestFileGoneAndBack(t *testing.T) {
	ctx := context.Background()
	path, w := newSaverFile(t, typeJSON)
	storetest.Build(w, store.Ref{ThreadID: "old"}, storetest.Demo[:1])
	b := openBackend(t, path)
	st := store.New(store.Config{Backend: b})
	if h, err := st.History(ctx, store.Ref{ThreadID: "old"}); err != nil || h.Total != 1 {
		t.Fatalf("History = %+v, %v", h, err)
	}
	w.db.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	if err := b.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping after delete = %v; want ErrUnavailable", err)
	}
	if _, err := b.Checkpoints(ctx, store.Ref{ThreadID: "old"}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Checkpoints after delete = %v; want ErrUnavailable", err)
	}

	// The agent host starts again on a fresh file at the same path.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(jsDDL); err != nil {
		t.Fatal(err)
	}
	w2 := &saverWriter{t: t, db: db, format: typeJSON, versions: map[store.Ref]map[string]*channelVersion{}, parent: map[store.Ref]string{}}
	storetest.Build(w2, store.Ref{ThreadID: "new"}, storetest.Demo[:2])
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("Ping after recreate = %v", err)
	}
	if h, err := st.History(ctx, store.Ref{ThreadID: "new"}); err != nil || h.Total != 2 {
		t.Errorf("new thread = %+v, %v", h, err)
	}
	if h, err := st.History(ctx, store.Ref{ThreadID: "old"}); err != nil || h.Total != 0 {
		t.Errorf("old thread after recreate = %+v, %v", h, err)
	}
}

// TestLockedIsUnavailable holds an exclusive lock on a rollback-journal
// database, which blocks readers, past the busy timeout.
func TestLockedIsUnavailable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(strings.Replace(pythonDDL, "PRAGMA journal_mode=WAL;", "PRAGMA journal_mode=DELETE;", 1)); err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, Config{Path: path, BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = b.Checkpoints(ctx, store.Ref{ThreadID: "t"})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Checkpoints under an exclusive lock = %v; want ErrUnavailable", err)
	}
	if waited := time.Since(start); waited < 80*time.Millisecond {
		t.Errorf("gave up after %v, before the busy timeout", waited)
	}
	if err := b.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping under an exclusive lock = %v; want ErrUnavailable", err)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(ctx); err != nil {
		t.Errorf("Ping after the lock = %v", err)
	}
}

func TestClosed(t *testing.T) {
	path, _ := newSaverFile(t, typeJSON)
	b := openBackend(t, path)
	b.Close()
	b.Close()
	if _, err := b.Checkpoints(context.Background(), store.Ref{ThreadID: "t"}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Checkpoints after Close = %v; want ErrUnavailable", err)
	}
}

func TestParseDSN(t *testing.T) {
	existing := filepath.Join(t.TempDir(), "checkpoints")
	if err := os.WriteFile(existing, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dsn, path string
		ok        bool
	}{
		{"sqlite:///var/lib/agent/checkpoints.db", "/var/lib/agent/checkpoints.db", true},
		{"sqlite://data/checkpoints.db", "data/checkpoints.db", true},
		{"sqlite:/abs/x", "/abs/x", true},
		{"sqlite:rel.sqlite", "rel.sqlite", true},
		{"sqlite:///odd name?.db", "/odd name?.db", true},
		{"sqlite://", "", false},
		{"sqlite:", "", false},
		{"/var/lib/agent/checkpoints.db", "/var/lib/agent/checkpoints.db", true},
		{"checkpoints.sqlite", "checkpoints.sqlite", true},
		{"state/CHECKPOINTS.SQLITE3", "state/CHECKPOINTS.SQLITE3", true},
		{existing, existing, true},
		{filepath.Dir(existing), "", false},
		{"/no/such/file", "", false},
		{"postgres://u@h/db.db", "", false},
		{"postgresql://u@h:5432/app", "", false},
		{"host=localhost dbname=app", "", false},
		{"dbname=checkpoints.db", "", false},
		{"sqlite:///data/a=b.db", "/data/a=b.db", true},
		{"", "", false},
	} {
		path, ok := ParseDSN(c.dsn)
		if path != c.path || ok != c.ok {
			t.Errorf("ParseDSN(%q) = %q, %v; want %q, %v", c.dsn, path, ok, c.path, c.ok)
		}
	}
}

// TestOpenRelativePathAndOddNames checks that a path with characters that
// mean something in a URI is opened as the file it names.
func TestOpenRelativePathAndOddNames(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "a dir?#%20", "check points.db")
	if err := os.MkdirAll(filepath.Dir(odd), 0o755); err != nil {
		t.Fatal(err)
	}
	// The writer needs a URI too: a bare name would be cut at the "?".
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: odd}).String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(jsDDL); err != nil {
		t.Fatal(err)
	}
	w := &saverWriter{t: t, db: db, format: typeJSON, versions: map[store.Ref]map[string]*channelVersion{}, parent: map[store.Ref]string{}}
	storetest.Build(w, store.Ref{ThreadID: "t"}, storetest.Demo[:1])
	db.Close()
	t.Chdir(filepath.Dir(odd))
	b := openBackend(t, "check points.db")
	if b.path != odd {
		t.Errorf("path = %q, want %q", b.path, odd)
	}
	if h, err := store.New(store.Config{Backend: b}).History(context.Background(), store.Ref{ThreadID: "t"}); err != nil || h.Total != 1 {
		t.Errorf("History = %+v, %v", h, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a dir")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the name was cut at a URI delimiter")
	}
}

// TestRealSaverFiles reads files written by the real savers (see
// testdata/python_saver.py and testdata/js_saver.mjs): Python's msgpack and
// LangChain.js's JSON, both with the checkpoint in a BLOB column.
func TestRealSaverFiles(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ file, typ string }{
		{"python_saver.db", typeMsgpack},
		{"js_saver.db", typeJSON},
	} {
		t.Run(c.file, func(t *testing.T) {
			// Copied: reading a WAL database creates its -wal and -shm
			// files, which do not belong in testdata.
			data, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), c.file)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			b := openBackend(t, path)
			ref := store.Ref{ThreadID: "demo"}
			cps, err := b.Checkpoints(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if len(cps) != 6 || cps[0].TS.IsZero() || cps[5].Versions["messages"] == "" || cps[5].Versions["tool_state"] == "" {
				t.Fatalf("checkpoints = %+v", cps)
			}
			st := store.New(store.Config{Backend: b})
			h, err := st.History(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if h.Total != 2 || h.Turns[0].Question != "sketch the Severn" || h.Turns[1].Question != "Wie groß ist die Themse? 🌊" ||
				h.Turns[1].End.ID != cps[5].ID || h.Turns[1].End.Messages != 4 {
				t.Fatalf("history = %+v", h)
			}
			states, err := st.States(ctx, ref, h.Turns, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range states {
				e := s["sketch-ops/sketch_area/area_km2"]
				// Compared as text: JSON gives 22841.0 back as an integer.
				if fmt.Sprint(e.Value) != fmt.Sprint(11420.5*float64(i+1)) || e.Turn == nil || *e.Turn != int64(i+1) {
					t.Errorf("turn %d state = %+v", i+1, s)
				}
			}
			blobs, err := b.Values(ctx, ref, "messages", []string{cps[5].ID})
			if err != nil || blobs[0].Type != c.typ {
				t.Errorf("messages blob = %+v, %v; want type %s", blobs, err, c.typ)
			}
		})
	}
}

func TestCheckpointsSince(t *testing.T) {
	ctx := context.Background()
	for _, format := range []string{typeJSON, typeMsgpack} {
		t.Run(format, func(t *testing.T) {
			path, w := newSaverFile(t, format)
			ref := store.Ref{ThreadID: "since", Namespace: "ns"}
			written := storetest.Build(w, ref, storetest.Demo[:2])
			storetest.Build(w, store.Ref{ThreadID: "since"}, storetest.Demo)
			b := openBackend(t, path)
			all, err := b.Checkpoints(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				after string
				newer []store.Checkpoint
			}{
				{"", all},
				{all[0].ID, all[1:]},
				{written[0].End, all[len(written[0].IDs)+1:]},
				{all[len(all)-1].ID, nil},
				{"zzzz", nil},
			} {
				for _, count := range []bool{true, false} {
					want := store.Census{Count: len(all), MinID: all[0].ID}
					if !count {
						want.Count = -1
					}
					census, newer, err := b.CheckpointsSince(ctx, ref, store.Since{After: c.after, Count: count})
					if err != nil || !reflect.DeepEqual(census, want) || !reflect.DeepEqual(newer, c.newer) {
						t.Errorf("after %q, count %v: %+v, %d newer, %v; want %+v, %d newer", c.after, count, census, len(newer), err, want, len(c.newer))
					}
				}
			}
			// Which checkpoints still exist is told in the same read.
			verify := []string{written[1].End, "1f0c-nope", all[0].ID}
			census, _, err := b.CheckpointsSince(ctx, ref, store.Since{After: all[len(all)-1].ID, Verify: verify})
			slices.Sort(census.Present)
			if want := []string{all[0].ID, written[1].End}; err != nil || !reflect.DeepEqual(census.Present, want) {
				t.Errorf("verify %v: present %v, %v; want %v", verify, census.Present, err, want)
			}
			if census, newer, err := b.CheckpointsSince(ctx, store.Ref{ThreadID: "none"}, store.Since{Count: true}); !reflect.DeepEqual(census, store.Census{}) || newer != nil || err != nil {
				t.Errorf("unknown thread: %+v, %v, %v", census, newer, err)
			}
			w.insert(ref, "1f0c-9999", nil, format, []byte("{broken"))
			var de *store.DecodeError
			if _, _, err := b.CheckpointsSince(ctx, ref, store.Since{After: all[len(all)-1].ID}); !errors.As(err, &de) || de.CheckpointID != "1f0c-9999" {
				t.Errorf("corrupt newer checkpoint: %v; want a DecodeError", err)
			}
		})
	}
}

// TestDeltaChannelRefused marks one checkpoint's metadata as LangGraph does
// for graphs with DeltaChannel channels: the thread is refused, not misread.
func TestDeltaChannelRefused(t *testing.T) {
	for _, format := range []string{typeJSON, typeMsgpack} {
		path, w := newSaverFile(t, format)
		ref := store.Ref{ThreadID: "delta"}
		written := storetest.Build(w, ref, storetest.Demo[:2])
		if _, err := w.db.Exec(`UPDATE checkpoints SET metadata = ? WHERE checkpoint_id = ?`,
			[]byte(`{"source": "loop", "counters_since_delta_snapshot": {"messages": 2}}`), written[1].End); err != nil {
			t.Fatal(err)
		}
		b := openBackend(t, path)
		_, err := store.New(store.Config{Backend: b}).History(context.Background(), ref)
		var unsupported *lgcodec.UnsupportedError
		if !errors.As(err, &unsupported) || unsupported.Feature != "DeltaChannel" {
			t.Errorf("%s: History of a delta thread = %v; want an UnsupportedError naming DeltaChannel", format, err)
		}
		other := store.Ref{ThreadID: "plain"}
		storetest.Build(w, other, storetest.Demo[:1])
		if h, err := store.New(store.Config{Backend: b}).History(context.Background(), other); err != nil || h.Total != 1 {
			t.Errorf("%s: another thread in the same file = %v, %v", format, h, err)
		}
	}
}

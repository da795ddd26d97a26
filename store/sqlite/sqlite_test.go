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
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// saverFile is a checkpoint file written as a SqliteSaver writes it,
// through a read-write connection of its own: the writer side of the file
// is a single agent host.
type saverFile struct {
	*storetest.SaverWriter
	t     testing.TB
	db    *sql.DB
	saver saver.Saver

	mu     sync.Mutex
	parent map[backend.Ref]string
}

// newSaverFile creates a checkpoint file in a fresh directory with saver's
// DDL.
func newSaverFile(t testing.TB, layout saver.Saver) (string, *saverFile) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	return path, openSaverFile(t, (&url.URL{Scheme: "file", Path: path}).String(), layout)
}

// openSaverFile opens (creating) the file the URI names, with saver's DDL.
func openSaverFile(t testing.TB, uri string, layout saver.Saver) *saverFile {
	t.Helper()
	// Not synced: the tests need no durability, and a sync per commit
	// would make them slow.
	db, err := sql.Open("sqlite", uri+"?_pragma=busy_timeout(10000)&_pragma=synchronous(OFF)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	exec := func(ctx context.Context, q string, args ...any) error {
		_, err := db.ExecContext(ctx, q, args...)
		return err
	}
	f := &saverFile{SaverWriter: storetest.NewSaverWriter(t, saver.NewWriter(layout, exec, "")), t: t, db: db, saver: layout,
		parent: map[backend.Ref]string{}}
	t.Cleanup(func() {
		f.Close()
		db.Close()
	})
	for _, stmt := range append([]string{saver.SQLiteWAL}, layout.DDL("")...) {
		if err := exec(context.Background(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// put stores a checkpoint holding values (in key order), the child of the
// thread's last one put.
func (f *saverFile) put(ref backend.Ref, id string, ts time.Time, values map[string]any) {
	f.mu.Lock()
	parent := f.parent[ref]
	f.parent[ref] = id
	f.mu.Unlock()
	var m write.Map
	for _, k := range slices.Sorted(maps.Keys(values)) {
		m = append(m, write.Field{Key: k, Value: values[k]})
	}
	f.Put(ref, saver.Checkpoint{ID: id, Parent: parent, TS: ts, Values: m})
}

// insert stores a raw checkpoint row.
func (f *saverFile) insert(ref backend.Ref, id string, parent any, typ any, data []byte) {
	f.t.Helper()
	_, err := f.db.Exec(`INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		ref.ThreadID, ref.Namespace, id, parent, typ, data, []byte(`{"source":"loop","step":1}`))
	if err != nil {
		f.t.Fatal(err)
	}
}

// savers are the two SqliteSavers' layouts.
var savers = []saver.Saver{saver.SQLiteJS, saver.SQLitePython}

func openBackend(t testing.TB, path string) *Backend {
	t.Helper()
	b, err := Open(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// TestSuite runs the shared backend suite over files in both savers'
// formats.
func TestSuite(t *testing.T) {
	for _, saver := range savers {
		t.Run(saver.Serializer(), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) (backend.Backend, storetest.Writer) {
				path, w := newSaverFile(t, saver)
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
	for _, saver := range savers {
		serializer := saver.Serializer()
		t.Run(serializer, func(t *testing.T) {
			path, w := newSaverFile(t, saver)
			ref := backend.Ref{ThreadID: "raw"}
			state := map[string]any{"k": map[string]any{"value": 1.5, "turn": 1, "turns_written": 1}}
			var ids []string
			for i := range idsPerQuery + 20 {
				id := fmt.Sprintf("1f0c-%05d", i)
				w.put(ref, id, time.Unix(int64(i), 0), map[string]any{"tool_state": state, "n": i, "branch:to:agent": nil})
				ids = append(ids, id)
			}
			b := openBackend(t, path)
			ask := append([]string{"missing", ids[3], ids[3]}, ids...)
			blobs, err := backend.Values(ctx, b, ref, "tool_state", ask)
			if err != nil {
				t.Fatal(err)
			}
			if len(blobs) != len(ask) || !blobs[0].Missing {
				t.Fatalf("got %d blobs, first %+v; want %d, first missing", len(blobs), blobs[0], len(ask))
			}
			var want []byte
			// Encoded independently of the writer: JSON by encoding/json, msgpack
			// by another library, configured as Python's serializer writes.
			if serializer == format.TypeJSON {
				want, _ = json.Marshal(state)
			} else {
				var buf bytes.Buffer
				enc := msgpack.NewEncoder(&buf)
				enc.UseCompactInts(true)
				enc.SetSortMapKeys(true)
				if err := enc.Encode(state); err != nil {
					t.Fatal(err)
				}
				want = buf.Bytes()
			}
			for i, bl := range blobs[1:] {
				if bl.Type != serializer || !bytes.Equal(bl.Data, want) {
					t.Fatalf("blob %d = %s %x, want %s %x", i+1, bl.Type, bl.Data, serializer, want)
				}
			}
			v, ok, err := codec.Decode(blobs[1].Type, blobs[1].Data, codec.Limits{})
			if err != nil || !ok {
				t.Fatalf("decode: %v, %v", ok, err)
			}
			if got, _ := json.Marshal(v); string(got) != `{"k":{"turn":1,"turns_written":1,"value":1.5}}` {
				t.Errorf("decoded %s", got)
			}
			blobs, err = backend.Values(ctx, b, ref, "no_such_channel", ids[:2])
			if err != nil || blobs[0].Type != format.TypeEmpty || blobs[1].Type != format.TypeEmpty {
				t.Errorf("unknown channel: %+v, %v", blobs, err)
			}
			// The null branch channel is a value, not an absence.
			blobs, err = backend.Values(ctx, b, ref, "branch:to:agent", ids[:1])
			if err != nil || blobs[0].Type != serializer {
				t.Errorf("null channel: %+v, %v", blobs, err)
			}
			cps := list(t, b, ref)
			if len(cps) != len(ids) || cps[0].Versions["tool_state"] == "" || cps[0].Versions["n"] == cps[1].Versions["n"] ||
				cps[0].Versions["tool_state"] != cps[1].Versions["tool_state"] || !cps[5].TS.Equal(time.Unix(5, 0)) {
				t.Errorf("checkpoints: %d, first two %+v %+v", len(cps), cps[0], cps[1])
			}
		})
	}
}

// listed is one listed checkpoint row, parsed.
type listed struct {
	backend.Row
	codec.Checkpoint
}

// list lists the thread's checkpoints in id order, parsing each row.
func list(t *testing.T, b *Backend, ref backend.Ref) []listed {
	t.Helper()
	var out []listed
	_, err := b.List(context.Background(), ref, backend.Query{}, func(r backend.Row) error {
		cp, err := codec.ParseCheckpoint(r.Checkpoint.Type, r.Checkpoint.Data, nil)
		if err != nil {
			return err
		}
		r.Checkpoint.Data, r.Metadata.Data = nil, nil // not valid after fn
		out = append(out, listed{r, cp})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b listed) int { return strings.Compare(a.ID, b.ID) })
	return out
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
			if !errors.Is(err, backend.ErrNotCheckpointStore) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open = %v; want ErrNotCheckpointStore naming the file", err)
			}
		})
	}
}

// TestReadWhileWriting reads a thread over and over while another
// connection keeps adding turns to it in WAL mode, as an agent host does.
func TestReadWhileWriting(t *testing.T) {
	for _, saver := range savers {
		t.Run(saver.Serializer(), func(t *testing.T) {
			path, w := newSaverFile(t, saver)
			ref := backend.Ref{ThreadID: "busy"}
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
					storetest.Build(w, backend.Ref{ThreadID: fmt.Sprintf("other-%d", n%3)}, storetest.Demo[:2])
					storetest.Build(w, ref, turns)
				}
			}()
			deadline := time.Now().Add(1500 * time.Millisecond)
			reads, last := 0, 0
			for time.Now().Before(deadline) {
				h, _, _, err := st.ReadEncoded(ctx, ref, "", func(h *store.History) []store.Turn { return h.Turns[len(h.Turns)-1:] }, nil, storetest.EntryEncoder{})
				if err != nil {
					t.Fatalf("read %d: %v", reads, err)
				}
				if h.Total < last {
					t.Fatalf("read %d: %d turns after %d", reads, h.Total, last)
				}
				last = h.Total
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
	path, w := newSaverFile(t, saver.SQLiteJS)
	ref := backend.Ref{ThreadID: "ro"}
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
	if h, turns, _ := storetest.Read(t, st, ref, storetest.Retained, nil); h.Total != len(storetest.Demo) || len(turns) != h.Total {
		t.Fatalf("read %d of %d turns", len(turns), h.Total)
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
	checkpoint := write.Map{{Key: "v", Value: 4}, {Key: "id", Value: "c"}, {Key: "ts", Value: time.Now()},
		{Key: "channel_values", Value: write.Map{{Key: "tool_state", Value: map[string]any{}}}},
		{Key: "channel_versions", Value: write.Map{{Key: "tool_state", Value: 1}}}}
	good := map[string][]byte{}
	var err error
	if good["json"], err = write.EncodeJSON(checkpoint); err != nil {
		t.Fatal(err)
	}
	if good["msgpack"], err = write.EncodeMsgpack(checkpoint); err != nil {
		t.Fatal(err)
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
			path, w := newSaverFile(t, saver.SQLiteJS)
			storetest.Build(w, backend.Ref{ThreadID: "fine"}, storetest.Demo[:1])
			ref := backend.Ref{ThreadID: "broken", Namespace: "ns"}
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
				_, err = backend.Values(ctx, b, ref, "tool_state", []string{"1f0c-0001", "1f0c-9999"})
				checkDecodeError(t, "Values", err, ref, c.unsupported)
			}
			if h, err := store.New(store.Config{Backend: b}).History(ctx, backend.Ref{ThreadID: "fine"}); err != nil || h.Total != 1 {
				t.Errorf("other thread: %+v, %v", h, err)
			}
		})
	}
}

func checkDecodeError(t *testing.T, what string, err error, ref backend.Ref, unsupported bool) {
	t.Helper()
	var de *store.DecodeError
	if !errors.As(err, &de) || de.CheckpointID != "1f0c-9999" || de.Channel != "checkpoint" || de.Ref != ref {
		t.Fatalf("%s error = %v; want a DecodeError for checkpoint 1f0c-9999", what, err)
	}
	var ue *codec.UnsupportedError
	var me *codec.MalformedError
	switch {
	case unsupported && !errors.As(err, &ue):
		t.Errorf("%s error = %v; want an UnsupportedError", what, err)
	case !unsupported && !errors.As(err, &me):
		t.Errorf("%s error = %v; want a MalformedError", what, err)
	}
}

// TestCorruptFile damages the b-tree pages of the checkpoints table and
// its index: reads fail with a backend.CorruptError whose role names the
// file by what it is, and whose error names the path and SQLite's words for
// the log; it is neither unavailability nor a wrong configuration.
func TestCorruptFile(t *testing.T) {
	ctx := context.Background()
	path, w := newSaverFile(t, saver.SQLitePython)
	ref := backend.Ref{ThreadID: "damaged"}
	storetest.Build(w, ref, storetest.Demo[:2])
	// Everything into the database file itself, where the damage goes.
	if _, err := w.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	var pageSize int64
	if err := w.db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	rows, err := w.db.Query(`SELECT rootpage FROM sqlite_master WHERE tbl_name = 'checkpoints'`)
	if err != nil {
		t.Fatal(err)
	}
	var roots []int64
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		roots = append(roots, p)
	}
	rows.Close()
	if len(roots) < 2 {
		t.Fatalf("checkpoints has %d b-trees, want the table and its primary key", len(roots))
	}
	b := openBackend(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range roots {
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xff}, 12), (p-1)*pageSize); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()

	_, err = b.List(ctx, ref, backend.Query{}, func(backend.Row) error { return nil })
	var ce *backend.CorruptError
	if !errors.As(err, &ce) || ce.Role != "the SQLite checkpoint database" {
		t.Fatalf("List of a damaged file = %v; want a CorruptError for the SQLite checkpoint database", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("error %q names neither the file nor the damage", err)
	}
	if errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrNotCheckpointStore) {
		t.Errorf("damage reported as an outage or a misconfiguration: %v", err)
	}
	if err := b.Ping(ctx); err != nil {
		t.Errorf("Ping with damaged data pages = %v; the file is there and holds the tables", err)
	}
}

// TestFileGoneAndBack checks that a deleted file is reported unavailable
// rather than read through connections still holding it, and that a file
// recreated at the path is read afresh.
func TestFileGoneAndBack(t *testing.T) {
	ctx := context.Background()
	path, w := newSaverFile(t, saver.SQLiteJS)
	storetest.Build(w, backend.Ref{ThreadID: "old"}, storetest.Demo[:1])
	b := openBackend(t, path)
	st := store.New(store.Config{Backend: b})
	if h, err := st.History(ctx, backend.Ref{ThreadID: "old"}); err != nil || h.Total != 1 {
		t.Fatalf("History = %+v, %v", h, err)
	}
	w.db.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	if err := b.Ping(ctx); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Ping after delete = %v; want ErrUnavailable", err)
	}
	if _, err := b.List(ctx, backend.Ref{ThreadID: "old"}, backend.Query{}, func(backend.Row) error { return nil }); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("List after delete = %v; want ErrUnavailable", err)
	}

	// The agent host starts again on a fresh file at the same path.
	w2 := openSaverFile(t, (&url.URL{Scheme: "file", Path: path}).String(), saver.SQLiteJS)
	storetest.Build(w2, backend.Ref{ThreadID: "new"}, storetest.Demo[:2])
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("Ping after recreate = %v", err)
	}
	if h, err := st.History(ctx, backend.Ref{ThreadID: "new"}); err != nil || h.Total != 2 {
		t.Errorf("new thread = %+v, %v", h, err)
	}
	if h, err := st.History(ctx, backend.Ref{ThreadID: "old"}); err != nil || h.Total != 0 {
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
	for _, stmt := range append([]string{"PRAGMA journal_mode=DELETE"}, saver.SQLitePython.DDL("")...) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
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
	_, err = b.List(ctx, backend.Ref{ThreadID: "t"}, backend.Query{}, func(backend.Row) error { return nil })
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Checkpoints under an exclusive lock = %v; want ErrUnavailable", err)
	}
	if waited := time.Since(start); waited < 80*time.Millisecond {
		t.Errorf("gave up after %v, before the busy timeout", waited)
	}
	if err := b.Ping(ctx); !errors.Is(err, backend.ErrUnavailable) {
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
	path, _ := newSaverFile(t, saver.SQLiteJS)
	b := openBackend(t, path)
	b.Close()
	b.Close()
	if _, err := b.List(context.Background(), backend.Ref{ThreadID: "t"}, backend.Query{}, func(backend.Row) error { return nil }); !errors.Is(err, backend.ErrUnavailable) {
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
	w := openSaverFile(t, (&url.URL{Scheme: "file", Path: odd}).String(), saver.SQLiteJS)
	storetest.Build(w, backend.Ref{ThreadID: "t"}, storetest.Demo[:1])
	w.db.Close()
	t.Chdir(filepath.Dir(odd))
	b := openBackend(t, "check points.db")
	if b.path != odd {
		t.Errorf("path = %q, want %q", b.path, odd)
	}
	if h, err := store.New(store.Config{Backend: b}).History(context.Background(), backend.Ref{ThreadID: "t"}); err != nil || h.Total != 1 {
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
		{"python_saver.db", format.TypeMsgpack},
		{"js_saver.db", format.TypeJSON},
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
			ref := backend.Ref{ThreadID: "demo"}
			cps := list(t, b, ref)
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
			_, _, states := storetest.Read(t, st, ref, storetest.Retained, nil)
			for i, s := range states {
				e := s["sketch-ops/sketch_area/area_km2"]
				if e["value"] != 11420.5*float64(i+1) || e["turn"] != float64(i+1) {
					t.Errorf("turn %d state = %+v", i+1, s)
				}
			}
			blobs, err := backend.Values(ctx, b, ref, "messages", []string{cps[5].ID})
			if err != nil || blobs[0].Type != c.typ {
				t.Errorf("messages blob = %+v, %v; want type %s", blobs, err, c.typ)
			}
		})
	}
}

func TestListSince(t *testing.T) {
	ctx := context.Background()
	for _, saver := range savers {
		t.Run(saver.Serializer(), func(t *testing.T) {
			path, w := newSaverFile(t, saver)
			ref := backend.Ref{ThreadID: "since", Namespace: "ns"}
			written := storetest.Build(w, ref, storetest.Demo[:2])
			storetest.Build(w, backend.Ref{ThreadID: "since"}, storetest.Demo)
			b := openBackend(t, path)
			all := list(t, b, ref)
			ids := func(cps []listed) []string {
				var out []string
				for _, c := range cps {
					out = append(out, c.ID)
				}
				return out
			}
			for _, c := range []struct {
				after string
				newer []string
			}{
				{all[0].ID, ids(all[1:])},
				{written[0].End, ids(all[len(written[0].IDs)+1:])},
				{all[len(all)-1].ID, nil},
				{"zzzz", nil},
			} {
				for _, count := range []bool{true, false} {
					want := backend.Census{Count: len(all), MinID: all[0].ID}
					if !count {
						want.Count = -1
					}
					var newer []string
					census, err := b.List(ctx, ref, backend.Query{After: c.after, Count: count}, func(r backend.Row) error {
						newer = append(newer, r.ID)
						return nil
					})
					if err != nil || !reflect.DeepEqual(census, want) || !reflect.DeepEqual(newer, c.newer) {
						t.Errorf("after %q, count %v: %+v, newer %v, %v; want %+v, %v", c.after, count, census, newer, err, want, c.newer)
					}
				}
			}
			// Which checkpoints still exist is told in the same read.
			verify := []string{written[1].End, "1f0c-nope", all[0].ID}
			census, err := b.List(ctx, ref, backend.Query{After: all[len(all)-1].ID, Verify: verify}, func(backend.Row) error { return nil })
			slices.Sort(census.Present)
			if want := []string{all[0].ID, written[1].End}; err != nil || !reflect.DeepEqual(census.Present, want) {
				t.Errorf("verify %v: present %v, %v; want %v", verify, census.Present, err, want)
			}
			if census, err := b.List(ctx, backend.Ref{ThreadID: "none"}, backend.Query{After: "x", Count: true}, func(backend.Row) error {
				t.Error("a row of an unknown thread")
				return nil
			}); !reflect.DeepEqual(census, backend.Census{}) || err != nil {
				t.Errorf("unknown thread: %+v, %v", census, err)
			}
			w.insert(ref, "1f0c-9999", nil, saver.Serializer(), []byte("{broken"))
			var de *store.DecodeError
			if _, err := store.New(store.Config{Backend: b}).History(ctx, ref); !errors.As(err, &de) || de.CheckpointID != "1f0c-9999" {
				t.Errorf("corrupt newer checkpoint: %v; want a DecodeError", err)
			}
		})
	}
}

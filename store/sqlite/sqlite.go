// Package sqlite reads LangGraph checkpoints from the SQLite file that the
// Python and JavaScript SqliteSaver write, while the agent host keeps
// writing it.
//
// Both savers keep one row per checkpoint in a table named checkpoints, with
// the whole checkpoint, channel values included, serialized in its checkpoint
// column: Python's JsonPlusSerializer writes msgpack (type "msgpack"),
// LangChain.js writes JSON text (type "json"). There is no blob table, so a
// channel's value is cut out of the checkpoint it belongs to, still encoded,
// and handed to the layers above as a backend.Blob of the checkpoint's type.
//
// The file is opened read-only: historyd never creates it, never writes to
// it, never checkpoints its write-ahead log, and reads consistent snapshots
// while the saver writes in WAL mode (which both savers switch on). Reading
// a WAL database needs its -wal and -shm files: when the saver is stopped
// and has removed them, SQLite creates them empty beside the database and,
// being read-only, leaves them for the saver's next start. A directory
// historyd cannot write to therefore works only while the saver runs;
// otherwise every read reports backend.ErrUnavailable.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// blobType names the serializer of a row. A NULL or empty type is read as
// JSON, as the JavaScript saver itself reads it: such rows predate the type
// column and were written as JSON.
func blobType(t *string) string {
	if t == nil || *t == "" {
		return format.TypeJSON
	}
	return *t
}

// Config configures a Backend.
type Config struct {
	// Path is the SQLite file the checkpointer writes. Required. A relative
	// path is resolved against the working directory when Open is called.
	// The file must already exist: historyd never creates it.
	Path string
	// BusyTimeout is how long a query waits for a lock held by the writer
	// before failing with backend.ErrUnavailable. In WAL mode readers are
	// rarely blocked; a database left in rollback-journal mode blocks them
	// for every write. Zero means 5 seconds.
	BusyTimeout time.Duration
	// MaxConns caps the open connections, each of which keeps its own page
	// cache. Zero means 4.
	MaxConns int
	// TracerProvider, when set, traces every statement of a traced call,
	// as a child of the call's span (see statement). Nil: no spans.
	TracerProvider trace.TracerProvider
}

const (
	defaultBusyTimeout = 5 * time.Second
	defaultMaxConns    = 4
	// idsPerQuery bounds the placeholders of one IN list, well under
	// SQLite's limit on bound parameters.
	idsPerQuery = 500
)

// Backend is a backend.Backend over a read-only SQLite connection pool.
type Backend struct {
	path     string
	dsn      string
	maxConns int

	mu sync.Mutex
	// db holds connections to the file as it was when file was taken. A
	// file replaced under the same name (restored from a backup, say) gets
	// a new pool: open connections would keep reading the old one.
	db     *sql.DB
	file   os.FileInfo
	closed bool

	// tracer starts statements' spans; nil when not traced.
	tracer trace.Tracer
}

var _ backend.Backend = (*Backend)(nil)

const (
	// rowSQL are the columns of one listed checkpoint.
	rowSQL  = `c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, c.metadata`
	listSQL = `SELECT ` + rowSQL + ` FROM checkpoints AS c
WHERE c.thread_id = ? AND c.checkpoint_ns = ? ORDER BY c.checkpoint_id`
	// sinceSQL and countSQL take the thread's census and list the newer
	// checkpoints in one statement, so both come from one snapshot of the
	// file. The census sits in a one-row subquery so that it is there with
	// no newer rows; the smallest id is an index probe, the count a walk of
	// the thread's index entries, asked for only now and then.
	sinceSQL = `SELECT -1, n.lo, n.present, ` + rowSQL + `
FROM (SELECT min(checkpoint_id) AS lo, ` + presentSQL + ` AS present FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?) AS n
LEFT JOIN checkpoints AS c ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id > ?
ORDER BY c.checkpoint_id`
	countSQL = `SELECT n.n, n.lo, n.present, ` + rowSQL + `
FROM (SELECT count(*) AS n, min(checkpoint_id) AS lo, ` + presentSQL + ` AS present FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?) AS n
LEFT JOIN checkpoints AS c ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id > ?
ORDER BY c.checkpoint_id`
	// presentSQL lists which of the checkpoint ids given as a JSON array
	// exist, as a JSON array.
	presentSQL = `(SELECT json_group_array(checkpoint_id) FROM checkpoints
 WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN (SELECT value FROM json_each(?)))`
	valuesSQL = `SELECT checkpoint_id, type, checkpoint FROM checkpoints
WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN (`
	// writesSQL reads a channel's writes; %s is the task path column, or
	// '' for LangChain.js's table, which has none.
	writesSQL = `SELECT checkpoint_id, task_id, %s, idx, type, value FROM writes
WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND checkpoint_id IN (`
	// newestSQL is a thread's newest checkpoints, by its index backwards;
	// newestAllSQL any thread's, by rowid backwards: the savers' tables
	// are rowid tables, so the last rows written have the greatest rowids,
	// and sorting the table by id instead would read every checkpoint.
	newestSQL = `SELECT ` + rowSQL + ` FROM checkpoints AS c
WHERE c.thread_id = ? AND c.checkpoint_ns = ? ORDER BY c.checkpoint_id DESC LIMIT ?`
	newestAllSQL = `SELECT ` + rowSQL + ` FROM checkpoints AS c ORDER BY c.rowid DESC LIMIT ?`
	// checkSQL names every column historyd reads, so that a table that
	// only shares the name is found out when it is compiled.
	checkSQL = `SELECT thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, metadata FROM checkpoints LIMIT 0`
)

// Open opens cfg.Path read-only and checks that it holds a checkpoints
// table. A missing file is an error wrapping fs.ErrNotExist, and a file
// without the table (or not an SQLite database) an error wrapping
// backend.ErrNotCheckpointStore: both mean the configuration points at the
// wrong place. A database that is merely locked at the moment is not an
// error here; Ping and each query report it as backend.ErrUnavailable.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlite: empty path")
	}
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("sqlite: %s does not exist (historyd never creates it; point it at the file the checkpointer writes): %w", path, fs.ErrNotExist)
	case err != nil:
		return nil, fmt.Errorf("sqlite: %w", err)
	case fi.IsDir():
		return nil, fmt.Errorf("sqlite: %s is a directory, not a database file", path)
	}
	busy := cfg.BusyTimeout
	if busy <= 0 {
		busy = defaultBusyTimeout
	}
	b := &Backend{path: path, dsn: dsn(path, busy), maxConns: cfg.MaxConns, file: fi, tracer: newTracer(cfg.TracerProvider)}
	if b.maxConns <= 0 {
		b.maxConns = defaultMaxConns
	}
	b.db = b.openPool()
	if err := b.check(ctx, b.db); err != nil && !errors.Is(err, backend.ErrUnavailable) {
		b.db.Close()
		// classify has named the file.
		return nil, err
	}
	return b, nil
}

// dsn builds the driver's connection string. mode=ro makes SQLite open the
// file read-only and never create it; query_only refuses writes on top of
// that, so no statement can change the file whatever it is.
func dsn(path string, busy time.Duration) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path)}
	q := fmt.Sprintf("mode=ro&_pragma=busy_timeout(%d)&_pragma=query_only(1)", busy.Milliseconds())
	return u.String() + "?" + q
}

func (b *Backend) openPool() *sql.DB {
	// sql.Open only checks the driver name; connections are made on use.
	db, _ := sql.Open("sqlite", b.dsn)
	db.SetMaxOpenConns(b.maxConns)
	db.SetMaxIdleConns(b.maxConns)
	return db
}

// ParseDSN tells whether dsn names an SQLite checkpoint file, and which.
//
//   - "sqlite:///abs/file.db" is /abs/file.db and "sqlite://rel/file.db" is
//     rel/file.db, relative to the working directory; "sqlite:/abs/file.db"
//     and "sqlite:rel/file.db" are accepted too. The rest of the DSN is the
//     path, taken literally: no query parameters, no percent-decoding.
//   - A plain path is itself, when it ends in .db, .sqlite or .sqlite3
//     (in any case) or names an existing regular file.
//
// Anything else is not an SQLite DSN: other URL schemes, an empty path,
// and any plain string with an "=", which is how PostgreSQL's key=value
// connection strings look ("dbname=app.db" included); a file whose name
// has an "=" can still be given as sqlite:///path.
func ParseDSN(dsn string) (path string, ok bool) {
	if rest, found := strings.CutPrefix(dsn, "sqlite:"); found {
		rest = strings.TrimPrefix(rest, "//")
		return rest, rest != ""
	}
	if dsn == "" || strings.Contains(dsn, "://") || strings.Contains(dsn, "=") {
		return "", false
	}
	switch strings.ToLower(filepath.Ext(dsn)) {
	case ".db", ".sqlite", ".sqlite3":
		return dsn, true
	}
	if fi, err := os.Stat(dsn); err == nil && fi.Mode().IsRegular() {
		return dsn, true
	}
	return "", false
}

// pool returns the connection pool for the file now at the path. A file
// that is gone is backend.ErrUnavailable: the writer may be recreating it.
func (b *Backend) pool() (*sql.DB, error) {
	// Stat first: open connections keep reading a deleted file's old
	// contents, and would hide that it is gone.
	fi, err := os.Stat(b.path)
	if err != nil {
		return nil, fmt.Errorf("%w: sqlite: %v", backend.ErrUnavailable, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("%w: sqlite: backend closed", backend.ErrUnavailable)
	}
	if !os.SameFile(fi, b.file) {
		old := b.db
		b.db, b.file = b.openPool(), fi
		// Close waits for queries still reading the old file; they need
		// not hold up this one.
		go old.Close()
	}
	return b.db, nil
}

// check compiles a query over the columns historyd reads.
func (b *Backend) check(ctx context.Context, db *sql.DB) (err error) {
	ctx, end := b.statement(ctx, checkSQL)
	defer func() { end(err) }()
	rows, err := db.QueryContext(ctx, checkSQL)
	if err != nil {
		return b.classify(ctx, err)
	}
	return b.classify(ctx, rows.Close())
}

// Probe implements backend.Backend, thread by thread: a statement on an
// embedded database costs no round trip.
func (b *Backend) Probe(ctx context.Context, ps []backend.Probe) ([]backend.ProbeResult, error) {
	return backend.ProbeEach(ctx, b, ps)
}

// List hands fn the thread's checkpoint rows, each row's checkpoint
// handed over whole, straight from the driver's buffer: the file keeps the
// whole checkpoint, channel values included, in one column, so listing only
// the new ones is what keeps refreshing a long thread cheap. The census
// and the rows come from one statement, so from one snapshot of the file.
func (b *Backend) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (_ backend.Census, err error) {
	db, err := b.pool()
	if err != nil {
		return backend.Census{}, err
	}
	stmt := listSQL
	switch {
	case q.After != "" && q.Count:
		stmt = countSQL
	case q.After != "":
		stmt = sinceSQL
	}
	ctx, end := b.statement(ctx, stmt)
	defer func() { end(err) }()
	var rows *sql.Rows
	if q.After == "" {
		rows, err = db.QueryContext(ctx, stmt, ref.ThreadID, ref.Namespace)
	} else {
		verify, jerr := json.Marshal(nonNil(q.Verify))
		if jerr != nil {
			return backend.Census{}, fmt.Errorf("sqlite: encode checkpoint ids: %w", jerr)
		}
		rows, err = db.QueryContext(ctx, stmt, ref.ThreadID, ref.Namespace, string(verify), ref.ThreadID, ref.Namespace,
			ref.ThreadID, ref.Namespace, q.After)
	}
	if err != nil {
		return backend.Census{}, b.classify(ctx, err)
	}
	defer rows.Close()
	census := backend.Census{Count: -1}
	want := map[string]bool{}
	if q.After == "" {
		census.Count = 0
		for _, id := range q.Verify {
			want[id] = true
		}
	}
	for rows.Next() {
		var (
			r        backend.Row
			id       *string
			parent   *string
			typ      *string
			data, md sql.RawBytes // handed over in place: never kept
		)
		if q.After == "" {
			err = rows.Scan(&id, &parent, &typ, &data, &md)
		} else {
			var (
				n       int
				lo      *string
				present *string
			)
			err = rows.Scan(&n, &lo, &present, &id, &parent, &typ, &data, &md)
			census.Count = n
			if present != nil && census.Present == nil {
				if err := json.Unmarshal([]byte(*present), &census.Present); err != nil {
					return backend.Census{}, fmt.Errorf("sqlite: read checked checkpoint ids: %w", err)
				}
				if len(census.Present) == 0 {
					census.Present = nil
				}
			}
			if lo != nil {
				census.MinID = *lo
			}
		}
		if err != nil {
			return backend.Census{}, b.classify(ctx, err)
		}
		if id == nil { // the census alone: nothing newer
			continue
		}
		r.ID = *id
		if parent != nil {
			r.Parent = *parent
		}
		if q.After == "" {
			census.Count++
			if census.MinID == "" || r.ID < census.MinID {
				census.MinID = r.ID
			}
			if want[r.ID] {
				census.Present = append(census.Present, r.ID)
			}
		}
		// The metadata column does not name its serializer; lgcodec tells
		// JSON from msgpack by its first byte.
		r.Checkpoint = backend.Blob{Type: blobType(typ), Data: data}
		r.Metadata = backend.Blob{Data: md}
		if err := fn(r); err != nil {
			return backend.Census{}, err
		}
	}
	if err := rows.Err(); err != nil {
		return backend.Census{}, b.classify(ctx, err)
	}
	return census, nil
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// EachValue cuts channel's value out of each checkpoint in ids, still
// encoded, with the checkpoint's own type, and hands it to fn straight
// from the driver's buffer. Checkpoints are read in batches, one statement
// per batch.
func (b *Backend) EachValue(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(int, backend.Blob) error) error {
	at, uniq := positions(ids)
	db, err := b.pool()
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(uniq))
	err = b.batches(ctx, db, valuesSQL, []any{ref.ThreadID, ref.Namespace}, uniq, func(rows *sql.Rows) error {
		var (
			id   string
			typ  *string
			data sql.RawBytes
		)
		if err := rows.Scan(&id, &typ, &data); err != nil {
			return b.classify(ctx, err)
		}
		if seen[id] {
			return nil
		}
		seen[id] = true
		t := blobType(typ)
		val, ok, err := codec.ChannelValue(t, data, channel)
		if err != nil {
			return &store.DecodeError{Ref: ref, CheckpointID: id, Channel: "checkpoint", Err: err}
		}
		blob := backend.Blob{Type: t, Data: val}
		if !ok {
			blob = backend.Blob{Type: format.TypeEmpty}
		}
		for _, i := range at[id] {
			if err := fn(i, blob); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range uniq {
		if !seen[id] {
			for _, i := range at[id] {
				if err := fn(i, backend.Blob{Missing: true}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// EachWrite hands fn channel's writes attached to the checkpoints of ids,
// straight from the driver's buffer.
func (b *Backend) EachWrite(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(backend.Write) error) error {
	_, uniq := positions(ids)
	db, err := b.pool()
	if err != nil {
		return err
	}
	path, err := b.taskPathColumn(ctx, db)
	if err != nil {
		return err
	}
	return b.batches(ctx, db, fmt.Sprintf(writesSQL, path), []any{ref.ThreadID, ref.Namespace, channel}, uniq, func(rows *sql.Rows) error {
		var (
			w    backend.Write
			typ  *string
			data sql.RawBytes
		)
		if err := rows.Scan(&w.CheckpointID, &w.TaskID, &w.TaskPath, &w.Idx, &typ, &data); err != nil {
			return b.classify(ctx, err)
		}
		w.Value = backend.Blob{Type: blobType(typ), Data: data}
		return fn(w)
	})
}

// taskPathColumn names the writes table's task path column for a query:
// Python's SqliteSaver has one, LangChain.js's does not.
func (b *Backend) taskPathColumn(ctx context.Context, db *sql.DB) (_ string, err error) {
	const columns = `SELECT name FROM pragma_table_info('writes')`
	ctx, end := b.statement(ctx, columns)
	defer func() { end(err) }()
	rows, err := db.QueryContext(ctx, columns)
	if err != nil {
		return "", b.classify(ctx, err)
	}
	defer rows.Close()
	found, path := false, false
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return "", b.classify(ctx, err)
		}
		found = true
		path = path || name == "task_path"
	}
	if err := rows.Err(); err != nil {
		return "", b.classify(ctx, err)
	}
	if !found {
		return "", fmt.Errorf("%w: no SqliteSaver writes table in %s", backend.ErrNotCheckpointStore, b.path)
	}
	if path {
		return "task_path", nil
	}
	return "''", nil
}

// positions maps each id to its places in ids, and lists the distinct ids.
func positions(ids []string) (map[string][]int, []string) {
	at := make(map[string][]int, len(ids))
	var uniq []string
	for i, id := range ids {
		if _, seen := at[id]; !seen {
			uniq = append(uniq, id)
		}
		at[id] = append(at[id], i)
	}
	return at, uniq
}

// batches runs stmt, an IN list left open, once per batch of ids, with args
// before the ids, calling each for every row.
func (b *Backend) batches(ctx context.Context, db *sql.DB, stmt string, args []any, ids []string, each func(*sql.Rows) error) error {
	for len(ids) > 0 {
		batch := ids[:min(len(ids), idsPerQuery)]
		ids = ids[len(batch):]
		all := append(slices.Clip(args), make([]any, 0, len(batch))...)
		for _, id := range batch {
			all = append(all, id)
		}
		q := stmt + strings.TrimSuffix(strings.Repeat("?,", len(batch)), ",") + ")"
		if err := b.query(ctx, db, q, all, each); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) query(ctx context.Context, db *sql.DB, q string, args []any, each func(*sql.Rows) error) (err error) {
	ctx, end := b.statement(ctx, q)
	defer func() { end(err) }()
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return b.classify(ctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return b.classify(ctx, rows.Err())
}

// Newest hands fn up to limit of the newest checkpoints, of the thread or
// of any thread, each whole, straight from the driver's buffer.
func (b *Backend) Newest(ctx context.Context, ref *backend.Ref, limit int, fn func(backend.Row) error) error {
	if limit <= 0 {
		return nil
	}
	db, err := b.pool()
	if err != nil {
		return err
	}
	stmt, args := newestAllSQL, []any{limit}
	if ref != nil {
		stmt, args = newestSQL, []any{ref.ThreadID, ref.Namespace, limit}
	}
	return b.query(ctx, db, stmt, args, func(rows *sql.Rows) error {
		var (
			id       string
			parent   *string
			typ      *string
			data, md sql.RawBytes // handed over in place: never kept
		)
		if err := rows.Scan(&id, &parent, &typ, &data, &md); err != nil {
			return b.classify(ctx, err)
		}
		r := backend.Row{ID: id, Checkpoint: backend.Blob{Type: blobType(typ), Data: data}, Metadata: backend.Blob{Data: md}}
		if parent != nil {
			r.Parent = *parent
		}
		return fn(r)
	})
}

// Ping checks that the file is still there, can be read, and has the
// checkpoints table.
func (b *Backend) Ping(ctx context.Context) error {
	db, err := b.pool()
	if err != nil {
		return err
	}
	return b.check(ctx, db)
}

// Close closes the connections. Calls after Close fail with
// backend.ErrUnavailable.
func (b *Backend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.db.Close()
	}
}

// fileRole is what the file is to historyd, as a caller may read it when
// the file is damaged: never its path.
const fileRole = "the SQLite checkpoint database"

// classify sorts a query error into what the layers above act on: the
// caller's own deadline or cancellation, the file being locked or
// unreadable for now, damaged, or not a checkpoint store.
func (b *Backend) classify(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("sqlite: %w: %w", backend.ErrNoAnswer, ctxErr)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		msg := se.Error()
		switch se.Code() & 0xff { // primary result code
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%w: sqlite: %s still locked by its writer after the busy timeout: %s", backend.ErrUnavailable, b.path, msg)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_PERM, sqlite3.SQLITE_NOTFOUND, sqlite3.SQLITE_PROTOCOL:
			return fmt.Errorf("%w: sqlite: %s: %s", backend.ErrUnavailable, b.path, msg)
		case sqlite3.SQLITE_CORRUPT:
			// Damage, not a bug nor an outage: the log gets the file and
			// SQLite's words, a caller only which file it is to historyd.
			return &backend.CorruptError{Role: fileRole, Err: fmt.Errorf("sqlite: %s: %s", b.path, msg)}
		case sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%w: %s is not an SQLite database: %s", backend.ErrNotCheckpointStore, b.path, msg)
		case sqlite3.SQLITE_ERROR:
			if strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column") {
				return fmt.Errorf("%w: no SqliteSaver checkpoints table in %s: %s", backend.ErrNotCheckpointStore, b.path, msg)
			}
		}
		return fmt.Errorf("sqlite: %s: %s", b.path, msg)
	}
	if strings.Contains(err.Error(), "sql: database is closed") {
		// A pool closed under a query, by Close or by the file being
		// replaced; a retry gets the current one.
		return fmt.Errorf("%w: sqlite: %v", backend.ErrUnavailable, err)
	}
	return fmt.Errorf("sqlite: %w", err)
}

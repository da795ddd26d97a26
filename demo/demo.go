// Package demo writes a small LangGraph checkpoint store to try historyd on,
// without running an agent: an SQLite database in exactly the format
// Python's SqliteSaver (langgraph-checkpoint-sqlite) writes (Write), or
// threads in a PostgreSQL database in exactly the format Python's
// PostgresSaver (langgraph-checkpoint-postgres) writes (WritePostgres),
// holding one scripted conversation of a ReAct agent with a sketch tool.
//
// Thread "demo" has four turns. Turn 1 sketches a boundary around the
// Severn catchment and stores its area, name and GeoJSON feature in
// session state (tool_state); turn 2 sketches the Thames and rewrites the
// same three keys; turn 3 asks to compare the two areas from state, which
// now holds only the Thames; turn 4 asks about a turn 7 that never was.
// Thread "demo-pruned" is the same conversation, played again, whose
// checkpoints of turns 1 and 2 have been deleted as a retention job would,
// with their pending writes: historyd must report those turns as no longer
// retained rather than serve another turn's state.
//
// The demo is reproducible: ids, timestamps and channel versions come from
// a fixed start time and a seeded generator, so writing it twice gives the
// same rows.
package demo

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
	"reflect"
	"slices"
	"strings"
	"time"

	"modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/historyd/historyd/langgraph/saver"
)

// The demo's threads and their shape.
const (
	// Thread is the thread id of the whole conversation.
	Thread = "demo"
	// PrunedThread is the thread id of the same conversation with the
	// checkpoints of turns 1 to PrunedThrough deleted.
	PrunedThread = "demo-pruned"
	// Turns is how many turns each thread has had.
	Turns = 4
	// PrunedThrough is the last turn whose checkpoints PrunedThread no
	// longer has.
	PrunedThrough = 2
)

// Start times of the two recorded conversations. They differ because the
// pruned thread is a second run, not a copy: its ids and times are its own.
var (
	demoStart   = time.Date(2026, 3, 14, 9, 26, 53, 589793000, time.UTC)
	prunedStart = time.Date(2026, 3, 15, 14, 2, 11, 204518000, time.UTC)
)

// ErrNotDemo is returned by Write when the path holds something other than
// a demo file, and by WritePostgres when the demo's threads hold rows an
// earlier demo did not write: neither is overwritten.
var ErrNotDemo = errors.New("not written by historyd demo")

// ThreadInfo describes one thread of the demo file.
type ThreadInfo struct {
	// ID is the thread id.
	ID string
	// Turns is how many turns the thread has had.
	Turns int
	// Retained lists the turns whose checkpoints the file still holds.
	Retained []int
	// Checkpoints is how many checkpoint rows the thread has in the file.
	Checkpoints int
}

// Threads describes what Write puts in the file.
func Threads() ([]ThreadInfo, error) {
	threads, err := build()
	if err != nil {
		return nil, err
	}
	out := make([]ThreadInfo, len(threads))
	for i, t := range threads {
		info := ThreadInfo{ID: t.id, Turns: Turns, Checkpoints: len(t.rows)}
		for _, r := range t.rows {
			if r.humans > 0 && !slices.Contains(info.Retained, r.humans) {
				info.Retained = append(info.Retained, r.humans)
			}
		}
		out[i] = info
	}
	return out, nil
}

// build plays both threads and prunes the second.
func build() ([]*thread, error) {
	full, err := play(Thread, demoStart)
	if err != nil {
		return nil, err
	}
	pruned, err := play(PrunedThread, prunedStart)
	if err != nil {
		return nil, err
	}
	pruned.rows = prune(pruned.rows, PrunedThrough)
	return []*thread{full, pruned}, nil
}

// prune deletes what a retention job keeping the turns after through
// deletes: every checkpoint holding at most through human messages (which
// includes the input checkpoint that opens turn through+1, since its
// messages are still those of turn through), and with each checkpoint the
// writes recorded against it. The oldest checkpoint left keeps its parent
// id, which no longer names a row, as after a real deletion.
func prune(rows []checkpointRow, through int) []checkpointRow {
	return slices.DeleteFunc(slices.Clone(rows), func(r checkpointRow) bool { return r.humans <= through })
}

// storedDDL is the text SQLite keeps in sqlite_master for a statement.
func storedDDL(ddl string) string {
	return strings.Replace(ddl, "CREATE TABLE IF NOT EXISTS", "CREATE TABLE", 1)
}

// Write writes the demo file at path, creating missing directories.
//
// An existing file is only replaced when it is a demo file: an SQLite
// database whose only tables are SqliteSaver's, holding only the demo's
// threads, each checkpoint marked as written by the demo. Anything else is
// left untouched and Write returns an error wrapping ErrNotDemo. A file
// already holding exactly the demo is not written at all. The rows are
// written in one transaction, so a reader never sees half a demo.
func Write(ctx context.Context, path string) (err error) {
	if path == "" {
		return errors.New("demo: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	threads, err := build()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fi, statErr := os.Stat(abs)
	created := errors.Is(statErr, fs.ErrNotExist)
	switch {
	case created:
		// A journal left by a database of the same name would be replayed
		// into the new file by SQLite.
		for _, suffix := range []string{"-wal", "-journal"} {
			if _, err := os.Stat(abs + suffix); err == nil {
				return fmt.Errorf("demo: %s%s is left over from an earlier database; remove it first", path, suffix)
			}
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	case statErr != nil:
		return fmt.Errorf("demo: %w", statErr)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("demo: %s is not a regular file: %w", path, ErrNotDemo)
	}
	defer func() {
		if err != nil && created {
			for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
				os.Remove(abs + suffix)
			}
		}
	}()

	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	db, err := sql.Open("sqlite", u.String()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("demo: open %s: %w", path, err)
	}
	defer conn.Close()
	if err := writeFile(ctx, conn, threads); err != nil {
		if errors.Is(err, ErrNotDemo) {
			return fmt.Errorf("demo: refusing to overwrite %s: %w", path, err)
		}
		return fmt.Errorf("demo: %s: %w", path, err)
	}
	// Closing the last connection checkpoints the write-ahead log into the
	// file and removes it, so the file stands alone afterwards.
	if err := conn.Close(); err != nil {
		return fmt.Errorf("demo: %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("demo: %s: %w", path, err)
	}
	return nil
}

// writeFile checks what the database holds and, unless it is already the
// demo, replaces it, all under one write lock so that two writers cannot
// interleave.
func writeFile(ctx context.Context, conn *sql.Conn, threads []*thread) (err error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return notDatabase(err)
	}
	committed := false
	defer func() {
		if !committed {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	current, err := inspect(ctx, conn, threads)
	if err != nil {
		return err
	}
	if !current {
		if err := replace(ctx, conn, threads); err != nil {
			return err
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return err
	}
	committed = true
	// SqliteSaver switches every file it opens to WAL. The mode is kept in
	// the file's header, so readers see the same file either way; it can
	// only be changed outside a transaction.
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return err
	}
	if mode != "wal" {
		return fmt.Errorf("journal mode is %q after asking for WAL", mode)
	}
	return nil
}

// notDatabase turns SQLite's "file is not a database" into ErrNotDemo:
// SQLite only finds out when it first reads the file.
func notDatabase(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB {
		return fmt.Errorf("it is not an SQLite database: %w", ErrNotDemo)
	}
	return err
}

// inspect reports whether the database already holds exactly the demo.
// It returns an error wrapping ErrNotDemo when it holds anything that is
// not demo data, and no error for an empty database or a demo file that
// differs (an older demo, or one cut short).
func inspect(ctx context.Context, conn *sql.Conn, threads []*thread) (bool, error) {
	rows, err := conn.QueryContext(ctx, "SELECT type, name, COALESCE(sql, '') FROM sqlite_master")
	if err != nil {
		return false, notDatabase(err)
	}
	schema := map[string]string{}
	for rows.Next() {
		var typ, name, ddl string
		if err := rows.Scan(&typ, &name, &ddl); err != nil {
			rows.Close()
			return false, err
		}
		switch {
		case typ == "table" && (name == "checkpoints" || name == "writes"):
			schema[name] = ddl
		case typ == "index" && (name == "sqlite_autoindex_checkpoints_1" || name == "sqlite_autoindex_writes_1"):
		default:
			rows.Close()
			return false, fmt.Errorf("it has a %s named %q, which SqliteSaver does not create: %w", typ, name, ErrNotDemo)
		}
	}
	if err := rows.Close(); err != nil {
		return false, err
	}
	if len(schema) == 0 {
		return false, nil
	}
	if err := demoRowsOnly(ctx, conn, schema); err != nil {
		return false, err
	}
	ddl := saver.SQLitePython.DDL("")
	if schema["checkpoints"] != storedDDL(ddl[0]) || schema["writes"] != storedDDL(ddl[1]) {
		return false, nil
	}
	return sameRows(ctx, conn, threads)
}

// demoThreads are the thread ids a demo file may hold.
var demoThreads = []string{Thread, PrunedThread}

// demoRowsOnly checks that every row belongs to a demo thread and every
// checkpoint carries the demo's metadata mark.
func demoRowsOnly(ctx context.Context, conn *sql.Conn, schema map[string]string) error {
	if _, ok := schema["checkpoints"]; ok {
		rows, err := conn.QueryContext(ctx, "SELECT thread_id, checkpoint_id, metadata FROM checkpoints")
		if err != nil {
			return fmt.Errorf("its checkpoints table is not SqliteSaver's (%v): %w", err, ErrNotDemo)
		}
		defer rows.Close()
		for rows.Next() {
			var thread, id string
			var meta []byte
			if err := rows.Scan(&thread, &id, &meta); err != nil {
				return fmt.Errorf("its checkpoints table is not SqliteSaver's (%v): %w", err, ErrNotDemo)
			}
			if !slices.Contains(demoThreads, thread) {
				return fmt.Errorf("it holds checkpoints of thread %q: %w", thread, ErrNotDemo)
			}
			var m map[string]any
			if json.Unmarshal(meta, &m) != nil || m[generatedByKey] != generatedByDemo {
				return fmt.Errorf("checkpoint %s of thread %q was not written by the demo: %w", id, thread, ErrNotDemo)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
	}
	if _, ok := schema["writes"]; ok {
		rows, err := conn.QueryContext(ctx, "SELECT DISTINCT thread_id FROM writes")
		if err != nil {
			return fmt.Errorf("its writes table is not SqliteSaver's (%v): %w", err, ErrNotDemo)
		}
		defer rows.Close()
		for rows.Next() {
			var thread string
			if err := rows.Scan(&thread); err != nil {
				return fmt.Errorf("its writes table is not SqliteSaver's (%v): %w", err, ErrNotDemo)
			}
			if !slices.Contains(demoThreads, thread) {
				return fmt.Errorf("it holds writes of thread %q: %w", thread, ErrNotDemo)
			}
		}
		return rows.Err()
	}
	return nil
}

// Row images for comparing a file with the demo: every column, with its
// storage class, since a TEXT where SqliteSaver stores a BLOB would read
// differently in Python.
const (
	checkpointImageSQL = `SELECT thread_id, checkpoint_ns, checkpoint_id, COALESCE(parent_checkpoint_id, ''),
typeof(parent_checkpoint_id), type, checkpoint, typeof(checkpoint), metadata, typeof(metadata)
FROM checkpoints ORDER BY rowid`
	writeImageSQL = `SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type,
value, typeof(value) FROM writes ORDER BY rowid`
)

// sameRows compares the tables, row by row in insertion order, with what
// replace writes: the demo written afresh into a database in memory.
func sameRows(ctx context.Context, conn *sql.Conn, threads []*thread) (bool, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return false, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection: one in-memory database
	fresh, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer fresh.Close()
	if err := replace(ctx, fresh, threads); err != nil {
		return false, err
	}
	for _, query := range []string{checkpointImageSQL, writeImageSQL} {
		want, err := image(ctx, fresh, query)
		if err != nil {
			return false, err
		}
		got, err := image(ctx, conn, query)
		if err != nil || !reflect.DeepEqual(got, want) {
			return false, err
		}
	}
	return true, nil
}

// image reads every row query returns.
func image(ctx context.Context, conn *sql.Conn, query string) ([][]any, error) {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]any
	for rows.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(row))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// replace empties the database and writes the demo's tables and rows as
// SqliteSaver does: each checkpoint, then the writes of the tasks that ran
// from it.
func replace(ctx context.Context, conn *sql.Conn, threads []*thread) error {
	exec := func(ctx context.Context, q string, args ...any) error {
		_, err := conn.ExecContext(ctx, q, args...)
		return err
	}
	for _, stmt := range append([]string{"DROP TABLE IF EXISTS checkpoints", "DROP TABLE IF EXISTS writes"}, saver.SQLitePython.DDL("")...) {
		if err := exec(ctx, stmt); err != nil {
			return err
		}
	}
	w := saver.NewWriter(saver.SQLitePython, exec, "")
	for _, t := range threads {
		for _, r := range t.rows {
			if err := w.Put(ctx, t.id, "", r.cp); err != nil {
				return err
			}
		}
	}
	return nil
}

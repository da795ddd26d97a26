// Package saver stores checkpoints exactly as LangGraph's four savers
// store them — Python's and LangChain.js's PostgresSaver and SqliteSaver —
// so that the demo, the benchmark's data generator and tests can write real
// threads without running the savers. It holds each saver's DDL and one
// writer per storage layout; the conformance suite has the real savers read
// what these writers wrote back. historyd itself only ever reads.
//
// A Writer takes a checkpoint as LangGraph's loop builds it (channel
// values, versions, metadata, the writes of the tasks that ran from it) and
// splits it into rows the way the saver's put and put_writes do: where each
// value goes (inline, a blob row, the whole checkpoint), in which
// serializer (langgraph/write's msgpack for Python, JSON for LangChain.js), with
// which version numbering.
package saver

import (
	"fmt"
	"strings"

	"github.com/historyd/historyd/langgraph/write"
)

// Saver names one saver's storage layout.
type Saver int

const (
	// PostgresPython is langgraph-checkpoint-postgres's PostgresSaver:
	// primitives inline in the checkpoint's jsonb, every other value a
	// msgpack row of checkpoint_blobs, string versions.
	PostgresPython Saver = iota + 1
	// PostgresJS is @langchain/langgraph-checkpoint-postgres's
	// PostgresSaver: every value a JSON row of checkpoint_blobs (an "empty"
	// row for a versioned channel without a value), numbered versions.
	PostgresJS
	// SQLitePython is langgraph-checkpoint-sqlite's SqliteSaver: the whole
	// checkpoint in one msgpack column, string versions.
	SQLitePython
	// SQLiteJS is @langchain/langgraph-checkpoint-sqlite's SqliteSaver: the
	// whole checkpoint as JSON text, numbered versions.
	SQLiteJS
)

// Savers lists every layout, for tests that run against each.
var Savers = []Saver{PostgresPython, PostgresJS, SQLitePython, SQLiteJS}

// String names the saver as the suites do: "postgres-python", ….
func (s Saver) String() string {
	switch s {
	case PostgresPython:
		return "postgres-python"
	case PostgresJS:
		return "postgres-js"
	case SQLitePython:
		return "sqlite-python"
	case SQLiteJS:
		return "sqlite-js"
	}
	return fmt.Sprintf("Saver(%d)", int(s))
}

// Postgres reports whether the saver keeps its checkpoints in PostgreSQL.
func (s Saver) Postgres() bool { return s == PostgresPython || s == PostgresJS }

// Python reports whether the saver is the Python one: msgpack values and
// string versions.
func (s Saver) Python() bool { return s == PostgresPython || s == SQLitePython }

// Serializer is the blob type the saver's values are stored with.
func (s Saver) Serializer() string {
	if s.Python() {
		return "msgpack"
	}
	return "json"
}

// encode serializes v as the saver's serializer does.
func (s Saver) encode(v any) ([]byte, error) {
	if s.Python() {
		return write.EncodeMsgpack(v)
	}
	return write.EncodeJSON(v)
}

// SQLiteWAL is the statement both SqliteSavers run on every file they open.
const SQLiteWAL = "PRAGMA journal_mode=WAL"

// DDL returns the statements that create the saver's tables as its setup
// leaves them. For PostgreSQL, schema qualifies the tables (an identifier
// as written in SQL, already quoted where it must be; empty for the
// search_path), and the migrations' bookkeeping table is created and
// filled too. SQLite files have no schemas; both savers also switch the file
// to WAL (SQLiteWAL), which is not part of the DDL.
//
// It is one function because it is the savers' DDL text, one case per
// saver, kept as each saver's setup writes it.
func (s Saver) DDL(schema string) []string {
	q := func(table string) string {
		if schema == "" {
			return table
		}
		return schema + "." + table
	}
	switch s {
	case PostgresPython, PostgresJS:
		stmts := []string{
			`CREATE TABLE IF NOT EXISTS ` + q("checkpoint_migrations") + ` (
    v INTEGER PRIMARY KEY
)`,
			`CREATE TABLE IF NOT EXISTS ` + q("checkpoints") + ` (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)`,
			`CREATE TABLE IF NOT EXISTS ` + q("checkpoint_blobs") + ` (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
)`,
			`CREATE TABLE IF NOT EXISTS ` + q("checkpoint_writes") + ` (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    blob BYTEA NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)`,
		}
		migrations := 5 // LangGraph.js's migrations, all applied
		if s == PostgresPython {
			stmts = append(stmts,
				`CREATE INDEX IF NOT EXISTS checkpoints_thread_id_idx ON `+q("checkpoints")+`(thread_id)`,
				`CREATE INDEX IF NOT EXISTS checkpoint_blobs_thread_id_idx ON `+q("checkpoint_blobs")+`(thread_id)`,
				`CREATE INDEX IF NOT EXISTS checkpoint_writes_thread_id_idx ON `+q("checkpoint_writes")+`(thread_id)`,
				`ALTER TABLE `+q("checkpoint_writes")+` ADD COLUMN IF NOT EXISTS task_path TEXT NOT NULL DEFAULT ''`,
			)
			migrations = 10
		}
		vs := make([]string, migrations)
		for i := range vs {
			vs[i] = fmt.Sprintf("(%d)", i)
		}
		return append(stmts, `INSERT INTO `+q("checkpoint_migrations")+` (v) VALUES `+strings.Join(vs, ", ")+` ON CONFLICT DO NOTHING`)
	case SQLitePython:
		// Statement for statement and space for space what SqliteSaver.setup
		// runs, so that sqlite_master reads as in a file the saver created.
		return []string{`CREATE TABLE IF NOT EXISTS checkpoints (
                thread_id TEXT NOT NULL,
                checkpoint_ns TEXT NOT NULL DEFAULT '',
                checkpoint_id TEXT NOT NULL,
                parent_checkpoint_id TEXT,
                type TEXT,
                checkpoint BLOB,
                metadata BLOB,
                PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
            )`, `CREATE TABLE IF NOT EXISTS writes (
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
            )`}
	case SQLiteJS:
		return []string{`CREATE TABLE IF NOT EXISTS checkpoints (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL DEFAULT '',
  checkpoint_id TEXT NOT NULL,
  parent_checkpoint_id TEXT,
  type TEXT,
  checkpoint BLOB,
  metadata BLOB,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)`, `CREATE TABLE IF NOT EXISTS writes (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL DEFAULT '',
  checkpoint_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  channel TEXT NOT NULL,
  type TEXT,
  value BLOB,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)`}
	}
	return nil
}

package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/langgraph/saver"
)

// ErrExists is returned by WritePostgres when the database already holds
// the demo's threads, written by an earlier demo, and Replace is not set.
var ErrExists = errors.New("the demo threads already exist")

// PostgresConfig says where WritePostgres writes.
type PostgresConfig struct {
	// DSN names the database: postgres://… or postgresql://…, or any
	// connection string pgx accepts. The role needs to create the tables
	// (or the schema) when they are missing, and to write them.
	DSN string
	// Schema holds the tables; it is created when missing. Empty: the
	// search_path, as PostgresSaver itself uses.
	Schema string
	// Replace lets WritePostgres delete the demo threads an earlier demo
	// wrote and write them afresh.
	Replace bool
}

// pythonMigrations is how many migrations langgraph-checkpoint-postgres
// 3.x's PostgresSaver.setup has run once its tables are complete (the last
// one adds checkpoint_writes.task_path); LangGraph.js's saver stops at 5.
const pythonMigrations = 10

// demoLock serialises demo writers on one database, so that two of them
// cannot both find the threads absent and interleave their rows.
const demoLock = 0x6869_7374_6f72_7964 // "historyd"

// WritePostgres writes the demo's threads into PostgreSQL in exactly the
// format Python's PostgresSaver (langgraph-checkpoint-postgres 3.x)
// writes, as the SQLite demo file is SqliteSaver's: the same conversation,
// "demo" whole and "demo-pruned" with the checkpoints of turns 1-2
// deleted together with their pending writes and the blobs no remaining
// checkpoint refers to, as a retention job would. (Only the retained
// checkpoints are written, so nothing is left to delete.)
//
// The tables are created when none of them exist, as PostgresSaver.setup
// leaves them (its migrations recorded, so a later setup() has nothing to
// do). Existing tables are written into only when they are complete and
// at PostgresSaver's last migration: LangGraph.js's tables, or a partial
// set, are refused. Nothing but the demo's two threads is read or
// changed. When they already hold checkpoints, WritePostgres returns an
// error wrapping ErrExists unless Replace is set; it never touches
// threads of those names holding a checkpoint the demo did not write, or
// only blobs and writes (ErrNotDemo). Everything happens in one
// transaction, so a reader never sees half a demo.
func WritePostgres(ctx context.Context, cfg PostgresConfig) error {
	threads, err := build()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := writePostgres(ctx, tx, cfg, threads); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

func writePostgres(ctx context.Context, tx pgx.Tx, cfg PostgresConfig, threads []*thread) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(demoLock)); err != nil {
		return err
	}
	schema, where := "", "the search_path"
	if cfg.Schema != "" {
		schema, where = pgx.Identifier{cfg.Schema}.Sanitize(), "schema "+cfg.Schema
		if err := ensureSchema(ctx, tx, cfg.Schema, schema); err != nil {
			return err
		}
	}
	created, err := ensureTables(ctx, tx, schema, where)
	if err != nil {
		return err
	}
	if !created {
		if err := clearDemo(ctx, tx, schema, where, cfg.Replace); err != nil {
			return err
		}
	}
	exec := func(ctx context.Context, q string, args ...any) error {
		_, err := tx.Exec(ctx, q, args...)
		return err
	}
	w := saver.NewWriter(saver.PostgresPython, exec, schema)
	for _, t := range threads {
		for _, r := range t.rows {
			if err := w.Put(ctx, t.id, "", r.cp); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureSchema creates the schema unless it exists. Creating one needs
// CREATE on the database, which a role writing an existing schema may
// well lack, so it is only asked for when needed.
func ensureSchema(ctx context.Context, tx pgx.Tx, name, quoted string) error {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	if _, err := tx.Exec(ctx, "CREATE SCHEMA "+quoted); err != nil {
		return fmt.Errorf("create schema %s: %w", name, err)
	}
	return nil
}

// saverTables are the tables PostgresSaver.setup creates.
var saverTables = []string{"checkpoint_migrations", "checkpoints", "checkpoint_blobs", "checkpoint_writes"}

// ensureTables creates PostgresSaver's tables when none exist, and
// reports whether it did; tables that exist must be PostgresSaver's,
// complete and migrated.
func ensureTables(ctx context.Context, tx pgx.Tx, schema, where string) (bool, error) {
	var found, missing []string
	for _, table := range saverTables {
		var oid *uint32
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1)::oid", qualify(schema, table)).Scan(&oid); err != nil {
			return false, err
		}
		if oid != nil {
			found = append(found, table)
		} else {
			missing = append(missing, table)
		}
	}
	switch {
	case len(found) == 0:
		for _, stmt := range saver.PostgresPython.DDL(schema) {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return false, fmt.Errorf("create PostgresSaver's tables in %s: %w", where, err)
			}
		}
		return true, nil
	case len(missing) > 0:
		return false, fmt.Errorf("%s has %s but not %s: not the tables PostgresSaver.setup() creates, so the demo leaves them alone",
			where, strings.Join(found, ", "), strings.Join(missing, ", "))
	}
	var last int
	if err := tx.QueryRow(ctx, "SELECT COALESCE(max(v), -1) FROM "+qualify(schema, "checkpoint_migrations")).Scan(&last); err != nil {
		return false, err
	}
	if last < pythonMigrations-1 {
		return false, fmt.Errorf("the checkpoint tables in %s are at migration %d, and the demo writes the format of langgraph-checkpoint-postgres 3.x, whose setup() reaches %d (LangGraph.js's PostgresSaver stops at 4): run that setup() first, or write the demo to another schema",
			where, last, pythonMigrations-1)
	}
	return false, nil
}

// clearDemo makes room for the demo's threads: nothing to do when none of
// their rows exist; with replace, deletes them when every checkpoint was
// written by the demo; otherwise refuses.
func clearDemo(ctx context.Context, tx pgx.Tx, schema, where string, replace bool) error {
	rows, err := tx.Query(ctx, "SELECT thread_id, checkpoint_id, COALESCE(metadata->>'"+generatedByKey+"', '') FROM "+qualify(schema, "checkpoints")+
		" WHERE thread_id = ANY($1) ORDER BY thread_id, checkpoint_id", demoThreads)
	if err != nil {
		return err
	}
	checkpoints := 0
	for rows.Next() {
		var thread, id, mark string
		if err := rows.Scan(&thread, &id, &mark); err != nil {
			rows.Close()
			return err
		}
		if mark != generatedByDemo {
			rows.Close()
			return fmt.Errorf("thread %q in %s is left alone: its checkpoint %s is %w", thread, where, id, ErrNotDemo)
		}
		checkpoints++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var others int
	if err := tx.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+qualify(schema, "checkpoint_blobs")+" WHERE thread_id = ANY($1)) + (SELECT count(*) FROM "+
		qualify(schema, "checkpoint_writes")+" WHERE thread_id = ANY($1))", demoThreads).Scan(&others); err != nil {
		return err
	}
	switch {
	case checkpoints == 0 && others == 0:
		return nil
	case checkpoints == 0:
		return fmt.Errorf("%s holds blobs or writes of thread %s or %s but no checkpoint, so whose they are cannot be told (delete them first): %w", where, Thread, PrunedThread, ErrNotDemo)
	case !replace:
		return fmt.Errorf("%w in %s: %d checkpoints of threads %s and %s, written by an earlier demo (--force replaces them)", ErrExists, where, checkpoints, Thread, PrunedThread)
	}
	for _, table := range []string{"checkpoint_writes", "checkpoint_blobs", "checkpoints"} {
		if _, err := tx.Exec(ctx, "DELETE FROM "+qualify(schema, table)+" WHERE thread_id = ANY($1)", demoThreads); err != nil {
			return err
		}
	}
	return nil
}

// qualify names a table in schema (already quoted; empty for the
// search_path).
func qualify(schema, table string) string {
	if schema == "" {
		return table
	}
	return schema + "." + table
}

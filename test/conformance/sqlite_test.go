package conformance

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestConformanceSQLite is TestConformance with the SqliteSaver of each
// language writing the thread to a file (Python: langgraph-checkpoint-sqlite,
// msgpack; JS: @langchain/langgraph-checkpoint-sqlite on better-sqlite3,
// JSON), served by historyd's read-only SQLite backend. Pruning deletes rows
// from the file through a read-write connection of the test's own while
// historyd keeps its connections open.
func TestConformanceSQLite(t *testing.T) {
	s := loadSetup(t, false)
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			checkWriter(t, s, w, sqliteStore{path: filepath.Join(t.TempDir(), "checkpoints.db")})
		})
	}
}

// sqliteStore is an SQLite file a SqliteSaver writes.
type sqliteStore struct{ path string }

func (f sqliteStore) flags() []string { return []string{"--sqlite", f.path} }

func (f sqliteStore) source(t *testing.T, want *expectation) (string, string) {
	t.Helper()
	if want.Schema != "" {
		t.Fatalf("the writer reports schema %q for an SQLite file", want.Schema)
	}
	return "sqlite://" + f.path, ""
}

func (f sqliteStore) rootCheckpoints(t *testing.T, ctx context.Context, want *expectation) int {
	t.Helper()
	db := f.connect(t)
	defer db.Close()
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''`, want.ThreadID).Scan(&n)
	if err != nil {
		t.Fatalf("count checkpoints in %s: %v", f.path, err)
	}
	return n
}

// deleteRoot deletes the checkpoints and their pending writes in one
// transaction, as a retention job on a SqliteSaver file would.
func (f sqliteStore) deleteRoot(t *testing.T, ctx context.Context, want *expectation, ids []string) int64 {
	t.Helper()
	db := f.connect(t)
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback()
	args := []any{want.ThreadID}
	for _, id := range ids {
		args = append(args, id)
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	if _, err := tx.ExecContext(ctx, `DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id IN (`+in+`)`, args...); err != nil {
		t.Fatalf("delete writes: %v", err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id IN (`+in+`)`, args...)
	if err != nil {
		t.Fatalf("delete checkpoints: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatalf("rows affected: %v", err)
	}
	return n
}

// connect opens the file read-write, as another process of the host would:
// never creating it, waiting for the saver's locks.
func (f sqliteStore) connect(t *testing.T) *sql.DB {
	t.Helper()
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(f.path), RawQuery: "mode=rw&_pragma=busy_timeout(10000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		t.Fatalf("open %s: %v", f.path, err)
	}
	db.SetMaxOpenConns(1)
	return db
}

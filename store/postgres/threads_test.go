package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// Under a collation that does not sort bytewise a prefix is no range of
// the primary key: a listing under prefixes is refused, whatever the store
// holds, until an index sorts thread_id bytewise, and is then walked in
// byte order over that index; a listing of every thread walks the primary
// key in the collation's order, each thread once. Indexes that cannot
// serve a walk in byte order (another operator class, a condition, another
// leading column) change nothing.
func TestThreadsUnderOtherCollations(t *testing.T) {
	ids := []string{"a", "A/1", "a/1", "a-b/1", "a/2", "ab/1", "B/1", "b/1", "z", "ü/1", "üb/1"}
	prefixSets := [][]string{{"a/"}, {"a"}, {"b/", "a/"}, {"ü"}, {"c"}}
	for _, coll := range []struct {
		name     string
		bytewise bool
	}{{"und-x-icu", false}, {"en-x-icu", false}, {"C", true}, {"C.utf8", true}, {"ucs_basic", true}} {
		t.Run(coll.name, func(t *testing.T) {
			admin, schema, ro := newSchemaFor(t, saver.PostgresPython)
			ctx := context.Background()
			var exists bool
			if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = $1)`, coll.name).Scan(&exists); err != nil || !exists {
				t.Fatalf("the test cluster has no collation %q (%v): PostgreSQL must be built with ICU, as Debian's is", coll.name, err)
			}
			cp := pgx.Identifier{schema, "checkpoints"}.Sanitize()
			exec := func(stmt string) {
				t.Helper()
				if _, err := admin.Exec(ctx, stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			exec(fmt.Sprintf(`ALTER TABLE %s ALTER COLUMN thread_id TYPE text COLLATE %s`, cp, pgx.Identifier{coll.name}.Sanitize()))
			w := newWriter(t, admin, schema, saver.PostgresPython)
			for i, id := range ids {
				storetest.PutThread(w, backend.Ref{ThreadID: id}, storetest.Base.Add(time.Duration(i)*time.Minute), 1+i%2)
			}
			b := openBackend(t, ro, schema)
			st := store.New(store.Config{Backend: b})
			var order []string
			if err := admin.QueryRow(ctx, fmt.Sprintf(`SELECT array_agg(DISTINCT thread_id ORDER BY thread_id) FROM %s`, cp)).Scan(&order); err != nil {
				t.Fatal(err)
			}
			byteOrder := slices.Sorted(slices.Values(ids))
			// listings checks every listing in the order want (of all
			// ids) says.
			listings := func(t *testing.T, want []string) {
				t.Helper()
				for _, size := range []int{1, 3, 100} {
					if got := storetest.AllThreads(t, st, store.ThreadsQuery{}, size); !slices.Equal(got, want) {
						t.Errorf("every thread, pages of %d: %q, want %q", size, got, want)
					}
				}
				for _, prefixes := range prefixSets {
					under := slices.DeleteFunc(slices.Clone(want), func(id string) bool {
						return !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(id, p) })
					})
					for _, size := range []int{1, 3, 100} {
						if got := storetest.AllThreads(t, st, store.ThreadsQuery{Prefixes: prefixes}, size); !slices.Equal(got, under) {
							t.Errorf("prefixes %q, pages of %d: %q, want %q", prefixes, size, got, under)
						}
					}
				}
			}
			if coll.bytewise {
				if o, err := b.walkOrder(ctx); err != nil || !o.bytewise || o.collate != "" {
					t.Fatalf("walk order %+v, %v; want the primary key's, bytewise", o, err)
				}
				listings(t, byteOrder)
				plan, err := b.ExplainThreads(ctx, backend.ThreadQuery{Prefixes: []string{"a/"}, Limit: 2})
				if err != nil || !strings.Contains(plan, "Recursive Union") || !strings.Contains(plan, "Index Only Scan") {
					t.Errorf("plan:\n%s\n%v", plan, err)
				}
				return
			}
			refused := func(t *testing.T) {
				t.Helper()
				if o, err := b.walkOrder(ctx); err != nil || o.bytewise {
					t.Fatalf("walk order %+v, %v; want the collation's", o, err)
				}
				for _, size := range []int{1, 100} {
					if got := storetest.AllThreads(t, st, store.ThreadsQuery{}, size); !slices.Equal(got, order) {
						t.Errorf("every thread, pages of %d: %q, want the collation's order %q", size, got, order)
					}
				}
				for _, prefixes := range prefixSets {
					for _, by := range []store.ThreadOrder{store.ByThreadID, store.ByLastActivity} {
						_, err := st.Threads(ctx, store.ThreadsQuery{Prefixes: prefixes, Order: by, Limit: 10})
						if !errors.Is(err, backend.ErrUnorderedPrefixes) || !strings.Contains(err.Error(), `COLLATE "C"`) {
							t.Errorf("prefixes %q, %v: %v; want ErrUnorderedPrefixes naming the index to create", prefixes, by, err)
						}
					}
				}
			}
			t.Run("no index", refused)
			exec(fmt.Sprintf(`CREATE INDEX ON %s (thread_id text_pattern_ops)`, cp))
			exec(fmt.Sprintf(`CREATE INDEX ON %s (thread_id COLLATE "C") WHERE checkpoint_ns = ''`, cp))
			exec(fmt.Sprintf(`CREATE INDEX ON %s (checkpoint_ns, thread_id COLLATE "C")`, cp))
			t.Run("indexes that cannot serve a walk", refused)
			exec(fmt.Sprintf(`CREATE INDEX thread_id_bytewise ON %s (thread_id COLLATE "C")`, cp))
			exec("ANALYZE " + cp)
			t.Run("an index in byte order", func(t *testing.T) {
				if o, err := b.walkOrder(ctx); err != nil || !o.bytewise || o.collate != ` COLLATE "pg_catalog"."C"` {
					t.Fatalf("walk order %+v, %v; want the index's, bytewise", o, err)
				}
				listings(t, byteOrder)
				// Every step of the walk, the first and each next one, is
				// a probe of the index, once the table is large enough for
				// the planner to prefer one to reading it whole.
				exec(fmt.Sprintf(`INSERT INTO %s (thread_id, checkpoint_ns, checkpoint_id, checkpoint)
  SELECT 'x/' || i, '', '1f0d-000000', '{}' FROM generate_series(1, 5000) i`, cp))
				exec("ANALYZE " + cp)
				plan, err := b.ExplainThreads(ctx, backend.ThreadQuery{Prefixes: []string{"x/"}, Limit: 3})
				if err != nil || strings.Count(plan, "Index Only Scan using thread_id_bytewise") != 2 || strings.Contains(plan, "Seq Scan") {
					t.Errorf("plan:\n%s\n%v", plan, err)
				}
			})
		})
	}
}

// TestThreadsSuiteUnderCollations runs the shared suite's Threads cases on
// a database of each collation storetest.PostgresLocales names, the
// checkpoint tables created without one of their own as LangGraph's
// migrations create them, so that thread_id sorts by the database's.
func TestThreadsSuiteUnderCollations(t *testing.T) {
	for _, l := range storetest.PostgresLocales {
		t.Run(l.Name, func(t *testing.T) {
			dsn := storetest.PostgresDatabase(t, l)
			storetest.RunThreads(t, func(t *testing.T) (backend.Backend, storetest.Writer) {
				admin, schema, ro := storetest.PostgresSchema(t, dsn, saver.PostgresPython)
				if !l.Bytewise {
					// The optional migration docs/deploy.md describes,
					// without which a listing under prefixes is refused.
					stmt := `CREATE INDEX ON ` + pgx.Identifier{schema, "checkpoints"}.Sanitize() + ` (thread_id COLLATE "C")`
					if _, err := admin.Exec(context.Background(), stmt); err != nil {
						t.Fatalf("%s: %v", stmt, err)
					}
				}
				return openBackend(t, ro, schema), newWriter(t, admin, schema, saver.PostgresPython)
			})
		})
	}
}

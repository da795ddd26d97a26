package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/lgsaver"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/storetest"
)

// Under a collation that does not sort bytewise a prefix is no range of
// the index: the listing walks every thread and filters, and still lists
// exactly the threads under the prefixes, each once, in the index's order.
func TestThreadsUnderOtherCollations(t *testing.T) {
	ids := []string{"a", "A/1", "a/1", "a-b/1", "a/2", "ab/1", "B/1", "b/1", "z", "ü/1", "üb/1"}
	for _, coll := range []struct {
		name     string
		bytewise bool
	}{{"und-x-icu", false}, {"en-x-icu", false}, {"C", true}, {"C.utf8", true}, {"ucs_basic", true}} {
		t.Run(coll.name, func(t *testing.T) {
			admin, schema, ro := newSchemaFor(t, lgsaver.PostgresPython)
			ctx := context.Background()
			var exists bool
			if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = $1)`, coll.name).Scan(&exists); err != nil || !exists {
				t.Fatalf("the test cluster has no collation %q (%v): PostgreSQL must be built with ICU, as Debian's is", coll.name, err)
			}
			stmt := fmt.Sprintf(`ALTER TABLE %s.checkpoints ALTER COLUMN thread_id TYPE text COLLATE %s`, pgx.Identifier{schema}.Sanitize(), pgx.Identifier{coll.name}.Sanitize())
			if _, err := admin.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
			w := newWriter(t, admin, schema, lgsaver.PostgresPython)
			for i, id := range ids {
				storetest.PutThread(w, store.Ref{ThreadID: id}, storetest.Base.Add(time.Duration(i)*time.Minute), 1+i%2)
			}
			b := openBackend(t, ro, schema)
			if got, err := b.threadOrder(ctx); err != nil || got != coll.bytewise {
				t.Fatalf("bytewise = %v, %v; want %v", got, err, coll.bytewise)
			}
			var order []string
			if err := admin.QueryRow(ctx, fmt.Sprintf(`SELECT array_agg(DISTINCT thread_id ORDER BY thread_id) FROM %s.checkpoints`, pgx.Identifier{schema}.Sanitize())).Scan(&order); err != nil {
				t.Fatal(err)
			}
			st := store.New(store.Config{Backend: b})
			for _, prefixes := range [][]string{nil, {"a/"}, {"a"}, {"b/", "a/"}, {"ü"}, {"c"}} {
				var want []string
				for _, id := range order {
					if len(prefixes) == 0 || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(id, p) }) {
						want = append(want, id)
					}
				}
				for _, size := range []int{1, 3, 100} {
					got := storetest.AllThreads(t, st, store.ThreadsQuery{Prefixes: prefixes}, size)
					if !slices.Equal(got, want) {
						t.Errorf("prefixes %q, pages of %d: %q, want %q", prefixes, size, got, want)
					}
				}
			}
			plan, err := b.ExplainThreads(ctx, store.ThreadQuery{Prefixes: []string{"a/"}, Limit: 2})
			if err != nil || !strings.Contains(plan, "Recursive Union") || !strings.Contains(plan, "Index Only Scan") {
				t.Errorf("plan:\n%s\n%v", plan, err)
			}
		})
	}
}

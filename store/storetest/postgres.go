package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/historyd/historyd/langgraph/saver"
)

// PostgresDSN returns the PostgreSQL database tests that need one use:
// HISTORYD_TEST_DSN, which `make test` sets after starting a throwaway
// cluster (scripts/pg-test.sh). Without it a test fails, saying how to get
// one, rather than passing unrun; under -short it is skipped.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("HISTORYD_TEST_DSN")
	if dsn == "" {
		if testing.Short() {
			t.Skip("HISTORYD_TEST_DSN not set (-short)")
		}
		t.Fatal("HISTORYD_TEST_DSN is not set: run `make test`, which starts a throwaway PostgreSQL (scripts/pg-test.sh), or point it at a database you can create schemas in")
	}
	return dsn
}

// PostgresLocale is the default collation of a PostgreSQL database, which
// LangGraph's tables, created without one of their own, sort thread ids
// by.
type PostgresLocale struct {
	// Name names it in test names.
	Name string
	// Create is what CREATE DATABASE is given for it; empty is the test
	// database itself.
	Create string
	// Bytewise says it sorts text by its bytes.
	Bytewise bool
}

// PostgresLocales are the collations thread listings are tested under: C,
// the test cluster's own (initdb --no-locale); ICU's en-US; and the C
// library's en_US.UTF-8, a common default of managed databases. Neither of
// the last two sorts thread ids bytewise, and they disagree with each
// other: ICU orders "A/2" after "a/1" by letters first, glibc ignores
// punctuation, so that "acmecorp/1" sorts between "acme/2" and "acme/z".
var PostgresLocales = []PostgresLocale{
	{Name: "C", Bytewise: true},
	{Name: "ICU en-US", Create: "LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"},
	{Name: "libc en_US.UTF-8", Create: "LOCALE 'en_US.UTF-8'"},
}

// PostgresDatabase returns the DSN of a database whose default collation
// is l's: for C the test database itself (PostgresDSN), for the others one
// created for the test and dropped when it ends. The C library's locales
// must exist where the server runs; scripts/pg-test.sh locale generates
// en_US.UTF-8.
func PostgresDatabase(t testing.TB, l PostgresLocale) string {
	t.Helper()
	dsn := PostgresDSN(t)
	if l.Create == "" {
		return dsn
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("historyd_test_%d", rand.Uint64())
	stmt := fmt.Sprintf("CREATE DATABASE %s TEMPLATE template0 ENCODING 'UTF8' %s", pgx.Identifier{name}.Sanitize(), l.Create)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		t.Fatalf("%s: %v (en_US.UTF-8 needs the C library's locale where PostgreSQL runs: scripts/pg-test.sh locale, which scripts/test.sh runs, generates it)", stmt, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("HISTORYD_TEST_DSN must be a URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// PostgresSchema creates, in the database dsn names, a fresh schema
// holding empty LangGraph tables as saver's migrations leave them, and a
// role that may only SELECT from them, all dropped when the test ends. It
// returns a pool connected as dsn's user, the schema's name (it holds
// "checkpoints" on purpose) and a DSN connecting as the role.
func PostgresSchema(t testing.TB, dsn string, layout saver.Saver) (admin *pgxpool.Pool, schema, readOnlyDSN string) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	schema = fmt.Sprintf("checkpoints_test_%d", rand.Uint64())
	role := schema + "_ro"
	q := pgx.Identifier{schema}.Sanitize()
	r := pgx.Identifier{role}.Sanitize()
	// Both savers' migrations leave the same tables, but Python's adds
	// task_path to checkpoint_writes.
	for _, stmt := range append(append([]string{"CREATE SCHEMA " + q}, layout.DDL(q)...),
		"CREATE ROLE "+r+" LOGIN",
		"GRANT USAGE ON SCHEMA "+q+" TO "+r,
		"GRANT SELECT ON ALL TABLES IN SCHEMA "+q+" TO "+r,
	) {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+q+" CASCADE")
		// Roles are the cluster's: drop them whichever database the
		// schema was in.
		_, _ = pool.Exec(context.Background(), "DROP ROLE "+r)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("the test DSN must be a URL: %v", err)
	}
	u.User = url.User(role)
	return pool, schema, u.String()
}

// NewPostgresWriter writes checkpoints into schema in saver's layout,
// through the admin pool, failing t on errors.
func NewPostgresWriter(t testing.TB, admin *pgxpool.Pool, schema string, layout saver.Saver) *SaverWriter {
	exec := func(ctx context.Context, q string, args ...any) error {
		_, err := admin.Exec(ctx, q, args...)
		return err
	}
	return NewSaverWriter(t, saver.NewWriter(layout, exec, pgx.Identifier{schema}.Sanitize()))
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/store/storetest"
)

// The warning at start when tenants are confined to thread-id prefixes
// and PostgreSQL would refuse their listings: thread_id's collation (ICU
// here) does not sort bytewise and no index sorts it so. It names the
// migration, and is given once; not once the index exists, not without a
// prefix-confined tenant, not where the collation is bytewise.
func TestServeWarnsOfUnorderedPrefixes(t *testing.T) {
	const warning = "tenants are confined to thread-id prefixes"
	tokens := func(t *testing.T, tenant map[string]any) string {
		tenant["name"], tenant["token_sha256"] = "acme", []string{auth.HashToken("secret-token")}
		data, err := json.Marshal(map[string]any{"tenants": []any{tenant}})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "tokens.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	confined := map[string]any{"thread_prefixes": []string{"acme/"}}
	serve := func(t *testing.T, dsn, schema, tokenFile string) string {
		return serveBriefly(t, "--log-format", "json", "--dsn", dsn, "--schema", schema, "--auth-tokens", tokenFile)
	}

	icu := storetest.PostgresDatabase(t, storetest.PostgresLocales[1])
	admin, schema, ro := storetest.PostgresSchema(t, icu, saver.PostgresPython)
	log := serve(t, ro, schema, tokens(t, confined))
	if n := strings.Count(log, warning); n != 1 || !strings.Contains(log, `CREATE INDEX CONCURRENTLY ON `) ||
		!strings.Contains(log, `thread_id COLLATE \"C\"`) || !strings.Contains(log, `docs/deploy.md (\"Listing threads\")`) {
		t.Errorf("ICU, a tenant confined to acme/, no index: %d warnings, want 1 naming the migration:\n%s", n, log)
	}
	if log := serve(t, ro, schema, tokens(t, map[string]any{"all_threads": true})); strings.Contains(log, warning) {
		t.Errorf("ICU, no tenant confined to prefixes: warned:\n%s", log)
	}
	stmt := "CREATE INDEX ON " + pgx.Identifier{schema, "checkpoints"}.Sanitize() + ` (thread_id COLLATE "C")`
	if _, err := admin.Exec(context.Background(), stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	if log := serve(t, ro, schema, tokens(t, confined)); strings.Contains(log, warning) {
		t.Errorf("ICU with the index: warned:\n%s", log)
	}

	_, schema, ro = storetest.PostgresSchema(t, storetest.PostgresDSN(t), saver.PostgresPython)
	if log := serve(t, ro, schema, tokens(t, confined)); strings.Contains(log, warning) {
		t.Errorf("C: warned:\n%s", log)
	}
}

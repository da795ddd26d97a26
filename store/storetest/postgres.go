package storetest

import (
	"os"
	"testing"
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

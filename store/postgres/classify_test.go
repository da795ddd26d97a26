package postgres

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/historyd/historyd/store/backend"
)

// TestConnectionCutIsUnavailable: a query whose connection the server or
// pooler closed under it (PostgreSQL restarting, PgBouncer stopped) ends
// with an unexpected EOF, which is the store being unavailable, not an
// internal error.
func TestConnectionCutIsUnavailable(t *testing.T) {
	for _, err := range []error{io.ErrUnexpectedEOF, fmt.Errorf("read rows: %w", io.ErrUnexpectedEOF), io.EOF} {
		if got := sortError(err); !errors.Is(got, backend.ErrUnavailable) {
			t.Errorf("sortError(%v) = %v, want store.ErrUnavailable", err, got)
		}
	}
	if got := sortError(errors.New("something else")); errors.Is(got, backend.ErrUnavailable) {
		t.Errorf("sortError(something else) = %v, not store.ErrUnavailable", got)
	}
}

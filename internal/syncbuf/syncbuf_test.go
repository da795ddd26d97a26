package syncbuf_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/historyd/historyd/internal/syncbuf"
)

// Writers and a reader at once, under -race: every write is kept whole.
func TestBufferConcurrent(t *testing.T) {
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 800 {
		t.Errorf("%d lines, want 800", got)
	}
}

package store

import (
	"context"
	"testing"
	"time"

	"github.com/historyd/historyd/store/backend"
)

// TestRefreshNotJoinedAfterCancel: a read queued behind a running refresh
// gives up (its caller cancelled); a read arriving next, while the first
// refresh still runs, gets a refresh of its own rather than the abandoned,
// cancelled one.
func TestRefreshNotJoinedAfterCancel(t *testing.T) {
	var r refreshes
	ref := backend.Ref{ThreadID: "t"}
	release := make(chan struct{})
	fn := func(ctx context.Context) (*index, seen, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, seen{}, ctx.Err()
	}
	queued := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		sl := r.slots[ref]
		return sl != nil && sl.queued != nil && sl.queued.waiters > 0
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	first := make(chan error, 1)
	go func() { _, _, err := r.do(context.Background(), ref, fn); first <- err }()
	waitFor("the first refresh", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.slots[ref] != nil
	})

	gone, cancel := context.WithCancel(context.Background())
	abandoned := make(chan error, 1)
	go func() { _, _, err := r.do(gone, ref, fn); abandoned <- err }()
	waitFor("the second read to queue", queued)
	cancel()
	if err := <-abandoned; err != context.Canceled {
		t.Fatalf("the cancelled read: %v, want context.Canceled", err)
	}

	next := make(chan error, 1)
	go func() { _, _, err := r.do(context.Background(), ref, fn); next <- err }()
	waitFor("the third read to queue", queued)
	close(release)
	if err := <-first; err != nil {
		t.Errorf("the first read: %v", err)
	}
	if err := <-next; err != nil {
		t.Errorf("a read arriving after another gave up: %v, want its own refresh", err)
	}
}

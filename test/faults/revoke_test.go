package faults

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/client"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
)

// writeTokens writes a token file giving tenant acme the threads under
// "acme/", for the bearer token given.
func writeTokens(t *testing.T, path, token string) {
	t.Helper()
	f := map[string]any{"tenants": []any{map[string]any{
		"name": "acme", "thread_prefixes": []string{"acme/"}, "token_sha256": []string{auth.HashToken(token)},
	}}}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSIGHUPEndsRevokedWatches revokes a token with SIGHUP while a watch
// made with it is open: the watch ends at once with UNAUTHENTICATED, as a
// fresh call with that token is refused, rather than reading on for as
// long as the client keeps it open.
func TestSIGHUPEndsRevokedWatches(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	shared := sharedDSN(t)
	pool := connect(t, shared)
	schema := newSchema(t, pool, "revoke")
	writeThread(t, pool, pgx.Identifier{schema}.Sanitize(), "acme/t1", rivers)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	writeTokens(t, tokens, "old-token")
	h := testbin.Start(t, bin, "--dsn", shared, "--schema", schema, "--auth-tokens", tokens, "--watch-poll-interval", "50ms")
	c := historydv1.NewThreadHistoryClient(dial(t, h.Addr))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer old-token")
	stream, err := c.WatchTurns(ctx, &historydv1.WatchTurnsRequest{ThreadId: "acme/t1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("the watch before the token was revoked: %v", err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()

	writeTokens(t, tokens, "new-token")
	sent := h.Signal(t, syscall.SIGHUP)
	select {
	case err := <-ended:
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("the revoked token's watch ended with %v, want UNAUTHENTICATED", err)
		}
		t.Logf("the revoked token's watch ended %v after SIGHUP: %v", time.Since(sent).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked token's watch still runs 5s after SIGHUP")
	}
	if _, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: "acme/t1"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a fresh call with the revoked token: %v, want UNAUTHENTICATED", err)
	}
	h.RequireRunning(t)
}

// TestWatchMaxAge serves with a short --watch-max-age: a raw watch ends at
// that age with UNAVAILABLE and the resume trailer, and the Go client's
// watch, allowed no retries, goes on through several such ends without a
// failure and without sending a turn twice.
func TestWatchMaxAge(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	shared := sharedDSN(t)
	pool := connect(t, shared)
	schema := newSchema(t, pool, "maxage")
	writeThread(t, pool, pgx.Identifier{schema}.Sanitize(), "t1", rivers)
	const age = time.Second
	h := testbin.Start(t, bin, "--dsn", shared, "--schema", schema, "--watch-max-age", age.String(), "--watch-poll-interval", "50ms")

	c := historydv1.NewThreadHistoryClient(dial(t, h.Addr))
	start := time.Now()
	stream, err := c.WatchTurns(context.Background(), &historydv1.WatchTurnsRequest{ThreadId: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	took := time.Since(start)
	if status.Code(err) != codes.Unavailable || took < age || took > age+2*time.Second {
		t.Errorf("the watch ended after %v with %v, want UNAVAILABLE after about %v", took.Round(time.Millisecond), err, age)
	}
	if got := stream.Trailer().Get("historyd-resume"); len(got) != 1 || got[0] != "max-age" {
		t.Errorf("trailer historyd-resume = %v, want [max-age]", got)
	}

	gc, err := client.Dial(h.Addr, client.WithInsecure(), client.WithRetry(0, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	wctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
	defer cancel()
	seen := map[int]int{}
	for ev, err := range gc.WatchTurns(wctx, "t1") {
		if err != nil {
			if status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("the client's watch failed across the server's maximum age: %v", err)
			}
			break
		}
		seen[ev.State.Turn]++
	}
	if len(seen) == 0 {
		t.Fatal("the client's watch yielded no turn")
	}
	for n, times := range seen {
		if times != 1 {
			t.Errorf("turn %d yielded %d times across resumptions, want once", n, times)
		}
	}
	h.RequireRunning(t)
}

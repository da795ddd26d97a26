package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// summaries returns the summary lines of a log, and the other lines
// logged at info or above.
func summaries(t *testing.T, buf *syncBuffer) (sums, others []map[string]any) {
	t.Helper()
	for _, r := range buf.records(t) {
		switch {
		case r["msg"] == "more calls failed the same way; their own lines were left out":
			sums = append(sums, r)
		case r["level"] != "DEBUG":
			others = append(others, r)
		}
	}
	return sums, others
}

// counted adds up the calls the summary lines count.
func counted(sums []map[string]any) int {
	n := 0
	for _, s := range sums {
		n += int(s["calls"].(float64))
	}
	return n
}

// While the store is unreachable every call fails alike: the first is
// logged as ever (its line and its cause), the others are counted and
// summed up once a period, by method, with the latest cause, and no call
// goes uncounted. Once the failures stop, the next one is logged in full
// again.
func TestUnavailableLoggedBySummary(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := storetest.NewMemory()
	m.SetErr(fmt.Errorf("%w: connection refused", backend.ErrUnavailable))
	const every = 300 * time.Millisecond
	srv := serveWith(t, m, service.Options{Logger: log, FailureSummaryEvery: every})
	c := srv.client(t)
	ctx := context.Background()
	const calls = 500
	for i := range calls {
		var err error
		if i%5 == 0 {
			_, err = c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: "t"})
		} else {
			_, err = c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: "t", Turn: 1})
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want UNAVAILABLE", i, err)
		}
	}
	time.Sleep(every + 200*time.Millisecond)
	sums, others := summaries(t, &buf)
	var finished, causes int
	for _, r := range others {
		switch r["msg"] {
		case "finished call":
			finished++
		case "call failed; the caller was not told why":
			causes++
		}
	}
	if finished != 1 || causes != 1 {
		t.Errorf("%d call lines and %d cause lines at info or above, want the first call's one of each:\n%s", finished, causes, buf.String())
	}
	if len(sums) == 0 || counted(sums) != calls-1 {
		t.Fatalf("summary lines %v count %d calls, want %d", sums, counted(sums), calls-1)
	}
	s := sums[len(sums)-1]
	if s["level"] != "WARN" || s["code"] != "Unavailable" || s["message"] != service.MessageUnavailable ||
		!strings.Contains(fmt.Sprint(s["last_cause"]), "connection refused") || !strings.Contains(fmt.Sprint(s["by_method"]), "Snapshot=") {
		t.Errorf("summary line %v, want WARN, the code, the callers' message, the latest cause and counts by method", s)
	}

	// A period with no such failure ends the flood.
	time.Sleep(2 * every)
	before := len(buf.records(t))
	if _, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: "t"}); status.Code(err) != codes.Unavailable {
		t.Fatal(err)
	}
	var again int
	for _, r := range buf.records(t)[before:] {
		if r["msg"] == "finished call" && r["level"] == "WARN" {
			again++
		}
	}
	if again != 1 {
		t.Errorf("the first failure after a quiet period was not logged in full:\n%s", buf.String())
	}
}

// A tenant far past its rate limit is refused thousands of times; the log
// has the first refusal and then one summary line per period counting the
// rest by tenant, not a line each.
func TestRateLimitLoggedBySummary(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, path := twoTenants(t)
	const every = 300 * time.Millisecond
	c := serveWith(t, b, service.Options{Logger: log, Auth: newAuth(t, path), RateLimit: 0.01, RateBurst: 1, FailureSummaryEvery: every}).client(t)
	ctx := withToken(context.Background(), "token-a")
	refused := 0
	for range 2000 {
		_, err := c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: "a/1"})
		if status.Code(err) == codes.ResourceExhausted {
			refused++
		}
	}
	if refused < 1990 {
		t.Fatalf("%d of 2000 calls refused at 0.01 calls/s, want nearly all", refused)
	}
	time.Sleep(every + 200*time.Millisecond)
	sums, others := summaries(t, &buf)
	var lines int
	for _, r := range others {
		if r["msg"] == "finished call" && r["grpc.code"] == "ResourceExhausted" {
			lines++
		}
	}
	if lines != 1 {
		t.Errorf("%d refusals logged at info or above, want the first one only", lines)
	}
	if counted(sums) != refused-1 {
		t.Fatalf("summaries %v count %d refusals, want %d", sums, counted(sums), refused-1)
	}
	if s := sums[0]; s["code"] != "ResourceExhausted" || s["by_tenant"] != fmt.Sprintf("a=%d", counted(sums[:1])) {
		t.Errorf("summary %v, want ResourceExhausted counted by tenant", s)
	}
}

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
	"github.com/historyd/historyd/store/storetest"
)

// TestStatusesNameNoDatabase provokes every status historyd sends a
// caller (InvalidArgument, DataLoss, FailedPrecondition for a value it
// will not decode and for tables it may not read, ResourceExhausted,
// DeadlineExceeded, Unavailable, Internal) against a database, role, host
// and port of its own, and requires that no status message or detail
// names any of them: they are the operator's to know, and the log has
// them. Each provoked code must be seen, so that a provocation that stops
// working fails the test rather than shrinking it.
func TestStatusesNameNoDatabase(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	shared := sharedDSN(t)
	admin := connect(t, shared)
	ctx := context.Background()
	tag := fmt.Sprintf("%08x", rand.Uint32())
	dbName, role := "leakdb_"+tag, "leakrole_"+tag
	for _, stmt := range []string{"CREATE DATABASE " + dbName, "CREATE ROLE " + role + " LOGIN"} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE "+dbName+" WITH (FORCE)")
		_, _ = admin.Exec(context.Background(), "DROP ROLE "+role)
	})
	u, err := url.Parse(shared)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + dbName
	owner := connect(t, u.String())
	public := pgx.Identifier{"public"}.Sanitize()
	checkpointTables(t, owner, public)
	grantSelect(t, owner, "public", role)
	threads := map[string]thread{}
	for _, id := range []string{"plain", "damaged", "pickled"} {
		threads[id] = writeThread(t, owner, public, id, rivers)
	}
	big := make([]byte, 16<<10)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	writeThread(t, owner, public, "big", []storetest.Turn{{Question: "load the big one", Writes: map[string]any{"blob": string(big)}}})
	end := func(id string, n int) string { return threads[id].written[n-1].End }
	setBlob := func(id string, n int, typ string, blob []byte) {
		t.Helper()
		res, err := owner.Exec(ctx, `UPDATE checkpoint_blobs b SET type = $3, blob = $4 FROM checkpoints c
WHERE c.thread_id = $1 AND c.checkpoint_id = $2 AND b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
  AND b.channel = 'tool_state' AND b.version = c.checkpoint->'channel_versions'->>'tool_state'`, id, end(id, n), typ, blob)
		if err != nil || res.RowsAffected() != 1 {
			t.Fatalf("damage %s: %v, %v", id, err, res)
		}
	}
	setBlob("damaged", 2, "json", []byte("{\"area_km2\": garbage"))
	setBlob("pickled", 2, "pickle", []byte("\x80\x04K\x01."))

	u.User = url.User(role)
	dsn := u.String()
	// Two servers: one whose lock waits end at its call cap, one whose
	// sessions give up on locks after 200ms, which PostgreSQL reports as an
	// error historyd has no status for.
	h := testbin.Start(t, bin, "--dsn", dsn, "--max-call-duration", "1500ms", "--max-response-bytes", "8KiB")
	lockDSN := dsn + "&lock_timeout=200"
	hl := testbin.Start(t, bin, "--dsn", lockDSN)
	c := historydv1.NewThreadHistoryClient(dial(t, h.Addr))
	cl := historydv1.NewThreadHistoryClient(dial(t, hl.Addr))
	for _, s := range []*testbin.Process{h, hl} {
		waitHealth(t, dial(t, s.Addr), healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	}

	var (
		mu   sync.Mutex
		seen = map[codes.Code][]*status.Status{}
	)
	call := func(what string, want codes.Code, f func(context.Context) error) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st := status.Convert(f(cctx))
		if st.Code() != want {
			t.Errorf("%s: %v %q, want %v", what, st.Code(), st.Message(), want)
		}
		t.Logf("%s: %v: %s", what, st.Code(), st.Message())
		mu.Lock()
		seen[st.Code()] = append(seen[st.Code()], st)
		mu.Unlock()
	}
	snapshot := func(client historydv1.ThreadHistoryClient, id string, n int32) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: id, Turn: n})
			return err
		}
	}
	turns := func(client historydv1.ThreadHistoryClient, id string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := client.Turns(ctx, &historydv1.TurnsRequest{ThreadId: id})
			return err
		}
	}

	call("Snapshot of a retained turn", codes.OK, snapshot(c, "plain", 1))
	call("Turns without a thread id", codes.InvalidArgument, turns(c, ""))
	call("Snapshot of a damaged blob", codes.DataLoss, snapshot(c, "damaged", 2))
	call("Snapshot of a pickled blob", codes.FailedPrecondition, snapshot(c, "pickled", 2))
	call("Snapshots over the response limit", codes.ResourceExhausted, func(ctx context.Context) error {
		_, err := c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: "big"})
		return err
	})

	// A lock held on the checkpoints table: one server's read waits until
	// its call cap, the other's gives up on the lock.
	func() {
		tx, err := owner.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // rolled back on purpose
		if _, err := tx.Exec(ctx, "LOCK TABLE checkpoints IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		call("Turns behind a lock, past the call cap", codes.DeadlineExceeded, turns(c, "plain"))
		call("Turns behind a lock, past lock_timeout", codes.Internal, turns(cl, "plain"))
	}()

	// The role loses its grant: the tables cannot be read.
	execSQL(t, owner, "REVOKE SELECT ON checkpoint_blobs FROM "+role)
	call("Snapshot without SELECT on checkpoint_blobs", codes.FailedPrecondition, snapshot(c, "plain", 3))
	execSQL(t, owner, "GRANT SELECT ON checkpoint_blobs TO "+role)

	// The role may open no connection, and its open ones are ended.
	execSQL(t, admin, "ALTER ROLE "+role+" CONNECTION LIMIT 0")
	execSQL(t, admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+role+"'")
	// Connections the pool still holds fail first; then a new one is
	// refused. Calls failing UNAVAILABLE are logged by summary, the first
	// in full; the refusal's cause reaches the log on the line the health
	// probe writes when the store turns unreachable.
	for start := time.Now(); !strings.Contains(h.Logs.String(), "too many connections for role"); {
		if time.Since(start) > 10*time.Second {
			t.Fatal("no connection refusal logged in 10s of calls")
		}
		call("Snapshot with no connection allowed", codes.Unavailable, snapshot(c, "plain", 4))
		time.Sleep(100 * time.Millisecond)
	}
	execSQL(t, admin, "ALTER ROLE "+role+" CONNECTION LIMIT -1")

	for _, code := range []codes.Code{codes.OK, codes.InvalidArgument, codes.DataLoss, codes.FailedPrecondition, codes.ResourceExhausted,
		codes.DeadlineExceeded, codes.Internal, codes.Unavailable} {
		if len(seen[code]) == 0 {
			t.Errorf("no %v was provoked", code)
		}
	}
	leaks := []*regexp.Regexp{
		regexp.MustCompile(regexp.QuoteMeta(dbName)),
		regexp.MustCompile(regexp.QuoteMeta(role)),
		regexp.MustCompile(regexp.QuoteMeta(u.Hostname())),
		regexp.MustCompile(`localhost`),
		regexp.MustCompile(`\b` + regexp.QuoteMeta(u.Port()) + `\b`),
	}
	codesSeen := slices.Sorted(func(yield func(codes.Code) bool) {
		for c := range seen {
			if !yield(c) {
				return
			}
		}
	})
	for _, code := range codesSeen {
		for _, st := range seen[code] {
			text := st.Message() + " " + prototext.Format(st.Proto())
			for _, re := range leaks {
				if re.MatchString(text) {
					t.Errorf("%v status shows %s: %s", code, re, text)
				}
			}
		}
	}
	// What the callers were not told is in the log, one line per call.
	logs := h.Logs.String() + hl.Logs.String()
	for _, want := range []string{"lock timeout", "permission denied for table checkpoint_blobs", "too many connections for role"} {
		if !strings.Contains(logs, want) {
			t.Errorf("historyd's logs lack the cause %q", want)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !strings.HasPrefix(line, "time=") {
			t.Errorf("log record not on one line: %q", line)
		}
	}
}

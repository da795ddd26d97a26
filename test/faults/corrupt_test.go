package faults

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
)

// TestCorruptBlob overwrites the tool_state blob one turn ended on with
// garbage, in three threads: as a "json" blob (LangGraph.js), as a
// "msgpack" one (Python), and as msgpack nested deeper than any serializer
// writes (format.DefaultMaxDepth), which is damage too. Snapshot of that turn must answer DataLoss naming
// the thread, the checkpoint and the channel; every other turn, a third
// untouched thread, and Turns must be served as before, and the server must
// stay healthy: damaged data is not an outage. A server that decoded the
// blob before the damage keeps serving its copy, since LangGraph never
// rewrites a stored version; a server reading the damaged bytes reports
// them.
func TestCorruptBlob(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	pool := connect(t, sharedDSN(t))
	schema := newSchema(t, pool, "corrupt")
	q := pgx.Identifier{schema}.Sanitize()
	threads := []thread{
		writeThread(t, pool, q, "corrupt-json", rivers),
		writeThread(t, pool, q, "corrupt-msgpack", rivers),
		writeThread(t, pool, q, "corrupt-deep", rivers),
		writeThread(t, pool, q, "untouched", rivers),
	}
	const bad = 3 // the turn whose end state is damaged
	damage := map[string]struct {
		typ  string
		blob []byte
	}{
		"corrupt-json": {"json", []byte("\xff\x00{\"area_km2\": garbage")},
		// A map announcing two entries, holding one and a half.
		"corrupt-msgpack": {"msgpack", []byte{0x82, 0xa4, 'n', 'a', 'm', 'e', 0xa5, 'T', 'r', 'e', 'n', 't', 0xa8, 'a', 'r', 'e'}},
		// A map whose one entry is a list of lists, 300 levels down.
		"corrupt-deep": {"msgpack", append(append([]byte{0x81, 0xa4, 'n', 'a', 'm', 'e'}, bytes.Repeat([]byte{0x91}, 300)...), 0xc0)},
	}

	h := testbin.Start(t, bin, "--dsn", sharedDSN(t), "--schema", schema)
	conn := dial(t, h.Addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	client := historydv1.NewThreadHistoryClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Read every turn once first, so that what historyd caches is warm
	// when the damage happens.
	for _, th := range threads {
		for n := int32(1); n <= int32(len(th.turns)); n++ {
			resp, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: n})
			if err != nil {
				t.Fatalf("%s turn %d before the damage: %v", th.id, n, err)
			}
			if err := th.checkSnapshot(n, resp); err != nil {
				t.Fatalf("%s before the damage: %v", th.id, err)
			}
		}
	}

	for id, d := range damage {
		tag, err := pool.Exec(ctx, `UPDATE `+q+`.checkpoint_blobs b SET type = $3, blob = $4
FROM `+q+`.checkpoints c
WHERE c.thread_id = $1 AND c.checkpoint_ns = '' AND c.checkpoint_id = $2
  AND b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
  AND b.channel = 'tool_state' AND b.version = c.checkpoint->'channel_versions'->>'tool_state'`,
			id, threads[0].written[bad-1].End, d.typ, d.blob)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("damage %s: %v, %d rows", id, err, tag.RowsAffected())
		}
	}

	// State versions never change in LangGraph, so the running server
	// keeps answering from the copy it decoded before the damage.
	for _, th := range threads[:len(damage)] {
		resp, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: bad})
		if err != nil {
			t.Errorf("%s turn %d from the warm server's cache: %v", th.id, bad, err)
		} else if err := th.checkSnapshot(bad, resp); err != nil {
			t.Errorf("%s from the warm server's cache: %v", th.id, err)
		}
	}
	// A server reading the damaged blob reports it, and serves the rest;
	// the warm server keeps running beside it, its index caches warm.
	h2 := testbin.Start(t, bin, "--dsn", sharedDSN(t), "--schema", schema)
	conn = dial(t, h2.Addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	client = historydv1.NewThreadHistoryClient(conn)

	for _, th := range threads {
		_, damaged := damage[th.id]
		for n := int32(1); n <= int32(len(th.turns)); n++ {
			resp, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: n})
			if !damaged || n != bad {
				if err != nil {
					t.Errorf("%s turn %d after another blob was damaged: %v", th.id, n, err)
				} else if err := th.checkSnapshot(n, resp); err != nil {
					t.Errorf("%s: %v", th.id, err)
				}
				continue
			}
			checkDataLoss(t, th.id+" Snapshot", err, th.id, th.written[bad-1].End, "tool_state")
			// A projection cannot read around the damage either.
			_, err = client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: n, Keys: []string{"lang"}})
			checkDataLoss(t, th.id+" Snapshot of one key", err, th.id, th.written[bad-1].End, "tool_state")
		}

		// Turns reads no state.
		turns, err := client.Turns(ctx, &historydv1.TurnsRequest{ThreadId: th.id})
		if err != nil {
			t.Errorf("%s Turns: %v", th.id, err)
		} else if err := th.checkTurns(turns); err != nil {
			t.Errorf("%s Turns: %v", th.id, err)
		}
		// Snapshots and Turns with keys_written read every turn's state, the
		// damaged one included: they fail whole, naming it, rather than
		// leave a turn out silently.
		all, err := client.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: th.id})
		withKeys, kerr := client.Turns(ctx, &historydv1.TurnsRequest{ThreadId: th.id, IncludeKeysWritten: true})
		if damaged {
			checkDataLoss(t, th.id+" Snapshots", err, th.id, th.written[bad-1].End, "tool_state")
			checkDataLoss(t, th.id+" Turns with keys_written", kerr, th.id, th.written[bad-1].End, "tool_state")
			continue
		}
		if err != nil {
			t.Errorf("%s Snapshots: %v", th.id, err)
		} else if err := th.checkSnapshots(all); err != nil {
			t.Errorf("%s Snapshots: %v", th.id, err)
		}
		if kerr != nil || len(withKeys.GetTurns()) != len(th.turns) {
			t.Errorf("%s Turns with keys_written: %v, %v", th.id, withKeys, kerr)
		}
	}

	if st, err := health(conn, serviceName); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health with a damaged blob = %v, %v; want SERVING", st, err)
	}
	h.RequireRunning(t)
	h2.RequireRunning(t)
}

// checkDataLoss checks that err is DataLoss naming the thread, checkpoint
// and channel.
func checkDataLoss(t *testing.T, what string, err error, thread, checkpoint, channel string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.DataLoss {
		t.Errorf("%s of a damaged blob = %v, want DataLoss", what, err)
		return
	}
	for _, want := range []string{thread, checkpoint, channel} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("%s: DataLoss message %q does not name %q", what, st.Message(), want)
		}
	}
	t.Logf("%s: %v: %s", what, st.Code(), st.Message())
}

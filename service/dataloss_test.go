package service_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/demo"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// TestOverDeepValueIsDataLoss: a stored value nested deeper than any
// LangGraph serializer writes is DATA_LOSS naming the thread, checkpoint
// and channel, like every other value that cannot be decoded; the other
// turns are still served.
func TestOverDeepValueIsDataLoss(t *testing.T) {
	for name, blob := range map[string]backend.Blob{
		"msgpack": {Type: format.TypeMsgpack, Data: append(bytes.Repeat([]byte{0x91}, format.DefaultMaxDepth+1), 0xc0)},
		"json":    {Type: format.TypeJSON, Data: []byte(strings.Repeat("[", format.DefaultMaxDepth+1) + strings.Repeat("]", format.DefaultMaxDepth+1))},
	} {
		t.Run(name, func(t *testing.T) {
			mem := storetest.NewMemory()
			ref := backend.Ref{ThreadID: "deep"}
			written := storetest.Build(mem, ref, demoTurns)
			msgs, err := backend.Values(t.Context(), mem, ref, "messages", []string{written[3].End})
			if err != nil {
				t.Fatal(err)
			}
			// Turn 4 ends on a checkpoint whose state is the deep value.
			deep := written[3].End + "-z"
			mem.PutBlobs(ref, deep, storetest.Base.Add(time.Hour), map[string]backend.Blob{"messages": msgs[0], "tool_state": blob})
			c := startServer(t, mem)

			_, err = c.Snapshot(t.Context(), &historydv1.SnapshotRequest{ThreadId: "deep", Turn: 4})
			st := status.Convert(err)
			if st.Code() != codes.DataLoss {
				t.Fatalf("Snapshot of the deep value: %v, want DataLoss", err)
			}
			for _, want := range []string{`"deep"`, deep, `"tool_state"`, "depth"} {
				if !strings.Contains(st.Message(), want) {
					t.Errorf("DataLoss message %q does not name %s", st.Message(), want)
				}
			}
			if resp, err := c.Snapshot(t.Context(), &historydv1.SnapshotRequest{ThreadId: "deep", Turn: 3}); err != nil || resp.GetState() == nil {
				t.Errorf("turn 3 beside the deep value: %v, %v", resp, err)
			}
		})
	}
}

// TestCorruptSQLiteFileIsDataLoss damages the b-tree pages of a real
// SqliteSaver file's checkpoints table, as a disk or a copy mid-write
// would: reading a thread answers DATA_LOSS ("database disk image is
// malformed" is damage, not a bug), naming the file's role and never its
// path, which the server's log has instead; health stays SERVING, since
// nothing a retry or a wait fixes is wrong.
func TestCorruptSQLiteFileIsDataLoss(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent-data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "checkpoints.db")
	if err := demo.Write(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	damagePages(t, path, "checkpoints", "sqlite_autoindex_checkpoints_1")

	var logs syncbuf.Buffer
	srv := servertest.Start(t, server.Config{Service: service.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}},
		servertest.WithDSN("sqlite://"+path, ""))
	c := srv.Client(t)
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"Snapshot", func() error {
			_, err := c.Snapshot(t.Context(), &historydv1.SnapshotRequest{ThreadId: demo.Thread, Turn: 1})
			return err
		}},
		{"Turns", func() error {
			_, err := c.Turns(t.Context(), &historydv1.TurnsRequest{ThreadId: demo.Thread})
			return err
		}},
		{"Threads", func() error {
			_, err := c.Threads(t.Context(), &historydv1.ThreadsRequest{})
			return err
		}},
	} {
		err := call.do()
		st := status.Convert(err)
		if st.Code() != codes.DataLoss || !strings.Contains(st.Message(), "SQLite checkpoint database") {
			t.Errorf("%s of a damaged file: %v, want DataLoss naming the SQLite checkpoint database", call.name, err)
		}
		if strings.Contains(st.Message(), dir) || strings.Contains(st.Message(), "checkpoints.db") {
			t.Errorf("%s: the caller reads the file's path: %q", call.name, st.Message())
		}
	}
	if !strings.Contains(logs.String(), path) || !strings.Contains(logs.String(), "malformed") {
		t.Errorf("the log does not say which file is damaged, and how:\n%s", logs.String())
	}
	hc := healthpb.NewHealthClient(srv.Conn(t))
	if r, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health with a damaged file = %v, %v; want SERVING", r, err)
	}
}

// damagePages overwrites the b-tree page header of each named table or
// index of the SQLite file at path with bytes no page starts with.
func damagePages(t *testing.T, path string, names ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var pageSize int64
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	var pages []int64
	for _, name := range names {
		var root int64
		if err := db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = ?`, name).Scan(&root); err != nil {
			t.Fatalf("root page of %s: %v", name, err)
		}
		pages = append(pages, root)
	}
	db.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range pages {
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xff}, 12), (p-1)*pageSize); err != nil {
			t.Fatal(err)
		}
	}
}

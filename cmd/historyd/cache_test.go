package main

import (
	"context"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// The cache flags reach the store: --cache-bytes sets the budget, which by
// default is a quarter of GOMEMLIMIT; the deprecated flags, from the
// command line or the environment, still bound their caches (0: off) and
// are warned about; left unset they bound nothing.
func TestServeCacheSettings(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(400 << 20))
	for _, tt := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    []string
		warning string
	}{
		{"default", nil, nil, []string{`historyd_cache_capacity_bytes 1.048576e+08`, `historyd_cache_entries{cache="index"} 1`, `historyd_cache_entries{cache="state"} 1`}, ""},
		{"flag", nil, []string{"--cache-bytes", "3MiB"}, []string{`historyd_cache_capacity_bytes 3.145728e+06`, `historyd_cache_entries{cache="index"} 1`}, ""},
		{"off", nil, []string{"--cache-bytes", "0"}, []string{`historyd_cache_capacity_bytes 0`, `historyd_cache_entries{cache="index"} 0`, `historyd_cache_entries{cache="state"} 0`}, ""},
		{"index cache off by its old variable", map[string]string{"HISTORYD_CACHE_THREADS": "0"}, nil,
			[]string{`historyd_cache_entries{cache="index"} 0`, `historyd_cache_entries{cache="state"} 1`}, "--cache-threads is deprecated"},
		{"state cache off by its old flag", nil, []string{"--cache-state-bytes", "0"},
			[]string{`historyd_cache_entries{cache="index"} 1`, `historyd_cache_entries{cache="state"} 0`}, "--cache-state-bytes is deprecated"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			mem := storetest.NewMemory()
			storetest.Build(mem, backend.Ref{ThreadID: "t"}, storetest.Demo)
			useMemory(t, mem)
			var log syncbuf.Buffer
			old := logOutput
			logOutput = &log
			t.Cleanup(func() { logOutput = old })
			addrs := make(chan [2]string, 1)
			servingHook = func(a server.Addrs) { addrs <- [2]string{a.GRPC, a.Metrics} }
			t.Cleanup(func() { servingHook = nil })
			ctx, cancel := context.WithCancel(context.Background())
			exited := make(chan int, 1)
			go func() {
				exited <- run(ctx, append([]string{"serve", "--dsn", "memory", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, tt.args...), io.Discard, io.Discard)
			}()
			defer func() {
				cancel()
				<-exited
			}()
			var a [2]string
			select {
			case a = <-addrs:
			case code := <-exited:
				t.Fatalf("serve exited %d:\n%s", code, log.String())
			case <-time.After(10 * time.Second):
				t.Fatal("serve did not start")
			}
			conn, err := grpc.NewClient("passthrough:///"+a[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := historydv1.NewThreadHistoryClient(conn).Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: "t", Turn: 1}); err != nil {
				t.Fatal(err)
			}
			resp, err := http.Get("http://" + a[1] + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, w := range tt.want {
				if !strings.Contains(string(body), w+"\n") {
					t.Errorf("/metrics lacks %s", w)
				}
			}
			if got := strings.Contains(log.String(), "is deprecated"); got != (tt.warning != "") || !strings.Contains(log.String(), tt.warning) {
				t.Errorf("log, want a warning %q:\n%s", tt.warning, log.String())
			}
		})
	}
}

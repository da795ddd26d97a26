package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/metrics"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/lgcodec"
	"github.com/historyd/historyd/store/storetest"
)

// setup serves b with historyd's server, metrics on, and its metrics
// handler over HTTP on 127.0.0.1.
func setup(t *testing.T, b store.Backend) (historydv1.ThreadHistoryClient, *servertest.Server, string) {
	t.Helper()
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: b}, Metrics: true, HealthInterval: 10 * time.Millisecond})
	hs := httptest.NewServer(srv.MetricsHandler())
	t.Cleanup(hs.Close)
	return srv.Client(t), srv, hs.URL
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestMetricsExposed(t *testing.T) {
	mem := storetest.NewMemory()
	storetest.Build(mem, store.Ref{ThreadID: "demo"}, storetest.Demo)
	c, _, url := setup(t, mem)
	if _, err := c.Snapshots(context.Background(), &historydv1.SnapshotsRequest{ThreadId: "demo"}); err != nil {
		t.Fatal(err)
	}
	mem.SetErr(store.ErrUnavailable)
	if _, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "other"}); err == nil {
		t.Fatal("call against a failing store succeeded")
	}

	code, body := get(t, url+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Snapshots",grpc_service="historyd.v1.ThreadHistory",grpc_type="unary"} 1`,
		`grpc_server_handled_total{grpc_code="Unavailable",grpc_method="Turns",grpc_service="historyd.v1.ThreadHistory",grpc_type="unary"} 1`,
		`grpc_server_handling_seconds_bucket{grpc_method="Snapshots"`,
		`historyd_store_query_duration_seconds_bucket{method="Checkpoints",le="+Inf"}`,
		`historyd_store_query_duration_seconds_count{method="Values"}`,
		`historyd_store_query_errors_total{method="Checkpoints"} 1`,
		`historyd_store_query_errors_total{method="CheckpointsSince"} 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, "demo") {
		t.Error("/metrics names a thread")
	}
}

func TestHealthzAndReadyz(t *testing.T) {
	mem := storetest.NewMemory()
	_, srv, url := setup(t, mem)

	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			code, body := get(t, url+"/readyz")
			if code == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz = %d %q, want %d", code, body, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(http.StatusOK)
	mem.SetErr(errors.New("connection refused"))
	waitFor(http.StatusServiceUnavailable)
	if code, _ := get(t, url+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while the store is down = %d, want 200: the process is alive", code)
	}
	mem.SetErr(nil)
	waitFor(http.StatusOK)
	srv.Shutdown(time.Second)
	waitFor(http.StatusServiceUnavailable)
}

// The metered backend times each read under its own name: a store's first
// read of a thread lists it whole, the second only what is newer.
func TestBackendTimesEachRead(t *testing.T) {
	m := metrics.New()
	inner := storetest.NewMemory()
	storetest.Build(inner, store.Ref{ThreadID: "t"}, storetest.Demo)
	st := store.New(store.Config{Backend: m.Backend(inner)})
	for range 2 {
		if _, err := st.History(context.Background(), store.Ref{ThreadID: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(m.Handler(nil))
	defer hs.Close()
	_, body := get(t, hs.URL+"/metrics")
	for _, want := range []string{
		`historyd_store_query_duration_seconds_count{method="Checkpoints"} 1`,
		`historyd_store_query_duration_seconds_count{method="CheckpointsSince"} 1`,
		`historyd_store_query_duration_seconds_count{method="Writes"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if code, _ := get(t, hs.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with no readiness signal = %d, want 503", code)
	}
}

type lenEncoder struct{}

func (lenEncoder) Encode(e store.Entry) ([]byte, error) { return []byte(fmt.Sprint(e.Value)), nil }

// The state cache's statistics are exported and follow the store.
func TestWatchStore(t *testing.T) {
	m := metrics.New()
	mem := storetest.NewMemory()
	ref := store.Ref{ThreadID: "t"}
	storetest.Build(mem, ref, storetest.Demo)
	st := store.New(store.Config{Backend: mem})
	m.WatchStore(st)
	all := func(h *store.History) []store.Turn { return h.Turns }
	for range 2 {
		if _, _, _, err := st.ReadEncoded(context.Background(), ref, "", all, nil, lenEncoder{}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]float64{}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			got[f.GetName()] = metric.GetGauge().GetValue() + metric.GetCounter().GetValue()
		}
	}
	n := float64(len(storetest.Demo))
	// Turns 2 and 3 end on one version: 3 versions, the first read misses
	// all four turns, the second hits all four.
	want := map[string]float64{
		"historyd_index_cache_threads":      1,
		"historyd_state_cache_versions":     3,
		"historyd_state_cache_hits_total":   n,
		"historyd_state_cache_misses_total": n,
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s = %v, want %v", name, got[name], w)
		}
	}
	if got["historyd_state_cache_bytes"] <= 0 {
		t.Errorf("historyd_state_cache_bytes = %v, want > 0", got["historyd_state_cache_bytes"])
	}
}

// A value the store cannot decode is not a store error; a store that fails
// is.
func TestValuesErrorsAreTheStores(t *testing.T) {
	m := metrics.New()
	mem := storetest.NewMemory()
	ref := store.Ref{ThreadID: "t"}
	mem.PutBlobs(ref, "1f0c-000001", time.Now(), map[string]store.Blob{"tool_state": {Type: "msgpack", Data: []byte{0x82, 0xa1}}})
	b := m.Backend(mem)
	decode := func() error {
		return b.EachValue(context.Background(), ref, "tool_state", []string{"1f0c-000001"}, func(_ int, v store.Blob) error {
			_, _, err := lgcodec.Decode(v.Type, v.Data, lgcodec.Limits{})
			return err
		})
	}
	if err := decode(); err == nil {
		t.Fatal("a truncated state was decoded")
	}
	errorsOf := func() string {
		hs := httptest.NewServer(m.Handler(nil))
		defer hs.Close()
		_, body := get(t, hs.URL+"/metrics")
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, `historyd_store_query_errors_total{method="Values"}`) {
				return line
			}
		}
		return ""
	}
	if got := errorsOf(); !strings.HasSuffix(got, " 0") {
		t.Errorf("after a decode failure: %q; want 0 store errors", got)
	}
	mem.SetErr(errors.New("down"))
	if err := decode(); err == nil {
		t.Fatal("a failing store read succeeded")
	}
	if got := errorsOf(); !strings.HasSuffix(got, " 1") {
		t.Errorf("after a store failure: %q; want 1 store error", got)
	}
}

package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/historyd/historyd/buildinfo"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/metrics"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// setup serves b with historyd's server, metrics on, and its metrics
// handler over HTTP on 127.0.0.1.
func setup(t *testing.T, b backend.Backend) (historydv1.ThreadHistoryClient, *servertest.Server, string) {
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
	storetest.Build(mem, backend.Ref{ThreadID: "demo"}, storetest.Demo)
	c, _, url := setup(t, mem)
	if _, err := c.Snapshots(context.Background(), &historydv1.SnapshotsRequest{ThreadId: "demo"}); err != nil {
		t.Fatal(err)
	}
	mem.SetErr(backend.ErrUnavailable)
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
// read of a thread lists it whole, the second probes it for anything newer.
func TestBackendTimesEachRead(t *testing.T) {
	m := metrics.New(buildinfo.Info{})
	inner := storetest.NewMemory()
	storetest.Build(inner, backend.Ref{ThreadID: "t"}, storetest.Demo)
	st := store.New(store.Config{Backend: m.Backend(inner)})
	for range 2 {
		if _, err := st.History(context.Background(), backend.Ref{ThreadID: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(m.Handler(nil))
	defer hs.Close()
	_, body := get(t, hs.URL+"/metrics")
	for _, want := range []string{
		`historyd_store_query_duration_seconds_count{method="Checkpoints"} 1`,
		`historyd_store_query_duration_seconds_count{method="Probe"} 1`,
		`historyd_store_query_duration_seconds_count{method="CheckpointsSince"} 0`,
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
	m := metrics.New(buildinfo.Info{})
	mem := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "t"}
	storetest.Build(mem, ref, storetest.Demo)
	st := store.New(store.Config{Backend: mem})
	m.WatchStore(st)
	all := func(h *store.History) []store.Turn { return h.Turns }
	for range 2 {
		if _, _, _, err := st.ReadEncoded(context.Background(), ref, "", all, nil, lenEncoder{}); err != nil {
			t.Fatal(err)
		}
	}
	got := gathered(t, m)
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

// gathered returns the value of each gauge and counter m exports, by name
// and labels: name{label="value"}….
func gathered(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			name := f.GetName()
			for _, l := range metric.GetLabel() {
				name += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
			}
			got[name] = metric.GetGauge().GetValue() + metric.GetCounter().GetValue()
		}
	}
	return got
}

// The caches' series, by cache, follow what the store's caches do: a
// second read of a thread hits, a thread over a quarter of the budget is
// counted uncached, and five threads into room for four evict the least
// recently read.
func TestCacheSeries(t *testing.T) {
	mem := storetest.NewMemory()
	for _, id := range []string{"a", "b"} {
		storetest.Build(mem, backend.Ref{ThreadID: id}, storetest.Demo)
	}
	probe := store.New(store.Config{Backend: mem})
	if _, err := probe.History(context.Background(), backend.Ref{ThreadID: "a"}); err != nil {
		t.Fatal(err)
	}
	one := probe.CacheStats().Index.Bytes
	storetest.Build(mem, backend.Ref{ThreadID: "long"}, slices.Repeat(storetest.Demo, 4))
	m := metrics.New(buildinfo.Info{})
	st := store.New(store.Config{Backend: mem, CacheBytes: 4*one + 1, CacheStateBytes: -1})
	m.WatchStore(st)
	for _, id := range []string{"a", "b", "b", "long"} {
		if _, err := st.History(context.Background(), backend.Ref{ThreadID: id}); err != nil {
			t.Fatal(err)
		}
	}
	got := gathered(t, m)
	for name, w := range map[string]float64{
		`historyd_cache_capacity_bytes`:                 float64(4*one + 1),
		`historyd_cache_entries{cache="index"}`:         2,
		`historyd_cache_bytes{cache="index"}`:           float64(2 * one),
		`historyd_cache_hits_total{cache="index"}`:      1,
		`historyd_cache_misses_total{cache="index"}`:    3,
		`historyd_cache_evictions_total{cache="index"}`: 0,
		`historyd_cache_uncached_total{cache="index"}`:  1,
		`historyd_cache_entries{cache="state"}`:         0,
		`historyd_cache_uncached_total{cache="state"}`:  0,
		`historyd_index_cache_threads`:                  2,
	} {
		if got[name] != w {
			t.Errorf("%s = %v, want %v", name, got[name], w)
		}
	}
	// Three more: the fifth has the least recently read, a, make room.
	for _, id := range []string{"c", "d", "e"} {
		storetest.Build(mem, backend.Ref{ThreadID: id}, storetest.Demo)
		if _, err := st.History(context.Background(), backend.Ref{ThreadID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if s := st.CacheStats(); s.Index.Evictions != 1 || s.Index.Entries != 4 {
		t.Errorf("after five threads into room for four: %+v, want one eviction", s.Index)
	}
	if _, err := st.History(context.Background(), backend.Ref{ThreadID: "a"}); err != nil {
		t.Fatal(err)
	}
	if s := st.CacheStats(); s.Index.Misses != 7 {
		t.Errorf("reading the evicted thread again: %+v, want a miss", s.Index)
	}
}

// A value the store cannot decode is not a store error; a store that fails
// is.
func TestValuesErrorsAreTheStores(t *testing.T) {
	m := metrics.New(buildinfo.Info{})
	mem := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "t"}
	mem.PutBlobs(ref, "1f0c-000001", time.Now(), map[string]backend.Blob{"tool_state": {Type: "msgpack", Data: []byte{0x82, 0xa1}}})
	b := m.Backend(mem)
	decode := func() error {
		return b.EachValue(context.Background(), ref, "tool_state", []string{"1f0c-000001"}, func(_ int, v backend.Blob) error {
			_, _, err := codec.Decode(v.Type, v.Data, codec.Limits{})
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

// scrape reads /metrics as Prometheus does, into metric families.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, url+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return families
}

// series returns the label sets of a family's series, each as name=value
// pairs, and their values.
func series(families map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range families[name].GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		out[strings.Join(labels, ",")] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return out
}

// grpcServices lists the services the gRPC metrics have series for.
func grpcServices(families map[string]*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, name := range []string{"grpc_server_started_total", "grpc_server_handled_total", "grpc_server_handling_seconds", "grpc_server_msg_received_total", "grpc_server_msg_sent_total"} {
		for _, m := range families[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "grpc_service" {
					out[l.GetValue()] = true
				}
			}
		}
	}
	return out
}

// probe calls what probes and operators call: a health check and a
// reflection listing.
func probe(t *testing.T, srv *servertest.Server) {
	t.Helper()
	conn := srv.Conn(t)
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("reflection stream ended with %v", err)
	}
}

// By default /metrics has per-method series for every ThreadHistory
// method, from the generated service description so that a method added
// later is held to it too, and none for health and reflection, however
// often they are called; --metrics-all-methods brings those back.
func TestGRPCSeriesCoverThreadHistoryOnly(t *testing.T) {
	mem := storetest.NewMemory()
	_, srv, url := setup(t, mem)
	probe(t, srv)

	families := scrape(t, url)
	if got := grpcServices(families); len(got) != 1 || !got["historyd.v1.ThreadHistory"] {
		t.Errorf("gRPC metrics have series for %v, want historyd.v1.ThreadHistory only", got)
	}
	started := series(families, "grpc_server_started_total")
	handled := series(families, "grpc_server_handled_total")
	desc := historydv1.ThreadHistory_ServiceDesc
	methods := map[string]string{}
	for _, m := range desc.Methods {
		methods[m.MethodName] = "unary"
	}
	for _, s := range desc.Streams {
		methods[s.StreamName] = map[bool]string{true: "server_stream", false: "bidi_stream"}[s.ServerStreams && !s.ClientStreams]
	}
	if len(methods) < 4 {
		t.Fatalf("ThreadHistory has %d methods?", len(methods))
	}
	for name, typ := range methods {
		labels := "grpc_method=" + name + ",grpc_service=" + desc.ServiceName + ",grpc_type=" + typ
		if v, ok := started[labels]; !ok || v != 0 {
			t.Errorf("grpc_server_started_total{%s} = %v, %v; want a series at 0", labels, v, ok)
		}
		if _, ok := handled["grpc_code=OK,"+labels]; !ok {
			t.Errorf("grpc_server_handled_total has no OK series for %s", name)
		}
	}
	if n := len(started); n != len(methods) {
		t.Errorf("grpc_server_started_total has %d series, want one per ThreadHistory method (%d)", n, len(methods))
	}

	all := servertest.Start(t, server.Config{Store: store.Config{Backend: mem}, Metrics: true, MetricsAllMethods: true})
	hs := httptest.NewServer(all.MetricsHandler())
	t.Cleanup(hs.Close)
	probe(t, all)
	families = scrape(t, hs.URL)
	got := grpcServices(families)
	for _, svc := range []string{"historyd.v1.ThreadHistory", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"} {
		if !got[svc] {
			t.Errorf("with MetricsAllMethods, no series for %s", svc)
		}
	}
	if v := series(families, "grpc_server_handled_total")["grpc_code=OK,grpc_method=Check,grpc_service=grpc.health.v1.Health,grpc_type=unary"]; v != 1 {
		t.Errorf("with MetricsAllMethods, health checks counted = %v, want 1", v)
	}
}

func TestBuildInfo(t *testing.T) {
	build := buildinfo.Info{Version: "v1.2.3", Commit: "0123456789abcdef", Modified: "false", GoVersion: "go1.99.1", Platform: "linux/amd64"}
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: storetest.NewMemory()}, Metrics: true, Build: build})
	hs := httptest.NewServer(srv.MetricsHandler())
	t.Cleanup(hs.Close)
	got := series(scrape(t, hs.URL), "historyd_build_info")
	want := map[string]float64{"commit=0123456789abcdef,goversion=go1.99.1,version=v1.2.3": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("historyd_build_info = %v, want %v", got, want)
	}

	// Without a Build, the binary's own: a test binary knows its Go version.
	_, _, url := setup(t, storetest.NewMemory())
	got = series(scrape(t, url), "historyd_build_info")
	if len(got) != 1 {
		t.Fatalf("historyd_build_info = %v, want one series", got)
	}
	for labels, v := range got {
		if v != 1 || !strings.Contains(labels, "goversion="+runtime.Version()) || !strings.Contains(labels, "version=") {
			t.Errorf("historyd_build_info{%s} = %v", labels, v)
		}
	}
}

// historyd_store_up follows the health service's probes of the store.
func TestStoreUp(t *testing.T) {
	mem := storetest.NewMemory()
	_, _, url := setup(t, mem)
	up := func() float64 {
		s := series(scrape(t, url), "historyd_store_up")
		if len(s) != 1 {
			t.Fatalf("historyd_store_up = %v, want one series", s)
		}
		return s[""]
	}
	waitFor := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for up() != want {
			if time.Now().After(deadline) {
				t.Fatalf("historyd_store_up = %v, want %v", up(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(1)
	mem.SetErr(errors.New("connection refused"))
	waitFor(0)
	mem.SetErr(nil)
	waitFor(1)
}

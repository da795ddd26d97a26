// Package metrics exposes historyd to Prometheus and to HTTP probes: gRPC
// server metrics (go-grpc-middleware's Prometheus provider), the latency and
// errors of every store query, whether the store answered its last probe,
// the build (historyd_build_info), the Go runtime's and the process's own
// metrics, and /healthz and /readyz for orchestrators that probe over HTTP.
//
// It serves on its own listener, apart from gRPC, so that scraping needs no
// client certificate or token and an operator can keep it off the network
// the agent hosts use. Nothing it exports names a thread or a tenant.
package metrics

import (
	"context"
	"errors"
	"net/http"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/historyd/historyd/buildinfo"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// Metrics is one server's Prometheus registry and the collectors in it.
// Each Metrics has its own registry rather than the global one, so tests
// and embedders can run several side by side.
type Metrics struct {
	// Registry holds every collector below, plus Go runtime and process
	// collectors.
	Registry *prometheus.Registry
	// GRPC counts and times gRPC calls; install its interceptors and call
	// InitializeMetrics once services are registered.
	GRPC *grpcprom.ServerMetrics

	storeDuration *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
	storeUp       prometheus.Gauge
}

// storeMethods are the Backend methods timed, listed so that every series
// exists from the start: a rate over a series that appears only on the
// first error reads as no errors at all.
var storeMethods = []string{"Checkpoints", "CheckpointsSince", "Probe", "Values", "Writes", "Newest", "Threads", "Ping"}

// New returns a Metrics with its collectors registered; build is what
// historyd_build_info reports (the zero Info: the binary's own build
// information, buildinfo.Read("", "")).
func New(build buildinfo.Info) *Metrics {
	if build == (buildinfo.Info{}) {
		build = buildinfo.Read("", "")
	}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		GRPC:     grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram()),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "historyd_store_query_duration_seconds",
			Help: "Time a checkpoint store query took, by store.Backend method, errors included.",
			// From a cached index lookup on a local database up to a
			// multi-megabyte state read over a slow link.
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "historyd_store_query_errors_total",
			Help: "Checkpoint store queries that failed, by store.Backend method; calls cancelled by their caller are not counted.",
		}, []string{"method"}),
		storeUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "historyd_store_up",
			Help: "1 when the last probe of the checkpoint store (at start, then every health interval) succeeded, 0 when it failed.",
		}),
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "historyd_build_info",
		Help: "Always 1; the labels say which build is running, as `historyd version` does.",
		ConstLabels: prometheus.Labels{
			"version": build.Version, "commit": build.Commit, "goversion": build.GoVersion,
		},
	})
	buildInfo.Set(1)
	for _, meth := range storeMethods {
		m.storeDuration.WithLabelValues(meth)
		m.storeErrors.WithLabelValues(meth)
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.GRPC,
		m.storeDuration,
		m.storeErrors,
		m.storeUp,
		buildInfo,
	)
	return m
}

// Handler serves /metrics, /healthz and /readyz. /healthz answers 200
// while the process can answer at all. /readyz answers 200 while ready
// reports true and 503 otherwise; give it the same signal the gRPC health
// service reports, so HTTP and gRPC probes never disagree.
func (m *Metrics) Handler(ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ready == nil || !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: checkpoint store unreachable or shutting down\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}

// WatchStore exports st's cache statistics, read at each scrape: for each
// cache (label cache: "index", the turn indexes; "state", the encoded
// states) what it holds and what it did, and the budget they share. The
// older per-cache series (historyd_index_cache_threads,
// historyd_state_cache_*) are kept, with the values they had.
func (m *Metrics) WatchStore(st *store.Store) {
	stat := func(f func(store.CacheStats) float64) func() float64 {
		return func() float64 { return f(st.CacheStats()) }
	}
	m.Registry.MustRegister(
		cacheCollector{st},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "historyd_index_cache_threads",
			Help: "Threads whose turn index is cached (historyd_cache_entries{cache=\"index\"}).",
		}, stat(func(c store.CacheStats) float64 { return float64(c.Threads) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "historyd_state_cache_versions",
			Help: "Encoded state versions held by the state cache (historyd_cache_entries{cache=\"state\"}).",
		}, stat(func(c store.CacheStats) float64 { return float64(c.StateVersions) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "historyd_state_cache_bytes",
			Help: "Approximate memory held by the state cache (historyd_cache_bytes{cache=\"state\"}).",
		}, stat(func(c store.CacheStats) float64 { return float64(c.StateBytes) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "historyd_state_cache_hits_total",
			Help: "Turns whose state was served from the state cache (historyd_cache_hits_total{cache=\"state\"}).",
		}, stat(func(c store.CacheStats) float64 { return float64(c.StateHits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "historyd_state_cache_misses_total",
			Help: "Turns whose state was read from the checkpoint store and decoded (historyd_cache_misses_total{cache=\"state\"}).",
		}, stat(func(c store.CacheStats) float64 { return float64(c.StateMisses) })),
	)
}

// The cache series, by cache.
var (
	cacheCapacityDesc = prometheus.NewDesc("historyd_cache_capacity_bytes",
		"Memory the caches may hold together (--cache-bytes).", nil, nil)
	cacheBytesDesc = prometheus.NewDesc("historyd_cache_bytes",
		"Memory held by the cache, as charged: about what its entries take.", []string{"cache"}, nil)
	cacheEntriesDesc = prometheus.NewDesc("historyd_cache_entries",
		"Entries the cache holds: threads' turn indexes (index), encoded state versions (state).", []string{"cache"}, nil)
	cacheHitsDesc = prometheus.NewDesc("historyd_cache_hits_total",
		"Lookups the cache answered: reads that found the thread's index (index), turns whose state it held (state).", []string{"cache"}, nil)
	cacheMissesDesc = prometheus.NewDesc("historyd_cache_misses_total",
		"Lookups the cache could not answer: reads that listed the whole thread (index), turns whose state was read and decoded (state).", []string{"cache"}, nil)
	cacheEvictionsDesc = prometheus.NewDesc("historyd_cache_evictions_total",
		"Entries dropped, least recently used first, to make room within --cache-bytes.", []string{"cache"}, nil)
	cacheUncachedDesc = prometheus.NewDesc("historyd_cache_uncached_total",
		"Entries too large to keep (over a quarter of the cache's bound), served without being cached.", []string{"cache"}, nil)
)

// cacheCollector reads a store's cache statistics once per scrape.
type cacheCollector struct{ st *store.Store }

func (cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cacheCapacityDesc, cacheBytesDesc, cacheEntriesDesc, cacheHitsDesc, cacheMissesDesc, cacheEvictionsDesc, cacheUncachedDesc} {
		ch <- d
	}
}

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.CacheStats()
	ch <- prometheus.MustNewConstMetric(cacheCapacityDesc, prometheus.GaugeValue, float64(s.Capacity))
	for name, u := range map[string]store.CacheUse{"index": s.Index, "state": s.State} {
		ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(u.Bytes), name)
		ch <- prometheus.MustNewConstMetric(cacheEntriesDesc, prometheus.GaugeValue, float64(u.Entries), name)
		ch <- prometheus.MustNewConstMetric(cacheHitsDesc, prometheus.CounterValue, float64(u.Hits), name)
		ch <- prometheus.MustNewConstMetric(cacheMissesDesc, prometheus.CounterValue, float64(u.Misses), name)
		ch <- prometheus.MustNewConstMetric(cacheEvictionsDesc, prometheus.CounterValue, float64(u.Evictions), name)
		ch <- prometheus.MustNewConstMetric(cacheUncachedDesc, prometheus.CounterValue, float64(u.Uncached), name)
	}
}

// Backend wraps b so that each query's latency and failure is recorded.
// Only the backend's own share is counted: the time the store's callbacks
// take (decoding what was read) is left out, and so are their errors,
// which say nothing about the store.
func (m *Metrics) Backend(b backend.Backend) backend.Backend {
	return &timedBackend{inner: b, m: m}
}

func (m *Metrics) observe(method string, start time.Time, err error) {
	m.observeFor(method, time.Since(start), err)
}

func (m *Metrics) observeFor(method string, took time.Duration, err error) {
	m.storeDuration.WithLabelValues(method).Observe(took.Seconds())
	// A caller that hung up says nothing about the store's health.
	if err != nil && !errors.Is(err, context.Canceled) {
		m.storeErrors.WithLabelValues(method).Inc()
	}
}

type timedBackend struct {
	inner backend.Backend
	m     *Metrics
}

var _ backend.Backend = (*timedBackend)(nil)

// timed runs read, which calls its callback through the returned wrapper,
// and records its latency under method without the callbacks' time and
// errors.
func (b *timedBackend) timed(method string, read func(call func(func() error) error) error) error {
	start := time.Now()
	var inFn time.Duration
	var fnErr error
	err := read(func(fn func() error) error {
		t := time.Now()
		fnErr = fn()
		inFn += time.Since(t)
		return fnErr
	})
	storeErr := err
	if err != nil && err == fnErr {
		storeErr = nil
	}
	b.m.observeFor(method, time.Since(start)-inFn, storeErr)
	return err
}

func (b *timedBackend) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (census backend.Census, err error) {
	// Named for what they read: the whole thread, or what is newer.
	method := "Checkpoints"
	if q.After != "" {
		method = "CheckpointsSince"
	}
	err = b.timed(method, func(call func(func() error) error) error {
		census, err = b.inner.List(ctx, ref, q, func(r backend.Row) error { return call(func() error { return fn(r) }) })
		return err
	})
	return census, err
}

func (b *timedBackend) Probe(ctx context.Context, ps []backend.Probe) (res []backend.ProbeResult, err error) {
	err = b.timed("Probe", func(func(func() error) error) error {
		res, err = b.inner.Probe(ctx, ps)
		return err
	})
	return res, err
}

func (b *timedBackend) EachValue(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(int, backend.Blob) error) error {
	return b.timed("Values", func(call func(func() error) error) error {
		return b.inner.EachValue(ctx, ref, channel, ids, func(i int, v backend.Blob) error { return call(func() error { return fn(i, v) }) })
	})
}

func (b *timedBackend) EachWrite(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(backend.Write) error) error {
	return b.timed("Writes", func(call func(func() error) error) error {
		return b.inner.EachWrite(ctx, ref, channel, ids, func(w backend.Write) error { return call(func() error { return fn(w) }) })
	})
}

func (b *timedBackend) Newest(ctx context.Context, ref *backend.Ref, limit int, fn func(backend.Row) error) error {
	return b.timed("Newest", func(call func(func() error) error) error {
		return b.inner.Newest(ctx, ref, limit, func(r backend.Row) error { return call(func() error { return fn(r) }) })
	})
}

// Ping is the store probe the health service runs (and server.New, once,
// at start), so its outcome is also historyd_store_up. A probe cancelled
// by its caller, at shutdown, leaves the gauge as it was.
func (b *timedBackend) Ping(ctx context.Context) (err error) {
	start := time.Now()
	defer func() {
		b.m.observe("Ping", start, err)
		switch {
		case err == nil:
			b.m.storeUp.Set(1)
		case !errors.Is(err, context.Canceled):
			b.m.storeUp.Set(0)
		}
	}()
	return b.inner.Ping(ctx)
}

func (b *timedBackend) Close() { b.inner.Close() }

// SharesBlobs implements backend.BlobSharer, as the wrapped backend does.
func (b *timedBackend) SharesBlobs() bool { return backend.SharesBlobs(b.inner) }

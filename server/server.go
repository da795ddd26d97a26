// Package server builds historyd's gRPC server, and is the only place it is
// built: the store over a checkpoint backend, the ThreadHistory handlers,
// the splicing response codec (service/wire) and the interceptor chain
// (assembled in interceptors.go), grpc.health.v1 fed by probes of the
// store, server reflection, and Prometheus metrics. historyd serve runs it, and every test that serves
// ThreadHistory runs it too (see server/servertest), so what the tests
// exercise is what is deployed.
package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/historyd/historyd/buildinfo"
	"github.com/historyd/historyd/metrics"
	"github.com/historyd/historyd/pagetoken"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// The channels a Server reads when Config.Store names none: LangGraph's
// messages channel, whose questions mark the turns, and the channel of
// historyd's StateEntry convention, session state key → entry.
const (
	DefaultMessagesChannel = store.DefaultMessagesChannel
	DefaultStateChannel    = store.DefaultStateChannel
)

// startupProbe bounds New's first probe of the store, so that a store that
// accepts connections and never answers delays the start by this much only.
const startupProbe = 5 * time.Second

// Config configures a Server. Its zero value, with Store.Backend set, is a
// plaintext server with no authentication, no limits and no metrics: what a
// test needs. historyd serve fills in the production settings from its
// flags, whose defaults are the Default constants of this package, the
// store's and the service's, and serves it with Run.
type Config struct {
	// Store configures the store the service reads. Its Backend is
	// required; the caller opens it (OpenBackend does for a DSN) and closes
	// it once the server has stopped. MessagesChannel and StateChannels
	// default to DefaultMessagesChannel and [DefaultStateChannel]; every other
	// field's zero value is store.Config's default (decoding limits,
	// caches); its Logger and ThreadLabel default to the service's logger
	// and the hash request logs name threads by. With Metrics on, the store
	// reads through a wrapper of Backend that times each query.
	Store store.Config
	// Service configures everything between the network and the handlers
	// (see service.Frontend): TLS, authentication and tenant isolation,
	// rate, size and concurrency limits, the deadline cap, keepalive,
	// request logging and reflection. A zero field leaves its concern off,
	// or at gRPC's own default; Logger defaults to slog.Default() and is
	// also the log of the handlers and the health probe. Leave Metrics nil:
	// New sets it when Config.Metrics is on.
	Service service.Frontend
	// Metrics turns on Prometheus metrics (package metrics): every call,
	// every store query, whether the store answered its last probe, the
	// caches' statistics and historyd_build_info, served by
	// MetricsHandler. Default off.
	Metrics bool
	// MetricsAllMethods exports per-method gRPC metrics for the services
	// every caller may use (grpc.health.v1, server reflection) as well.
	// Default off: only ThreadHistory's methods, every one of them, since
	// probes would otherwise fill /metrics with series nobody reads.
	MetricsAllMethods bool
	// Build is what historyd_build_info reports; zero: the binary's own
	// build information (buildinfo.Read), without link-time values.
	Build buildinfo.Info
	// TracerProvider turns on OpenTelemetry tracing (tracing.FromEnv builds
	// one from the OTEL_* variables): a span for every call (see
	// service.Frontend.TracerProvider) and for the store's index and state
	// reads (store.SpanIndex, store.SpanReadState). The backend's statements
	// are traced by the backend: open it with WithTracing and the same
	// provider. Nil, the default: nothing is installed. The caller shuts the
	// provider down once the server has stopped, so that the last calls'
	// spans are sent. Leave Store.TracerProvider and Service.TracerProvider
	// nil: New sets them.
	TracerProvider trace.TracerProvider
	// HealthInterval is how often the health service probes the store
	// while the server serves. Default 2s.
	HealthInterval time.Duration
	// Watch configures WatchTurns: how often a watched thread is read and
	// how many watches may be open (see service.WatchConfig). Shutdown
	// and Stop end every watch first.
	Watch service.WatchConfig
	// PageTokens seals and opens Threads page tokens. Replicas behind one
	// Service must share them (pagetoken.LoadFile of one key file), or a
	// listing's next page fails with INVALID_ARGUMENT whenever it reaches
	// another replica. Default: pagetoken.PerProcess(), keys this process
	// alone holds.
	PageTokens *pagetoken.Keys
	// GRPCOptions are grpc.ServerOptions applied after historyd's own, for
	// tests and embedders that need what the fields above do not offer,
	// such as an interceptor that injects faults. A scalar setting here
	// overrides historyd's. An interceptor given with
	// grpc.ChainUnaryInterceptor or grpc.ChainStreamInterceptor runs
	// innermost, right before the handler; one given with
	// grpc.UnaryInterceptor or grpc.StreamInterceptor runs outermost,
	// before metrics. Either sees responses' state entries undecoded (see
	// service.Decoded).
	GRPCOptions []grpc.ServerOption
}

// Channels returns the channels the Server's store reads, the messages
// channel first, with the defaults filled in, and last the functional
// API's saved value (store.SavedValueChannel), which state channels are
// read out of. Pass them to OpenBackend so that PostgreSQL lists the
// versions of exactly these.
func (c Config) Channels() []string {
	c.fillChannels()
	return append(append([]string{c.Store.MessagesChannel}, c.Store.StateChannels...), store.SavedValueChannel)
}

func (c *Config) fillChannels() {
	if c.Store.MessagesChannel == "" {
		c.Store.MessagesChannel = DefaultMessagesChannel
	}
	if len(c.Store.StateChannels) == 0 {
		c.Store.StateChannels = []string{DefaultStateChannel}
	}
}

// Server is historyd's gRPC server: ThreadHistory, grpc.health.v1 and
// server reflection over one store.
type Server struct {
	gs   *grpc.Server
	svc  *service.Handlers
	st   *store.Store
	m    *metrics.Metrics
	log  *slog.Logger
	http http.Handler // HTTPHandler

	// mu guards the health probe's start and stop: it runs from the
	// first Serve until Shutdown or Stop.
	mu        sync.Mutex
	stopped   bool
	probing   chan struct{} // closed when the probe loop has returned
	probeCtx  context.Context
	stopProbe context.CancelFunc
}

// New builds the server over cfg.Store.Backend. It probes the store once,
// for at most 5 seconds: a store that answers is reported SERVING from the
// start; one that holds no checkpoint tables historyd can read, or refuses
// it for good (no such database, a login refused), fails New with an error
// wrapping backend.ErrNotCheckpointStore, since serving it could never work;
// one that does not answer is logged and reported NOT_SERVING until a
// later probe finds it answering, since a database may well come up after
// historyd. A store that answers has its newest checkpoints sampled, and a
// configured channel none of them holds is logged as a warning naming the
// channels they do hold; so is the first thread listed whose checkpoints
// hold none. Nothing is served until Serve.
func New(ctx context.Context, cfg Config) (*Server, error) {
	switch {
	case cfg.Store.Backend == nil:
		return nil, errors.New("server: Config.Store.Backend is required (OpenBackend opens one from a DSN)")
	case cfg.Service.Metrics != nil:
		return nil, errors.New("server: Config.Service.Metrics is set by New; turn metrics on with Config.Metrics")
	case cfg.Store.TracerProvider != nil || cfg.Service.TracerProvider != nil:
		return nil, errors.New("server: Config.Store.TracerProvider and Config.Service.TracerProvider are set by New; turn tracing on with Config.TracerProvider")
	case cfg.HealthInterval < 0:
		return nil, fmt.Errorf("server: Config.HealthInterval %s: must not be negative (0 is the default, 2s)", cfg.HealthInterval)
	}
	cfg.fillChannels()
	if err := cfg.Store.Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	log := service.RedactThreadIDs(cfg.Service.Logger)
	cfg.Service.Logger = log
	if len(cfg.Service.ThreadIDSalt) == 0 {
		// One random key for the process, so that the store's log names a
		// thread as the request log does.
		cfg.Service.ThreadIDSalt = make([]byte, 32)
		_, _ = rand.Read(cfg.Service.ThreadIDSalt) // never fails; see crypto/rand.Read
	}
	if cfg.Store.Logger == nil {
		cfg.Store.Logger = log
	}
	if cfg.Store.ThreadLabel == nil {
		cfg.Store.ThreadLabel = service.ThreadLabel(cfg.Service)
	}

	s := &Server{log: log}
	if cfg.Metrics {
		s.m = metrics.New(cfg.Build)
		cfg.Store.Backend = s.m.Backend(cfg.Store.Backend)
		cfg.Service.Metrics = s.m.GRPC
		cfg.Service.MetricsAllMethods = cfg.MetricsAllMethods
	}
	cfg.Store.TracerProvider, cfg.Service.TracerProvider = cfg.TracerProvider, cfg.TracerProvider
	channels := newChannelCheck(log, cfg.Store.MessagesChannel, cfg.Store.StateChannels)
	cfg.Store.Backend = newChannelWatch(cfg.Store.Backend, channels)
	s.st = store.New(cfg.Store)
	if s.m != nil {
		s.m.WatchStore(s.st)
	}
	watches := service.NewWatches(cfg.Watch)
	s.svc = service.New(service.Options{Store: s.st, Logger: log, HealthInterval: cfg.HealthInterval, Watches: watches, PageTokens: cfg.PageTokens})

	pctx, cancel := context.WithTimeout(ctx, startupProbe)
	err := s.st.Ping(pctx)
	cancel()
	switch {
	case errors.Is(err, backend.ErrNotCheckpointStore):
		return nil, err
	case err != nil:
		log.Warn("store unreachable at start; serving NOT_SERVING until it answers", "err", err)
	default:
		s.svc.SetServing(true)
		channels.checkAtStart(ctx, cfg.Store.Backend)
	}

	// The interceptor chain and codec, then whatever the caller adds.
	s.gs = grpc.NewServer(append(grpcOptions(cfg.Service, s.svc), cfg.GRPCOptions...)...)
	s.svc.Register(s.gs)
	s.http = s.newHTTPHandler()
	if s.m != nil {
		// Every method's series exist from the start, counted or not, so
		// that a rate over them reads 0 rather than nothing.
		s.m.GRPC.InitializeMetrics(metered{s.gs, cfg.MetricsAllMethods})
	}
	s.probeCtx, s.stopProbe = context.WithCancel(context.Background())
	return s, nil
}

// Serve accepts connections on lis until Shutdown or Stop, and returns
// nil then; it may be called for several listeners at once. The first
// call starts probing the store every HealthInterval, reporting SERVING
// or NOT_SERVING through grpc.health.v1 and Serving.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if !s.stopped && s.probing == nil {
		s.probing = make(chan struct{})
		go func() {
			defer close(s.probing)
			s.svc.Watch(s.probeCtx)
		}()
	}
	s.mu.Unlock()
	return s.gs.Serve(lis)
}

// Shutdown stops the server gracefully, as historyd serve does on SIGTERM:
// every service is marked NOT_SERVING for good, so that balancers stop
// sending calls; no new calls are accepted; calls in flight may finish for
// up to grace, and are then cancelled. It returns once every Serve has
// returned and every call has ended, or at most StopWait after grace when
// a cancelled call does not end (a read stuck in the driver): the process
// can then exit whatever the store holds.
func (s *Server) Shutdown(grace time.Duration) {
	s.log.Info("shutting down", "grace", grace)
	s.svc.Shutdown()
	s.stopProbing()
	done := make(chan struct{})
	go func() { s.gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		s.log.Warn("grace period over; cancelling in-flight RPCs")
		s.gs.Stop()
		select {
		case <-done:
		case <-time.After(StopWait):
			s.log.Error("calls still running after being cancelled; stopping without waiting for them", "waited", StopWait)
		}
	}
}

// StopWait is how long Shutdown waits, once the grace period is over and
// the calls still running are cancelled, for them to end.
const StopWait = time.Second

// Stop stops the server at once, cancelling calls in flight.
func (s *Server) Stop() {
	s.svc.Shutdown()
	s.stopProbing()
	s.gs.Stop()
}

func (s *Server) stopProbing() {
	s.mu.Lock()
	s.stopped = true
	s.stopProbe()
	probing := s.probing
	s.mu.Unlock()
	if probing != nil {
		<-probing
	}
}

// Serving reports what grpc.health.v1 reports for the server as a whole:
// true while the store answers, false while it does not and for good
// after Shutdown or Stop.
func (s *Server) Serving() bool { return s.svc.Serving() }

// MetricsHandler serves /metrics (Prometheus), /healthz and /readyz, the
// last answering as Serving; nil when Config.Metrics is off. Serve it on a
// listener of its own, apart from gRPC: it needs no credentials, so it
// belongs on a network agent hosts do not use.
func (s *Server) MetricsHandler() http.Handler {
	if s.m == nil {
		return nil
	}
	return s.m.Handler(s.svc.Serving)
}

// Store returns the store the service reads.
func (s *Server) Store() *store.Store { return s.st }

// metered lists the services whose calls the metrics interceptors count:
// every registered one but the open services (health, reflection), unless
// all are asked for. It is what InitializeMetrics creates series for, so
// that each ThreadHistory method has its series, whatever methods it has.
type metered struct {
	gs  *grpc.Server
	all bool
}

func (m metered) GetServiceInfo() map[string]grpc.ServiceInfo {
	infos := m.gs.GetServiceInfo()
	if !m.all {
		maps.DeleteFunc(infos, func(name string, _ grpc.ServiceInfo) bool { return service.OpenService(name) })
	}
	return infos
}

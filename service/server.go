// Package service implements the historyd.v1.ThreadHistory gRPC service: it
// validates each request, asks the store for the thread's turns and only the
// state that was asked for, and maps the result to the wire and every error
// to a gRPC status.
package service

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/pagetoken"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// Config configures a Server.
type Config struct {
	// Store answers the queries. Required.
	Store *store.Store
	// Logger receives errors that map to Internal. Default slog.Default().
	Logger *slog.Logger
	// HealthInterval is how often Watch probes the store. Default 2s.
	HealthInterval time.Duration
	// Watches holds the WatchTurns limits and shutdown, shared with the
	// server that tenant isolation answers denied calls with (pass the
	// same to Options.Watches). Default: NewWatches with the defaults.
	Watches *Watches
	// PageTokens seals and opens Threads page tokens. Replicas serving one
	// listing must share them (pagetoken.LoadFile with one key file).
	// Default: pagetoken.PerProcess(), whose tokens this process alone
	// opens.
	PageTokens *pagetoken.Keys
}

// Server is the ThreadHistory service, plus the standard health service
// that reports whether the store can be reached.
type Server struct {
	historydv1.UnimplementedThreadHistoryServer

	store    *store.Store
	log      *slog.Logger
	health   *health.Server
	interval time.Duration
	watches  *Watches
	pollers  *pollers

	pageTokens *pagetoken.Keys
}

// New returns a Server over cfg.Store.
func New(cfg Config) *Server {
	s := &Server{store: cfg.Store, log: cfg.Logger, health: health.NewServer(), interval: cfg.HealthInterval, watches: cfg.Watches, pageTokens: cfg.PageTokens}
	if s.pageTokens == nil {
		s.pageTokens = pagetoken.PerProcess()
	}
	if s.watches == nil {
		s.watches = NewWatches(WatchConfig{})
	}
	s.pollers = &pollers{st: s.store, w: s.watches, by: map[backend.Ref]*poller{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.interval <= 0 {
		s.interval = 2 * time.Second
	}
	// grpc's health server starts out SERVING; until the first probe has
	// answered, nothing says the store is reachable.
	s.SetServing(false)
	return s
}

// Register registers ThreadHistory, grpc.health.v1 and server reflection on
// gs, their unary methods decoding requests as decode.go says.
func (s *Server) Register(gs *grpc.Server) {
	gs.RegisterService(decodingService(&historydv1.ThreadHistory_ServiceDesc), s)
	gs.RegisterService(decodingService(&healthpb.Health_ServiceDesc), s.health)
	registerReflection(gs)
}

// Watch probes the store until ctx ends, reporting SERVING while it answers
// and NOT_SERVING while it does not, for both the overall health ("") and
// historyd.v1.ThreadHistory. It probes once before returning from its first
// iteration, so callers may start it in a goroutine right before serving.
func (s *Server) Watch(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	last := healthpb.HealthCheckResponse_UNKNOWN
	var downSince time.Time
	for {
		status := healthpb.HealthCheckResponse_SERVING
		pctx, cancel := context.WithTimeout(ctx, s.interval)
		err := s.store.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			status = healthpb.HealthCheckResponse_NOT_SERVING
		}
		if status != last {
			// Once per change: while the store stays down, calls' failures
			// are summed up in the request log (see failureSummary).
			if err != nil {
				downSince = time.Now()
				s.log.Warn("store unreachable", "err", err)
			} else if last != healthpb.HealthCheckResponse_UNKNOWN {
				s.log.Info("store reachable again", "down_for", time.Since(downSince).Round(time.Millisecond).String())
			}
			s.SetServing(status == healthpb.HealthCheckResponse_SERVING)
			last = status
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SetServing sets the health status of the server and of the
// ThreadHistory service.
func (s *Server) SetServing(ok bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(historydv1.ThreadHistory_ServiceDesc.ServiceName, st)
}

// Shutdown marks every service NOT_SERVING for good, so balancers stop
// sending requests while in-flight ones finish, and ends every WatchTurns
// stream (see Watches.Close).
func (s *Server) Shutdown() {
	s.health.Shutdown()
	s.watches.Close()
}

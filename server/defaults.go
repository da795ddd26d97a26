package server

import "time"

// The defaults of historyd serve: what Run listens on and how long it
// lets calls drain, and the limits its flags put in Config.Service
// (service.Frontend, whose zero fields leave a limit off or at gRPC's own
// default rather than at these values). The defaults of the store's caches
// and of WatchTurns are the store's and the service's own
// (store.DefaultCacheBytes, service.DefaultWatchPollInterval,
// service.DefaultMaxWatchesPerTenant, service.DefaultMaxWatches,
// service.DefaultStreamMaxAge).
const (
	// DefaultListen is the address RunConfig.Listen defaults to, and the
	// one historyd's operator commands dial by default.
	DefaultListen = "localhost:50051"
	// DefaultShutdownGrace is how long in-flight calls may run after the
	// context Run serves under is done (RunConfig.ShutdownGrace).
	DefaultShutdownGrace = 10 * time.Second

	// DefaultLogFormat and DefaultLogLevel are NewLogger's format and
	// level in historyd serve.
	DefaultLogFormat = "text"
	DefaultLogLevel  = "info"
	// DefaultLogThreadIDs is how historyd serve's request logs show thread
	// ids, in the spelling service.ParseThreadIDLogging reads:
	// service.ThreadIDsHashed.
	DefaultLogThreadIDs = "hash"
	// DefaultLogSuccessEvery is historyd serve's
	// service.Frontend.LogSuccessEvery: one successful call in this many is
	// logged at info.
	DefaultLogSuccessEvery = 100

	// DefaultMaxRequestBytes is historyd serve's
	// service.Frontend.MaxRequestBytes, 1 MiB.
	DefaultMaxRequestBytes = 1 << 20
	// DefaultMaxResponseBytes is historyd serve's
	// service.Frontend.MaxResponseBytes, 64 MiB.
	DefaultMaxResponseBytes = 64 << 20
	// DefaultMaxCallDuration is historyd serve's
	// service.Frontend.MaxCallDuration.
	DefaultMaxCallDuration = 30 * time.Second
	// DefaultMaxConcurrentStreams is historyd serve's
	// service.Frontend.MaxConcurrentStreams.
	DefaultMaxConcurrentStreams = 100
	// DefaultKeepaliveMinTime is historyd serve's least time between a
	// client's keepalive pings (service.Frontend.KeepaliveEnforcement).
	DefaultKeepaliveMinTime = 10 * time.Second
	// DefaultKeepaliveTime and DefaultKeepaliveTimeout are historyd serve's
	// server pings of idle connections (service.Frontend.Keepalive): after
	// this long idle, and waiting this long for the answer.
	DefaultKeepaliveTime    = 2 * time.Minute
	DefaultKeepaliveTimeout = 20 * time.Second
)

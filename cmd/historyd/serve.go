package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"

	"google.golang.org/grpc/keepalive"

	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/postgres"
)

const serveHelp = `Usage: historyd serve [flags]

Serve historyd.v1.ThreadHistory, grpc.health.v1 and server reflection.

Security is off by default, for local use: plaintext, no credentials, every
caller reads every thread. For a deployment shared by several agent hosts set
--tls-cert/--tls-key, and --auth-tokens to give each host a tenant that reads
only its own threads (or --tls-client-ca to identify hosts by certificate).
Health and reflection stay open to every caller. SIGHUP rereads the token
file, the TLS files and the page token keys; TLS files are also reread when
they change. See docs/security.md.

Sizes take a KiB, MiB or GiB suffix or are plain bytes; durations are like
30s or 2m; 0 turns a limit off.

Flags:
`

var serveCommand = command{
	name:    "serve",
	summary: "serve historyd.v1.ThreadHistory over gRPC",
	flags: func(fs *flag.FlagSet) func(context.Context) error {
		c := bindServeFlags(fs)
		fs.Usage = func() {
			fmt.Fprint(fs.Output(), serveHelp)
			fs.PrintDefaults()
		}
		return c.run
	},
}

// Test hooks: tests serve from memory on port 0, need the addresses, and
// read the log.
var (
	newBackend  = server.OpenBackend
	servingHook func(server.Addrs)
	logOutput   io.Writer = os.Stderr
)

// run is historyd serve: the flags, refused when they contradict each
// other or are out of range, become the configuration server.Run serves.
func (c *serveFlags) run(ctx context.Context) error {
	if err := c.env.err(); err != nil {
		return err
	}
	log, err := server.NewLogger(logOutput, *c.logFormat, *c.logLevel)
	if err != nil {
		return err
	}
	log = service.RedactThreadIDs(log)
	rc, err := c.config(log)
	if err != nil {
		return err
	}
	c.warnIgnored(log)
	rc.OpenBackend = newBackend
	rc.Serving = servingHook
	return server.Run(ctx, rc)
}

// config turns the flags into server.Run's configuration, mapping a
// flag's 0 onto the configuration's off where they differ (offAtZero).
func (c *serveFlags) config(log *slog.Logger) (server.RunConfig, error) {
	opts, err := c.options(log)
	if err != nil {
		return server.RunConfig{}, err
	}
	channels, reducers, err := c.channels()
	if err != nil {
		return server.RunConfig{}, err
	}
	if *c.watchMaxAge < 0 {
		return server.RunConfig{}, fmt.Errorf("--watch-max-age %s: must not be negative (0 turns the maximum off)", *c.watchMaxAge)
	}
	opts.StreamMaxAge = *c.watchMaxAge
	cfg := server.Config{
		Store: store.Config{
			MessagesChannel: *c.messages, StateChannels: channels, Reducers: reducers,
			CacheBytes:      offAtZero(*c.cacheBytes),
			CacheThreads:    c.env.offAtZeroIfGiven("cache-threads", *c.cacheThreads),
			CacheStateBytes: c.env.offAtZeroIfGiven("cache-state-bytes", int(*c.cacheState)),
		},
		Service: opts,
		Metrics: true, MetricsAllMethods: *c.metricsAll, Build: currentBuild(),
		Watch: service.WatchConfig{PollInterval: *c.watchInterval, MaxPerTenant: offAtZero(*c.watchPerTenant), MaxTotal: offAtZero(*c.watchMax)},
	}
	if err := cfg.Store.Validate(); err != nil {
		return server.RunConfig{}, fmt.Errorf("--state-channels/--channel-reducers: %w", err)
	}
	pooler, err := postgres.ParsePooler(*c.pooler)
	if err != nil {
		return server.RunConfig{}, fmt.Errorf("--pooler %w", err)
	}
	return server.RunConfig{
		Config: cfg, Listen: *c.listen, MetricsListen: *c.metricsListen, HTTPListen: *c.httpListen,
		DSN: *c.dsn, Schema: *c.schema, Pooler: pooler,
		AuthTokens: *c.authTokens, TLSCert: *c.tlsCert, TLSKey: *c.tlsKey, TLSClientCA: *c.tlsClientCA,
		PageTokenKeyFile: *c.pageTokenKeys,
		ShutdownGrace:    offAtZero(*c.grace),
	}, nil
}

// channels reads --state-channels (or the older --state-channel) and
// --channel-reducers.
func (c *serveFlags) channels() ([]string, map[string]string, error) {
	list := *c.states
	if *c.state != "" {
		if c.env.fs.Lookup("state-channels").Value.String() != server.DefaultStateChannel && list != *c.state {
			return nil, nil, fmt.Errorf("--state-channel %q and --state-channels %q: give one of them", *c.state, list)
		}
		list = *c.state
	}
	var channels []string
	for _, ch := range strings.Split(list, ",") {
		ch = strings.TrimSpace(ch)
		if ch == "" {
			return nil, nil, fmt.Errorf("--state-channels %q: want channel names separated by commas, none empty", list)
		}
		channels = append(channels, ch)
	}
	reducers := map[string]string{}
	if *c.reducers != "" {
		for _, pair := range strings.Split(*c.reducers, ",") {
			ch, name, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || ch == "" || name == "" {
				return nil, nil, fmt.Errorf("--channel-reducers %q: want channel=reducer pairs separated by commas, e.g. files=merge", *c.reducers)
			}
			if ch != *c.messages && !slices.Contains(channels, ch) {
				return nil, nil, fmt.Errorf("--channel-reducers %q: channel %q is neither --messages-channel nor one of --state-channels, so its reducer would never be used", *c.reducers, ch)
			}
			reducers[ch] = name
		}
	}
	return channels, reducers, nil
}

// options turns the flags into service.Frontend, refusing contradictory or
// out-of-range values rather than guessing.
func (c *serveFlags) options(log *slog.Logger) (service.Frontend, error) {
	o := service.Frontend{Logger: log, DisableReflection: !*c.reflection}
	var err error
	if o.ThreadIDs, err = service.ParseThreadIDLogging(*c.logThreadIDs); err != nil {
		return o, fmt.Errorf("--log-thread-ids %w", err)
	}
	if err := c.checkProcess(); err != nil {
		return o, err
	}
	if err := c.checkLimits(); err != nil {
		return o, err
	}
	o.ThreadIDSalt = []byte(*c.logThreadSalt)
	o.LogSuccessEvery = *c.logSample
	o.MaxRequestBytes = int(*c.maxRequest)
	o.MaxResponseBytes = int(*c.maxResponse)
	o.RateLimit = *c.rateLimit
	o.RateBurst = *c.rateBurst
	o.MaxCallDuration = *c.maxDeadline
	o.MaxConcurrentStreams = uint32(*c.maxStreams)
	if *c.kaMinTime > 0 {
		// Idle connections may ping too: hosts keep a connection open
		// between turns, and a NAT would otherwise drop it silently.
		o.KeepaliveEnforcement = &keepalive.EnforcementPolicy{MinTime: *c.kaMinTime, PermitWithoutStream: true}
	}
	if *c.kaTime > 0 || *c.kaTimeout > 0 {
		o.Keepalive = &keepalive.ServerParameters{Time: *c.kaTime, Timeout: *c.kaTimeout}
	}
	return o, nil
}

// checkProcess refuses out-of-range logging, shutdown and cache settings,
// and TLS files that do not go together.
func (c *serveFlags) checkProcess() error {
	switch {
	case *c.logSample < 1:
		return fmt.Errorf("--log-call-sample %d: want 1 (every call) or more", *c.logSample)
	case *c.grace < 0:
		return fmt.Errorf("--shutdown-grace %s: must not be negative", *c.grace)
	case *c.cacheThreads < 0:
		return fmt.Errorf("--cache-threads %d: must not be negative (0 turns the cache off)", *c.cacheThreads)
	case *c.cacheState < 0 || *c.cacheState > math.MaxInt32:
		return fmt.Errorf("--cache-state-bytes %d: want 0 (off) to 2GiB", *c.cacheState)
	case *c.cacheBytes > math.MaxInt32*int64(1<<10):
		return fmt.Errorf("--cache-bytes %d: want 0 (off) to 2TiB", *c.cacheBytes)
	case (*c.tlsCert == "") != (*c.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case *c.tlsClientCA != "" && *c.tlsCert == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are only sent over TLS")
	}
	return nil
}

// checkLimits refuses out-of-range or contradictory limits on calls and
// connections.
func (c *serveFlags) checkLimits() error {
	switch {
	case *c.maxRequest < 0 || *c.maxRequest > math.MaxInt32:
		return fmt.Errorf("--max-request-bytes %d: want 0 to 2GiB", *c.maxRequest)
	case *c.maxResponse < 0 || *c.maxResponse > math.MaxInt32:
		return fmt.Errorf("--max-response-bytes %d: want 0 to 2GiB", *c.maxResponse)
	case *c.rateLimit < 0 || math.IsNaN(*c.rateLimit) || math.IsInf(*c.rateLimit, 0):
		return fmt.Errorf("--rate-limit %v: want a number of calls per second, 0 for none", *c.rateLimit)
	case *c.rateBurst < 0:
		return fmt.Errorf("--rate-burst %d: must not be negative", *c.rateBurst)
	case *c.rateBurst > 0 && *c.rateLimit == 0:
		return fmt.Errorf("--rate-burst %d without --rate-limit: there is no bucket to size; set --rate-limit too, or drop --rate-burst", *c.rateBurst)
	case *c.maxDeadline < 0:
		return fmt.Errorf("--max-call-duration %s: must not be negative", *c.maxDeadline)
	case *c.maxStreams < 0 || int64(*c.maxStreams) > math.MaxUint32:
		return fmt.Errorf("--max-concurrent-streams %d: out of range", *c.maxStreams)
	case *c.kaMinTime < 0 || *c.kaTime < 0 || *c.kaTimeout < 0:
		return errors.New("--keepalive-min-time, --keepalive-time and --keepalive-timeout must not be negative")
	}
	return nil
}

// Settings that parse but would be ignored are logged as warnings at
// start. (Contradictions between two flags' values, such as --tls-cert
// without --tls-key or --rate-burst without --rate-limit, are refused with
// the range checks in options; a token file that would lock every caller
// out stops server.Run.)

// warnIgnored warns about settings that take no effect in the
// configuration given.
func (c *serveFlags) warnIgnored(log *slog.Logger) {
	for _, name := range []string{"cache-threads", "cache-state-bytes"} {
		if c.env.given(name) {
			log.Warn("--"+name+" is deprecated: --cache-bytes bounds the memory the caches hold together; it still bounds its cache too", "cache_bytes", (*byteSize)(c.cacheBytes).String())
		}
	}
	if *c.logThreadSalt != "" && *c.logThreadIDs == "omit" {
		log.Warn("--log-thread-salt is ignored with --log-thread-ids omit: no thread id is hashed")
	}
	if *c.metricsAll && *c.metricsListen == "" {
		log.Warn("--metrics-all-methods is ignored without --metrics-listen: nothing serves the metrics")
	}
	// For keepalive, 0 is not "off" but gRPC's own default.
	if *c.kaMinTime == 0 {
		log.Warn("--keepalive-min-time 0 does not turn enforcement off: gRPC's default applies, which disconnects clients pinging more often than every 5m or pinging idle connections")
	}
	if *c.kaTime == 0 {
		log.Warn("--keepalive-time 0 does not turn server pings off: gRPC's default applies, a ping after 2h idle")
	}
	if *c.kaTimeout == 0 {
		log.Warn("--keepalive-timeout 0 is gRPC's default, 20s")
	}
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/keepalive"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/pagetoken"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/postgres"
	"github.com/historyd/historyd/tracing"
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
		c := serveConfig{env: &envFlags{fs: fs}}
		e := c.env
		c.listen = stringFlag(fs, "listen", "HISTORYD_LISTEN", "localhost:50051", "address to serve gRPC on")
		c.dsn = stringFlag(fs, "dsn", "HISTORYD_DSN", "", "checkpoint store: postgres://…, postgresql://…, sqlite:///path/file.db or a .db file path (required)")
		c.schema = stringFlag(fs, "schema", "HISTORYD_SCHEMA", "", "PostgreSQL schema holding the checkpoint tables (default: the search_path)")
		c.pooler = stringFlag(fs, "pooler", "HISTORYD_POOLER", "none", "connection pooler between historyd and PostgreSQL: none, session, or transaction (PgBouncer's pool_mode = transaction: no session settings, no named prepared statements; the role must be SELECT-only)")
		c.messages = stringFlag(fs, "messages-channel", "HISTORYD_MESSAGES_CHANNEL", server.DefaultMessagesChannel, "channel holding the conversation's messages")
		c.states = stringFlag(fs, "state-channels", "HISTORYD_STATE_CHANNELS", server.DefaultStateChannel, "comma-separated state channels a request may read (its channel field), the first read when it names none; e.g. tool_state,files,todos for deepagents")
		c.state = stringFlag(fs, "state-channel", "HISTORYD_STATE_CHANNEL", "", "the one state channel served: the older spelling of --state-channels with one channel")
		c.reducers = stringFlag(fs, "channel-reducers", "HISTORYD_CHANNEL_REDUCERS", "", "reducer of each channel rebuilt from writes (a DeltaChannel's), as channel=reducer pairs separated by commas; reducers: messages, merge (key by key, null deletes: deepagents' files), tool_state (mcp-toolsets-runtime), last (default: messages for the messages channel, tool_state for tool_state, merge for any other)")
		c.logFormat = stringFlag(fs, "log-format", "HISTORYD_LOG_FORMAT", "text", "log format: text or json")
		c.logLevel = stringFlag(fs, "log-level", "HISTORYD_LOG_LEVEL", "info", "least severe records logged: debug, info, warn or error; successful health checks and reflection calls are logged at debug, other calls at info or above (warn: only failures other than INVALID_ARGUMENT, NOT_FOUND, UNAUTHENTICATED and CANCELLED)")
		c.logThreadIDs = stringFlag(fs, "log-thread-ids", "HISTORYD_LOG_THREAD_IDS", "hash", "how logs show thread ids: hash (first 12 hex digits of HMAC-SHA256 with --log-thread-salt) or omit; never as sent")
		c.logSample = e.int("log-call-sample", "HISTORYD_LOG_CALL_SAMPLE", 100, "log one successful ThreadHistory call in this many at info, the others at debug (1: every call); failed calls are always logged")
		c.logThreadSalt = stringFlag(fs, "log-thread-salt", "HISTORYD_LOG_THREAD_SALT", "", "key of the thread id hash in logs, to find a thread's calls across restarts (default: random per process; prefer the environment variable)")
		c.grace = e.duration("shutdown-grace", "HISTORYD_SHUTDOWN_GRACE", 10*time.Second, "how long in-flight RPCs may run after SIGINT/SIGTERM")

		c.authTokens = stringFlag(fs, "auth-tokens", "HISTORYD_AUTH_TOKENS", "", "token file (JSON) mapping SHA-256 hashes of bearer tokens, and client certificate identities, to tenants and the thread-id prefixes each may read; reread on SIGHUP (default: no authentication)")
		c.tlsCert = stringFlag(fs, "tls-cert", "HISTORYD_TLS_CERT", "", "PEM certificate (chain) to serve TLS with; reread when it changes (default: plaintext)")
		c.tlsKey = stringFlag(fs, "tls-key", "HISTORYD_TLS_KEY", "", "PEM private key of --tls-cert")
		c.pageTokenKeys = stringFlag(fs, "page-token-key-file", "HISTORYD_PAGE_TOKEN_KEY_FILE", "", "file of the keys Threads page tokens are authenticated with (HMAC-SHA256): one per line, at least 32 bytes, the first signing, every one accepted; reread on SIGHUP. Replicas behind one Service must share it, or a listing's next page fails with INVALID_ARGUMENT on another replica (default: a random key per process)")
		c.tlsClientCA = stringFlag(fs, "tls-client-ca", "HISTORYD_TLS_CLIENT_CA", "", "PEM CA bundle; when set every client must present a certificate it issued (health checks included), and --auth-tokens can map certificates to tenants")
		c.reflection = e.bool("reflection", "HISTORYD_REFLECTION", true, "serve gRPC server reflection (open to every caller: it describes the API, no data)")

		c.maxRequest = e.size("max-request-bytes", "HISTORYD_MAX_REQUEST_BYTES", 1<<20, "largest `size` of a request message accepted")
		c.maxResponse = e.size("max-response-bytes", "HISTORYD_MAX_RESPONSE_BYTES", 64<<20, "largest `size` of a response message sent; a larger Snapshots fails with RESOURCE_EXHAUSTED suggesting keys or StreamSnapshots")
		c.rateLimit = e.float("rate-limit", "HISTORYD_RATE_LIMIT", 0, "calls per second each tenant may make to ThreadHistory, as a token bucket; without --auth-tokens all callers share one bucket (default: unlimited)")
		c.rateBurst = e.int("rate-burst", "HISTORYD_RATE_BURST", 0, "calls a tenant may make at once after being idle (default: --rate-limit rounded up)")
		c.maxDeadline = e.duration("max-call-duration", "HISTORYD_MAX_CALL_DURATION", 30*time.Second, "longest a ThreadHistory call may run; a caller's later deadline, or none, is replaced by it")
		c.maxStreams = e.int("max-concurrent-streams", "HISTORYD_MAX_CONCURRENT_STREAMS", 100, "calls in flight per client connection; more wait")
		c.kaMinTime = e.duration("keepalive-min-time", "HISTORYD_KEEPALIVE_MIN_TIME", 10*time.Second, "least time between a client's keepalive pings; clients pinging more often are disconnected")
		c.kaTime = e.duration("keepalive-time", "HISTORYD_KEEPALIVE_TIME", 2*time.Minute, "how long a connection may be idle before the server pings it")
		c.kaTimeout = e.duration("keepalive-timeout", "HISTORYD_KEEPALIVE_TIMEOUT", 20*time.Second, "how long the server waits for a ping's answer before closing the connection")

		c.cacheBytes = e.size("cache-bytes", "HISTORYD_CACHE_BYTES", store.DefaultCacheBytes(), "memory the caches hold together: threads' turn indexes, refreshed incrementally, and encoded state versions, so that a warm Snapshot decodes nothing; each charged about what it holds, the least recently used dropped first. A thread whose index would take more than a quarter of it, or a state stored larger than a quarter, is read for each request and not kept (default: a quarter of GOMEMLIMIT when it is set, else 256MiB; 0: no caches)")
		c.cacheThreads = e.int("cache-threads", "HISTORYD_CACHE_THREADS", 0, "deprecated, --cache-bytes bounds the turn-index cache: also keep at most this many threads' indexes (0: no index cache; unset: as many as --cache-bytes holds)")
		c.cacheState = e.size("cache-state-bytes", "HISTORYD_CACHE_STATE_BYTES", 0, "deprecated, --cache-bytes bounds the state cache: also keep at most this much of it for encoded state versions (0: no state cache; unset: as much of --cache-bytes as is free)")

		c.watch = watchFlags(e)
		c.metricsListen = stringFlag(fs, "metrics-listen", "HISTORYD_METRICS_LISTEN", "", "address of the HTTP listener for /metrics (Prometheus), /healthz and /readyz, e.g. localhost:9090; plaintext and unauthenticated, so keep it off networks clients use (default: off)")
		c.metricsAll = e.bool("metrics-all-methods", "HISTORYD_METRICS_ALL_METHODS", false, "export per-method gRPC metrics for grpc.health.v1 and server reflection too, not only historyd.v1.ThreadHistory")
		fs.Usage = func() {
			fmt.Fprint(fs.Output(), serveHelp)
			fs.PrintDefaults()
		}
		return c.run
	},
}

type serveConfig struct {
	env *envFlags

	listen, dsn, schema, pooler, messages, state *string
	logFormat, states, reducers                  *string
	logThreadIDs, logThreadSalt                  *string
	logSample                                    *int
	grace                                        *time.Duration

	authTokens, tlsCert, tlsKey, tlsClientCA *string
	pageTokenKeys                            *string
	reflection                               *bool

	maxRequest, maxResponse *int64
	rateLimit               *float64
	rateBurst, maxStreams   *int
	maxDeadline             *time.Duration
	kaMinTime, kaTime       *time.Duration
	kaTimeout               *time.Duration

	cacheBytes   *int64
	cacheThreads *int
	cacheState   *int64

	metricsListen *string
	metricsAll    *bool
	watch         func() (watchSettings, error)

	logLevel *string
}

// offIfZero maps a flag's 0 ("off") to store.Config's negative, since
// store.Config's zero means its default.
func offIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// ifGiven is offIfZero for a flag that has no default of its own: store
// Config's zero when neither the flag nor its variable is given.
func (c serveConfig) ifGiven(name, env string, n int) int {
	if !c.env.given(name, env) {
		return 0
	}
	return offIfZero(n)
}

// Test hooks: tests serve from memory on port 0, need the addresses, and
// read the log.
var (
	newBackend  = server.OpenBackend
	servingHook func(grpcAddr, metricsAddr string)
	logOutput   io.Writer = os.Stderr
)

func (c serveConfig) run(ctx context.Context) error {
	if err := c.env.err(); err != nil {
		return err
	}
	log, err := newLogger(*c.logFormat, *c.logLevel)
	if err != nil {
		return err
	}
	log = service.RedactThreadIDs(log)
	opts, err := c.options(log)
	if err != nil {
		return err
	}
	channels, reducers, err := c.channels()
	if err != nil {
		return err
	}
	watch, err := c.watch()
	if err != nil {
		return err
	}
	opts.StreamMaxAge = watch.maxAge
	cfg := server.Config{
		Store: store.Config{
			MessagesChannel: *c.messages, StateChannels: channels, Reducers: reducers,
			CacheBytes: int64(offIfZero(int(*c.cacheBytes))), CacheThreads: c.ifGiven("cache-threads", "HISTORYD_CACHE_THREADS", *c.cacheThreads),
			CacheStateBytes: c.ifGiven("cache-state-bytes", "HISTORYD_CACHE_STATE_BYTES", int(*c.cacheState)),
		},
		Metrics: true, MetricsAllMethods: *c.metricsAll, Build: currentBuild(),
		Watch: watch.config,
	}
	if err := cfg.Store.Validate(); err != nil {
		return fmt.Errorf("--state-channels/--channel-reducers: %w", err)
	}
	pooler, err := postgres.ParsePooler(*c.pooler)
	if err != nil {
		return fmt.Errorf("--pooler %w", err)
	}
	// OpenTelemetry, from the standard OTEL_* variables: off unless they
	// name a collector. Closed last, once the server has drained.
	tr, err := tracing.FromEnv(ctx, currentBuild().Version, log)
	if err != nil {
		return err
	}
	defer tr.Close(log)
	cfg.TracerProvider = tr.TracerProvider()
	b, err := newBackend(ctx, *c.dsn, *c.schema, cfg.Channels(), server.WithTracing(cfg.TracerProvider), server.WithPooler(pooler), server.WithLogger(log))
	if err != nil {
		return err
	}
	defer func() {
		// Closing waits for the connections in use, which a read stuck
		// in the driver would hold for ever: as long as Shutdown waits
		// for such calls, and no longer.
		closed := make(chan struct{})
		go func() { b.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(server.StopWait):
			log.Warn("checkpoint store connections still in use; exiting without closing them", "waited", server.StopWait)
		}
	}()
	cfg.Store.Backend = b

	var reload []func() error
	var policy *auth.Policy
	if *c.authTokens != "" {
		a, err := auth.NewAuthenticator(*c.authTokens, log)
		if err != nil {
			return fmt.Errorf("--auth-tokens: %w", err)
		}
		if err := c.checkTokens(a.Policy(), log); err != nil {
			return err
		}
		opts.Auth, policy = a, a.Policy()
		reload = append(reload, a.Reload)
	}
	cfg.PageTokens = pagetoken.PerProcess()
	if *c.pageTokenKeys != "" {
		if cfg.PageTokens, err = pagetoken.LoadFile(*c.pageTokenKeys, log); err != nil {
			return fmt.Errorf("--page-token-key-file: %w", err)
		}
		reload = append(reload, cfg.PageTokens.Reload)
	}
	var serverTLS *auth.ServerTLS
	if *c.tlsCert != "" {
		serverTLS, err = auth.NewServerTLS(*c.tlsCert, *c.tlsKey, *c.tlsClientCA, log)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key/--tls-client-ca: %w", err)
		}
		opts.TLS = serverTLS.Config()
		reload = append(reload, serverTLS.Reload)
	}
	switch {
	case opts.Auth != nil && serverTLS == nil:
		log.Warn("--auth-tokens without --tls-cert: bearer tokens cross the network in plaintext; only do this behind a proxy or mesh that encrypts")
	case opts.Auth == nil && serverTLS != nil && serverTLS.ClientAuth():
		log.Warn("--tls-client-ca without --auth-tokens: every client with a certificate from that CA reads every thread")
	}
	c.warnIgnored(log)

	cfg.Service = opts
	srv, err := server.New(ctx, cfg)
	if errors.Is(err, backend.ErrNotCheckpointStore) {
		// Each such error says what to fix; waiting would not help.
		return fmt.Errorf("store %s: %v", server.RedactDSN(*c.dsn), err)
	}
	if err != nil {
		return err
	}
	warnUnorderedPrefixes(ctx, b, policy, log)

	lis, err := net.Listen("tcp", *c.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *c.listen, err)
	}
	served := make(chan error, 2)
	var hs *http.Server
	metricsAddr := ""
	if *c.metricsListen != "" {
		mlis, err := net.Listen("tcp", *c.metricsListen)
		if err != nil {
			lis.Close()
			return fmt.Errorf("--metrics-listen %s: %w", *c.metricsListen, err)
		}
		metricsAddr = mlis.Addr().String()
		hs = &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := hs.Serve(mlis); !errors.Is(err, http.ErrServerClosed) {
				served <- fmt.Errorf("metrics listener: %w", err)
			}
		}()
	}
	go func() { served <- srv.Serve(lis) }()

	// SIGHUP is only taken over when there is something to reread; with
	// nothing configured it keeps its default meaning.
	hup := make(chan os.Signal, 1)
	if len(reload) > 0 {
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	rctx, stopReload := context.WithCancel(ctx)
	defer stopReload()
	go func() {
		for {
			select {
			case <-rctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: rereading the token file, TLS files and page token keys")
				for _, r := range reload {
					_ = r() // each logs its own failure and keeps what it had
				}
			}
		}
	}()

	log.Info("historyd serving", "addr", lis.Addr().String(), "store", server.RedactDSN(*c.dsn), "pooler", string(pooler),
		"messages_channel", *c.messages, "state_channels", strings.Join(cfg.Store.StateChannels, ","),
		"tls", serverTLS != nil, "client_certs", serverTLS != nil && serverTLS.ClientAuth(),
		"auth", opts.Auth != nil, "metrics", metricsAddr, "reflection", *c.reflection,
		"page_token_keys", pageTokenKeys(cfg.PageTokens))
	if servingHook != nil {
		servingHook(lis.Addr().String(), metricsAddr)
	}

	var serveErr error
	select {
	case serveErr = <-served:
	case <-ctx.Done():
	}
	srv.Shutdown(*c.grace)
	if hs != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = hs.Shutdown(sctx)
		cancel()
	}
	if serveErr != nil {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}

// pageTokenKeys says, for the start's log line, where page token keys
// come from: what decides whether replicas continue each other's listings.
func pageTokenKeys(k *pagetoken.Keys) string {
	if k.Shared() {
		return "file"
	}
	return "per process"
}

// channels reads --state-channels (or the older --state-channel) and
// --channel-reducers.
func (c serveConfig) channels() ([]string, map[string]string, error) {
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

// options turns the flags into service.Options, refusing contradictory or
// out-of-range values rather than guessing.
func (c serveConfig) options(log *slog.Logger) (service.Options, error) {
	o := service.Options{Logger: log, DisableReflection: !*c.reflection}
	var err error
	if o.ThreadIDs, err = service.ParseThreadIDLogging(*c.logThreadIDs); err != nil {
		return o, fmt.Errorf("--log-thread-ids %w", err)
	}
	o.ThreadIDSalt = []byte(*c.logThreadSalt)
	o.LogSuccessEvery = *c.logSample
	switch {
	case *c.logSample < 1:
		return o, fmt.Errorf("--log-call-sample %d: want 1 (every call) or more", *c.logSample)
	case *c.grace < 0:
		return o, fmt.Errorf("--shutdown-grace %s: must not be negative", *c.grace)
	case *c.cacheThreads < 0:
		return o, fmt.Errorf("--cache-threads %d: must not be negative (0 turns the cache off)", *c.cacheThreads)
	case *c.cacheState < 0 || *c.cacheState > math.MaxInt32:
		return o, fmt.Errorf("--cache-state-bytes %d: want 0 (off) to 2GiB", *c.cacheState)
	case *c.cacheBytes > math.MaxInt32*int64(1<<10):
		return o, fmt.Errorf("--cache-bytes %d: want 0 (off) to 2TiB", *c.cacheBytes)
	case (*c.tlsCert == "") != (*c.tlsKey == ""):
		return o, errors.New("--tls-cert and --tls-key go together")
	case *c.tlsClientCA != "" && *c.tlsCert == "":
		return o, errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are only sent over TLS")
	case *c.maxRequest < 0 || *c.maxRequest > math.MaxInt32:
		return o, fmt.Errorf("--max-request-bytes %d: want 0 to 2GiB", *c.maxRequest)
	case *c.maxResponse < 0 || *c.maxResponse > math.MaxInt32:
		return o, fmt.Errorf("--max-response-bytes %d: want 0 to 2GiB", *c.maxResponse)
	case *c.rateLimit < 0 || math.IsNaN(*c.rateLimit) || math.IsInf(*c.rateLimit, 0):
		return o, fmt.Errorf("--rate-limit %v: want a number of calls per second, 0 for none", *c.rateLimit)
	case *c.rateBurst < 0:
		return o, fmt.Errorf("--rate-burst %d: must not be negative", *c.rateBurst)
	case *c.rateBurst > 0 && *c.rateLimit == 0:
		return o, fmt.Errorf("--rate-burst %d without --rate-limit: there is no bucket to size; set --rate-limit too, or drop --rate-burst", *c.rateBurst)
	case *c.maxDeadline < 0:
		return o, fmt.Errorf("--max-call-duration %s: must not be negative", *c.maxDeadline)
	case *c.maxStreams < 0 || int64(*c.maxStreams) > math.MaxUint32:
		return o, fmt.Errorf("--max-concurrent-streams %d: out of range", *c.maxStreams)
	case *c.kaMinTime < 0 || *c.kaTime < 0 || *c.kaTimeout < 0:
		return o, errors.New("--keepalive-min-time, --keepalive-time and --keepalive-timeout must not be negative")
	}
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

func newLogger(format, level string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{}
	switch level {
	case "debug":
		opts.Level = slog.LevelDebug
	case "info":
		opts.Level = slog.LevelInfo
	case "warn":
		opts.Level = slog.LevelWarn
	case "error":
		opts.Level = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(logOutput, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(logOutput, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// envFlags defines typed flags whose defaults come from environment
// variables, like stringFlag. An environment value that does not parse is
// kept as an error for run to report: silently falling back to the
// built-in default could, for a limit, mean no limit at all.
type envFlags struct {
	fs   *flag.FlagSet
	errs []error
	// fromEnv holds the variables that were set.
	fromEnv map[string]bool
}

func (e *envFlags) err() error { return errors.Join(e.errs...) }

// lookup returns the variable's value, if set, and the flag's help text
// naming the variable.
func (e *envFlags) lookup(env, help string) (string, bool, string) {
	v, ok := os.LookupEnv(env)
	if ok {
		if e.fromEnv == nil {
			e.fromEnv = map[string]bool{}
		}
		e.fromEnv[env] = true
	}
	return v, ok, fmt.Sprintf("%s (env %s)", help, env)
}

// given reports whether the flag name was given, on the command line or
// by its variable env.
func (e *envFlags) given(name, env string) bool {
	set := false
	e.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set || e.fromEnv[env]
}

func (e *envFlags) bad(env, v, want string) {
	e.errs = append(e.errs, fmt.Errorf("%s=%q: want %s", env, v, want))
}

func (e *envFlags) duration(name, env string, def time.Duration, help string) *time.Duration {
	v, ok, help := e.lookup(env, help)
	if ok {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		} else {
			e.bad(env, v, wantDuration)
		}
	}
	return e.fs.Duration(name, def, help)
}

func (e *envFlags) bool(name, env string, def bool, help string) *bool {
	v, ok, help := e.lookup(env, help)
	if ok {
		if b, err := strconv.ParseBool(v); err == nil {
			def = b
		} else {
			e.bad(env, v, wantBool)
		}
	}
	return e.fs.Bool(name, def, help)
}

func (e *envFlags) int(name, env string, def int, help string) *int {
	v, ok, help := e.lookup(env, help)
	if ok {
		if n, err := strconv.Atoi(v); err == nil {
			def = n
		} else {
			e.bad(env, v, wantInt)
		}
	}
	return e.fs.Int(name, def, help)
}

func (e *envFlags) float(name, env string, def float64, help string) *float64 {
	v, ok, help := e.lookup(env, help)
	if ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			def = f
		} else {
			e.bad(env, v, wantNumber)
		}
	}
	return e.fs.Float64(name, def, help)
}

func (e *envFlags) size(name, env string, def int64, help string) *int64 {
	v, ok, help := e.lookup(env, help)
	b := byteSize(def)
	if ok {
		if err := b.Set(v); err != nil {
			e.bad(env, v, wantSize)
		}
	}
	e.fs.Var(&b, name, help)
	return (*int64)(&b)
}

// byteSize is a flag.Value for sizes: plain bytes or a KiB, MiB or GiB
// suffix.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	n      int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return errors.New("want " + wantSize)
	}
	*b = byteSize(n * mult)
	return nil
}

// Want says what Set accepts, for the message about a bad value.
func (b *byteSize) Want() string { return wantSize }

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range sizeUnits {
		if n >= u.n && n%u.n == 0 && u.n > 1 {
			return fmt.Sprintf("%d%s", n/u.n, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}

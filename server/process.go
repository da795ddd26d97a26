package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/pagetoken"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/postgres"
	"github.com/historyd/historyd/tracing"
)

// RunConfig configures Run: a whole historyd serve process, the server
// and what surrounds it. As in Config, a zero field is its documented
// default, and where a setting can be turned off a negative value turns it
// off. The errors Run returns name historyd serve's flags, which is where
// these settings come from.
type RunConfig struct {
	// Config configures the server. Run sets Store.Backend (from DSN),
	// Service.Auth (AuthTokens), Service.TLS (TLSCert), PageTokens
	// (PageTokenKeyFile) and TracerProvider (the OTEL_* variables): leave
	// them unset. Service.Logger is the process's log too, default
	// slog.Default(), wrapped with service.RedactThreadIDs.
	Config Config
	// Listen is the gRPC listener's address. Default DefaultListen.
	Listen string
	// MetricsListen, when set, is the address of an HTTP listener for
	// MetricsHandler (/metrics, /healthz, /readyz); it needs
	// Config.Metrics. Default: none.
	MetricsListen string
	// HTTPListen, when set, is the address of an HTTP listener for
	// HTTPHandler (HTTP/JSON, Connect, gRPC-Web, MCP), served with the
	// gRPC listener's TLS and authentication. Default: none.
	HTTPListen string
	// DSN names the checkpoint store and Schema its PostgreSQL schema, as
	// OpenBackend reads them; Pooler is the connection pooler in front of
	// PostgreSQL (WithPooler). DSN is required.
	DSN, Schema string
	Pooler      postgres.Pooler
	// AuthTokens, when set, is the token file (auth.NewAuthenticator),
	// reread on SIGHUP. Default: no authentication.
	AuthTokens string
	// TLSCert and TLSKey, when set, are the PEM certificate and key TLS is
	// served with (auth.NewServerTLS), and TLSClientCA the CA bundle
	// client certificates must be issued by; reread on SIGHUP and when they
	// change. Default: plaintext.
	TLSCert, TLSKey, TLSClientCA string
	// PageTokenKeyFile, when set, holds the page token keys
	// (pagetoken.LoadFile), reread on SIGHUP. Default:
	// pagetoken.PerProcess().
	PageTokenKeyFile string
	// ShutdownGrace is how long calls in flight may run once ctx is done
	// (see Server.Shutdown). Default DefaultShutdownGrace; negative: none,
	// they are cancelled at once.
	ShutdownGrace time.Duration
	// OpenBackend opens the store; default OpenBackend. Tests serve from
	// memory with it.
	OpenBackend func(ctx context.Context, dsn, schema string, channels []string, opts ...BackendOption) (backend.Backend, error)
	// Serving, when set, is called once every listener accepts
	// connections, with their addresses: tests listen on port 0.
	Serving func(Addrs)
}

// Addrs are the addresses Run listens on; Metrics and HTTP are empty
// when their listener is off.
type Addrs struct {
	GRPC, Metrics, HTTP string
}

// Run is historyd serve: it opens the store DSN names, loads the token
// file, TLS files and page token keys, builds the server (New), serves
// gRPC on Listen and metrics and health on MetricsListen, rereads the
// files on SIGHUP while it serves, and once ctx is done shuts the server
// down gracefully (Shutdown with ShutdownGrace), then closes the store and
// the tracer. It returns nil after a shutdown ctx asked for, and an error
// when the server could not start or a listener failed.
func Run(ctx context.Context, rc RunConfig) error {
	if err := rc.check(); err != nil {
		return err
	}
	cfg := rc.Config
	log := service.RedactThreadIDs(cfg.Service.Logger)
	// OpenTelemetry, from the standard OTEL_* variables: off unless they
	// name a collector. Closed last, once the server has drained.
	tr, err := tracing.FromEnv(ctx, cfg.Build.Version, log)
	if err != nil {
		return err
	}
	defer tr.Close(log)
	cfg.TracerProvider = tr.TracerProvider()
	b, err := rc.openBackend(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeBackend(b, log)
	cfg.Store.Backend = b

	creds, err := rc.loadCredentials(&cfg, log)
	if err != nil {
		return err
	}
	srv, err := New(ctx, cfg)
	if errors.Is(err, backend.ErrNotCheckpointStore) {
		// Each such error says what to fix; waiting would not help.
		return fmt.Errorf("store %s: %v", RedactDSN(rc.DSN), err)
	}
	if err != nil {
		return err
	}
	warnUnorderedPrefixes(ctx, b, creds.policy, log)
	return rc.serve(ctx, srv, cfg, creds, log)
}

// check refuses the fields Run sets itself.
func (rc RunConfig) check() error {
	c := rc.Config
	switch {
	case c.Store.Backend != nil:
		return errors.New("server: RunConfig.Config.Store.Backend is set by Run; name the store with RunConfig.DSN")
	case c.Service.Auth != nil || c.Service.TLS != nil:
		return errors.New("server: RunConfig.Config.Service.Auth and .TLS are set by Run; name their files with RunConfig.AuthTokens and RunConfig.TLSCert")
	case c.PageTokens != nil:
		return errors.New("server: RunConfig.Config.PageTokens is set by Run; name the key file with RunConfig.PageTokenKeyFile")
	case c.TracerProvider != nil:
		return errors.New("server: RunConfig.Config.TracerProvider is set by Run, from the OTEL_* variables")
	case rc.MetricsListen != "" && !c.Metrics:
		return errors.New("server: RunConfig.MetricsListen needs Config.Metrics: there would be no metrics to serve")
	}
	return nil
}

// openBackend opens the store DSN names, through RunConfig.OpenBackend.
func (rc RunConfig) openBackend(ctx context.Context, cfg Config, log *slog.Logger) (backend.Backend, error) {
	open := rc.OpenBackend
	if open == nil {
		open = OpenBackend
	}
	pooler := rc.Pooler
	if pooler == "" {
		pooler = postgres.PoolerNone
	}
	return open(ctx, rc.DSN, rc.Schema, cfg.Channels(), WithTracing(cfg.TracerProvider), WithPooler(pooler), WithLogger(log))
}

// closeBackend closes the store. Closing waits for the connections in
// use, which a read stuck in the driver would hold for ever: as long as
// Shutdown waits for such calls, and no longer.
func closeBackend(b backend.Backend, log *slog.Logger) {
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(StopWait):
		log.Warn("checkpoint store connections still in use; exiting without closing them", "waited", StopWait)
	}
}

// loaded is what Run loaded from the token file, the TLS files and
// the page token key file: what the log line at start reports, and what
// SIGHUP rereads.
type loaded struct {
	policy *auth.Policy
	tls    *auth.ServerTLS
	reload []func() error
}

// loadCredentials loads the token file, the page token keys and the TLS
// files into cfg, refusing a token file no call could authenticate
// against, and warns of combinations that leave a deployment open.
func (rc RunConfig) loadCredentials(cfg *Config, log *slog.Logger) (loaded, error) {
	var c loaded
	if rc.AuthTokens != "" {
		a, err := auth.NewAuthenticator(rc.AuthTokens, log)
		if err != nil {
			return c, fmt.Errorf("--auth-tokens: %w", err)
		}
		if err := rc.checkTokens(a.Policy(), log); err != nil {
			return c, err
		}
		cfg.Service.Auth, c.policy = a, a.Policy()
		c.reload = append(c.reload, a.Reload)
	}
	cfg.PageTokens = pagetoken.PerProcess()
	if rc.PageTokenKeyFile != "" {
		keys, err := pagetoken.LoadFile(rc.PageTokenKeyFile, log)
		if err != nil {
			return c, fmt.Errorf("--page-token-key-file: %w", err)
		}
		cfg.PageTokens = keys
		c.reload = append(c.reload, keys.Reload)
	}
	if rc.TLSCert != "" {
		serverTLS, err := auth.NewServerTLS(rc.TLSCert, rc.TLSKey, rc.TLSClientCA, log)
		if err != nil {
			return c, fmt.Errorf("--tls-cert/--tls-key/--tls-client-ca: %w", err)
		}
		cfg.Service.TLS, c.tls = serverTLS.Config(), serverTLS
		c.reload = append(c.reload, serverTLS.Reload)
	}
	switch {
	case cfg.Service.Auth != nil && c.tls == nil:
		log.Warn("--auth-tokens without --tls-cert: bearer tokens cross the network in plaintext; only do this behind a proxy or mesh that encrypts")
	case cfg.Service.Auth == nil && c.tls != nil && c.tls.ClientAuth():
		log.Warn("--tls-client-ca without --auth-tokens: every client with a certificate from that CA reads every thread")
	}
	return c, nil
}

// serve serves srv on the listeners until ctx is done or one of them
// fails, rereading the credentials on SIGHUP meanwhile, and then shuts
// down.
func (rc RunConfig) serve(ctx context.Context, srv *Server, cfg Config, creds loaded, log *slog.Logger) error {
	listen := rc.Listen
	if listen == "" {
		listen = DefaultListen
	}
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	served := make(chan error, 3)
	hs, metricsAddr, err := serveHTTP("--metrics-listen", rc.MetricsListen, srv.MetricsHandler(), nil, served)
	if err != nil {
		lis.Close()
		return err
	}
	api, httpAddr, err := serveHTTP("--http-listen", rc.HTTPListen, srv.HTTPHandler(), cfg.Service.TLS, served)
	if err != nil {
		lis.Close()
		shutdownHTTP(hs)
		return err
	}
	go func() { served <- srv.Serve(lis) }()
	stopReload := reloadOnSIGHUP(ctx, creds.reload, log)
	defer stopReload()

	log.Info("historyd serving", "addr", lis.Addr().String(), "store", RedactDSN(rc.DSN), "pooler", string(rc.pooler()),
		"messages_channel", cfg.Store.MessagesChannel, "state_channels", strings.Join(cfg.Store.StateChannels, ","),
		"tls", creds.tls != nil, "client_certs", creds.tls != nil && creds.tls.ClientAuth(),
		"auth", creds.policy != nil, "metrics", metricsAddr, "http", httpAddr, "reflection", !cfg.Service.DisableReflection,
		"page_token_keys", pageTokenKeys(cfg.PageTokens))
	if rc.Serving != nil {
		rc.Serving(Addrs{GRPC: lis.Addr().String(), Metrics: metricsAddr, HTTP: httpAddr})
	}

	var serveErr error
	select {
	case serveErr = <-served:
	case <-ctx.Done():
	}
	shutdownHTTP(api)
	srv.Shutdown(rc.grace())
	shutdownHTTP(hs)
	if serveErr != nil {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}

func (rc RunConfig) pooler() postgres.Pooler {
	if rc.Pooler == "" {
		return postgres.PoolerNone
	}
	return rc.Pooler
}

func (rc RunConfig) grace() time.Duration {
	switch {
	case rc.ShutdownGrace == 0:
		return DefaultShutdownGrace
	case rc.ShutdownGrace < 0:
		return 0
	}
	return rc.ShutdownGrace
}

// serveHTTP serves h on addr, when set, with TLS when tlsc is set,
// sending a failure of the listener (named by flag) to served; it returns
// the HTTP server to shut down and the address it listens on.
func serveHTTP(flag, addr string, h http.Handler, tlsc *tls.Config, served chan<- error) (*http.Server, string, error) {
	if addr == "" {
		return nil, "", nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	if tlsc != nil {
		tlsc = tlsc.Clone()
		if len(tlsc.NextProtos) == 0 {
			tlsc.NextProtos = []string{"h2", "http/1.1"}
		}
		lis = tls.NewListener(lis, tlsc)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, Protocols: new(http.Protocols)}
	// HTTP/1.1 for curl and browsers, HTTP/2 over TLS, and HTTP/2 without
	// TLS (h2c) for Connect and gRPC clients on a plaintext listener.
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetHTTP2(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	go func() {
		if err := hs.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			served <- fmt.Errorf("%s listener: %w", flag, err)
		}
	}()
	return hs, lis.Addr().String(), nil
}

// shutdownHTTP closes hs, when set, letting requests in flight finish
// for a second.
func shutdownHTTP(hs *http.Server) {
	if hs == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = hs.Shutdown(sctx)
	cancel()
}

// reloadOnSIGHUP runs every reload on each SIGHUP until ctx is done or the
// returned function is called. SIGHUP is only taken over when there is
// something to reread; with nothing configured it keeps its default
// meaning.
func reloadOnSIGHUP(ctx context.Context, reload []func() error, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	if len(reload) > 0 {
		signal.Notify(hup, syscall.SIGHUP)
	}
	rctx, cancel := context.WithCancel(ctx)
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
	return func() {
		cancel()
		if len(reload) > 0 {
			signal.Stop(hup)
		}
	}
}

// pageTokenKeys says, for the start's log line, where page token keys
// come from: what decides whether replicas continue each other's listings.
func pageTokenKeys(k *pagetoken.Keys) string {
	if k.Shared() {
		return "file"
	}
	return "per process"
}

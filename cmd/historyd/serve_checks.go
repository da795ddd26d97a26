package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/store/backend"
)

// Settings that parse but would be ignored, or would lock every caller
// out, are caught at start: the ones that can only be mistakes stop
// historyd, the ones that are merely pointless are logged as warnings.
// (Contradictions between two flags' values, such as --tls-cert without
// --tls-key or --rate-burst without --rate-limit, are refused with the
// range checks in serveConfig.options.)

// checkTokens refuses a token file no call could authenticate against,
// and warns about credentials in it that cannot be presented.
func (c serveConfig) checkTokens(p *auth.Policy, log *slog.Logger) error {
	tokens, certs := p.Credentials()
	file := *c.authTokens
	switch {
	case len(p.Tenants()) == 0:
		return fmt.Errorf("--auth-tokens %s: the token file names no tenant, so every call would be refused; add one (see docs/security.md)", file)
	case tokens == 0 && certs == 0:
		return fmt.Errorf("--auth-tokens %s: no tenant has a token_sha256 or client_certs entry, so every call would be refused", file)
	case tokens == 0 && *c.tlsClientCA == "":
		return fmt.Errorf("--auth-tokens %s: tenants are identified by client_certs only, and without --tls-client-ca no client presents a certificate, so every call would be refused", file)
	case certs > 0 && *c.tlsClientCA == "":
		log.Warn("the token file's client_certs entries are ignored without --tls-client-ca: clients can only authenticate with bearer tokens", "auth_tokens", file)
	}
	return nil
}

// warnIgnored warns about settings that take no effect in the
// configuration given.
func (c serveConfig) warnIgnored(log *slog.Logger) {
	for _, f := range [][2]string{{"cache-threads", "HISTORYD_CACHE_THREADS"}, {"cache-state-bytes", "HISTORYD_CACHE_STATE_BYTES"}} {
		if c.env.given(f[0], f[1]) {
			log.Warn("--"+f[0]+" is deprecated: --cache-bytes bounds the memory the caches hold together; it still bounds its cache too", "cache_bytes", (*byteSize)(c.cacheBytes).String())
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

// prefixListing is a backend that can say whether listings under
// thread-id prefixes can be walked (store/postgres).
type prefixListing interface {
	PrefixListing(ctx context.Context) error
}

// prefixCheckTimeout bounds the look at the store warnUnorderedPrefixes
// takes.
const prefixCheckTimeout = 5 * time.Second

// warnUnorderedPrefixes warns once, at start, when tenants are confined to
// thread-id prefixes and the store would refuse their Threads listings
// FAILED_PRECONDITION (backend.ErrUnorderedPrefixes): PostgreSQL whose
// thread_id collation does not sort bytewise, without the index
// docs/deploy.md ("Listing threads") describes. A store that does not
// answer is left to the checks that report that.
func warnUnorderedPrefixes(ctx context.Context, b backend.Backend, p *auth.Policy, log *slog.Logger) {
	pl, ok := b.(prefixListing)
	if !ok || p == nil {
		return
	}
	confined := false
	for _, t := range p.Tenants() {
		confined = confined || len(t.ThreadPrefixes) > 0
	}
	if !confined {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, prefixCheckTimeout)
	defer cancel()
	if err := pl.PrefixListing(ctx); errors.Is(err, backend.ErrUnorderedPrefixes) {
		log.Warn("tenants are confined to thread-id prefixes, and their Threads listings will be refused FAILED_PRECONDITION until thread_id has an index that sorts it bytewise: run the migration docs/deploy.md (\"Listing threads\") gives", "err", err)
	} else if err != nil {
		log.Debug("could not check whether listings under thread-id prefixes can be walked", "err", err)
	}
}

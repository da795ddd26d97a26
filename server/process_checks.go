package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/store/backend"
)

// Settings that parse but would lock every caller out are caught at
// start and stop Run; the ones that merely leave a deployment open, or a
// listing refused, are logged as warnings. (Contradictions between two
// flags' values, such as --tls-cert without --tls-key, are refused by
// historyd serve before Run.)

// checkTokens refuses a token file no call could authenticate against,
// and warns about credentials in it that cannot be presented.
func (rc RunConfig) checkTokens(p *auth.Policy, log *slog.Logger) error {
	tokens, certs := p.Credentials()
	file := rc.AuthTokens
	switch {
	case len(p.Tenants()) == 0:
		return fmt.Errorf("--auth-tokens %s: the token file names no tenant, so every call would be refused; add one (see docs/security.md)", file)
	case tokens == 0 && certs == 0:
		return fmt.Errorf("--auth-tokens %s: no tenant has a token_sha256 or client_certs entry, so every call would be refused", file)
	case tokens == 0 && rc.TLSClientCA == "":
		return fmt.Errorf("--auth-tokens %s: tenants are identified by client_certs only, and without --tls-client-ca no client presents a certificate, so every call would be refused", file)
	case certs > 0 && rc.TLSClientCA == "":
		log.Warn("the token file's client_certs entries are ignored without --tls-client-ca: clients can only authenticate with bearer tokens", "auth_tokens", file)
	}
	return nil
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

// NewLogger returns historyd serve's log, writing to w in format (text or
// json) the records at level (debug, info, warn or error) and above.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
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
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

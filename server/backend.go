package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/postgres"
	"github.com/historyd/historyd/store/sqlite"
)

// OpenBackend opens the backend a DSN names, picked by its form:
// postgres://… or postgresql://… for PostgreSQL (in schema, or the
// search_path when schema is empty), sqlite:///path or a path ending in .db,
// .sqlite or .sqlite3 for an SQLite file. channels are the only channels
// whose versions PostgreSQL lists (the SQLite saver keeps them inside the
// checkpoint blob, read whole anyway); pass Config.Channels, so that the
// listing and the store agree. WithTracing traces its statements.
//
// A DSN that is wrong (unknown form, missing SQLite file, a file without
// checkpoint tables) fails here, at start; a PostgreSQL server that is
// merely down does not, since it may come up later. The errors name
// historyd serve's --dsn and --schema, which is where these come from.
// The caller closes the backend.
func OpenBackend(ctx context.Context, dsn, schema string, channels []string, opts ...BackendOption) (backend.Backend, error) {
	var o backendOptions
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case dsn == "":
		return nil, errors.New("no store: set --dsn or HISTORYD_DSN to the checkpointer's database, e.g. postgres://user@localhost:5432/app or sqlite:///path/checkpoints.db")
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		b, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema, Channels: channels, TracerProvider: o.tp, Pooler: o.pooler, Logger: o.log})
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", RedactDSN(dsn), err)
		}
		return b, nil
	}
	if path, ok := sqlite.ParseDSN(dsn); ok {
		if schema != "" {
			return nil, fmt.Errorf("store %s: --schema applies to PostgreSQL only; SQLite files have none", dsn)
		}
		if o.pooler != "" && o.pooler != postgres.PoolerNone {
			return nil, fmt.Errorf("store %s: --pooler applies to PostgreSQL only; SQLite files are opened directly", dsn)
		}
		b, err := sqlite.Open(ctx, sqlite.Config{Path: path, TracerProvider: o.tp})
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("store %s: no such file; point --dsn at the file LangGraph's SqliteSaver writes, or run `historyd demo` to create a demo file", dsn)
		case errors.Is(err, backend.ErrNotCheckpointStore):
			return nil, fmt.Errorf("store %s: %w; point --dsn at the file LangGraph's SqliteSaver writes", dsn, err)
		case err != nil:
			return nil, fmt.Errorf("store %s: %w", dsn, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("store %s: unrecognised DSN; use postgres://…, postgresql://…, sqlite:///path/file.db or a path ending in .db, .sqlite or .sqlite3", RedactDSN(dsn))
}

// BackendOption configures OpenBackend beyond the DSN.
type BackendOption func(*backendOptions)

type backendOptions struct {
	tp     trace.TracerProvider
	pooler postgres.Pooler
	log    *slog.Logger
}

// WithLogger gives the backend a log for what it finds out by itself (a
// transaction pooler --pooler does not name); default slog.Default().
func WithLogger(l *slog.Logger) BackendOption {
	return func(o *backendOptions) { o.log = l }
}

// WithTracing traces the backend's statements with tp (otelpgx for
// PostgreSQL, the SQLite backend's own spans), each a child of the traced
// call that ran it. Give it Config.TracerProvider; nil traces nothing.
func WithTracing(tp trace.TracerProvider) BackendOption {
	return func(o *backendOptions) { o.tp = tp }
}

// WithPooler says which connection pooler stands between historyd and
// PostgreSQL (historyd serve's --pooler); see postgres.Pooler.
func WithPooler(p postgres.Pooler) BackendOption {
	return func(o *backendOptions) { o.pooler = p }
}

// RedactDSN hides a URL DSN's password, in its user info or its password
// parameter, so it can be logged.
func RedactDSN(dsn string) string {
	scheme := strings.Index(dsn, "://")
	if scheme < 0 {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		// Unparseable, so shown only as far as the user info's end.
		at := strings.LastIndex(dsn, "@")
		if at < scheme {
			return dsn[:scheme+3] + "…"
		}
		userinfo := dsn[scheme+3 : at]
		if i := strings.Index(userinfo, ":"); i >= 0 {
			return dsn[:scheme+3] + userinfo[:i] + ":xxxxx" + dsn[at:]
		}
		return dsn
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

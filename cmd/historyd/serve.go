package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/postgres"
)

var serveCommand = command{
	name:    "serve",
	summary: "serve historyd.v1.ThreadHistory over gRPC",
	flags: func(fs *flag.FlagSet) func(context.Context) error {
		var c serveConfig
		c.listen = stringFlag(fs, "listen", "HISTORYD_LISTEN", "localhost:50051", "address to serve gRPC on")
		c.dsn = stringFlag(fs, "dsn", "HISTORYD_DSN", "", "checkpoint store: postgres://… or postgresql://… (required)")
		c.schema = stringFlag(fs, "schema", "HISTORYD_SCHEMA", "", "PostgreSQL schema holding the checkpoint tables (default: the search_path)")
		c.messages = stringFlag(fs, "messages-channel", "HISTORYD_MESSAGES_CHANNEL", "messages", "channel holding the conversation's messages")
		c.state = stringFlag(fs, "state-channel", "HISTORYD_STATE_CHANNEL", "tool_state", "channel holding session state (key → entry)")
		c.logFormat = stringFlag(fs, "log-format", "HISTORYD_LOG_FORMAT", "text", "log format: text or json")
		c.grace = stringFlag(fs, "shutdown-grace", "HISTORYD_SHUTDOWN_GRACE", "10s", "how long in-flight RPCs may run after SIGINT/SIGTERM")
		fs.Usage = func() {
			fmt.Fprintf(fs.Output(), "Usage: historyd serve [flags]\n\nServe historyd.v1.ThreadHistory, grpc.health.v1 and server reflection.\n\nFlags:\n")
			fs.PrintDefaults()
		}
		return c.run
	},
}

type serveConfig struct {
	listen, dsn, schema, messages, state, logFormat, grace *string
}

func (c serveConfig) run(ctx context.Context) error {
	log, err := newLogger(*c.logFormat)
	if err != nil {
		return err
	}
	grace, err := time.ParseDuration(*c.grace)
	if err != nil || grace < 0 {
		return fmt.Errorf("--shutdown-grace %q: want a duration such as 10s", *c.grace)
	}
	backend, err := openBackend(ctx, *c.dsn, *c.schema)
	if err != nil {
		return err
	}
	defer backend.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = backend.Ping(pctx)
	cancel()
	if err != nil {
		if errors.Is(err, store.ErrNotCheckpointStore) {
			return fmt.Errorf("store %s: %v; point --dsn/--schema at the database LangGraph's checkpointer writes", redactDSN(*c.dsn), err)
		}
		// The database may come up later; serve and report NOT_SERVING until then.
		log.Warn("store unreachable at start; serving NOT_SERVING until it answers", "dsn", redactDSN(*c.dsn), "err", err)
	}
	st := store.New(store.Config{Backend: backend, MessagesChannel: *c.messages, StateChannel: *c.state})
	svc := service.New(service.Config{Store: st, Logger: log})
	gs := grpc.NewServer(service.ServerOptions(log)...)
	svc.Register(gs)

	lis, err := net.Listen("tcp", *c.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *c.listen, err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go svc.Watch(wctx)

	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	log.Info("historyd serving", "addr", lis.Addr().String(), "store", redactDSN(*c.dsn), "messages_channel", *c.messages, "state_channel", *c.state)

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", grace)
	svc.Shutdown()
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		log.Warn("grace period over; cancelling in-flight RPCs")
		gs.Stop()
	}
	return nil
}

func newLogger(format string) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, nil)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// openBackend picks the backend from the DSN's form.
func openBackend(ctx context.Context, dsn, schema string) (store.Backend, error) {
	switch {
	case dsn == "":
		return nil, errors.New("no store: set --dsn or HISTORYD_DSN to the checkpointer's database, e.g. postgres://user@localhost:5432/app")
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		b, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", redactDSN(dsn), err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("store %s: unrecognised DSN; use postgres://… or postgresql://…", redactDSN(dsn))
}

// redactDSN hides a URL DSN's password so it can be logged.
func redactDSN(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	scheme := strings.Index(dsn, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return dsn
	}
	userinfo := dsn[scheme+3 : at]
	if i := strings.Index(userinfo, ":"); i >= 0 {
		return dsn[:scheme+3] + userinfo[:i] + ":xxxxx" + dsn[at:]
	}
	return dsn
}

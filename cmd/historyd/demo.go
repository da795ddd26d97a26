package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/historyd/historyd/demo"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/store/sqlite"
)

const demoHelp = `Usage: historyd demo [flags]

Write a small LangGraph checkpoint store to try historyd on, without running
an agent: a four-turn conversation whose second turn overwrites the session
state the first one wrote, once whole (thread demo) and once with turns 1-2
pruned (thread demo-pruned).

By default it is an SQLite file in the format Python's SqliteSaver writes
(--out). Missing directories are created. An existing file is only replaced
when it is an earlier demo file; anything else is left alone.

With --dsn postgres://… the threads go into PostgreSQL instead, in the
format Python's PostgresSaver (langgraph-checkpoint-postgres 3.x) writes,
in --schema (created when missing) or the search_path. PostgresSaver's
tables are created when there are none; existing ones must be the Python
saver's. Only the two demo threads are written. When they already exist the
demo stops, unless --force, which replaces them if an earlier demo wrote
them; threads of those names written by anything else are never touched.

Flags:
`

var demoCommand = command{
	name:    "demo",
	summary: "write demo checkpoints (an SQLite file, or PostgreSQL) to try historyd on",
	flags: func(fs *flag.FlagSet) func(context.Context) error {
		f := bindDemoFlags(fs)
		out, dsn, schema, force := f.out, f.dsn, f.schema, f.force
		fs.Usage = func() {
			fmt.Fprint(fs.Output(), demoHelp)
			fs.PrintDefaults()
		}
		return func(ctx context.Context) error {
			outGiven := f.env.given("out")
			switch {
			case *dsn == "":
			case outGiven:
				return errors.New("--out and --dsn name two places to write; give one")
			case strings.HasPrefix(*dsn, "postgres://"), strings.HasPrefix(*dsn, "postgresql://"):
				return runDemoPostgres(ctx, demo.PostgresConfig{DSN: *dsn, Schema: *schema, Replace: *force}, demoOutput)
			default:
				path, ok := sqlite.ParseDSN(*dsn)
				if !ok {
					return fmt.Errorf("--dsn %s: want postgres://…, postgresql://…, sqlite:///path/file.db or a .db file path", server.RedactDSN(*dsn))
				}
				*out = path
			}
			switch {
			case *schema != "":
				return errors.New("--schema applies to --dsn postgres://… only: SQLite files have no schemas")
			case *force:
				return errors.New("--force applies to --dsn postgres://… only: a demo file is replaced whenever it holds nothing but an earlier demo")
			}
			return runDemo(ctx, *out, demoOutput)
		}
	},
}

// demoOutput is where demo says what it wrote; tests read it.
var demoOutput io.Writer = os.Stdout

// runDemo writes the file and says what is in it, so the next command to
// try (a Snapshots or Turns call on one of the threads) needs no guessing.
func runDemo(ctx context.Context, path string, w io.Writer) error {
	if err := demo.Write(ctx, path); err != nil {
		return err
	}
	return describeDemo(w, path+": LangGraph SqliteSaver checkpoints", "historyd serve --dsn "+path)
}

// runDemoPostgres writes the threads into PostgreSQL and says what it
// wrote, as runDemo does.
func runDemoPostgres(ctx context.Context, cfg demo.PostgresConfig, w io.Writer) error {
	if err := demo.WritePostgres(ctx, cfg); err != nil {
		return err
	}
	where, serve := server.RedactDSN(cfg.DSN), "historyd serve --dsn "+server.RedactDSN(cfg.DSN)
	if cfg.Schema != "" {
		where += " schema " + cfg.Schema
		serve += " --schema " + cfg.Schema
	}
	return describeDemo(w, where+": LangGraph PostgresSaver (Python) checkpoints", serve)
}

func describeDemo(w io.Writer, what, serve string) error {
	threads, err := demo.Threads()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s, %d threads\n", what, len(threads))
	for _, t := range threads {
		kept := "all retained"
		if len(t.Retained) < t.Turns {
			kept = fmt.Sprintf("retained %s, earlier turns pruned", joinInts(t.Retained))
		}
		fmt.Fprintf(w, "  thread %-12s %d turns, %s, %d checkpoints\n", t.ID, t.Turns, kept, t.Checkpoints)
	}
	fmt.Fprintln(w, "turns:")
	for i, q := range demo.Questions() {
		fmt.Fprintf(w, "  %d  %s\n", i+1, q)
	}
	fmt.Fprintf(w, "session state keys: %s\n", strings.Join([]string{demo.KeyArea, demo.KeyName, demo.KeyFeature}, ", "))
	fmt.Fprintf(w, "serve them: %s\n", serve)
	return nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

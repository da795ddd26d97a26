package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/historyd/historyd/demo"
)

const demoHelp = `Usage: historyd demo [flags]

Write a small LangGraph checkpoint file to try historyd on, without running an
agent: an SQLite database in the format Python's SqliteSaver writes, holding a
four-turn conversation whose second turn overwrites the session state the
first one wrote, once whole (thread demo) and once with turns 1-2 pruned
(thread demo-pruned). Missing directories are created. An existing file is
only replaced when it is an earlier demo file; anything else is left alone.

Flags:
`

var demoCommand = command{
	name:    "demo",
	summary: "write a demo checkpoint file (SQLite) to try historyd on",
	flags: func(fs *flag.FlagSet) func(context.Context) error {
		out := stringFlag(fs, "out", "HISTORYD_DEMO_PATH", "var/demo.db", "file to write")
		fs.Usage = func() {
			fmt.Fprint(fs.Output(), demoHelp)
			fs.PrintDefaults()
		}
		return func(ctx context.Context) error { return runDemo(ctx, *out, os.Stdout) }
	},
}

// runDemo writes the file and says what is in it, so the next command to
// try (a Snapshots or Turns call on one of the threads) needs no guessing.
func runDemo(ctx context.Context, path string, w io.Writer) error {
	if err := demo.Write(ctx, path); err != nil {
		return err
	}
	threads, err := demo.Threads()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: LangGraph SqliteSaver checkpoints, %d threads\n", path, len(threads))
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
	return nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// Command historyd serves the turn history of LangGraph threads over gRPC.
//
// Usage:
//
//	historyd serve [flags]   serve historyd.v1.ThreadHistory
//	historyd demo [flags]    write a demo checkpoint file to try it on
//	historyd threads|turns|show|diff|watch …   ask a running historyd (cli.go)
//	historyd help [command]  show help
//
// Every flag can also be set by an environment variable, named in its help.
// Help goes to stdout and exits 0; a bad flag or value is one line on
// stderr naming it, and exits 2.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// command is one subcommand: its flags and what it runs.
type command struct {
	name    string
	summary string
	flags   func(fs *flag.FlagSet) func(ctx context.Context) error
	// main, when set, runs the command on its arguments instead of flags:
	// the operator commands take positional arguments and have exit
	// codes of their own (cli.go).
	main func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = []command{serveCommand, demoCommand, versionCommand,
	threadsCommand.command(), turnsCommand.command(), showCommand.command(), diffCommand.command(), watchCommand.command()}

const usage = `historyd serves what LangGraph threads' session state held at each earlier turn.

Usage:
  historyd <command> [flags]

Commands:
%s
Run "historyd <command> --help" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	args = versionAlias(args)
	if len(args) == 0 {
		// No command is a mistake: the usage goes with the error, to stderr.
		printUsage(stderr)
		return 2
	}
	if isHelp(args[0]) || args[0] == "help" && len(args) == 1 {
		printUsage(stdout)
		return 0
	}
	name := args[0]
	rest := args[1:]
	if name == "help" {
		name, rest = args[1], []string{"--help"}
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		if c.main != nil {
			return c.main(ctx, rest, stdout, stderr)
		}
		fs := flag.NewFlagSet("historyd "+c.name, flag.ContinueOnError)
		runFn := c.flags(fs)
		if code, done := parseFlags(fs, rest, stdout, stderr); done {
			return code
		}
		if err := runFn(ctx); err != nil {
			fmt.Fprintf(stderr, "historyd %s: %v\n", c.name, err)
			return 1
		}
		return 0
	}
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	fmt.Fprintf(stderr, "historyd: unknown command %q; commands: %s (run \"historyd --help\" for what each does)\n", name, strings.Join(names, ", "))
	return 2
}

// isHelp reports whether arg asks for help the way the flag package
// understands it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

func printUsage(w io.Writer) {
	list := ""
	for _, c := range commands {
		list += fmt.Sprintf("  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, usage, list)
}

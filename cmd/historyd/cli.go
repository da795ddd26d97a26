package main

// The operator commands (threads, turns, show, diff, watch) talk gRPC to a
// running historyd through the Go client, as etcdctl talks to etcd.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/client"
)

// Exit codes of the operator commands, for scripts.
const (
	// exitOK: the command did what was asked; the turn was found.
	exitOK = 0
	// exitFailed: anything not listed below (the server's INTERNAL,
	// DATA_LOSS, FAILED_PRECONDITION, RESOURCE_EXHAUSTED, …).
	exitFailed = 1
	// exitUsage: bad flags or arguments, or INVALID_ARGUMENT.
	exitUsage = 2
	// exitNoSuchTurn: the thread never had the turn asked for.
	exitNoSuchTurn = 3
	// exitNotRetained: the turn existed and is no longer retained.
	exitNotRetained = 4
	// exitUnavailable: historyd or its store could not be reached in time
	// (UNAVAILABLE, DEADLINE_EXCEEDED).
	exitUnavailable = 5
	// exitDenied: UNAUTHENTICATED or PERMISSION_DENIED.
	exitDenied = 6
)

const exitCodesHelp = `Exit codes: 0 done (the turn was found), 1 other failure, 2 usage or an
invalid request, 3 no such turn, 4 no longer retained, 5 historyd or its
store unreachable (or the deadline passed), 6 not authenticated or not
allowed.`

// clientCommand is an operator command: it parses its own arguments,
// flags and positional arguments in any order.
type clientCommand struct {
	name, summary, usage string
	// args names the positional arguments: at least min, at most max.
	min, max int
	// flags defines the command's own flags and returns what it runs.
	flags func(fs *flag.FlagSet) func(ctx context.Context, cc *cliContext, args []string) int
}

func (cc clientCommand) command() command {
	return command{name: cc.name, summary: cc.summary, main: cc.run}
}

// cliContext is what every operator command shares: the connection
// flags, the output format and where output goes.
type cliContext struct {
	stdout, stderr io.Writer
	name           string
	addr, output   *string
	plaintext      *bool
	tlsCA          *string
	tlsCert        *string
	tlsKey         *string
	serverName     *string
	token          *string
	tokenFile      *string
	timeout        *time.Duration
	json           bool
}

func (cc clientCommand) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("historyd "+cc.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &cliContext{stdout: stdout, stderr: stderr, name: cc.name}
	e := bindClientFlags(fs, c)
	runFn := cc.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: historyd %s\n\n%s\n\n%s\n\nFlags:\n", cc.usage, cc.summary, exitCodesHelp)
		fs.PrintDefaults()
	}
	// Flags may come before, between or after the positional arguments;
	// the flags are parsed as every command's are (help on stdout, a bad
	// flag one line on stderr).
	flags, pos := splitArgs(fs, args)
	if code, done := parseFlags(fs, flags, stdout, stderr); done {
		return code
	}
	if err := e.err(); err != nil {
		return c.usageError("%v", err)
	}
	switch *c.output {
	case outputTable:
	case "json":
		c.json = true
	default:
		return c.usageError("-o %q: want table or json", *c.output)
	}
	if len(pos) < cc.min || len(pos) > cc.max {
		return c.usageError("want %s", cc.usage)
	}
	return runFn(ctx, c, pos)
}

func (c *cliContext) usageError(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "historyd %s: %s\n", c.name, fmt.Sprintf(format, args...))
	return exitUsage
}

// splitArgs separates args into flags (with their values) and positional
// arguments, using fs to know which flags take a value; everything after
// "--" is positional.
func splitArgs(fs *flag.FlagSet, args []string) (flags, pos []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, append(pos, args[i+1:]...)
		case len(a) < 2 || a[0] != '-':
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // parseFlags names it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, pos
}

// dial connects to --addr as the flags say.
func (c *cliContext) dial() (*client.Client, error) {
	opts := []client.Option{client.WithTimeout(*c.timeout)}
	token := *c.token
	if *c.tokenFile != "" {
		b, err := os.ReadFile(*c.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	tlsAsked := *c.tlsCA != "" || *c.tlsCert != "" || *c.tlsKey != "" || *c.serverName != ""
	if *c.plaintext && tlsAsked {
		return nil, errors.New("--plaintext contradicts the TLS flags")
	}
	if *c.plaintext || !tlsAsked && loopback(*c.addr) {
		return client.Dial(*c.addr, append(opts, client.WithInsecure())...)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: *c.serverName}
	if *c.tlsCA != "" {
		pem, err := os.ReadFile(*c.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", *c.tlsCA)
		}
	}
	if *c.tlsCert != "" || *c.tlsKey != "" {
		cert, err := tls.LoadX509KeyPair(*c.tlsCert, *c.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return client.Dial(*c.addr, append(opts, client.WithTLS(tc))...)
}

// loopback reports whether addr is this machine, which is reached in
// plaintext unless TLS is asked for: localhost, a loopback address, or the
// unspecified address (0.0.0.0, ::), which a connection reaches this
// machine by, and which is what a server's --listen often says.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(strings.TrimPrefix(addr, "dns:///"))
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

// fail reports err and returns its exit code.
func (c *cliContext) fail(err error) int {
	if line, ok := c.mismatch(err); ok {
		fmt.Fprintf(c.stderr, "historyd %s: %s\n", c.name, line)
		return exitUnavailable
	}
	fmt.Fprintf(c.stderr, "historyd %s: %v\n", c.name, err)
	switch status.Code(err) {
	case codes.InvalidArgument:
		return exitUsage
	case codes.Unavailable, codes.DeadlineExceeded:
		return exitUnavailable
	case codes.Unauthenticated, codes.PermissionDenied:
		return exitDenied
	}
	return exitFailed
}

// mismatch is the line that says which of TLS and plaintext the server
// speaks and which flag to change, when err is a call that could not
// connect for that reason.
func (c *cliContext) mismatch(err error) (string, bool) {
	switch {
	case errors.Is(err, client.ErrServerPlaintext):
		return fmt.Sprintf("historyd at %s speaks plaintext, not TLS: pass --plaintext", *c.addr), true
	case errors.Is(err, client.ErrServerTLS) && *c.plaintext:
		return fmt.Sprintf("historyd at %s speaks TLS, not plaintext: drop --plaintext (and pass --tls-ca for a private CA)", *c.addr), true
	case errors.Is(err, client.ErrServerTLS):
		return fmt.Sprintf("historyd at %s speaks TLS, not plaintext: a loopback --addr is dialled in plaintext unless a TLS flag is given: pass --tls-ca (or --tls-server-name)", *c.addr), true
	}
	return "", false
}

// miss reports a turn that was not found, and returns its exit code.
func (c *cliContext) miss(outcome client.Outcome, turn, total int, retained []int) int {
	if outcome == client.NoSuchTurn {
		fmt.Fprintf(c.stderr, "historyd %s: no such turn: turn %d, of a thread with %d turns\n", c.name, turn, total)
		return exitNoSuchTurn
	}
	fmt.Fprintf(c.stderr, "historyd %s: turn %d is no longer retained; retained turns: %s\n", c.name, turn, intList(retained))
	return exitNotRetained
}

// printJSON writes v as indented JSON.
func (c *cliContext) printJSON(v any) int {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// table writes rows under header, aligned.
func (c *cliContext) table(header []string, rows [][]string) {
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	w.Flush()
}

// timeText shows a time in UTC, to the second; "-" when unknown.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// timeJSON is a time for JSON output: RFC 3339 in UTC, or null.
func timeJSON(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// clip shortens s to n characters for a table cell, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// compact is v as one line of JSON.
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func intList(ns []int) string {
	if len(ns) == 0 {
		return "none"
	}
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}

// parseTurn reads a turn argument.
func parseTurn(c *cliContext, what, s string) (int, bool) {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil || fmt.Sprint(n) != s || n < 1 {
		c.usageError("%s %q: want a turn number, counted from 1", what, s)
		return 0, false
	}
	return n, true
}

// entryJSON is an entry for JSON output, with the fields the host recorded.
func entryJSON(e client.Entry) map[string]any {
	m := map[string]any{"value": e.Value}
	if e.Tool != "" {
		m["tool"] = e.Tool
	}
	if e.Seq != 0 {
		m["seq"] = e.Seq
	}
	if e.Turn != 0 {
		m["turn"] = e.Turn
	}
	if e.TurnsWritten != 0 {
		m["turns_written"] = e.TurnsWritten
	}
	if len(e.Inputs) > 0 {
		m["inputs"] = e.Inputs
	}
	if len(e.Extra) > 0 {
		m["extra"] = e.Extra
	}
	return m
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// headFlag defines --head, which every command reading one thread takes.
func headFlag(fs *flag.FlagSet) *string {
	return fs.String("head", "", "read the lineage ending at this checkpoint (a branch `turns --branches` lists) instead of the thread's head")
}

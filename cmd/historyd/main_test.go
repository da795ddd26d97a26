package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/historyd/historyd/auth/authtest"
	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/store/storetest"
)

// runCLI runs historyd with args and returns its exit code and what it
// wrote to stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCLIContext(context.Background(), args...)
}

func runCLIContext(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// Asked for, help goes to stdout and exits 0: at the top and for every
// command, however it is asked for.
func TestHelpGoesToStdout(t *testing.T) {
	asks := [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}}
	for _, c := range commands {
		asks = append(asks, []string{c.name, "--help"}, []string{c.name, "-h"}, []string{"help", c.name})
	}
	for _, args := range asks {
		code, out, errOut := runCLI(t, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "Usage") {
			t.Errorf("historyd %s: exit %d, stdout %.80q, stderr %q; want the help on stdout, exit 0", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// A bad argument is one line on stderr naming the flag and what it takes,
// with a pointer to --help, and exit 2; the help itself is not printed.
func TestBadArgumentsAreOneLine(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--max-call-duration", "soon"}, `historyd serve: --max-call-duration "soon": want a duration such as 30s or 2m (run "historyd serve --help" for its flags)`},
		{[]string{"serve", "--max-response-bytes=lots"}, `historyd serve: --max-response-bytes "lots": want a size such as 64MiB: bytes, or a number with KiB, MiB or GiB (run "historyd serve --help" for its flags)`},
		{[]string{"serve", "--cache-threads", "many"}, `historyd serve: --cache-threads "many": want an integer`},
		{[]string{"serve", "--rate-limit", "fast"}, `historyd serve: --rate-limit "fast": want a number`},
		{[]string{"serve", "--reflection=perhaps"}, `historyd serve: --reflection "perhaps": want true or false`},
		{[]string{"serve", "--no-such-flag"}, `historyd serve: unknown flag --no-such-flag (run "historyd serve --help" for its flags)`},
		{[]string{"serve", "-tls-certs", "x"}, `historyd serve: unknown flag --tls-certs`},
		{[]string{"serve", "--dsn"}, `historyd serve: --dsn needs a value`},
		{[]string{"serve", "extra"}, `historyd serve: unexpected argument "extra"`},
		{[]string{"demo", "--outfile", "x.db"}, `historyd demo: unknown flag --outfile`},
		{[]string{"version", "--short=maybe"}, `historyd version: --short "maybe": want true or false`},
		{[]string{"serv"}, `historyd: unknown command "serv"; commands: serve, demo, version`},
		{[]string{"--verbose"}, `historyd: unknown command "--verbose"`},
		{[]string{"help", "serv"}, `historyd: unknown command "serv"`},
	} {
		code, out, errOut := runCLI(t, tt.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, tt.want) {
			t.Errorf("historyd %s: exit %d, stdout %q, stderr %q; want exit 2 and one line starting %q", strings.Join(tt.args, " "), code, out, errOut, tt.want)
		}
	}
	// No command at all: the usage, as an error.
	if code, out, errOut := runCLI(t); code != 2 || out != "" || !strings.Contains(errOut, "Usage") {
		t.Errorf("historyd: exit %d, stdout %q, stderr %q; want the usage on stderr, exit 2", code, out, errOut)
	}
}

// A token file no call could authenticate against stops serve before it
// listens; credentials that cannot be presented are warned about.
func TestServeRefusesLockout(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		authtest.WriteFile(t, path, data)
		return path
	}
	for _, tt := range []struct {
		name, file string
		want       string
	}{
		{"no tenants", write("none.json", []byte(`{"tenants": []}`)), "names no tenant"},
		{"empty object", write("empty.json", []byte(`{}`)), "names no tenant"},
		{"no credentials", write("revoked.json", authtest.TokenFile(t, authtest.Tenant{Name: "a", Prefixes: []string{"a/"}})),
			"no tenant has a token_sha256 or client_certs entry"},
		{"certificates without a client CA", write("certs.json", authtest.TokenFile(t, authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, ClientCerts: []string{"cn:agent"}})),
			"without --tls-client-ca no client presents a certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			useMemory(t, storetest.NewMemory())
			code, _, errOut := runCLI(t, "serve", "--dsn", "memory", "--listen", "127.0.0.1:0", "--auth-tokens", tt.file)
			if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "--auth-tokens "+tt.file) || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit 1 and one line naming the file and %q", code, errOut, tt.want)
			}
		})
	}
}

// Settings that would take no effect are logged as warnings at start; the
// defaults warn about nothing.
func TestServeWarnsAboutIgnoredSettings(t *testing.T) {
	useMemory(t, storetest.NewMemory())
	if log := serveBriefly(t, "--log-format", "json"); strings.Contains(log, `"level":"WARN"`) {
		t.Errorf("the defaults warn:\n%s", log)
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	authtest.WriteFile(t, tokens, authtest.TokenFile(t, authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"secret"}, ClientCerts: []string{"cn:agent"}}))
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"salt with omitted ids", []string{"--log-thread-ids", "omit", "--log-thread-salt", "pepper"}, "--log-thread-salt is ignored with --log-thread-ids omit"},
		{"all methods without a listener", []string{"--metrics-all-methods"}, "--metrics-all-methods is ignored without --metrics-listen"},
		{"certificates without a client CA", []string{"--auth-tokens", tokens}, "client_certs entries are ignored without --tls-client-ca"},
		{"keepalive enforcement at 0", []string{"--keepalive-min-time", "0"}, "--keepalive-min-time 0 does not turn enforcement off"},
		{"keepalive pings at 0", []string{"--keepalive-time", "0"}, "--keepalive-time 0 does not turn server pings off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			useMemory(t, storetest.NewMemory())
			log := serveBriefly(t, append([]string{"--log-format", "json"}, tt.args...)...)
			if !strings.Contains(log, `"level":"WARN"`) || !strings.Contains(log, tt.want) {
				t.Errorf("log lacks the warning %q:\n%s", tt.want, log)
			}
		})
	}
}

// serveBriefly starts serve with args on a free port, stops it once it
// serves, and returns its log.
func serveBriefly(t *testing.T, args ...string) string {
	t.Helper()
	var log syncbuf.Buffer
	old := logOutput
	logOutput = &log
	t.Cleanup(func() { logOutput = old })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	servingHook = func(server.Addrs) { cancel() }
	t.Cleanup(func() { servingHook = nil })
	code, _, errOut := runCLIContext(ctx, append([]string{"serve", "--dsn", "memory", "--listen", "127.0.0.1:0", "--shutdown-grace", "1s"}, args...)...)
	if code != 0 {
		t.Fatalf("serve exited %d: %s\n%s", code, errOut, log.String())
	}
	return log.String()
}

// --log-level drops the records below it; info is the default.
func TestServeLogLevel(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		serving bool
	}{
		{nil, true},
		{[]string{"--log-level", "debug"}, true},
		{[]string{"--log-level", "warn"}, false},
		{[]string{"--log-level", "error"}, false},
	} {
		useMemory(t, storetest.NewMemory())
		log := serveBriefly(t, tt.args...)
		if got := strings.Contains(log, "historyd serving"); got != tt.serving {
			t.Errorf("%v: the info line \"historyd serving\" logged: %v, want %v\n%s", tt.args, got, tt.serving, log)
		}
	}
}

package main

import (
	"flag"
	"strings"
	"testing"
)

// Every flag set by a variable names it in its help, and the variable's
// name is the flag's, upper-cased after HISTORYD_, but for the few whose
// names were chosen apart from their flags'.
func TestFlagVariables(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	bindServeFlags(fs)
	want := map[string]string{"max-call-duration": "HISTORYD_MAX_CALL_DURATION", "page-token-key-file": "HISTORYD_PAGE_TOKEN_KEY_FILE", "tls-cert": "HISTORYD_TLS_CERT"}
	fs.VisitAll(func(f *flag.Flag) {
		env := "HISTORYD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if !strings.HasSuffix(f.Usage, "(env "+env+")") {
			t.Errorf("serve --%s: help %q does not end naming %s", f.Name, f.Usage, env)
		}
		if w, ok := want[f.Name]; ok && w != env {
			t.Errorf("serve --%s: variable %s, want %s", f.Name, env, w)
		}
	})

	fs = flag.NewFlagSet("turns", flag.ContinueOnError)
	bindClientFlags(fs, &cliContext{})
	demo := flag.NewFlagSet("demo", flag.ContinueOnError)
	bindDemoFlags(demo)
	for _, tt := range []struct {
		fs         *flag.FlagSet
		name, want string
	}{
		{fs, "addr", "HISTORYD_ADDR"}, {fs, "tls-server-name", "HISTORYD_TLS_SERVER_NAME"},
		{fs, "tls-cert", "HISTORYD_CLIENT_CERT"}, {fs, "tls-key", "HISTORYD_CLIENT_KEY"}, {fs, "o", "HISTORYD_OUTPUT"},
		{demo, "out", "HISTORYD_DEMO_PATH"}, {demo, "dsn", "HISTORYD_DEMO_DSN"}, {demo, "schema", "HISTORYD_DEMO_SCHEMA"},
	} {
		if f := tt.fs.Lookup(tt.name); f == nil || !strings.HasSuffix(f.Usage, "(env "+tt.want+")") {
			t.Errorf("%s --%s: want its help to name %s", tt.fs.Name(), tt.name, tt.want)
		}
	}
}

// A flag's 0 turns a limit off: a configuration's negative.
func TestOffAtZero(t *testing.T) {
	if offAtZero(0) != -1 || offAtZero(5) != 5 || offAtZero(int64(-1)) != -1 {
		t.Error("offAtZero does not map 0 alone to -1")
	}
}

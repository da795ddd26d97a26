package clients_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/auth/authtest"
	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/internal/testbin"
)

// pythonMismatch reads turn 1 of the demo thread with both Python clients,
// each target in its mode, and prints each failure's code and details.
const pythonMismatch = `
import asyncio, json, sys
from historyd_client import HistorydThreadHistory, SyncHistorydThreadHistory

async def main():
    out = []
    for target, plaintext in json.loads(sys.argv[1]):
        async with HistorydThreadHistory(target, plaintext=plaintext, retries=0) as h:
            try:
                await h.turn("demo", 1)
                out.append({"client": "python", "code": "OK"})
            except Exception as e:
                out.append({"client": "python", "code": e.code().name, "details": e.details()})
        with SyncHistorydThreadHistory(target, plaintext=plaintext, retries=0) as s:
            try:
                s.turn("demo", 1)
                out.append({"client": "python-sync", "code": "OK"})
            except Exception as e:
                out.append({"client": "python-sync", "code": e.code().name, "details": e.details()})
    print(json.dumps(out))

asyncio.run(main())
`

// jsMismatch is the same with the TypeScript client.
const jsMismatch = `
import { ThreadHistory } from "./dist/index.js";
const out = [];
for (const [target, plaintext] of JSON.parse(process.argv[1])) {
  const h = new ThreadHistory(target, { plaintext, retries: 0 });
  try {
    await h.snapshot("demo", 1);
    out.push({ client: "typescript", code: "OK" });
  } catch (e) {
    out.push({ client: "typescript", code: e.codeName, details: e.details });
  }
  h.close();
}
console.log(JSON.stringify(out));
`

// TestTransportMismatch: every client and the CLI, dialling a historyd in
// TLS without TLS and one in plaintext with TLS, fail with UNAVAILABLE and
// one line saying which the server speaks, each naming its own option.
func TestTransportMismatch(t *testing.T) {
	skipIfShort(t)
	root := testbin.RepoRoot(t)
	python := need(t, "HISTORYD_TEST_CLIENT_PYTHON", "the Python clients run in the client virtualenv (scripts/pyclient.sh builds it)")
	jsDir := need(t, "HISTORYD_TEST_CLIENT_JS", "the TypeScript client runs from client/js with its node_modules (scripts/jsclient.sh installs them)")

	bin := testbin.Build(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "demo.db")
	if out, err := exec.Command(bin, "demo", "--out", db).CombinedOutput(); err != nil {
		t.Fatalf("historyd demo: %v\n%s", err, out)
	}
	ca := authtest.NewCA(t, "historyd test CA")
	caFile := filepath.Join(dir, "ca.pem")
	authtest.WriteFile(t, caFile, ca.PEM)
	certFile, keyFile := ca.Server().WriteFiles(t, dir, "server")
	tlsAddr := startHistorydWith(t, credentials.NewTLS(&tls.Config{RootCAs: ca.Pool()}), bin,
		"--dsn", db, "--tls-cert", certFile, "--tls-key", keyFile)
	plainAddr := startHistoryd(t, bin, "--dsn", db)

	plainServer := "historyd at " + plainAddr + " speaks plaintext, not TLS: "
	tlsServer := "historyd at " + tlsAddr + " speaks TLS, not plaintext: "
	type failure struct {
		Client  string `json:"client"`
		Code    string `json:"code"`
		Details string `json:"details"`
	}
	var got []failure

	// Go: TLS (the default) to the plaintext server, plaintext to the TLS one.
	for _, d := range []struct {
		addr string
		opts []client.Option
	}{{plainAddr, nil}, {tlsAddr, []client.Option{client.WithInsecure()}}} {
		c, err := client.Dial(d.addr, append(d.opts, client.WithRetry(0, 0))...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Snapshot(context.Background(), "demo", 1)
		c.Close()
		st, _ := status.FromError(err)
		code := st.Code().String()
		if st.Code() == codes.Unavailable {
			code = "UNAVAILABLE" // as the other clients spell it
		}
		got = append(got, failure{"go", code, st.Message()})
		if !errors.Is(err, client.ErrServerPlaintext) && !errors.Is(err, client.ErrServerTLS) {
			t.Errorf("go client against %s: %v matches neither ErrServerPlaintext nor ErrServerTLS", d.addr, err)
		}
	}
	// The CLI: a TLS flag to the plaintext server; the loopback default
	// (plaintext) to the TLS one.
	for _, args := range [][]string{{"--addr", plainAddr, "--tls-ca", caFile}, {"--addr", tlsAddr}} {
		cmd := exec.Command(bin, append([]string{"show", "demo", "1"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		code := "OK"
		if errors.As(err, &exit) && exit.ExitCode() == 5 {
			code = "UNAVAILABLE"
		} else if err != nil {
			code = err.Error()
		}
		got = append(got, failure{"cli", code, strings.TrimSuffix(strings.TrimPrefix(stderr.String(), "historyd show: "), "\n")})
	}
	targets, err := json.Marshal([][]any{{plainAddr, false}, {tlsAddr, true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, argv := range []struct {
		dir  string
		env  []string
		argv []string
	}{
		{root, []string{"PYTHONPATH=" + filepath.Join(root, "client/python/src")}, []string{python, "-c", pythonMismatch, string(targets)}},
		{jsDir, nil, []string{"node", "--input-type=module", "-e", jsMismatch, string(targets)}},
	} {
		if argv.dir == jsDir {
			run(t, jsDir, nil, "npm", "run", "--silent", "build")
		}
		var out []failure
		if err := json.Unmarshal([]byte(run(t, argv.dir, argv.env, argv.argv...)), &out); err != nil {
			t.Fatal(err)
		}
		got = append(got, out...)
	}

	// What each says after the sentence every one of them shares.
	option := map[string][2]string{
		"go":          {"dial it with client.WithInsecure()", "dial it without client.WithInsecure() (client.WithTLS for a private CA)"},
		"cli":         {"pass --plaintext", "a loopback --addr is dialled in plaintext unless a TLS flag is given: pass --tls-ca (or --tls-server-name)"},
		"python":      {"pass plaintext=True", "drop plaintext=True (credentials=grpc.ssl_channel_credentials(...) for a private CA)"},
		"python-sync": {"pass plaintext=True", "drop plaintext=True (credentials=grpc.ssl_channel_credentials(...) for a private CA)"},
		"typescript":  {"pass { plaintext: true }", "drop plaintext: true (tls: { ca } for a private CA)"},
	}
	seen := map[string]int{}
	for _, f := range got {
		i := seen[f.Client]
		seen[f.Client]++
		want := []string{plainServer, tlsServer}[i%2] + option[f.Client][i%2]
		if f.Code != "UNAVAILABLE" || f.Details != want {
			t.Errorf("%s, %s server: %s %q\nwant UNAVAILABLE %q", f.Client, []string{"plaintext", "TLS"}[i%2], f.Code, f.Details, want)
		}
	}
	for name := range option {
		if seen[name] != 2 {
			t.Errorf("%s: %d answers, want 2", name, seen[name])
		}
	}
}

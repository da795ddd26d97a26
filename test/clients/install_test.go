package clients_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/historyd/historyd/internal/testbin"
)

// headCommit is the commit this tree is at: what an install from git gets.
// (A git install takes what is committed, so uncommitted edits are not in
// it; the folder install takes the tree as it is.)
func headCommit(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v (an install from git needs git and a checkout)", err)
	}
	return strings.TrimSpace(string(out))
}

// pythonInstalled reads turn 1 of the demo thread as an installed client
// does: the sync client, and the LangChain tool under invoke.
const pythonInstalled = `
import json, sys
import historyd_client, langchain_core
from historyd_client import SyncHistorydThreadHistory
from historyd_client.langchain import inspect_state_tool

with SyncHistorydThreadHistory(sys.argv[1], plaintext=True) as h:
    turn = h.turn("demo", 1)
    answer = inspect_state_tool(h).invoke({"key": "sketch-ops/sketch_area/area_km2", "turn": 1},
                                          {"configurable": {"thread_id": "demo"}})
print(json.dumps({"file": historyd_client.__file__, "langchain_core": langchain_core.__version__,
                  "python": "%d.%d" % sys.version_info[:2],
                  "value": turn.state["sketch-ops/sketch_area/area_km2"]["value"], "answer": answer}))
`

// TestPythonInstall installs the client with its [langchain] extra the
// ordinary way, `pip install "historyd-client[langchain] @
// git+file://localhost/…@<commit>#subdirectory=client/python"`, into a new
// virtualenv of the oldest Python it supports (3.10), with
// requirements-langchain.txt as constraints so that what installs is what
// is pinned (langchain-core 1.7.7 there); then runs the client's unit tests
// against the installed package (not the source tree) and reads the demo
// from a historyd with it.
func TestPythonInstall(t *testing.T) {
	skipIfShort(t)
	root := testbin.RepoRoot(t)
	python := need(t, "HISTORYD_TEST_CLIENT_PYTHON_OLDEST", "pip installs the client into a virtualenv of the oldest supported Python (scripts/pyclients.sh --venvs builds it)")
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	run(t, dir, nil, python, "-m", "venv", venv)
	py := filepath.Join(venv, "bin", "python")
	// file://localhost/…: the pip of Python 3.10 (23.0) refuses a file URL
	// with an empty host (file:///…) in a "name[extra] @ url" requirement.
	spec := "historyd-client[langchain] @ git+file://localhost" + root + "@" + headCommit(t, root) + "#subdirectory=client/python"
	run(t, dir, nil, py, "-m", "pip", "--disable-pip-version-check", "--no-input", "install", "-q",
		"-c", filepath.Join(root, "client/python/requirements-langchain.txt"), spec)
	run(t, dir, nil, py, "-m", "pip", "--disable-pip-version-check", "check")

	// The installed package, not client/python/src: no PYTHONPATH.
	noPath := []string{"PYTHONPATH="}
	run(t, filepath.Join(root, "client/python/tests"), noPath, py, "-m", "unittest", "discover", "-s", ".")

	bin := testbin.Build(t)
	db := filepath.Join(dir, "demo.db")
	if out, err := exec.Command(bin, "demo", "--out", db).CombinedOutput(); err != nil {
		t.Fatalf("historyd demo: %v\n%s", err, out)
	}
	addr := startHistoryd(t, bin, "--dsn", db)
	var got struct {
		File          string  `json:"file"`
		LangchainCore string  `json:"langchain_core"`
		Python        string  `json:"python"`
		Answer        string  `json:"answer"`
		Value         float64 `json:"value"`
	}
	out := run(t, dir, noPath, py, "-c", pythonInstalled, addr)
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if !strings.HasPrefix(got.File, venv) || got.Python != "3.10" || got.LangchainCore != "1.7.7" {
		t.Errorf("imported %s (Python %s, langchain-core %s), want the package installed into %s on 3.10 with langchain-core 1.7.7", got.File, got.Python, got.LangchainCore, venv)
	}
	if want := "11420\n[This is sketch-ops/sketch_area/area_km2 as it stood at the end of turn 1.]"; got.Value != 11420 || got.Answer != want {
		t.Errorf("read turn 1 as %v, the tool answered %q; want 11420 and %q", got.Value, got.Answer, want)
	}
}

// jsInstalled reads turn 1 of the demo thread through the installed
// package, with require (CommonJS) and with import (ESM).
const jsInstalled = `
const cjs = require("@historyd/client");
const { inspectState } = require("@historyd/client/langchain");
(async () => {
  const esm = await import("@historyd/client");
  const out = {};
  for (const [name, mod] of [["require", cjs], ["import", esm]]) {
    const h = new mod.ThreadHistory(process.argv[1], { plaintext: true });
    const snap = await h.snapshot("demo", 1);
    out[name] = snap.state["sketch-ops/sketch_area/area_km2"].value;
    if (name === "require") {
      out.answer = await inspectState(h).invoke({ key: "sketch-ops/sketch_area/area_km2", turn: 1 }, { configurable: { thread_id: "demo" } });
    }
    h.close();
  }
  out.resolved = require.resolve("@historyd/client");
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// jsTypes uses the package's types from CommonJS (.cts) and ESM (.mts)
// sources; tsc must find each through the exports map, and refuse a misuse.
var jsTypes = map[string]string{
	"use.cts": `import { ThreadHistory, type Snapshot } from "@historyd/client";
import { inspectState } from "@historyd/client/langchain";
const h: ThreadHistory = new ThreadHistory("localhost:1", { plaintext: true });
export const s: Promise<Snapshot> = h.snapshot("t", 1);
export const n: string = inspectState(h).name;
`,
	"use.mts": `import { ThreadHistory, type Snapshot } from "@historyd/client";
import { Inspector } from "@historyd/client/inspect";
const h: ThreadHistory = new ThreadHistory("localhost:1", { plaintext: true });
export const s: Promise<Snapshot> = h.snapshot("t", 1);
export const i: Inspector = new Inspector({ history: h });
`,
}

// TestJSInstall installs client/js into a new npm project the two ordinary
// ways, from a folder (a copy of client/js as checked out: no node_modules,
// no dist/) and from git (git+file://…#<commit>::path:client/js), each
// beside @langchain/core and zod as a host installs them. Its prepare
// script must build dist/; require and import must both read the demo from
// a historyd; and tsc must type a CommonJS and an ESM user through the
// exports map.
func TestJSInstall(t *testing.T) {
	skipIfShort(t)
	root := testbin.RepoRoot(t)
	jsDir := need(t, "HISTORYD_TEST_CLIENT_JS", "tsc comes from client/js's node_modules (scripts/jsclient.sh installs them)")
	raw, err := os.ReadFile(filepath.Join(root, "client/js/package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	bin := testbin.Build(t)
	db := filepath.Join(t.TempDir(), "demo.db")
	if out, err := exec.Command(bin, "demo", "--out", db).CombinedOutput(); err != nil {
		t.Fatalf("historyd demo: %v\n%s", err, out)
	}
	addr := startHistoryd(t, bin, "--dsn", db)

	// The folder as a checkout has it: the tracked files only.
	folder := filepath.Join(t.TempDir(), "js")
	files, err := exec.Command("git", "-C", filepath.Join(root, "client/js"), "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, "client/js", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(folder, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(folder, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for _, tt := range []struct{ name, spec string }{
		{"folder", folder},
		{"git", "git+file://" + root + "#" + headCommit(t, root) + "::path:client/js"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			proj := t.TempDir()
			if err := os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name": "host", "version": "0.0.0", "private": true}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, proj, nil, "npm", "install", "--no-audit", "--no-fund", "--loglevel=error", tt.spec,
				"@langchain/core@"+pkg.DevDependencies["@langchain/core"], "zod@"+pkg.DevDependencies["zod"])

			var got struct {
				Require, Import float64
				Answer          string
				Resolved        string
			}
			out := run(t, proj, nil, "node", "-e", jsInstalled, addr)
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if want := "11420\n[This is sketch-ops/sketch_area/area_km2 as it stood at the end of turn 1.]"; got.Require != 11420 || got.Import != 11420 || got.Answer != want {
				t.Errorf("require read %v, import %v, the tool answered %q; want 11420 and %q", got.Require, got.Import, got.Answer, want)
			}
			if !strings.HasSuffix(got.Resolved, filepath.Join("dist", "cjs", "index.js")) {
				t.Errorf("require resolved %s, want the CommonJS build dist/cjs/index.js", got.Resolved)
			}

			for name, src := range jsTypes {
				if err := os.WriteFile(filepath.Join(proj, name), []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tsc := []string{filepath.Join(jsDir, "node_modules/.bin/tsc"), "--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext",
				"--skipLibCheck", "--typeRoots", filepath.Join(jsDir, "node_modules/@types"), "--types", "node"}
			run(t, proj, nil, append(tsc, "use.cts", "use.mts")...)
			if err := os.WriteFile(filepath.Join(proj, "bad.cts"), []byte("import { ThreadHistory } from \"@historyd/client\";\nexport const x: number = ThreadHistory;\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			bad := exec.Command(tsc[0], append(tsc[1:], "bad.cts")...)
			bad.Dir = proj
			if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "TS2322") {
				t.Errorf("tsc took a class as a number (the types are not the package's): %v\n%s", err, out)
			}
		})
	}
}

package clients_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/client/inspect"
	"github.com/historyd/historyd/internal/testbin"
)

var update = flag.Bool("update", false, "rewrite the want of every case in client/testdata/cases.json with the Go inspector's answer")

// casesFile is the shared table, relative to the repository root.
const casesFile = "client/testdata/cases.json"

// table is client/testdata/cases.json.
type table struct {
	Comment []string     `json:"comment"`
	Cases   []sharedCase `json:"cases"`
}

// sharedCase is one inspect_state call and the answer every client must
// give, byte for byte.
type sharedCase struct {
	// Name says what the case shows; unique in the table.
	Name string `json:"name"`
	// Thread is the thread the tool reads.
	Thread string `json:"thread"`
	// NoThread runs the tool without a thread id (no configurable.thread_id
	// in the run's config), as a host that forgot to pass it does; Thread
	// is then empty.
	NoThread bool `json:"no_thread,omitempty"`
	// NoHistory builds the tool without a history, as a deployment that
	// keeps none does.
	NoHistory bool `json:"no_history,omitempty"`
	// Channel builds the tool reading this state channel instead of the
	// server's default, as a host configures it.
	Channel string `json:"channel,omitempty"`
	// Args are the tool's arguments as the model sends them.
	Args json.RawMessage `json:"args"`
	// Want is the tool's answer.
	Want string `json:"want"`
}

// runnerOutput is what each language's case runner writes: the tool as it
// binds it, and each case's answer (or the error the tool raised).
type runnerOutput struct {
	Tool struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	} `json:"tool"`
	Results []struct {
		Name   string  `json:"name"`
		Output *string `json:"output"`
		Error  string  `json:"error"`
	} `json:"results"`
}

func loadTable(t *testing.T, root string) table {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, casesFile))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var tab table
	if err := dec.Decode(&tab); err != nil {
		t.Fatalf("%s: %v", casesFile, err)
	}
	seen := map[string]bool{}
	for i, c := range tab.Cases {
		if c.Name == "" || seen[c.Name] {
			t.Fatalf("%s: case %d: name %q is empty or not unique", casesFile, i, c.Name)
		}
		seen[c.Name] = true
		if (c.Thread == "") != c.NoThread || len(c.Args) == 0 {
			t.Fatalf("%s: case %q: args, and either thread or no_thread, are required", casesFile, c.Name)
		}
	}
	return tab
}

// TestSharedCases answers every case of client/testdata/cases.json with the
// Go, Python and TypeScript inspect_state against one running historyd, and
// requires each answer to be the table's, byte for byte.
func TestSharedCases(t *testing.T) {
	skipIfShort(t)
	root := testbin.RepoRoot(t)
	if *update {
		updateTable(t, root)
		return
	}
	tab := loadTable(t, root)
	addr := serveFixture(t)
	cases := filepath.Join(root, casesFile)

	t.Run("go", func(t *testing.T) { compare(t, tab, goCases(t, addr, tab.Cases)) })
	t.Run("python", func(t *testing.T) {
		python := need(t, "HISTORYD_TEST_CLIENT_PYTHON", "the Python case runner needs the client virtualenv's interpreter (scripts/pyclient.sh builds it)")
		out := filepath.Join(t.TempDir(), "python.json")
		run(t, root, []string{"PYTHONPATH=" + filepath.Join(root, "client/python/src")},
			python, filepath.Join(root, "client/python/tests/run_cases.py"), "--target", addr, "--cases", cases, "--out", out)
		compare(t, tab, readRunner(t, out))
	})
	t.Run("typescript", func(t *testing.T) {
		jsDir := need(t, "HISTORYD_TEST_CLIENT_JS", "the TypeScript case runner needs client/js with its node_modules (scripts/jsclient.sh installs them)")
		run(t, jsDir, nil, "npm", "run", "--silent", "build")
		out := filepath.Join(t.TempDir(), "typescript.json")
		run(t, jsDir, nil, "node", "test/support/run-cases.mjs", "--target", addr, "--cases", cases, "--out", out)
		compare(t, tab, readRunner(t, out))
	})
}

// compare requires a runner's tool to be Go's and each of its answers to be
// the table's.
func compare(t *testing.T, tab table, out runnerOutput) {
	t.Helper()
	checkTool(t, out)
	if len(out.Results) != len(tab.Cases) {
		t.Fatalf("%d results for %d cases", len(out.Results), len(tab.Cases))
	}
	for i, c := range tab.Cases {
		r := out.Results[i]
		switch {
		case r.Name != c.Name:
			t.Errorf("result %d is for case %q, want %q", i, r.Name, c.Name)
		case r.Output == nil:
			t.Errorf("case %q: the tool failed: %s", c.Name, r.Error)
		case *r.Output != c.Want:
			t.Errorf("case %q (thread %s, args %s):\n got: %s\nwant: %s\n%s", c.Name, c.Thread, c.Args, quote(*r.Output), quote(c.Want), firstDifference(*r.Output, c.Want))
		}
	}
}

// updateTable rewrites each case's want with the Go inspector's answer:
// Go's client/inspect is the reference the other clients port.
func updateTable(t *testing.T, root string) {
	tab := loadTable(t, root)
	addr := serveFixture(t)
	out := goCases(t, addr, tab.Cases)
	for i := range tab.Cases {
		r := out.Results[i]
		if r.Output == nil {
			t.Fatalf("case %q: the Go inspector failed: %s", tab.Cases[i].Name, r.Error)
		}
		tab.Cases[i].Want = *r.Output
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(tab); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, casesFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote the answers of %d cases in %s with Go's; run again without -update to check every client", len(tab.Cases), casesFile)
}

// serveFixture builds historyd, writes the fixture and serves it, with
// every state channel the fixture's threads hold, returning its address.
func serveFixture(t *testing.T) string {
	t.Helper()
	bin := testbin.Build(t)
	return startHistoryd(t, bin, "--dsn", writeFixture(t, bin), "--state-channels", strings.Join(fixtureChannels, ","))
}

// goCases answers the cases with client/inspect over the Go client, in the
// shape the other runners write.
func goCases(t *testing.T, addr string, cases []sharedCase) runnerOutput {
	t.Helper()
	c, err := client.Dial(addr, client.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out runnerOutput
	out.Tool.Name, out.Tool.Description = inspect.ToolName, inspect.ToolDescription
	if err := json.Unmarshal(inspect.ParametersSchema, &out.Tool.Parameters); err != nil {
		t.Fatal(err)
	}
	for _, sc := range cases {
		in := &inspect.Inspector{History: c}
		if sc.Channel != "" {
			in.Options = []client.ReadOption{client.WithChannel(sc.Channel)}
		}
		if sc.NoHistory {
			in = &inspect.Inspector{}
		}
		text, err := in.Call(context.Background(), sc.Thread, sc.Args)
		r := struct {
			Name   string  `json:"name"`
			Output *string `json:"output"`
			Error  string  `json:"error"`
		}{Name: sc.Name}
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Output = &text
		}
		out.Results = append(out.Results, r)
	}
	return out
}

func readRunner(t *testing.T, path string) runnerOutput {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out runnerOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// checkTool requires the tool a runner bound to be Go's: the same name and
// description, and the same parameters with the same types and
// descriptions, of which only key is required.
func checkTool(t *testing.T, out runnerOutput) {
	t.Helper()
	if out.Tool.Name != inspect.ToolName {
		t.Errorf("tool name %q, want %q", out.Tool.Name, inspect.ToolName)
	}
	if out.Tool.Description != inspect.ToolDescription {
		t.Errorf("tool description differs from Go's inspect.ToolDescription:\n%s", firstDifference(out.Tool.Description, inspect.ToolDescription))
	}
	var want map[string]any
	if err := json.Unmarshal(inspect.ParametersSchema, &want); err != nil {
		t.Fatal(err)
	}
	got := out.Tool.Parameters
	if fmt.Sprint(got["required"]) != fmt.Sprint(want["required"]) {
		t.Errorf("required parameters %v, want %v", got["required"], want["required"])
	}
	gotProps, _ := got["properties"].(map[string]any)
	wantProps := want["properties"].(map[string]any)
	if len(gotProps) != len(wantProps) {
		t.Errorf("parameters %v, want %v", keysOf(gotProps), keysOf(wantProps))
	}
	for name, w := range wantProps {
		g, _ := gotProps[name].(map[string]any)
		w := w.(map[string]any)
		if g["description"] != w["description"] || !sameType(g, w["type"].(string)) {
			t.Errorf("parameter %s = %v, want type %v, description %q", name, g, w["type"], w["description"])
		}
	}
}

// sameType says whether a property schema has the type want, also when it
// spells an optional parameter as a union with null.
func sameType(prop map[string]any, want string) bool {
	if prop["type"] == want {
		return true
	}
	if types, ok := prop["type"].([]any); ok {
		return reflect.DeepEqual(types, []any{want, "null"})
	}
	for _, branch := range []string{"anyOf", "oneOf"} {
		if alts, ok := prop[branch].([]any); ok && len(alts) == 2 {
			a, _ := alts[0].(map[string]any)
			b, _ := alts[1].(map[string]any)
			if a["type"] == want && b["type"] == "null" {
				return true
			}
		}
	}
	return false
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// quote shows a text with every byte visible: escapes, not look-alikes.
func quote(s string) string { return fmt.Sprintf("%+q", s) }

// firstDifference points at where two texts part.
func firstDifference(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-40)
	return fmt.Sprintf("first difference at byte %d: got …%+q…, want …%+q…", i, got[from:min(len(got), i+40)], want[from:min(len(want), i+40)])
}

package clients_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/historyd/historyd/internal/testbin"
)

// formatsOutput is what each language's format checker writes.
type formatsOutput struct {
	Reads []struct {
		Thread    string `json:"thread"`
		Channel   string `json:"channel"`
		Turns     int    `json:"turns"`
		Entries   int    `json:"entries"`
		JSONBytes int    `json:"json_bytes"`
	} `json:"reads"`
	Mismatches []string `json:"mismatches"`
}

// TestValueFormats has the Python and TypeScript clients read every turn of
// every thread and channel the shared cases name, from the historyd built
// here serving the fixture, with values as JSON text (their default) and as
// google.protobuf.Value, and requires the same values from both, in each
// language's own terms: Python's int against float, -0.0 and key order;
// JavaScript's -0 and key order. Both must have read the same entries.
func TestValueFormats(t *testing.T) {
	skipIfShort(t)
	root := testbin.RepoRoot(t)
	python := need(t, "HISTORYD_TEST_CLIENT_PYTHON", "the Python format checker needs the client virtualenv's interpreter (scripts/pyclient.sh builds it)")
	jsDir := need(t, "HISTORYD_TEST_CLIENT_JS", "the TypeScript format checker needs client/js with its node_modules (scripts/jsclient.sh installs them)")

	var reads [][2]string
	seen := map[[2]string]bool{}
	for _, c := range loadTable(t, root).Cases {
		r := [2]string{c.Thread, c.Channel}
		if !c.NoHistory && !c.NoThread && !seen[r] {
			seen[r] = true
			reads = append(reads, r)
		}
	}
	arg, err := json.Marshal(reads)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveFixture(t)

	pyOut := filepath.Join(t.TempDir(), "python.json")
	run(t, root, []string{"PYTHONPATH=" + filepath.Join(root, "client/python/src")},
		python, filepath.Join(root, "client/python/tests/check_formats.py"), "--target", addr, "--reads", string(arg), "--out", pyOut)
	run(t, jsDir, nil, "npm", "run", "--silent", "build")
	jsOut := filepath.Join(t.TempDir(), "typescript.json")
	run(t, jsDir, nil, "node", "test/support/check-formats.mjs", "--target", addr, "--reads", string(arg), "--out", jsOut)

	py, js := readFormats(t, pyOut), readFormats(t, jsOut)
	for name, out := range map[string]formatsOutput{"python": py, "typescript": js} {
		for _, m := range out.Mismatches {
			t.Errorf("%s: %s", name, m)
		}
		if len(out.Reads) != len(reads) {
			t.Fatalf("%s: %d reads, want %d", name, len(out.Reads), len(reads))
		}
	}
	entries, bytes := 0, 0
	for i, p := range py.Reads {
		j := js.Reads[i]
		if p != j {
			t.Errorf("read %d: python %+v, typescript %+v", i, p, j)
		}
		entries += p.Entries
		bytes += p.JSONBytes
	}
	// The fixture's turns hold 70 entries between them (more as threads
	// are added); a checker that read none would have compared nothing.
	if entries < 50 {
		t.Errorf("the checkers read %d entries in all, want the fixture's (at least 50)", entries)
	}
	t.Logf("%d threads and channels, %d entries, %d bytes of JSON text, the same in both formats in Python and TypeScript", len(reads), entries, bytes)
}

func readFormats(t *testing.T, path string) formatsOutput {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out formatsOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

package clients_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/client/inspect"
	"github.com/historyd/historyd/internal/testbin"
)

// TestLangGraphAgent runs a real LangGraph agent (a StateGraph with a
// ToolNode, a scripted chat model, SQLite checkpoints) whose inspect_state
// is the Python client's tool, with graph.invoke over the sync client,
// graph.invoke over the async one, and graph.ainvoke
// (client/python/tests/langgraph_agent.py), against the historyd built
// here serving the agent's own checkpoint file. Each run's answers must be
// what LangGraph's state held at that turn, labelled as the Go tool labels
// it, and byte for byte the Go inspector's answer to the same call.
func TestLangGraphAgent(t *testing.T) {
	skipIfShort(t)
	root := testbin.RepoRoot(t)
	python := need(t, "HISTORYD_TEST_PYTHON", "the agent runs with LangGraph in the conformance virtualenv (scripts/pyenv.sh builds it)")
	bin := testbin.Build(t)
	db := filepath.Join(t.TempDir(), "agent.db")
	// The demo writes the tables in SqliteSaver's format; the agent's
	// SqliteSaver writes its threads beside the demo's.
	if out, err := exec.Command(bin, "demo", "--out", db).CombinedOutput(); err != nil {
		t.Fatalf("historyd demo: %v\n%s", err, out)
	}
	addr := startHistoryd(t, bin, "--dsn", db)
	out := filepath.Join(t.TempDir(), "agent.json")
	run(t, root, []string{"PYTHONPATH=" + filepath.Join(root, "client/python/src") + string(os.PathListSeparator) + filepath.Join(root, "test/conformance/py")},
		python, filepath.Join(root, "client/python/tests/langgraph_agent.py"), "--target", addr, "--db", db, "--out", out)
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var runs map[string]struct {
		Thread  string    `json:"thread"`
		Answers []string  `json:"answers"`
		Areas   []float64 `json:"areas"`
	}
	if err := json.Unmarshal(raw, &runs); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}

	c, err := client.Dial(addr, client.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const key = "sketch-ops/sketch_area/area_km2"
	for _, name := range []string{"invoke", "invoke-over-async-client", "ainvoke"} {
		r, ok := runs[name]
		if !ok {
			t.Errorf("no %s run in %s", name, raw)
			continue
		}
		// LangGraph's own state: Severn's sketch, then the Thames' over it.
		if !slices.Equal(r.Areas, []float64{11420, 12935, 12935, 12935}) {
			t.Errorf("%s: LangGraph's areas at the end of each turn %v", name, r.Areas)
		}
		one := 1
		var want []string
		for _, args := range []inspect.Args{{Key: key, Turn: &one}, {Key: key}} {
			text, err := inspect.Read(context.Background(), c, r.Thread, args)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, text)
		}
		if !strings.HasPrefix(want[0], fmt.Sprintf("%v\n[This is %s as it stood at the end of turn 1.]", r.Areas[0], key)) {
			t.Errorf("%s: the Go inspector reads turn 1 as %q, not LangGraph's %v", name, want[0], r.Areas[0])
		}
		if !slices.Equal(r.Answers, want) {
			t.Errorf("%s: the agent's inspect_state answered\n%q\nwant (the Go inspector's)\n%q", name, r.Answers, want)
		}
	}
}

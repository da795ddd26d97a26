package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/historyd/historyd/demo"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// demoServer serves the demo file (`historyd demo`) on loopback, as
// `make run` does, and returns its address.
func demoServer(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := demo.Write(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, server.Config{}, servertest.WithDSN(path, ""), servertest.WithTCP())
	return srv.Addr()
}

// cli runs an operator command and returns its exit code and output.
func cli(t *testing.T, addr string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append(args, "--addr", addr), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCLIExitCodes(t *testing.T) {
	addr := demoServer(t)
	for _, tt := range []struct {
		args   []string
		code   int
		stdout string // a line it holds
		stderr string
	}{
		{[]string{"threads"}, exitOK, "demo-pruned  5 ", ""},
		{[]string{"threads", "--newest", "--turns", "--limit", "1"}, exitOK, "demo-pruned", "more threads follow"},
		{[]string{"turns", "demo"}, exitOK, "2     yes       2026-03-14 09:29:52Z  1f11f885-aaa8-6b98-8009-fdda1613a4ed  now sketch one around the Thames", ""},
		{[]string{"turns", "nope"}, exitOK, "", `thread "nope" has no turns`},
		{[]string{"show", "demo", "1", "--key", "sketch-ops/sketch_area/area_km2"}, exitOK, "sketch-ops/sketch_area/area_km2  turn 1      sketch_area  11420", ""},
		{[]string{"show", "demo", "7"}, exitNoSuchTurn, "", "no such turn: turn 7, of a thread with 4 turns"},
		{[]string{"show", "demo-pruned", "1"}, exitNotRetained, "", "turn 1 is no longer retained; retained turns: 3, 4"},
		{[]string{"show", "demo", "zero"}, exitUsage, "", `TURN "zero": want a turn number`},
		{[]string{"show", "demo"}, exitUsage, "", "want show THREAD TURN"},
		{[]string{"diff", "demo", "2", "--key", "sketch-ops/sketch_area/area_km2"}, exitOK, "sketch-ops/sketch_area/area_km2  changed  replace (value) 12935", ""},
		{[]string{"diff", "demo", "2", "3"}, exitOK, "no key changed", ""},
		{[]string{"diff", "demo-pruned", "2"}, exitNotRetained, "", "turn 1 is no longer retained"},
		{[]string{"diff", "demo", "4", "5"}, exitNoSuchTurn, "", "no such turn: turn 5"},
		{[]string{"diff", "demo", "1"}, exitUsage, "", "turn 1 has no turn before it"},
		{[]string{"threads", "--since", "yesterday"}, exitUsage, "", "--since"},
		{[]string{"threads", "-o", "yaml"}, exitUsage, "", `-o "yaml"`},
		{[]string{"threads", "--page-size", "5000", "--limit", "0"}, exitUsage, "", "page_size: is 5000; the limit is 1000"},
	} {
		code, out, errs := cli(t, addr, tt.args...)
		if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errs, tt.stderr) {
			t.Errorf("%q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.args, code, tt.code, out, errs)
		}
	}
	// Nothing listens there.
	if code, _, errs := cli(t, "127.0.0.1:1", "threads", "--timeout", "2s"); code != exitUnavailable {
		t.Errorf("no server: exit %d, %s", code, errs)
	}
}

func TestCLIJSON(t *testing.T) {
	addr := demoServer(t)
	code, out, _ := cli(t, addr, "show", "demo", "2", "-o", "json", "--key", "sketch-ops/sketch_area/name")
	var snap struct {
		Turn    int                       `json:"turn"`
		Outcome string                    `json:"outcome"`
		State   map[string]map[string]any `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &snap); err != nil || code != exitOK || snap.Outcome != "found" || snap.State["sketch-ops/sketch_area/name"]["value"] != "Thames" {
		t.Errorf("show -o json: exit %d, %v\n%s", code, err, out)
	}
	// A miss still prints its answer, and exits with its code.
	code, out, _ = cli(t, addr, "show", "demo-pruned", "2", "-o", "json")
	if err := json.Unmarshal([]byte(out), &snap); err != nil || code != exitNotRetained || snap.Outcome != "no_longer_retained" {
		t.Errorf("show of a pruned turn -o json: exit %d, %v\n%s", code, err, out)
	}
	code, out, _ = cli(t, addr, "diff", "demo", "1", "2", "-o", "json", "--key", "sketch-ops/sketch_area/area_km2")
	var d struct {
		From    map[string]any   `json:"from"`
		Changes []map[string]any `json:"changes"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != exitOK || d.From["outcome"] != "found" || len(d.Changes) != 1 {
		t.Fatalf("diff -o json: exit %d, %v\n%s", code, err, out)
	}
	if p, _ := json.Marshal(d.Changes[0]["patch"]); string(p) != `[{"op":"replace","path":"","value":12935}]` {
		t.Errorf("diff patch: %s", p)
	}
	var listed struct {
		Threads []map[string]any `json:"threads"`
		Next    string           `json:"next_page_token"`
	}
	code, out, _ = cli(t, addr, "threads", "-o", "json", "--limit", "1")
	if err := json.Unmarshal([]byte(out), &listed); err != nil || code != exitOK || len(listed.Threads) != 1 || listed.Next == "" {
		t.Fatalf("threads --limit 1 -o json: %v\n%s", err, out)
	}
	code, out, _ = cli(t, addr, "threads", "-o", "json", "--page-token", listed.Next)
	if err := json.Unmarshal([]byte(out), &listed); err != nil || code != exitOK || len(listed.Threads) != 1 || listed.Threads[0]["thread_id"] != "demo-pruned" || listed.Next != "" {
		t.Errorf("threads from the token: %v\n%s", err, out)
	}
}

// A thread the server could not read in full is listed with its error:
// on stderr beside the table, under "error" in JSON.
func TestCLIThreadsWithAnError(t *testing.T) {
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "fine"}, storetest.Demo)
	mem.PutBlobs(backend.Ref{ThreadID: "broken"}, "1f0d-000000", storetest.Base, map[string]backend.Blob{"messages": {Type: "json", Data: []byte(`[{`)}})
	addr := servertest.Start(t, server.Config{Store: store.Config{Backend: mem}}, servertest.WithTCP()).Addr()
	code, out, errs := cli(t, addr, "threads", "--turns")
	if code != exitOK || !strings.Contains(out, "fine ") || !strings.Contains(out, "broken ") ||
		!strings.Contains(errs, "historyd threads: broken could not be read in full: DataLoss: ") {
		t.Errorf("threads --turns: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	code, out, _ = cli(t, addr, "threads", "--turns", "-o", "json")
	var listed struct {
		Threads []struct {
			ID    string         `json:"thread_id"`
			Error map[string]any `json:"error"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil || code != exitOK || len(listed.Threads) != 2 ||
		listed.Threads[0].ID != "broken" || listed.Threads[0].Error["code"] != "DataLoss" || listed.Threads[1].Error != nil {
		t.Errorf("threads --turns -o json: exit %d, %v\n%s", code, err, out)
	}
}

// historyd watch prints each turn as it ends, as JSON lines for scripts.
func TestCLIWatch(t *testing.T) {
	mem := storetest.NewMemory()
	b := storetest.NewBuilder(mem, backend.Ref{ThreadID: "w"})
	cfg := server.Config{Store: store.Config{Backend: mem}}
	cfg.Watch.PollInterval = 10 * time.Millisecond
	srv := servertest.Start(t, cfg, servertest.WithTCP())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"watch", "w", "-o", "json", "--addr", srv.Addr()}, w, io.Discard)
		w.Close()
	}()
	lines := bufio.NewScanner(r)
	b.Turn(storetest.Demo[0])
	b.Turn(storetest.Demo[1])
	if !lines.Scan() {
		t.Fatal("no line from historyd watch")
	}
	var ev struct {
		Event string                    `json:"event"`
		Turn  int                       `json:"turn"`
		State map[string]map[string]any `json:"state"`
	}
	if err := json.Unmarshal(lines.Bytes(), &ev); err != nil || ev.Event != "turn_ended" || ev.Turn != 1 || ev.State["sketch-ops/sketch_area/name"]["value"] != "Severn" {
		t.Errorf("first line %s: %v", lines.Bytes(), err)
	}
	cancel()
	go func() {
		for lines.Scan() {
		}
	}()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("watch ended with exit %d, want 0", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not end after its context")
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/historyd/historyd/client"
)

// Every command reading a thread takes --head: the answer names the head it
// was read on, and a head past the limit is refused naming the field.
func TestCLIHead(t *testing.T) {
	addr := demoServer(t)
	code, out, errs := cli(t, addr, "turns", "demo", "-o", "json")
	var idx struct {
		Head      string `json:"head_checkpoint_id"`
		Branches  int    `json:"branches"`
		Numbering string `json:"numbering"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &idx) != nil || idx.Head == "" || idx.Branches != 0 || idx.Numbering != "complete" {
		t.Fatalf("turns -o json: exit %d, %s %s", code, out, errs)
	}
	for _, args := range [][]string{
		{"turns", "demo", "--head", idx.Head, "-o", "json"},
		{"show", "demo", "1", "--head", idx.Head, "-o", "json"},
		{"diff", "demo", "2", "--head", idx.Head, "-o", "json"},
	} {
		code, out, errs := cli(t, addr, args...)
		var got struct {
			Head string `json:"head_checkpoint_id"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || got.Head != idx.Head {
			t.Errorf("%q: exit %d, head %q, want %q\n%s", args, code, got.Head, idx.Head, errs)
		}
	}
	long := strings.Repeat("x", 257)
	for _, cmd := range [][]string{{"turns", "demo"}, {"show", "demo", "1"}, {"diff", "demo", "2"}, {"watch", "demo"}} {
		code, _, errs := cli(t, addr, append(cmd, "--head", long)...)
		if code != exitUsage || !strings.Contains(errs, "head_checkpoint_id: is 257 bytes; the limit is 256") {
			t.Errorf("%q --head of 257 bytes: exit %d, %s", cmd, code, errs)
		}
	}
	code, out, errs = cli(t, addr, "turns", "demo", "--branches")
	if code != exitOK || out != "" || !strings.Contains(errs, `thread "demo" has no abandoned branches (head `+idx.Head+")") {
		t.Errorf("--branches of a thread never rewound: exit %d\n%s\n%s", code, out, errs)
	}
}

// --branches lists each fork: where it left, at which turn, how many
// questions the branch held, and its newest checkpoint to pass to --head.
func TestCLIBranches(t *testing.T) {
	idx := &client.TurnIndex{Head: "1f0c-0012", Forks: []client.Fork{
		{From: "1f0c-0004", Turn: 2, Questions: 4, Newest: "1f0c-0009"},
		{From: "1f0c-0002", Turn: 1, Questions: 2, Newest: "1f0c-000b"},
	}}
	var out, errs bytes.Buffer
	c := &cliContext{stdout: &out, stderr: &errs, name: "turns"}
	if code := c.branches("t", idx); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	want := "FROM CHECKPOINT  TURN  QUESTIONS  NEWEST CHECKPOINT\n" +
		"1f0c-0004        2     4          1f0c-0009\n" +
		"1f0c-0002        1     2          1f0c-000b\n"
	if out.String() != want || !strings.Contains(errs.String(), "--head NEWEST_CHECKPOINT") {
		t.Errorf("table:\n%s\nwant:\n%s\nstderr: %s", out.String(), want, errs.String())
	}
	out.Reset()
	c.json = true
	c.branches("t", idx)
	var got struct {
		Branches []map[string]any `json:"branches"`
	}
	if json.Unmarshal(out.Bytes(), &got) != nil || len(got.Branches) != 2 || got.Branches[0]["newest_checkpoint_id"] != "1f0c-0009" || got.Branches[1]["turn"] != 1.0 {
		t.Errorf("-o json: %s", out.String())
	}
	if line := rewoundText(&client.Rewound{Turn: 2, Fork: &idx.Forks[0]}); line != "history rewound to turn 2: the turns printed after it belong to an abandoned branch (from checkpoint 1f0c-0004, newest 1f0c-0009; read it with --head 1f0c-0009)" {
		t.Errorf("watch's line: %s", line)
	}
}

package client_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/client/clienttest"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// scriptedThreads writes three threads into one backend: "together" (turns 2 and 3
// asked in one input), "summarized" (a summary, then everything before it
// pruned: estimated numbering) and "files" (a files and a todos channel
// besides tool_state).
func scriptedThreads() *storetest.Memory {
	mem := storetest.NewMemory()
	together := clienttest.NewScript(mem, backend.Ref{ThreadID: "together"}, "1f0c")
	together.Run(clienttest.Input{Asked: []string{"sketch the Severn"}, State: map[string]any{"name": "Severn"}})
	together.Run(clienttest.Input{Asked: []string{"now the Thames", "and colour it blue"}, State: map[string]any{"name": "Thames", "colour": "blue"}})
	together.Run(clienttest.Input{Asked: []string{"compare them"}})

	summarized := clienttest.NewScript(mem, backend.Ref{ThreadID: "summarized"}, "1f0c")
	summarized.Run(clienttest.Input{Asked: []string{"q1"}, State: map[string]any{"area": 1.0}})
	summarized.Run(clienttest.Input{Asked: []string{"q2"}, Summary: "the user asked q1"})
	summarized.Prune()
	summarized.Run(clienttest.Input{Asked: []string{"q3"}, State: map[string]any{"area": 3.0}})

	files := clienttest.NewScript(mem, backend.Ref{ThreadID: "files"}, "1f0c")
	files.Run(clienttest.Input{Asked: []string{"take notes"}, State: map[string]any{"area": 1.0},
		Merge:   map[string]map[string]any{"files": {"/notes.md": clienttest.FileData("one", 0, 0)}},
		Replace: map[string]any{"todos": []any{clienttest.Todo("sketch", "pending")}}})
	files.Run(clienttest.Input{Asked: []string{"more notes"},
		Merge: map[string]map[string]any{"files": {"/notes.md": clienttest.FileData("two", 0, 1), "/more.md": clienttest.FileData("more", 1, 1)}}})
	return mem
}

// serveChannels serves mem with the channels scriptedThreads writes.
func serveChannels(t *testing.T, mem *storetest.Memory) *client.Client {
	t.Helper()
	s := &running{servertest.Start(t, server.Config{Store: store.Config{Backend: mem, StateChannels: []string{"tool_state", "files", "todos"}}})}
	return s.dial(t)
}

func TestAnsweredWith(t *testing.T) {
	c := serveChannels(t, scriptedThreads())
	ctx := context.Background()
	want := map[int][]int{2: {3}, 3: {2}}

	for n := 1; n <= 4; n++ {
		s, err := c.Snapshot(ctx, "together", n)
		if err != nil {
			t.Fatal(err)
		}
		if s.Outcome != client.Found || !slices.Equal(s.AnsweredWith, want[n]) {
			t.Errorf("Snapshot(%d): outcome %v, answered with %v; want found, %v", n, s.Outcome, s.AnsweredWith, want[n])
		}
	}
	two, _ := c.Snapshot(ctx, "together", 2)
	three, _ := c.Snapshot(ctx, "together", 3)
	if two.CheckpointID != three.CheckpointID || two.State["name"].Value != "Thames" || two.Question != "now the Thames" || three.Question != "and colour it blue" {
		t.Errorf("turns 2 and 3 = %+v, %+v; want one end state, each its own question", two, three)
	}

	h, err := c.Snapshots(ctx, "together")
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range h.Turns {
		if !slices.Equal(ts.AnsweredWith, want[ts.Turn]) {
			t.Errorf("Snapshots turn %d answered with %v, want %v", ts.Turn, ts.AnsweredWith, want[ts.Turn])
		}
		if at := h.At(ts.Turn); !slices.Equal(at.AnsweredWith, want[ts.Turn]) {
			t.Errorf("History.At(%d) answered with %v, want %v", ts.Turn, at.AnsweredWith, want[ts.Turn])
		}
	}
	for _, ts := range collect(t, c.StreamSnapshots(ctx, "together")) {
		if !slices.Equal(ts.AnsweredWith, want[ts.Turn]) {
			t.Errorf("StreamSnapshots turn %d answered with %v, want %v", ts.Turn, ts.AnsweredWith, want[ts.Turn])
		}
	}
	turns, err := c.Turns(ctx, "together")
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range turns {
		if !slices.Equal(ti.AnsweredWith, want[ti.Turn]) {
			t.Errorf("Turns turn %d answered with %v, want %v", ti.Turn, ti.AnsweredWith, want[ti.Turn])
		}
	}
}

func TestNumbering(t *testing.T) {
	mem := scriptedThreads()
	ref := backend.Ref{ThreadID: "pruned"}
	written := storetest.Build(mem, ref, demo)
	// The thread's first, empty checkpoint and turns 1 and 2: the oldest
	// left holds every earlier message, so those questions are counted.
	mem.Delete(ref, append([]string{"1f0c-000000"}, append(written[0].IDs, written[1].IDs...)...))
	storetest.Build(mem, backend.Ref{ThreadID: "demo"}, demo)
	c := serveChannels(t, mem)
	ctx := context.Background()

	for _, tt := range []struct {
		thread string
		want   client.Numbering
	}{
		{"demo", client.NumberingComplete},
		{"pruned", client.NumberingCounted},
		{"summarized", client.NumberingEstimated},
	} {
		idx, err := c.TurnIndex(ctx, tt.thread)
		if err != nil {
			t.Fatal(err)
		}
		if idx.Numbering != tt.want || idx.Total != len(idx.Turns) {
			t.Errorf("%s: TurnIndex numbering %v, total %d of %d turns; want %v", tt.thread, idx.Numbering, idx.Total, len(idx.Turns), tt.want)
		}
		h, err := c.Snapshots(ctx, tt.thread)
		if err != nil {
			t.Fatal(err)
		}
		if h.Numbering != tt.want {
			t.Errorf("%s: Snapshots numbering %v, want %v", tt.thread, h.Numbering, tt.want)
		}
		for _, ts := range h.Turns {
			if ts.Numbering != tt.want {
				t.Errorf("%s: Snapshots turn %d numbering %v, want %v", tt.thread, ts.Turn, ts.Numbering, tt.want)
			}
		}
		// Every outcome carries it: found, no_such_turn, and the pruned or
		// summarized threads' no_longer_retained turn 1.
		for _, n := range []int{0, 1, idx.Total} {
			s, err := c.Snapshot(ctx, tt.thread, n)
			if err != nil {
				t.Fatal(err)
			}
			if s.Numbering != tt.want || h.At(n).Numbering != tt.want {
				t.Errorf("%s: Snapshot(%d) (%v) numbering %v, At %v; want %v", tt.thread, n, s.Outcome, s.Numbering, h.At(n).Numbering, tt.want)
			}
		}
		for _, ts := range collect(t, c.StreamSnapshots(ctx, tt.thread)) {
			if ts.Numbering != tt.want {
				t.Errorf("%s: StreamSnapshots turn %d numbering %v, want %v", tt.thread, ts.Turn, ts.Numbering, tt.want)
			}
		}
	}

	// What estimated means: the questions before the summary are not
	// counted, so q2 and q3 are turns 1 and 2, and q2's checkpoints are gone.
	idx, err := c.TurnIndex(ctx, "summarized")
	if err != nil {
		t.Fatal(err)
	}
	if idx.Total != 2 || idx.Turns[0].Question != "q2" || idx.Turns[0].Retained || idx.Turns[1].Question != "q3" || !idx.Turns[1].Retained {
		t.Errorf("summarized turns = %+v", idx)
	}
}

func TestNumberingString(t *testing.T) {
	for n, want := range map[client.Numbering]string{
		0: "unspecified", client.NumberingComplete: "complete", client.NumberingCounted: "counted",
		client.NumberingEstimated: "estimated", 9: "Numbering(9)",
	} {
		if got := n.String(); got != want {
			t.Errorf("Numbering(%d).String() = %q, want %q", int(n), got, want)
		}
	}
}

func TestChannel(t *testing.T) {
	c := serveChannels(t, scriptedThreads())
	ctx := context.Background()

	def, err := c.Snapshot(ctx, "files", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := def.State["area"]; !ok || len(def.State) != 1 {
		t.Errorf("default channel state = %v, want tool_state's area only", def.State)
	}

	s, err := c.Snapshot(ctx, "files", 2, client.WithChannel("files"))
	if err != nil {
		t.Fatal(err)
	}
	notes, _ := s.State["/notes.md"].Value.(map[string]any)
	if s.Outcome != client.Found || len(s.State) != 2 || notes["content"] != "two" || notes["encoding"] != "utf-8" {
		t.Errorf("files at turn 2 = %+v", s.State)
	}
	one, err := c.Snapshot(ctx, "files", 1, client.WithChannel("files"), client.WithKeys("/notes.md"))
	if err != nil {
		t.Fatal(err)
	}
	if notes, _ := one.State["/notes.md"].Value.(map[string]any); len(one.State) != 1 || notes["content"] != "one" {
		t.Errorf("files at turn 1, projected = %+v", one.State)
	}

	h, err := c.Snapshots(ctx, "files", client.WithChannel("todos"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range h.Turns {
		todos, _ := ts.State["todos"].Value.([]any)
		if len(ts.State) != 1 || len(todos) != 1 {
			t.Errorf("todos at turn %d = %+v, want one entry named todos holding the list", ts.Turn, ts.State)
		}
	}

	streamed := collect(t, c.StreamSnapshots(ctx, "files", client.WithChannel("files"), client.WithFromTurn(2)))
	if len(streamed) != 1 || len(streamed[0].State) != 2 {
		t.Errorf("StreamSnapshots of files from turn 2 = %+v", streamed)
	}

	turns, err := c.Turns(ctx, "files", client.WithChannel("files"), client.WithKeysWritten())
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 2 {
		t.Fatalf("Turns = %+v", turns)
	}
	byDefault, err := c.Turns(ctx, "files", client.WithKeysWritten())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(byDefault[0].KeysWritten, []string{"area"}) || slices.Equal(turns[0].KeysWritten, byDefault[0].KeysWritten) {
		t.Errorf("keys written at turn 1: %v reading files, %v reading tool_state; want the channel to decide", turns[0].KeysWritten, byDefault[0].KeysWritten)
	}

	// A channel the server does not serve is the caller's mistake, named.
	for name, call := range map[string]func() error{
		"Snapshot":  func() error { _, err := c.Snapshot(ctx, "files", 1, client.WithChannel("nope")); return err },
		"Snapshots": func() error { _, err := c.Snapshots(ctx, "files", client.WithChannel("nope")); return err },
		"Turns":     func() error { _, err := c.Turns(ctx, "files", client.WithChannel("nope")); return err },
		"StreamSnapshots": func() error {
			_, err := streamErr(c.StreamSnapshots(ctx, "files", client.WithChannel("nope")))
			return err
		},
	} {
		err := call()
		if status.Code(err) != codes.InvalidArgument || !contains(err.Error(), "nope", "tool_state, files, todos") {
			t.Errorf("%s with an unknown channel: %v; want INVALID_ARGUMENT naming it and the channels served", name, err)
		}
	}
}

// streamErr reads a stream to its end and returns the error that ended it.
func streamErr(seq func(func(*client.TurnState, error) bool)) (int, error) {
	n := 0
	for _, err := range seq {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// contains says whether s holds every one of parts.
func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/syncbuf"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// logBuffer collects JSON log records from several goroutines.
type logBuffer struct{ syncbuf.Buffer }

// warnings returns the warning records logged so far.
func (l *logBuffer) warnings(t *testing.T) []map[string]any {
	t.Helper()
	text := l.String()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["level"] == "WARN" && r["channel"] != nil {
			out = append(out, r)
		}
	}
	return out
}

// putOwnChannels writes a thread of n checkpoints whose conversation is in
// "chat" and whose state is in "scratch", as a graph not following the
// convention would.
func putOwnChannels(m *storetest.Memory, ref backend.Ref, n int) {
	for i := range n {
		m.Put(ref, saver.Checkpoint{
			ID: fmt.Sprintf("1f0c-%06d", i), TS: storetest.Base.Add(time.Duration(i) * time.Second),
			Values: write.Map{
				{Key: "chat", Value: []any{write.Human(fmt.Sprintf("h%d", i), "question")}},
				{Key: "scratch", Value: map[string]any{"k": i}},
				{Key: "__start__", Value: "x"},
			},
		})
	}
}

func serveLogging(t *testing.T, m *storetest.Memory) (*servertest.Server, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cfg := server.Config{Store: store.Config{Backend: m}}
	cfg.Service.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	return servertest.Start(t, cfg), logs
}

// TestChannelsSampledAtStart: when none of the newest checkpoints holds the
// configured messages or state channel, the server says so at start,
// naming the channels they hold; when they do, it says nothing.
func TestChannelsSampledAtStart(t *testing.T) {
	m := storetest.NewMemory()
	putOwnChannels(m, backend.Ref{ThreadID: "own"}, 3)
	_, logs := serveLogging(t, m)
	warned := map[string]bool{}
	for _, w := range logs.warnings(t) {
		warned[w["channel"].(string)] = true
		held, _ := w["channels_held"].(string)
		if held != "__start__ (3), chat (3), scratch (3)" || w["sampled"] != 3.0 {
			t.Errorf("warning %v: want the 3 checkpoints sampled and the channels they hold", w)
		}
		if msg := w["msg"].(string); !strings.Contains(msg, "--messages-channel") && !strings.Contains(msg, "--state-channel") {
			t.Errorf("warning %q names no flag to set", msg)
		}
	}
	if !warned["messages"] || !warned["tool_state"] {
		t.Errorf("warned about %v at start; want messages and tool_state", warned)
	}

	healthy := storetest.NewMemory()
	storetest.Build(healthy, backend.Ref{ThreadID: "demo"}, storetest.Demo)
	if _, logs := serveLogging(t, healthy); len(logs.warnings(t)) > 0 {
		t.Errorf("warnings for a store that holds both channels: %v", logs.warnings(t))
	}
	// No tool has written state yet: nothing is misnamed.
	chat := storetest.NewMemory()
	storetest.Build(chat, backend.Ref{ThreadID: "chat"}, []storetest.Turn{{Question: "hello"}})
	if _, logs := serveLogging(t, chat); len(logs.warnings(t)) > 0 {
		t.Errorf("warnings for a store whose threads hold messages only: %v", logs.warnings(t))
	}
}

// TestChannelsSampledOnFirstThread: a store empty at start says nothing
// then; the first thread listed whose checkpoints hold none of a
// configured channel gets a warning naming the channels the thread holds,
// once for the process; a thread that has not run a step yet gets none.
func TestChannelsSampledOnFirstThread(t *testing.T) {
	m := storetest.NewMemory()
	srv, logs := serveLogging(t, m)
	if w := logs.warnings(t); len(w) > 0 {
		t.Fatalf("warnings for an empty store: %v", w)
	}
	c := srv.Client(t)
	turns := func(id string) {
		t.Helper()
		r, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: id})
		if err != nil || r.GetTotal() != 0 {
			t.Fatalf("Turns(%s) = %v, %v; want no turns", id, r, err)
		}
	}
	// A conversation no tool has written state in yet.
	storetest.Build(m, backend.Ref{ThreadID: "chat-only"}, []storetest.Turn{{Question: "hello"}})
	if r, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "chat-only"}); err != nil || r.GetTotal() != 1 {
		t.Fatalf("Turns(chat-only) = %v, %v", r, err)
	}
	// Only LangGraph's input checkpoint so far.
	m.Put(backend.Ref{ThreadID: "starting"}, saver.Checkpoint{ID: "1f0c-000000", TS: storetest.Base,
		Values: write.Map{{Key: "__start__", Value: map[string]any{"chat": []any{}}}}})
	turns("starting")
	time.Sleep(200 * time.Millisecond)
	if w := logs.warnings(t); len(w) > 0 {
		t.Fatalf("warnings for a thread that has not run a step, or holds messages only: %v", w)
	}

	putOwnChannels(m, backend.Ref{ThreadID: "own-channels-1"}, 4)
	turns("own-channels-1")
	deadline := time.Now().Add(5 * time.Second)
	for len(logs.warnings(t)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := logs.warnings(t)
	if len(got) != 2 {
		t.Fatalf("%d warnings after the first thread without the channels, want 2 (messages, tool_state): %v", len(got), got)
	}
	for _, w := range got {
		if w["channels_held"] != "__start__ (4), chat (4), scratch (4)" || w["thread"] == nil || strings.Contains(fmt.Sprint(w["thread"]), "own-channels-1") {
			t.Errorf("warning %v: want the thread's channels, and the thread as its hash", w)
		}
	}
	putOwnChannels(m, backend.Ref{ThreadID: "own-channels-2"}, 2)
	turns("own-channels-2")
	time.Sleep(200 * time.Millisecond)
	if n := len(logs.warnings(t)); n != 2 {
		t.Errorf("%d warnings after a second such thread; want still 2, once per process", n)
	}
}

package conformance

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/server"
)

// The watched thread: the writer waits watchPause before each of
// watchTurns turns, so a turn's end is known from its own checkpoints,
// not from the next question, which comes later than the watcher must
// see the turn.
const (
	watchTurns  = 3
	watchPause  = "2"
	watchWithin = time.Second
	// watchVertices sizes turn 1's outline for a state of some 40 kB: what a
	// host's state usually is. (The conformance thread's 60000 points make
	// a state of over 1 MB, which under the race detector takes a second to
	// decode on its own.)
	watchVertices = 2000
)

// TestWatchTurnsLive watches a thread real LangGraph writes (Python's
// PostgresSaver, and its SqliteSaver in WAL mode) through historyd's
// WatchTurns: each turn arrives once, in order, within a second of its last
// checkpoint, before the next question is asked, with the state LangGraph
// reports for the turn.
func TestWatchTurnsLive(t *testing.T) {
	s := loadSetup(t, true)
	for _, st := range []struct {
		name string
		open func(dir string) checkpointStore
	}{
		{"postgres", func(string) checkpointStore { return pgStore{dsn: s.dsn} }},
		{"sqlite", func(dir string) checkpointStore { return sqliteStore{path: filepath.Join(dir, "watched.db")} }},
	} {
		t.Run(st.name, func(t *testing.T) { watchLive(t, s, st.open(t.TempDir())) })
	}
}

func watchLive(t *testing.T, s setup, f checkpointStore) {
	ctx, cancel := context.WithTimeout(context.Background(), liveMaxWrite+time.Minute)
	defer cancel()
	dir := t.TempDir()
	thread := fmt.Sprintf("conformance-watch-%d", time.Now().UnixNano())
	w := writers[0]
	if w.name != "python" {
		t.Fatalf("writers[0] is %s, want the Python writer", w.name)
	}
	argv := w.command(s, f, thread, filepath.Join(dir, "expected.json"), false,
		"--turns", fmt.Sprint(watchTurns), "--pause", watchPause, "--ready", "--no-reference", "--vertices", fmt.Sprint(watchVertices))
	stderr, writerDone := startReadyWriter(t, writerCmd(ctx, argv))

	client := serveConfig(t, f, &expectation{}, server.Config{})
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	stream, err := client.WatchTurns(wctx, &historydv1.WatchTurnsRequest{ThreadId: thread})
	if err != nil {
		t.Fatal(err)
	}
	type received struct {
		ev *historydv1.TurnState
		at time.Time
	}
	events := make(chan received, 16)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				close(events)
				return
			}
			if m.GetTurnEnded() != nil {
				events <- received{m.GetTurnEnded(), time.Now()}
			}
		}
	}()
	var got []received
	var werr error
	writing := true
	for len(got) < watchTurns {
		select {
		case r, ok := <-events:
			if !ok {
				t.Fatalf("the watch ended after %d turns", len(got))
			}
			got = append(got, r)
		case werr = <-writerDone:
			writing = false
			if werr != nil {
				t.Fatalf("writer (%s) failed: %v\n%s", strings.Join(redactArgv(argv), " "), werr, tail(stderr.String(), 4000))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("after %d turns, no turn within 30s", len(got))
		}
	}
	if writing {
		if werr = <-writerDone; werr != nil {
			t.Fatalf("writer failed: %v\n%s", werr, tail(stderr.String(), 4000))
		}
	}
	// Nothing more: every turn came once.
	select {
	case r, ok := <-events:
		if ok {
			t.Errorf("turn %d came again, at checkpoint %s", r.ev.GetTurn(), r.ev.GetCheckpointId())
		}
	case <-time.After(time.Second):
	}

	fin := readExpectation(t, argAfter(argv, "--out"))
	if fin.Total != watchTurns {
		t.Fatalf("the writer wrote %d turns, want %d", fin.Total, watchTurns)
	}
	for i, r := range got {
		n := i + 1
		want := fin.turn(n)
		if r.ev.GetTurn() != int32(n) || r.ev.GetQuestion() != want.Question {
			t.Errorf("event %d: turn %d %q, want turn %d %q", i, r.ev.GetTurn(), r.ev.GetQuestion(), n, want.Question)
			continue
		}
		for _, d := range diffJSON("entries", want.ToolState, entriesJSON(t, r.ev.GetEntries())) {
			t.Errorf("turn %d: %s", n, d)
		}
		ended := r.ev.GetEndedAt().AsTime()
		late := r.at.Sub(ended)
		t.Logf("turn %d ended at %s, seen %s later", n, ended.Format(time.RFC3339Nano), late.Round(time.Millisecond))
		if late > watchWithin || late < -time.Second {
			t.Errorf("turn %d was seen %s after its last checkpoint (%s), want within %s", n, late.Round(time.Millisecond), ended.Format(time.RFC3339Nano), watchWithin)
		}
		if n < watchTurns {
			// Before the next question: the turn was known to have ended
			// from its own last checkpoint.
			next := fin.turn(n + 1)
			if at, err := time.Parse(time.RFC3339Nano, next.EndedAt); err == nil && !r.at.Before(at) {
				t.Errorf("turn %d was seen at %s, after turn %d ended (%s)", n, r.at.Format(time.RFC3339Nano), n+1, next.EndedAt)
			}
		}
	}
}

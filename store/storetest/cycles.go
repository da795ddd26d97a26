package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// cycleCases hold the store to stored parent links that loop, which no
// saver writes but anyone who can write a thread's rows can: every read
// returns, with an error naming the thread and the checkpoints of the
// loop, never spinning on it.
var cycleCases = []Case{
	{"A parent cycle through unstored values is data loss, not a spin", parentCycles},
}

// cycleBound is how long a read of a thread with a parent cycle may take
// before the case calls it a hang: the reads are of a handful of
// checkpoints, and the deadline they are given is far shorter.
const cycleBound = 20 * time.Second

// cycleThread is one shape of loop: the checkpoints written, in order, and
// the checkpoints of the loop.
type cycleThread struct {
	name  string
	cps   []saver.Checkpoint
	cycle []string
	// channel is the state channel read; "" the default.
	channel string
}

// cycleThreads are the loops the case writes: through checkpoints whose
// messages (a DeltaChannel's) are rebuilt from writes, a checkpoint that
// is its own parent, a loop of checkpoints that all store their values,
// and one where only a state channel is rebuilt.
func cycleThreads() []cycleThread {
	ts := func(i int) time.Time { return Base.Add(time.Duration(i) * time.Second) }
	md := write.Map{{Key: "source", Value: "loop"}, {Key: "counters_since_delta_snapshot", Value: write.Map{}}}
	writeTo := func(ch string, v any) []saver.Write {
		return []saver.Write{{TaskID: "t", TaskPath: "~__pregel_pull, node", Channel: ch, Value: v}}
	}
	h1, a1 := write.Human("h1", "first question"), write.AI("a1", "one")
	// unstored is a checkpoint whose messages have a version and no value.
	unstored := func(id, parent string, i int, extra ...write.Field) saver.Checkpoint {
		return saver.Checkpoint{ID: id, Parent: parent, TS: ts(i), Metadata: md,
			Versions: append(write.Map{{Key: "messages", Value: i}}, extra...), Writes: writeTo("messages", []any{a1})}
	}
	stored := func(id, parent string, i int, msgs ...any) saver.Checkpoint {
		return saver.Checkpoint{ID: id, Parent: parent, TS: ts(i), Metadata: md,
			Values: write.Map{{Key: "messages", Value: write.DeltaSnapshot{Value: msgs}}}}
	}
	return []cycleThread{{
		// The loop c-1 → c-3 → c-2 → c-1, each the parent of the one
		// before, none storing its messages; c-4 hangs off it.
		name: "unstored",
		cps: []saver.Checkpoint{
			stored("c-0", "", 0, h1),
			unstored("c-1", "c-3", 1),
			unstored("c-2", "c-1", 2),
			unstored("c-3", "c-2", 3),
			unstored("c-4", "c-3", 4),
		},
		cycle: []string{"c-1", "c-3", "c-2"},
	}, {
		name: "self-parent",
		cps: []saver.Checkpoint{
			stored("s-0", "", 0, h1),
			unstored("s-1", "s-0", 1),
			unstored("s-2", "s-2", 2),
			unstored("s-3", "s-2", 3),
		},
		cycle: []string{"s-2"},
	}, {
		// Every checkpoint stores its messages: nothing is rebuilt, and
		// the order of the checkpoints still has no start.
		name: "stored",
		cps: []saver.Checkpoint{
			stored("v-0", "", 0, h1),
			stored("v-1", "v-2", 1, h1, a1),
			stored("v-2", "v-1", 2, h1, a1),
		},
		cycle: []string{"v-1", "v-2"},
	}, {
		// The messages are stored throughout; files, a DeltaChannel, is
		// rebuilt through the loop when a turn's state is read.
		name:    "state channel",
		channel: "files",
		cps: func() []saver.Checkpoint {
			out := []saver.Checkpoint{stored("f-0", "", 0, h1)}
			for i, parent := range []string{"f-3", "f-1", "f-2"} {
				cp := stored([]string{"f-1", "f-2", "f-3"}[i], parent, i+1, h1, a1)
				cp.Versions = write.Map{{Key: "messages", Value: 2}, {Key: "files", Value: i + 1}}
				cp.Writes = writeTo("files", map[string]any{"/a.md": "v"})
				out = append(out, cp)
			}
			return out
		}(),
		cycle: []string{"f-1", "f-3", "f-2"},
	}}
}

// parentCycles writes each loop into a thread of its own and reads it
// every way the server does, cold and again: each read returns well
// within cycleBound, with a store.CycleError naming the thread and the
// loop's checkpoints, from the smallest id on, each followed by its
// parent.
func parentCycles(t *testing.T, open Open) {
	b, w := open(t)
	for _, c := range cycleThreads() {
		t.Run(c.name, func(t *testing.T) {
			ref := backend.Ref{ThreadID: "suite-cycle-" + c.name}
			for _, cp := range c.cps {
				w.Put(ref, cp)
			}
			st := store.New(store.Config{Backend: b, StateChannels: []string{"tool_state", "files"}})
			reads := map[string]func(context.Context) error{
				"History": func(ctx context.Context) error {
					_, err := st.History(ctx, ref)
					return err
				},
				"ReadEncoded": func(ctx context.Context) error {
					_, _, _, err := st.ReadEncoded(ctx, ref, c.channel, Retained, nil, EntryEncoder{})
					return err
				},
			}
			for _, name := range []string{"History", "ReadEncoded", "History", "ReadEncoded"} {
				err := ReturnsWithin(t, cycleBound, func() error {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					return reads[name](ctx)
				})
				var ce *store.CycleError
				if !errors.As(err, &ce) {
					t.Fatalf("%s = %v, want a store.CycleError", name, err)
				}
				if ce.Ref != ref || !slices.Equal(ce.Checkpoints, c.cycle) {
					t.Errorf("%s: cycle %+v in %+v; want %v in %+v", name, ce.Checkpoints, ce.Ref, c.cycle, ref)
				}
			}
		})
	}
}

// ReturnsWithin runs fn and returns what it returned, failing t when it
// has not returned within bound: a call that never returns is left
// running, as there is no stopping it.
func ReturnsWithin(t testing.TB, bound time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		t.Fatalf("no answer within %v", bound)
		return nil
	}
}

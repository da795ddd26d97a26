package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// fuzzCall bounds each read of a fuzzed thread: the threads are a few
// dozen checkpoints, so a read that takes this long is a hang. Each read
// is given a deadline of a quarter of it.
const fuzzCall = 20 * time.Second

// parentGraph plays fuzz input as a thread's checkpoints, three bytes each:
// which id the checkpoint has, which parent, and what it stores. Ids repeat,
// parents may be the checkpoint itself, a later one, one never written or
// none, and each channel may be stored, rebuilt from writes (a version and
// no value) or absent. It returns the checkpoints in the order written.
//
//	byte 0: the id: checkpoint i's own, or with the top bit set an
//	        earlier one's (a repeat)
//	byte 1: the parent: %(n+2): none, one never written, or checkpoint k
//	byte 2: bits 0-1 messages: stored, rebuilt, absent (twice as often
//	        stored); bit 2 a question rather than an answer in the writes;
//	        bits 3-4 files: stored, rebuilt, absent; bit 5 the input source
func parentGraph(data []byte) []saver.Checkpoint {
	n := min(len(data)/3, 24)
	id := func(k int) string { return fmt.Sprintf("1f0c-%02d", k) }
	ids := make([]string, n)
	var out []saver.Checkpoint
	var held []any // the messages a stored list holds: one more each time
	for i := range n {
		b := data[3*i : 3*i+3]
		ids[i] = id(i)
		if b[0]&0x80 != 0 && i > 0 {
			ids[i] = ids[int(b[0]&0x7f)%i]
		}
		parent := ""
		switch p := int(b[1]) % (n + 2); p {
		case 0:
		case 1:
			parent = "1f0b-never-written"
		default:
			parent = id(p - 2)
		}
		msg := write.AI(fmt.Sprintf("a%d", i), "answer")
		if b[2]&4 != 0 {
			msg = write.Human(fmt.Sprintf("h%d", i), fmt.Sprintf("question %d", i))
		}
		held = append(held, msg)
		cp := saver.Checkpoint{ID: ids[i], Parent: parent, TS: storetest.Base.Add(time.Duration(i) * time.Second),
			Versions: write.Map{}, Values: write.Map{},
			Writes: []saver.Write{
				{TaskID: "t", Channel: "messages", Value: []any{msg}},
				{TaskID: "t", Idx: 1, Channel: "files", Value: map[string]any{fmt.Sprintf("/f%d", i%3): i}},
			}}
		source := "loop"
		if b[2]&32 != 0 {
			source = "input"
		}
		cp.Metadata = write.Map{{Key: "source", Value: source}, {Key: "counters_since_delta_snapshot", Value: write.Map{}}}
		switch b[2] & 3 {
		case 0, 3:
			cp.Values = append(cp.Values, write.Field{Key: "messages", Value: write.DeltaSnapshot{Value: append([]any(nil), held...)}})
			cp.Versions = append(cp.Versions, write.Field{Key: "messages", Value: fmt.Sprintf("m%d", i)})
		case 1:
			cp.Versions = append(cp.Versions, write.Field{Key: "messages", Value: fmt.Sprintf("m%d", i)})
		}
		switch b[2] >> 3 & 3 {
		case 0:
			cp.Values = append(cp.Values, write.Field{Key: "files", Value: write.DeltaSnapshot{Value: map[string]any{"/f": i}}})
			cp.Versions = append(cp.Versions, write.Field{Key: "files", Value: fmt.Sprintf("f%d", i)})
		case 1:
			cp.Versions = append(cp.Versions, write.Field{Key: "files", Value: fmt.Sprintf("f%d", i)})
		}
		out = append(out, cp)
	}
	return out
}

// loops reports whether the parent links of cps, a later checkpoint of an
// id standing for the earlier, lead from some checkpoint back to it.
func loops(cps []saver.Checkpoint) bool {
	parent := map[string]string{}
	for _, c := range cps {
		parent[c.ID] = c.Parent
	}
	for start := range parent {
		id := start
		for range len(parent) {
			p, ok := parent[id]
			if !ok || p == "" {
				break
			}
			if p == start {
				return true
			}
			id = p
		}
	}
	return false
}

// FuzzParentGraphs reads random parent graphs (loops, checkpoints that are
// their own parent, parents never written, repeated ids), their channels
// stored, rebuilt from writes or absent, through the Store's public read
// path over the in-memory backend: cold, warm, and after the rest of the
// thread is written to a cached index. Every read returns within fuzzCall;
// one of a thread whose links loop fails with a CycleError naming a real
// loop, and no other read does; and nothing a read started is left
// running once it has returned.
func FuzzParentGraphs(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 2, 5, 0, 3, 1, 0, 4, 4})                 // a chain, rebuilt in part
	f.Add([]byte{0, 0, 4, 0, 5, 1, 0, 2, 1, 0, 3, 1, 0, 4, 9})        // 1 → 3 → 2 → 1, rebuilt
	f.Add([]byte{0, 0, 0, 0, 3, 1})                                   // its own parent, rebuilt
	f.Add([]byte{0, 3, 0, 0, 2, 0, 0, 1, 1})                          // stored values in a loop
	f.Add([]byte{0, 0, 0, 0x80, 2, 1, 0, 3, 1, 0x81, 1, 1, 0, 1, 13}) // repeated ids, a missing parent
	f.Fuzz(func(t *testing.T, data []byte) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		cps := parentGraph(data)
		mem := storetest.NewMemory()
		ref := backend.Ref{ThreadID: "fuzz"}
		st := store.New(store.Config{Backend: mem, StateChannels: []string{"tool_state", "files"}, RecountEvery: -1})
		read := func(written []saver.Checkpoint) {
			looped := loops(written)
			for _, r := range []struct {
				name string
				call func(context.Context) error
			}{
				{"History", func(ctx context.Context) error {
					_, err := st.History(ctx, ref)
					return err
				}},
				{"ReadEncoded", func(ctx context.Context) error {
					_, _, _, err := st.ReadEncoded(ctx, ref, "", storetest.Retained, nil, storetest.EntryEncoder{})
					return err
				}},
				{"ReadEncoded files", func(ctx context.Context) error {
					_, _, _, err := st.ReadEncoded(ctx, ref, "files", storetest.Retained, nil, storetest.EntryEncoder{})
					return err
				}},
			} {
				err := storetest.ReturnsWithin(t, fuzzCall, func() error {
					ctx, cancel := context.WithTimeout(context.Background(), fuzzCall/4)
					defer cancel()
					return r.call(ctx)
				})
				var ce *store.CycleError
				switch {
				case errors.As(err, &ce):
					if !looped || !isLoop(written, ce.Checkpoints) {
						t.Fatalf("%s: %v, but %v is not a loop of the links written", r.name, err, ce.Checkpoints)
					}
				case looped:
					t.Fatalf("%s = %v over links that loop, want a CycleError", r.name, err)
				case err != nil && !errors.As(err, new(*store.DecodeError)):
					t.Fatalf("%s: %v", r.name, err)
				}
			}
		}
		half := len(cps) / 2
		for _, c := range cps[:half] {
			mem.Put(ref, c)
		}
		read(cps[:half])
		read(cps[:half])
		for _, c := range cps[half:] {
			mem.Put(ref, c)
		}
		read(cps)
	})
}

// isLoop reports whether loop names checkpoints each of whose parent,
// among cps (a later checkpoint of an id standing for the earlier), is the
// next, the last's the first.
func isLoop(cps []saver.Checkpoint, loop []string) bool {
	parent := map[string]string{}
	for _, c := range cps {
		parent[c.ID] = c.Parent
	}
	for i, id := range loop {
		if p, ok := parent[id]; !ok || p != loop[(i+1)%len(loop)] {
			return false
		}
	}
	return len(loop) > 0
}

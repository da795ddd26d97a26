package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/store/backend"
)

// links is a thread's parent links as (id, parent) pairs.
type links [][2]string

func (l links) link(i int) (string, string) { return l[i][0], l[i][1] }

func TestParentCycle(t *testing.T) {
	for _, c := range []struct {
		name  string
		links links
		want  []string
	}{
		{"a chain", links{{"a", ""}, {"b", "a"}, {"c", "b"}}, nil},
		{"a fork", links{{"a", ""}, {"b", "a"}, {"c", "a"}, {"d", "c"}}, nil},
		{"a clock disagreeing", links{{"b", ""}, {"a", "b"}, {"c", "a"}}, nil},
		{"pruned", links{{"c", "b"}, {"d", "c"}}, nil},
		{"no links", nil, nil},
		{"its own parent", links{{"a", ""}, {"b", "b"}, {"c", "b"}}, []string{"b"}},
		{"two", links{{"a", "b"}, {"b", "a"}}, []string{"a", "b"}},
		{"with a tail and a start", links{{"a", ""}, {"b", "d"}, {"c", "b"}, {"d", "c"}, {"e", "d"}, {"f", "e"}}, []string{"b", "d", "c"}},
		{"entered from a pruned end", links{{"x", "w"}, {"b", "x"}, {"x2", "b"}, {"w", "x2"}}, []string{"b", "x", "w", "x2"}},
		{"two loops, the smaller id's", links{{"m", "n"}, {"n", "m"}, {"c", "d"}, {"d", "c"}}, []string{"c", "d"}},
		{"an id repeated, the later standing", links{{"a", ""}, {"b", "a"}, {"b", "c"}, {"c", "b"}}, []string{"b", "c"}},
		{"an id repeated, breaking the loop", links{{"b", "c"}, {"c", "b"}, {"b", ""}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(8) {
				l := slices.Clone(c.links)
				if seed > 0 && !slices.ContainsFunc(l, func(p [2]string) bool {
					return slices.ContainsFunc(l, func(q [2]string) bool { return q != p && q[0] == p[0] })
				}) {
					// Order decides nothing but which of a repeated id stands.
					rand.New(rand.NewPCG(seed, 2)).Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
				}
				if got := parentCycle(len(l), l.link); !slices.Equal(got, c.want) {
					t.Fatalf("parentCycle(%v) = %v, want %v", l, got, c.want)
				}
			}
		})
	}
}

// unstoredBackend stores no value anywhere: every checkpoint asked for
// exists and has none, as between a DeltaChannel's snapshots.
type unstoredBackend struct{ backend.Empty }

func (unstoredBackend) EachValue(_ context.Context, _ backend.Ref, _ string, ids []string, fn func(int, backend.Blob) error) error {
	for i := range ids {
		if err := fn(i, backend.Blob{Type: format.TypeEmpty}); err != nil {
			return err
		}
	}
	return nil
}

// TestRebuildLoops hands rebuild, which every other guard is before, links
// that loop through checkpoints storing no value: it returns at once with
// the loop, rather than walking it for ever.
func TestRebuildLoops(t *testing.T) {
	s := New(Config{Backend: unstoredBackend{}})
	ref := backend.Ref{ThreadID: "loops"}
	for _, c := range []struct {
		name    string
		links   links
		targets []string
		want    []string
	}{
		{"three", links{{"a", "c"}, {"b", "a"}, {"c", "b"}, {"d", "c"}}, []string{"d"}, []string{"a", "c", "b"}},
		{"its own parent", links{{"a", "a"}, {"b", "a"}}, []string{"b", "a"}, []string{"a"}},
		{"joined by a second target", links{{"a", ""}, {"b", "c"}, {"c", "b"}, {"d", "c"}, {"e", "b"}}, []string{"d", "e"}, []string{"b", "c"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			nodes := map[string]listed{}
			for _, l := range c.links {
				nodes[l[0]] = listed{id: l[0], parent: l[1], versions: map[string]string{"ch": "v-" + l[0]}}
			}
			done := make(chan error, 1)
			go func() {
				_, err := rebuild(context.Background(), s, ref, "ch", nodes, c.targets, folder[int]{
					seed:  func(string, backend.Blob) (int, error) { return 0, nil },
					empty: func() int { return 0 },
					apply: func(_ string, v int, _ []backend.Write) (int, error) { return v + 1, nil },
					done:  func(string, int) error { return nil },
				})
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("rebuild did not return within 10s")
			}
			var ce *CycleError
			if !errors.As(err, &ce) || ce.Ref != ref || !slices.Equal(ce.Checkpoints, c.want) {
				t.Fatalf("rebuild = %v, want a CycleError naming %v", err, c.want)
			}
		})
	}
}

// TestRebuildStops cancels a rebuild of a long chain: it returns the
// context's error.
func TestRebuildStops(t *testing.T) {
	s := New(Config{Backend: unstoredBackend{}})
	nodes := map[string]listed{}
	const n = 5000
	for i := range n {
		parent := ""
		if i > 0 {
			parent = idOf(i - 1)
		}
		nodes[idOf(i)] = listed{id: idOf(i), parent: parent, versions: map[string]string{"ch": idOf(i)}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	applied := 0
	_, err := rebuild(ctx, s, backend.Ref{ThreadID: "long"}, "ch", nodes, []string{idOf(n - 1)}, folder[int]{
		seed:  func(string, backend.Blob) (int, error) { return 0, nil },
		empty: func() int { return 0 },
		apply: func(_ string, v int, _ []backend.Write) (int, error) {
			if applied++; applied == 10 {
				cancel()
			}
			return v + 1, nil
		},
		done: func(string, int) error { return nil },
	})
	if !errors.Is(err, context.Canceled) || applied > 10 {
		t.Fatalf("rebuild cancelled at its 10th step = %v after %d steps, want context.Canceled at once", err, applied)
	}
}

func idOf(i int) string { return fmt.Sprintf("c-%06d", i) }

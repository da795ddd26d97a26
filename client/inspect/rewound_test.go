package inspect_test

import (
	"context"
	"strings"
	"testing"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/client/inspect"
)

// forkedHistory is a fakeHistory whose thread was rewound: its TurnIndex
// lists forks, and records the head each call read.
type forkedHistory struct {
	*fakeHistory
	forks []client.Fork
	heads []string
}

func (f *forkedHistory) TurnIndex(ctx context.Context, threadID string, opts ...client.ReadOption) (*client.TurnIndex, error) {
	f.heads = append(f.heads, client.NewReadConfig(opts...).Head)
	return &client.TurnIndex{Total: f.total, Numbering: f.numbering, Forks: f.forks}, nil
}

func twoTurns(n client.Numbering) *fakeHistory {
	return &fakeHistory{total: 2, numbering: n, questions: map[int]string{1: "q1", 2: "q2"}, turns: map[int]map[string]client.Entry{
		1: {"k": {Value: "first"}},
		2: {"k": {Value: "second"}},
	}}
}

// A turn read of a rewound thread says so once, in every kind of answer,
// naming the turn it was rewound at; the read goes to the head the host
// chose.
func TestTurnReadSaysRewound(t *testing.T) {
	h := &forkedHistory{fakeHistory: twoTurns(client.NumberingComplete), forks: []client.Fork{{From: "c2", Turn: 1, Questions: 3, Newest: "c9"}}}
	in := &inspect.Inspector{History: h, Options: []client.ReadOption{client.WithHead("c7")}}
	const says = "This conversation was rewound at turn 1 and went on from there: what came after on the abandoned branch is not part of these turns."
	for _, tt := range []struct {
		name string
		args inspect.Args
		want string
	}{
		{"value", inspect.Args{Key: "k", Turn: ptr(2)}, "\"second\"\n[This is k as it stood at the end of turn 2. " + says + "]"},
		{"no such turn", inspect.Args{Key: "k", Turn: ptr(5)}, `"note":"` + says + `"`},
		{"listing", inspect.Args{Turn: ptr(1)}, `"note":"` + says + `"`},
	} {
		got, err := in.Read(context.Background(), "t", tt.args)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, tt.want) || strings.Count(got, "rewound") != 1 {
			t.Errorf("%s: %s\nwant it to hold %s, once", tt.name, got, tt.want)
		}
	}
	if len(h.heads) == 0 || h.heads[0] != "c7" {
		t.Errorf("forks read at heads %v, want c7", h.heads)
	}

	// Two forks, one before the first question.
	h.forks = append(h.forks, client.Fork{From: "c0", Turn: 0}, client.Fork{From: "c3", Turn: 1})
	got, _ := in.Read(context.Background(), "t", inspect.Args{Key: "k", Turn: ptr(1)})
	if want := "rewound at its start and turn 1 and went on from there: what came after on the abandoned branches"; !strings.Contains(got, want) {
		t.Errorf("two fork points: %s\nwant %q", got, want)
	}

	// Not rewound, or a history that cannot say: nothing about it.
	h.forks = nil
	for _, hist := range []client.ThreadHistory{h, twoTurns(client.NumberingComplete)} {
		got, _ := (&inspect.Inspector{History: hist}).Read(context.Background(), "t", inspect.Args{Key: "k", Turn: ptr(1)})
		if strings.Contains(got, "rewound") {
			t.Errorf("no forks: %s", got)
		}
	}
}

// A thread numbered by runs (a graph without messages) is spoken of in
// runs.
func TestRunsAreCalledRuns(t *testing.T) {
	h := &forkedHistory{fakeHistory: twoTurns(client.NumberingRuns), forks: []client.Fork{{From: "c2", Turn: 1}}}
	in := &inspect.Inspector{History: h}
	got, _ := in.Read(context.Background(), "t", inspect.Args{Key: "k", Turn: ptr(2)})
	if want := "\"second\"\n[This is k as it stood at the end of run 2. This conversation was rewound at run 1 and went on from there: what came after on the abandoned branch is not part of these runs.]"; got != want {
		t.Errorf("value:\n got %s\nwant %s", got, want)
	}
	got, _ = in.Read(context.Background(), "t", inspect.Args{Key: "k", Turn: ptr(3)})
	if !strings.Contains(got, "its runs (its graph keeps no messages), counted from 1; it has had 2 so far.") || strings.Contains(got, "question") {
		t.Errorf("no such run: %s", got)
	}
	got, _ = in.Read(context.Background(), "t", inspect.Args{Key: "nope", Turn: ptr(1)})
	if !strings.Contains(got, "at the end of run 1. A later run may") {
		t.Errorf("unknown key at a run: %s", got)
	}
}

func ptr(n int) *int { return &n }

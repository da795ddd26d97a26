package service

import (
	"testing"

	"google.golang.org/protobuf/proto"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
)

// A History's forks travel field by field, oldest fork point first, and
// every numbering has its wire value (none the unspecified one).
func TestForksAndNumberingOnTheWire(t *testing.T) {
	got := forks([]store.Fork{{From: "1f0c-02", Turn: 2, Questions: 4, Newest: "1f0c-09"}, {From: "1f0c-05", Turn: 3, Questions: 3, Newest: "1f0c-0c"}})
	want := []*historydv1.Fork{
		{FromCheckpointId: "1f0c-02", Turn: 2, Questions: 4, NewestCheckpointId: "1f0c-09"},
		{FromCheckpointId: "1f0c-05", Turn: 3, Questions: 3, NewestCheckpointId: "1f0c-0c"},
	}
	if len(got) != len(want) {
		t.Fatalf("forks = %v, want %v", got, want)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("fork %d = %v, want %v", i, got[i], want[i])
		}
	}
	if forks(nil) != nil {
		t.Error("no forks: want none on the wire")
	}
	for n, w := range map[store.Numbering]historydv1.TurnNumbering{
		store.Complete:  historydv1.TurnNumbering_TURN_NUMBERING_COMPLETE,
		store.Counted:   historydv1.TurnNumbering_TURN_NUMBERING_COUNTED,
		store.Estimated: historydv1.TurnNumbering_TURN_NUMBERING_ESTIMATED,
		store.Runs:      historydv1.TurnNumbering_TURN_NUMBERING_RUNS,
	} {
		if got := numbering(n); got != w {
			t.Errorf("numbering(%v) = %v, want %v", n, got, w)
		}
	}
}

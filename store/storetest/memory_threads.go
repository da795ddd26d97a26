package storetest

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/store/backend"
)

// Threads implements backend.Backend: thread ids sort bytewise, as in
// SQLite.
func (m *Memory) Threads(ctx context.Context, q backend.ThreadQuery, fn func(backend.ThreadRow) error) (backend.ThreadWalk, error) {
	m.mu.Lock()
	if m.err != nil {
		defer m.mu.Unlock()
		return backend.ThreadWalk{}, m.err
	}
	byID := map[string][]memCheckpoint{}
	for ref, cps := range m.threads {
		if len(cps) == 0 {
			continue // every checkpoint deleted: the thread is gone
		}
		if _, ok := byID[ref.ThreadID]; !ok {
			byID[ref.ThreadID] = nil
		}
		if ref.Namespace == q.Namespace {
			byID[ref.ThreadID] = slices.Clone(cps)
		}
	}
	m.mu.Unlock()
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var w backend.ThreadWalk
	n := 0
	for _, r := range backend.PrefixRanges(q.Prefixes, q.After) {
		for _, id := range ids {
			if id < r.From || id == r.From && !r.Inclusive || !strings.HasPrefix(id, r.Prefix) {
				continue
			}
			if n == q.Limit {
				w.More = true
				return w, nil
			}
			n++
			w.Last = id
			cps := byID[id]
			if len(cps) == 0 {
				continue
			}
			row, err := memThreadRow(id, cps)
			if err != nil {
				return w, err
			}
			if err := fn(row); err != nil {
				return w, err
			}
		}
	}
	return w, nil
}

func memThreadRow(id string, cps []memCheckpoint) (backend.ThreadRow, error) {
	first := slices.MinFunc(cps, func(a, b memCheckpoint) int { return cmp.Compare(a.id, b.id) })
	last := slices.MaxFunc(cps, func(a, b memCheckpoint) int { return cmp.Compare(a.id, b.id) })
	row := func(c memCheckpoint) (backend.Row, error) {
		head, err := json.Marshal(map[string]any{"ts": c.ts.Format(time.RFC3339Nano)})
		if err != nil {
			return backend.Row{}, err
		}
		return backend.Row{ID: c.id, Parent: c.parent, Checkpoint: backend.Blob{Type: format.TypeJSON, Data: head},
			Metadata: backend.Blob{Type: format.TypeJSON, Data: c.metadata}}, nil
	}
	f, err := row(first)
	if err != nil {
		return backend.ThreadRow{}, err
	}
	l, err := row(last)
	if err != nil {
		return backend.ThreadRow{}, err
	}
	return backend.ThreadRow{ThreadID: id, Count: int64(len(cps)), First: f, Last: l}, nil
}

// Package storetest holds what store tests share: an in-memory Backend, a
// builder for LangGraph-shaped threads, adapters that write them in each
// real saver's layout, and the suite every backend must pass.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
	"github.com/historyd/historyd/store/backend"
)

// Memory is an in-memory backend.Backend. Its values are stored as
// LangChain.js JSON blobs, and it lists rows the way store/postgres does: a
// JSON projection of each checkpoint's ts and channel versions.
type Memory struct {
	// Versions, when set, names each stored value's version instead of
	// Version: LangGraph.js counts a channel's versions 1, 2, 3, …, so a
	// thread deleted and written again reuses them for other values.
	Versions func(ref backend.Ref, channel string, data []byte) string

	mu      sync.Mutex
	threads map[backend.Ref][]memCheckpoint
	err     error
}

type memCheckpoint struct {
	id, parent string
	ts         time.Time
	versions   map[string]any // as stored: strings, numbers, nil
	updated    []string       // updated_channels; nil when not recorded
	metadata   []byte
	values     map[string]backend.Blob
	writes     []backend.Write
	// writeChannels holds the channel of each of writes.
	writeChannels []string
}

var (
	_ backend.Backend = (*Memory)(nil)
	_ Writer          = (*Memory)(nil)
)

// NewMemory returns an empty Memory backend.
func NewMemory() *Memory { return &Memory{threads: map[backend.Ref][]memCheckpoint{}} }

// Put implements Writer, storing each value as a JSON blob.
func (m *Memory) Put(ref backend.Ref, cp saver.Checkpoint) {
	blobs := make(map[string]backend.Blob, len(cp.Values))
	for _, f := range cp.Values {
		data, err := write.EncodeJSON(f.Value)
		if err != nil {
			panic(fmt.Sprintf("storetest: encode %s: %v", f.Key, err))
		}
		blobs[f.Key] = backend.Blob{Type: format.TypeJSON, Data: data}
	}
	var versions map[string]any
	if cp.Versions != nil {
		versions = map[string]any{}
		for _, f := range cp.Versions {
			versions[f.Key] = f.Value
		}
	}
	md, err := write.EncodeJSON(cp.Metadata)
	if err != nil || cp.Metadata == nil {
		md = nil
	}
	c := m.checkpoint(ref, cp.ID, cp.Parent, cp.TS, blobs, versions)
	c.metadata = md
	c.updated = cp.UpdatedChannels
	for _, w := range cp.Writes {
		data, err := write.EncodeJSON(w.Value)
		if err != nil {
			panic(fmt.Sprintf("storetest: encode write: %v", err))
		}
		c.writes = append(c.writes, backend.Write{CheckpointID: cp.ID, TaskID: w.TaskID, TaskPath: w.TaskPath, Idx: w.Idx,
			Value: backend.Blob{Type: format.TypeJSON, Data: data}})
		c.writeChannels = append(c.writeChannels, w.Channel)
	}
	m.add(ref, c)
}

// PutBlobs adds a checkpoint whose channels hold the given blobs, its
// parent the thread's newest checkpoint. Each channel's version is derived
// from its bytes, so equal values share a version as LangGraph's do.
func (m *Memory) PutBlobs(ref backend.Ref, id string, ts time.Time, values map[string]backend.Blob) {
	m.mu.Lock()
	parent := ""
	if cps := m.threads[ref]; len(cps) > 0 {
		parent = cps[len(cps)-1].id
	}
	m.mu.Unlock()
	m.add(ref, m.checkpoint(ref, id, parent, ts, values, nil))
}

// checkpoint builds a checkpoint, giving each value a version unless
// versions are given.
func (m *Memory) checkpoint(ref backend.Ref, id, parent string, ts time.Time, values map[string]backend.Blob, versions map[string]any) *memCheckpoint {
	c := &memCheckpoint{id: id, parent: parent, ts: ts, values: values, versions: versions}
	if c.versions == nil {
		c.versions = map[string]any{}
		for ch, b := range values {
			if m.Versions != nil {
				c.versions[ch] = m.Versions(ref, ch, b.Data)
			} else {
				c.versions[ch] = Version(b.Data)
			}
		}
	}
	return c
}

func (m *Memory) add(ref backend.Ref, c *memCheckpoint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.threads[ref] = append(m.threads[ref], *c)
}

// SetErr makes every call fail with err until it is set to nil, to simulate
// an outage.
func (m *Memory) SetErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
}

// Delete implements Writer.
func (m *Memory) Delete(ref backend.Ref, ids []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.threads[ref] = slices.DeleteFunc(slices.Clone(m.threads[ref]), func(c memCheckpoint) bool { return slices.Contains(ids, c.id) })
}

// List implements backend.Backend.
func (m *Memory) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	m.mu.Lock()
	if m.err != nil {
		defer m.mu.Unlock()
		return backend.Census{}, m.err
	}
	cps := slices.Clone(m.threads[ref])
	m.mu.Unlock()
	census := backend.Census{Count: -1}
	if q.Count || q.After == "" {
		census.Count = len(cps)
	}
	for _, c := range cps {
		if census.MinID == "" || c.id < census.MinID {
			census.MinID = c.id
		}
		if slices.Contains(q.Verify, c.id) {
			census.Present = append(census.Present, c.id)
		}
	}
	for _, c := range cps {
		if c.id <= q.After {
			continue
		}
		doc := map[string]any{"ts": c.ts.Format(time.RFC3339Nano), "channel_versions": c.versions}
		if c.updated != nil {
			doc["updated_channels"] = c.updated
		}
		head, err := json.Marshal(doc)
		if err != nil {
			return backend.Census{}, err
		}
		row := backend.Row{ID: c.id, Parent: c.parent, Checkpoint: backend.Blob{Type: format.TypeJSON, Data: head},
			Metadata: backend.Blob{Type: format.TypeJSON, Data: c.metadata}}
		if err := fn(row); err != nil {
			return backend.Census{}, err
		}
	}
	return census, nil
}

// Probe implements backend.Backend, thread by thread.
func (m *Memory) Probe(ctx context.Context, ps []backend.Probe) ([]backend.ProbeResult, error) {
	return backend.ProbeEach(ctx, m, ps)
}

// Newest implements backend.Backend: checkpoints ordered by id, every
// thread's together when ref is nil.
func (m *Memory) Newest(ctx context.Context, ref *backend.Ref, limit int, fn func(backend.Row) error) error {
	m.mu.Lock()
	if m.err != nil {
		defer m.mu.Unlock()
		return m.err
	}
	var cps []memCheckpoint
	for r, thread := range m.threads {
		if ref == nil || r == *ref {
			cps = append(cps, thread...)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(cps, func(a, b memCheckpoint) int { return strings.Compare(b.id, a.id) })
	for _, c := range cps[:min(len(cps), max(limit, 0))] {
		head, err := json.Marshal(map[string]any{"ts": c.ts.Format(time.RFC3339Nano), "channel_versions": c.versions})
		if err != nil {
			return err
		}
		if err := fn(backend.Row{ID: c.id, Parent: c.parent, Checkpoint: backend.Blob{Type: format.TypeJSON, Data: head},
			Metadata: backend.Blob{Type: format.TypeJSON, Data: c.metadata}}); err != nil {
			return err
		}
	}
	return nil
}

// EachValue implements backend.Backend. Each blob is handed over in a buffer
// that is overwritten as soon as fn returns, as a driver reuses its row
// buffer, so that a caller keeping a reference to it is caught.
func (m *Memory) EachValue(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(int, backend.Blob) error) error {
	m.mu.Lock()
	if m.err != nil {
		defer m.mu.Unlock()
		return m.err
	}
	out := make([]backend.Blob, len(ids))
	for i, id := range ids {
		out[i] = backend.Blob{Missing: true}
		for _, c := range m.threads[ref] {
			if c.id != id {
				continue
			}
			out[i] = backend.Blob{Type: format.TypeEmpty}
			if b, ok := c.values[channel]; ok {
				out[i] = b
			}
		}
	}
	m.mu.Unlock()
	for i, b := range out {
		if err := poisoned(b, func(b backend.Blob) error { return fn(i, b) }); err != nil {
			return err
		}
	}
	return nil
}

// EachWrite implements backend.Backend, handing values over as EachValue
// does.
func (m *Memory) EachWrite(ctx context.Context, ref backend.Ref, channel string, ids []string, fn func(backend.Write) error) error {
	m.mu.Lock()
	if m.err != nil {
		defer m.mu.Unlock()
		return m.err
	}
	var out []backend.Write
	for _, c := range m.threads[ref] {
		if !slices.Contains(ids, c.id) {
			continue
		}
		for i, w := range c.writes {
			if c.writeChannels[i] == channel {
				out = append(out, w)
			}
		}
	}
	m.mu.Unlock()
	for _, w := range out {
		err := poisoned(w.Value, func(b backend.Blob) error {
			w.Value = b
			return fn(w)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// poisoned calls fn with a copy of b whose bytes are overwritten once fn
// returns.
func poisoned(b backend.Blob, fn func(backend.Blob) error) error {
	buf := bytes.Clone(b.Data)
	err := fn(backend.Blob{Type: b.Type, Data: buf, Missing: b.Missing})
	for j := range buf {
		buf[j] = 0xff
	}
	return err
}

// Ping implements backend.Backend.
func (m *Memory) Ping(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Close implements backend.Backend.
func (m *Memory) Close() {}

// Version names a value by its encoding, so that equal values share a
// version as LangGraph's do.
func Version(data []byte) string {
	h := fnv.New64a()
	h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}

// Package storetest holds what store tests share: an in-memory Backend, a
// builder for LangGraph-shaped threads, and the suite every real backend
// must pass.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/historyd/historyd/store"
)

// Memory is an in-memory store.Backend. Its values are stored as LangGraph
// JSON blobs, the format LangGraph.js writes.
type Memory struct {
	// Versions, when set, names each stored value's version instead of
	// Version: LangGraph.js counts a channel's versions 1, 2, 3, …, so a
	// thread deleted and written again reuses them for other values.
	Versions func(ref store.Ref, channel string, data []byte) string

	mu      sync.Mutex
	threads map[store.Ref][]memCheckpoint
	err     error
}

type memCheckpoint struct {
	cp     store.Checkpoint
	values map[string]store.Blob
}

var (
	_ store.Backend       = (*Memory)(nil)
	_ store.ValueStreamer = (*Memory)(nil)
	_ Writer              = (*Memory)(nil)
)

// NewMemory returns an empty Memory backend.
func NewMemory() *Memory { return &Memory{threads: map[store.Ref][]memCheckpoint{}} }

// Put implements Writer, storing each value as a JSON blob.
func (m *Memory) Put(ref store.Ref, id string, ts time.Time, values map[string]any) {
	blobs := make(map[string]store.Blob, len(values))
	for ch, v := range values {
		blobs[ch] = JSON(v)
	}
	m.PutBlobs(ref, id, ts, blobs)
}

// PutBlobs adds a checkpoint whose channels hold the given blobs. Each
// channel's version is derived from its bytes, so equal values share a
// version as LangGraph's do.
func (m *Memory) PutBlobs(ref store.Ref, id string, ts time.Time, values map[string]store.Blob) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := memCheckpoint{cp: store.Checkpoint{ID: id, TS: ts, Versions: map[string]string{}}, values: values}
	for ch, b := range values {
		if m.Versions != nil {
			c.cp.Versions[ch] = m.Versions(ref, ch, b.Data)
		} else {
			c.cp.Versions[ch] = Version(b.Data)
		}
	}
	m.threads[ref] = append(m.threads[ref], c)
}

// SetErr makes every call fail with err until it is set to nil, to simulate
// an outage.
func (m *Memory) SetErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
}

// Delete implements Writer.
func (m *Memory) Delete(ref store.Ref, ids []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	drop := map[string]bool{}
	for _, id := range ids {
		drop[id] = true
	}
	kept := m.threads[ref][:0]
	for _, c := range m.threads[ref] {
		if !drop[c.cp.ID] {
			kept = append(kept, c)
		}
	}
	m.threads[ref] = kept
}

// Checkpoints implements store.Backend.
func (m *Memory) Checkpoints(ctx context.Context, ref store.Ref) ([]store.Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	out := make([]store.Checkpoint, 0, len(m.threads[ref]))
	for _, c := range m.threads[ref] {
		out = append(out, c.cp)
	}
	return out, nil
}

// Values implements store.Backend.
func (m *Memory) Values(ctx context.Context, ref store.Ref, channel string, ids []string) ([]store.Blob, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	out := make([]store.Blob, len(ids))
	for i, id := range ids {
		out[i] = store.Blob{Type: store.BlobMissing}
		for _, c := range m.threads[ref] {
			if c.cp.ID != id {
				continue
			}
			out[i] = store.Blob{Type: "empty"}
			if b, ok := c.values[channel]; ok {
				out[i] = b
			}
		}
	}
	return out, nil
}

// EachValue implements store.ValueStreamer. Each blob is handed over in a
// buffer that is overwritten as soon as fn returns, as a driver reuses its
// row buffer, so that a caller keeping a reference to it is caught.
func (m *Memory) EachValue(ctx context.Context, ref store.Ref, channel string, ids []string, fn func(int, store.Blob) error) error {
	blobs, err := m.Values(ctx, ref, channel, ids)
	if err != nil {
		return err
	}
	for i, b := range blobs {
		buf := bytes.Clone(b.Data)
		err := fn(i, store.Blob{Type: b.Type, Data: buf})
		for j := range buf {
			buf[j] = 0xff
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Ping implements store.Backend.
func (m *Memory) Ping(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Close implements store.Backend.
func (m *Memory) Close() {}

// Version names a value by its encoding, so that equal values share a
// version as LangGraph's do.
func Version(data []byte) string {
	h := fnv.New64a()
	h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}

// JSON encodes v as a LangGraph "json" blob.
func JSON(v any) store.Blob {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("storetest.JSON: %v", err))
	}
	return store.Blob{Type: "json", Data: data}
}

// Message returns a LangChain.js serialized message of the given class
// (HumanMessage, AIMessage, ToolMessage, ...).
func Message(class string, content any) map[string]any {
	return map[string]any{
		"lc": 1, "type": "constructor",
		"id":     []string{"langchain_core", "messages", class},
		"kwargs": map[string]any{"content": content},
	}
}

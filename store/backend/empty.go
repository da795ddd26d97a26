package backend

import "context"

// Empty is the backend of a store that holds no checkpoints at all: every
// thread is unknown. Tenant isolation answers a thread the tenant may not
// read through a store over it, exactly as an unknown thread is answered.
type Empty struct{}

var _ Backend = Empty{}

// List implements Backend: there are no checkpoints.
func (Empty) List(context.Context, Ref, Query, func(Row) error) (Census, error) {
	return Census{Count: 0}, nil
}

// Probe implements Backend: no thread has a checkpoint.
func (Empty) Probe(_ context.Context, ps []Probe) ([]ProbeResult, error) {
	return make([]ProbeResult, len(ps)), nil
}

// EachValue implements Backend: every checkpoint is missing.
func (Empty) EachValue(_ context.Context, _ Ref, _ string, ids []string, fn func(int, Blob) error) error {
	for i := range ids {
		if err := fn(i, Blob{Missing: true}); err != nil {
			return err
		}
	}
	return nil
}

// EachWrite implements Backend: there are no writes.
func (Empty) EachWrite(context.Context, Ref, string, []string, func(Write) error) error { return nil }

// Newest implements Backend: there are no checkpoints.
func (Empty) Newest(context.Context, *Ref, int, func(Row) error) error { return nil }

// Ping implements Backend: an empty store is always reachable.
func (Empty) Ping(context.Context) error { return nil }

// Close implements Backend.
func (Empty) Close() {}

// Empty implements Backend: there are no threads.
func (Empty) Threads(context.Context, ThreadQuery, func(ThreadRow) error) (ThreadWalk, error) {
	return ThreadWalk{}, nil
}

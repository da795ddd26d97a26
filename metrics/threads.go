package metrics

import (
	"context"

	"github.com/historyd/historyd/store/backend"
)

// Threads times the walk over the store's threads, the query behind the
// Threads RPC, as "Threads".
func (b *timedBackend) Threads(ctx context.Context, q backend.ThreadQuery, fn func(backend.ThreadRow) error) (w backend.ThreadWalk, err error) {
	err = b.timed("Threads", func(call func(func() error) error) error {
		w, err = b.inner.Threads(ctx, q, func(r backend.ThreadRow) error { return call(func() error { return fn(r) }) })
		return err
	})
	return w, err
}

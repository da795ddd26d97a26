package client

import (
	"context"
	"iter"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// Thread is one listed thread, without its turns.
type Thread struct {
	// ID is the thread id.
	ID string
	// Checkpoints is how many checkpoints it has in the namespace.
	Checkpoints int64
	// FirstAt and LastAt are when its oldest and newest checkpoints were
	// written; zero when they carry no timestamp.
	FirstAt, LastAt time.Time
	// LastCheckpointID is its newest checkpoint's id.
	LastCheckpointID string
	// Turns is how many turns it has had; -1 unless the listing was asked
	// WithIncludeTurns.
	Turns int
	// Err, when not nil, is why the thread could not be read in full (a
	// value of its own that does not decode, say; status.Code tells which):
	// the fields it kept from being read are zero, and the other threads of
	// the page are unaffected. It is the error a call reading this thread
	// alone would return.
	Err error
}

// ThreadsPage is one page of a listing.
type ThreadsPage struct {
	// Threads are the page's threads.
	Threads []Thread
	// NextPageToken continues the listing; empty when it is complete. A
	// page may hold fewer threads than asked for, even none, and still
	// have one (see historyd.v1.ThreadsResponse).
	NextPageToken string
}

// Threads lists one page of the threads the caller may read: a tenant
// confined to thread-id prefixes sees only its own. Without options it
// lists every such thread of the root graph, in thread-id order, 100 a
// page. WithNamespace, WithPrefix, WithPageSize, WithPageToken,
// WithNewestFirst, WithActiveAfter, WithActiveBefore and WithIncludeTurns
// apply; Threads ignores the other ReadOptions.
func (c *Client) Threads(ctx context.Context, opts ...ReadOption) (*ThreadsPage, error) {
	return c.threads(ctx, NewReadConfig(opts...))
}

// threads is Threads with its options applied.
func (c *Client) threads(ctx context.Context, o ReadConfig) (*ThreadsPage, error) {
	ctx, cancel, err := c.begin(ctx)
	if err != nil {
		return nil, c.fail("Threads", o.Prefix, err)
	}
	defer cancel()
	req := &historydv1.ThreadsRequest{ThreadIdPrefix: o.Prefix, CheckpointNs: o.Namespace, PageToken: o.PageToken,
		PageSize: int32(min(max(o.PageSize, 0), math.MaxInt32)), IncludeTurns: o.IncludeTurns}
	if o.PageSize < 0 {
		req.PageSize = -1 // refused by the server, naming page_size
	}
	if o.NewestFirst {
		req.Order = historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY
	}
	if !o.ActiveAfter.IsZero() {
		req.LastActivityAfter = timestamppb.New(o.ActiveAfter)
	}
	if !o.ActiveBefore.IsZero() {
		req.LastActivityBefore = timestamppb.New(o.ActiveBefore)
	}
	resp, err := c.rpc.Threads(ctx, req)
	if err != nil {
		return nil, c.fail("Threads", o.Prefix, err)
	}
	page := &ThreadsPage{NextPageToken: resp.GetNextPageToken(), Threads: make([]Thread, 0, len(resp.GetThreads()))}
	for _, t := range resp.GetThreads() {
		th := Thread{ID: t.GetThreadId(), Checkpoints: t.GetCheckpointCount(), LastCheckpointID: t.GetLastCheckpointId(), Turns: -1}
		if t.GetFirstCheckpointAt() != nil {
			th.FirstAt = t.GetFirstCheckpointAt().AsTime()
		}
		if t.GetLastCheckpointAt() != nil {
			th.LastAt = t.GetLastCheckpointAt().AsTime()
		}
		if t.TotalTurns != nil {
			th.Turns = int(t.GetTotalTurns())
		}
		if e := t.GetError(); e != nil {
			th.Err = c.fail("Threads", th.ID, status.Error(codes.Code(e.GetCode()), e.GetMessage()))
		}
		page.Threads = append(page.Threads, th)
	}
	return page, nil
}

// AllThreads pages through the listing that Threads with opts starts (from
// WithPageToken's page, if given), yielding each thread with a nil error,
// or, once, the error that ended it. Each page is one Threads call, with
// the Client's timeout and retries, and the options of Threads apply.
func (c *Client) AllThreads(ctx context.Context, opts ...ReadOption) iter.Seq2[Thread, error] {
	o := NewReadConfig(opts...)
	return func(yield func(Thread, error) bool) {
		for {
			page, err := c.threads(ctx, o)
			if err != nil {
				yield(Thread{}, err)
				return
			}
			for _, t := range page.Threads {
				if !yield(t, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			o.PageToken = page.NextPageToken
		}
	}
}

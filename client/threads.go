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

// ThreadsQuery is what Client.Threads lists. Its zero value lists every
// thread the caller may read, in thread-id order, 100 a page.
type ThreadsQuery struct {
	// Prefix, when set, lists only thread ids starting with it.
	Prefix string
	// Namespace is the checkpoint namespace; empty is the root graph.
	Namespace string
	// PageSize is the most threads one page holds: 0 is the server's
	// default (100), and it caps it at 1000 (100 with IncludeTurns).
	PageSize int
	// PageToken continues a listing: the NextPageToken of the page before,
	// every other field unchanged but PageSize.
	PageToken string
	// NewestFirst lists by last activity, newest first, instead of by
	// thread id. The server visits every thread under the prefix for each
	// page of it and refuses (FAILED_PRECONDITION) past 10,000.
	NewestFirst bool
	// ActiveAfter and ActiveBefore, when set, keep only the threads whose
	// last checkpoint was written after (before) them.
	ActiveAfter, ActiveBefore time.Time
	// IncludeTurns asks for each thread's number of turns, which costs the
	// server a derivation of each listed thread's turns.
	IncludeTurns bool
}

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
	// Turns is how many turns it has had; -1 unless the query asked
	// IncludeTurns.
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
// confined to thread-id prefixes sees only its own.
func (c *Client) Threads(ctx context.Context, q ThreadsQuery) (*ThreadsPage, error) {
	ctx, cancel, err := c.begin(ctx)
	if err != nil {
		return nil, c.fail("Threads", q.Prefix, err)
	}
	defer cancel()
	req := &historydv1.ThreadsRequest{ThreadIdPrefix: q.Prefix, CheckpointNs: q.Namespace, PageToken: q.PageToken,
		PageSize: int32(min(max(q.PageSize, 0), math.MaxInt32)), IncludeTurns: q.IncludeTurns}
	if q.PageSize < 0 {
		req.PageSize = -1 // refused by the server, naming page_size
	}
	if q.NewestFirst {
		req.Order = historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY
	}
	if !q.ActiveAfter.IsZero() {
		req.LastActivityAfter = timestamppb.New(q.ActiveAfter)
	}
	if !q.ActiveBefore.IsZero() {
		req.LastActivityBefore = timestamppb.New(q.ActiveBefore)
	}
	resp, err := c.rpc.Threads(ctx, req)
	if err != nil {
		return nil, c.fail("Threads", q.Prefix, err)
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

// AllThreads pages through the listing q starts (from q.PageToken, if
// set), yielding each thread with a nil error, or, once, the error that
// ended it. Each page is one Threads call, with the Client's timeout and
// retries.
func (c *Client) AllThreads(ctx context.Context, q ThreadsQuery) iter.Seq2[Thread, error] {
	return func(yield func(Thread, error) bool) {
		for {
			page, err := c.Threads(ctx, q)
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
			q.PageToken = page.NextPageToken
		}
	}
}

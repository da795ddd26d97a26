package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/store/backend"
)

// ThreadOrder is the order Store.Threads lists threads in.
type ThreadOrder int

const (
	// ByThreadID lists threads in ascending thread-id order, as the
	// backend sorts them.
	ByThreadID ThreadOrder = iota + 1
	// ByLastActivity lists the threads whose last checkpoint is newest
	// first, then by thread id; threads whose last checkpoint has no
	// timestamp come last.
	ByLastActivity
)

// Limits of Store.Threads.
const (
	// MaxThreadsVisited is the most threads one Store.Threads call visits
	// in thread-id order, whatever it keeps: a call costs at most that
	// much, and a selective time filter is read a call at a time.
	MaxThreadsVisited = 10_000
	// MaxThreadsSorted is the most threads ByLastActivity sorts: every
	// thread under the prefixes is visited on each call, since no index
	// of LangGraph's tables leads with time.
	MaxThreadsSorted = 10_000
)

// ErrTooManyToSort marks a ByLastActivity listing of more threads than
// MaxThreadsSorted.
var ErrTooManyToSort = errors.New("too many threads to list by last activity")

// ThreadCursor is where a listing stopped: the next page starts after it.
type ThreadCursor struct {
	// ThreadID is the last thread visited (ByThreadID) or listed
	// (ByLastActivity).
	ThreadID string
	// LastAt is the last listed thread's last activity (ByLastActivity
	// only; zero when it has no timestamp).
	LastAt time.Time
}

// ThreadsQuery is what Store.Threads lists.
type ThreadsQuery struct {
	// Namespace is the checkpoint namespace.
	Namespace string
	// Prefixes, when not empty, lists only threads whose id starts with
	// one of them.
	Prefixes []string
	// Order is the order; zero is ByThreadID.
	Order ThreadOrder
	// After continues a listing; nil starts it.
	After *ThreadCursor
	// Limit is the most threads one page holds. Required.
	Limit int
	// ActiveAfter and ActiveBefore, when not zero, keep only the threads
	// whose last checkpoint was written after (before) them; a thread
	// whose last checkpoint has no timestamp is then left out.
	ActiveAfter, ActiveBefore time.Time
	// Turns asks for each listed thread's History.
	Turns bool
}

// ThreadSummary is one listed thread.
type ThreadSummary struct {
	// ThreadID is the thread id.
	ThreadID string
	// Checkpoints is how many checkpoints it has in the namespace.
	Checkpoints int64
	// FirstAt and LastAt are the times of its oldest and newest
	// checkpoints; zero when they have none.
	FirstAt, LastAt time.Time
	// LastID is its newest checkpoint's id.
	LastID string
	// History is its turn history; only with ThreadsQuery.Turns.
	History *History
	// Err, when set, is why the thread's times or History could not be
	// read (those that could not are zero and nil): a value of its own
	// that does not decode, say. It concerns this thread only; a listing
	// fails only for what concerns every thread (the store unreachable,
	// the call's deadline). A thread listed with Err is listed whatever
	// the time filters, which cannot be judged without its times, and
	// sorts by last activity as a thread without a timestamp.
	Err error
}

// ThreadsPage is one page of a listing.
type ThreadsPage struct {
	// Threads are the page's threads, in the order asked for.
	Threads []ThreadSummary
	// Next continues the listing; nil when it is complete.
	Next *ThreadCursor
}

// errPageFull ends a walk whose page is full.
var errPageFull = errors.New("page full")

// Threads lists one page of the backend's threads. In thread-id order a
// page costs its own threads (and, with time filters, at most
// MaxThreadsVisited threads visited); by last activity every thread under
// the prefixes is visited, at most MaxThreadsSorted of them, or the call
// fails with ErrTooManyToSort.
func (s *Store) Threads(ctx context.Context, q ThreadsQuery) (ThreadsPage, error) {
	if q.Limit < 1 {
		return ThreadsPage{}, errors.New("store: ThreadsQuery.Limit must be at least 1")
	}
	q.Prefixes = backend.NormalizePrefixes(q.Prefixes)
	var page ThreadsPage
	var err error
	if q.Order == ByLastActivity {
		page, err = s.threadsByActivity(ctx, q)
	} else {
		page, err = s.threadsByID(ctx, q)
	}
	if err != nil || !q.Turns {
		return page, err
	}
	for i := range page.Threads {
		if page.Threads[i].Err != nil {
			continue // its times did not decode; nor would its turns
		}
		h, err := s.History(ctx, backend.Ref{ThreadID: page.Threads[i].ThreadID, Namespace: q.Namespace})
		if err != nil && failsListing(err) {
			return ThreadsPage{}, err
		}
		page.Threads[i].History, page.Threads[i].Err = h, err
	}
	return page, nil
}

// failsListing reports whether an error reading one listed thread
// concerns the whole listing rather than that thread: the store is
// unreachable or unreadable, or the call is over. Any other (a value that
// does not decode, a limit it exceeds, a thread that changed while it was
// read) is the thread's own (ThreadSummary.Err).
func failsListing(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrNotCheckpointStore)
}

// summary reads a visited thread's row; keep says whether the query's
// time filters keep it. A checkpoint whose time does not decode is the
// thread's error (ThreadSummary.Err), and the thread is kept.
func (s *Store) summary(q ThreadsQuery, r backend.ThreadRow) (ThreadSummary, bool) {
	sum := ThreadSummary{ThreadID: r.ThreadID, Checkpoints: r.Count, LastID: r.Last.ID}
	ts := func(row backend.Row) time.Time {
		cp, err := codec.ParseCheckpoint(row.Checkpoint.Type, row.Checkpoint.Data, func(string) bool { return false })
		if err != nil {
			if sum.Err == nil {
				sum.Err = &DecodeError{Ref: backend.Ref{ThreadID: r.ThreadID, Namespace: q.Namespace}, CheckpointID: row.ID, Channel: "checkpoint", Err: err}
			}
			return time.Time{}
		}
		return cp.TS
	}
	sum.FirstAt, sum.LastAt = ts(r.First), ts(r.Last)
	if sum.Err != nil {
		return sum, true
	}
	last, keep := sum.LastAt, true
	if !q.ActiveAfter.IsZero() {
		keep = !last.IsZero() && last.After(q.ActiveAfter)
	}
	if !q.ActiveBefore.IsZero() {
		keep = keep && !last.IsZero() && last.Before(q.ActiveBefore)
	}
	return sum, keep
}

func (s *Store) walk(ctx context.Context, q backend.ThreadQuery, fn func(backend.ThreadRow) error) (backend.ThreadWalk, error) {
	w, err := s.b.Threads(ctx, q, fn)
	if err != nil && !errors.Is(err, errPageFull) {
		err = fmt.Errorf("list threads: %w", err)
	}
	return w, err
}

func (s *Store) threadsByID(ctx context.Context, q ThreadsQuery) (ThreadsPage, error) {
	var page ThreadsPage
	after := ""
	if q.After != nil {
		after = q.After.ThreadID
	}
	filtered := !q.ActiveAfter.IsZero() || !q.ActiveBefore.IsZero()
	for visited := 0; visited < MaxThreadsVisited; {
		want := q.Limit - len(page.Threads)
		n := want
		if filtered {
			n = max(4*want, 256)
		}
		n = min(n, MaxThreadsVisited-visited)
		lastHanded := ""
		w, err := s.walk(ctx, backend.ThreadQuery{Namespace: q.Namespace, Prefixes: q.Prefixes, After: after, Limit: n}, func(r backend.ThreadRow) error {
			lastHanded = r.ThreadID
			if sum, keep := s.summary(q, r); keep {
				page.Threads = append(page.Threads, sum)
				if len(page.Threads) == q.Limit {
					return errPageFull
				}
			}
			return nil
		})
		switch {
		case errors.Is(err, errPageFull):
			page.Next = &ThreadCursor{ThreadID: lastHanded}
			return page, nil
		case err != nil:
			return ThreadsPage{}, err
		case !w.More:
			return page, nil
		}
		visited += n
		after = w.Last
	}
	page.Next = &ThreadCursor{ThreadID: after}
	return page, nil
}

// byActivity orders threads by last activity: the
// newer first, then by thread id.
func byActivity(a, b ThreadSummary) int {
	if c := b.LastAt.Compare(a.LastAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ThreadID, b.ThreadID)
}

func (s *Store) threadsByActivity(ctx context.Context, q ThreadsQuery) (ThreadsPage, error) {
	var all []ThreadSummary
	w, err := s.walk(ctx, backend.ThreadQuery{Namespace: q.Namespace, Prefixes: q.Prefixes, Limit: MaxThreadsSorted + 1}, func(r backend.ThreadRow) error {
		if sum, keep := s.summary(q, r); keep {
			all = append(all, sum)
		}
		return nil
	})
	if err != nil {
		return ThreadsPage{}, err
	}
	if w.More || len(all) > MaxThreadsSorted {
		return ThreadsPage{}, fmt.Errorf("%w: more than %d threads, every one of which would be visited on each call; narrow the prefix, or list by thread id (with last_activity_after to find recent ones)",
			ErrTooManyToSort, MaxThreadsSorted)
	}
	slices.SortFunc(all, byActivity)
	if q.After != nil {
		cur := ThreadSummary{ThreadID: q.After.ThreadID, LastAt: q.After.LastAt}
		i, found := slices.BinarySearchFunc(all, cur, byActivity)
		if found {
			i++
		}
		all = all[i:]
	}
	page := ThreadsPage{Threads: all[:min(len(all), q.Limit)]}
	if len(all) > q.Limit {
		last := page.Threads[len(page.Threads)-1]
		page.Next = &ThreadCursor{ThreadID: last.ThreadID, LastAt: last.LastAt}
	}
	page.Threads = slices.Clip(page.Threads)
	return page, nil
}

package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/historyd/historyd/langgraph/codec"
)

// ThreadQuery is what Backend.Threads is asked: a walk over the storage's
// distinct thread ids, in ascending order as the storage sorts them.
type ThreadQuery struct {
	// Namespace is the checkpoint namespace whose checkpoints are counted
	// and whose first and last checkpoints are read.
	Namespace string
	// Prefixes, when not empty, restricts the walk to thread ids starting
	// with one of them, byte for byte. They are normalized (see
	// NormalizePrefixes): sorted, none a prefix of another.
	Prefixes []string
	// After, when not empty, starts the walk after this thread id; empty
	// starts from the first.
	After string
	// Limit is the most thread ids one walk visits. A walk visits only ids
	// under Prefixes: Prefixes are what a tenant may read, and nothing of
	// a tenant's listing (its cursor, its refusals, its cost) may depend
	// on threads outside them. A storage that cannot range over a prefix
	// (PostgreSQL whose thread_id sorts by a collation that is not
	// bytewise, with no index that is) fails a walk under Prefixes with
	// ErrUnorderedPrefixes rather than visit other ids.
	Limit int
}

// ThreadRow is one thread a walk visited and handed over: its checkpoints
// in the query's namespace, counted, and the oldest and newest of them by
// id.
type ThreadRow struct {
	// ThreadID is the thread id.
	ThreadID string
	// Count is how many checkpoints the thread has in the namespace; never
	// 0, as a thread with none there is not handed over.
	Count int64
	// First and Last are the checkpoints with the smallest and the largest
	// id, as List lists rows (Checkpoint holds at least "ts"; Metadata may
	// be empty).
	First, Last Row
}

// ThreadWalk is how a Backend.Threads walk ended.
type ThreadWalk struct {
	// Last is the last thread id the walk visited, handed over or not;
	// empty when it visited none.
	Last string
	// More says the walk stopped at Limit: threads after Last may remain.
	More bool
}

// NormalizePrefixes sorts prefixes bytewise, drops duplicates and every
// prefix another one covers ("a/b/" under "a/"), so that the id ranges
// they name are disjoint and in order. A nil or empty result is no
// restriction: so is a list holding "".
func NormalizePrefixes(prefixes []string) []string {
	ps := slices.Clone(prefixes)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	var out []string
	for _, p := range ps {
		if p == "" {
			return nil
		}
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// PrefixRange is one contiguous range of thread ids, in byte order: the
// ids starting with Prefix from From on (the ids after From unless
// Inclusive).
type PrefixRange struct {
	// Prefix is what every id of the range starts with; "" for every id.
	Prefix string
	// From is where the range starts.
	From string
	// Inclusive says From itself is in the range.
	Inclusive bool
}

// PrefixRanges returns, in byte order, the ranges a walk after after
// visits under prefixes (normalized), for backends whose thread ids sort
// bytewise: the ranges wholly at or before after are left out.
func PrefixRanges(prefixes []string, after string) []PrefixRange {
	if len(prefixes) == 0 {
		return []PrefixRange{{From: after, Inclusive: after == ""}}
	}
	var out []PrefixRange
	for _, p := range prefixes {
		switch {
		case after < p:
			out = append(out, PrefixRange{Prefix: p, From: p, Inclusive: true})
		case strings.HasPrefix(after, p):
			out = append(out, PrefixRange{Prefix: p, From: after})
		}
		// Otherwise after is past every id starting with p.
	}
	return out
}

// Empty implements Backend: there are no threads.
func (Empty) Threads(context.Context, ThreadQuery, func(ThreadRow) error) (ThreadWalk, error) {
	return ThreadWalk{}, nil
}

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

// ErrUnorderedPrefixes marks a listing under thread-id prefixes that the
// backend cannot walk without visiting other threads: its thread ids do
// not sort bytewise, so the ids under a prefix are no range of its index.
// It is the operator's to fix (for PostgreSQL, an index; the error says
// which), and it depends on nothing the store holds.
var ErrUnorderedPrefixes = errors.New("thread ids do not sort bytewise, so a thread-id prefix is no range of the index")

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
	q.Prefixes = NormalizePrefixes(q.Prefixes)
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
		h, err := s.History(ctx, Ref{ThreadID: page.Threads[i].ThreadID, Namespace: q.Namespace})
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
		errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotCheckpointStore)
}

// summary reads a visited thread's row; keep says whether the query's
// time filters keep it. A checkpoint whose time does not decode is the
// thread's error (ThreadSummary.Err), and the thread is kept.
func (s *Store) summary(q ThreadsQuery, r ThreadRow) (ThreadSummary, bool) {
	sum := ThreadSummary{ThreadID: r.ThreadID, Checkpoints: r.Count, LastID: r.Last.ID}
	ts := func(row Row) time.Time {
		cp, err := codec.ParseCheckpoint(row.Checkpoint.Type, row.Checkpoint.Data, func(string) bool { return false })
		if err != nil {
			if sum.Err == nil {
				sum.Err = &DecodeError{Ref: Ref{ThreadID: r.ThreadID, Namespace: q.Namespace}, CheckpointID: row.ID, Channel: "checkpoint", Err: err}
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

func (s *Store) walk(ctx context.Context, q ThreadQuery, fn func(ThreadRow) error) (ThreadWalk, error) {
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
		w, err := s.walk(ctx, ThreadQuery{Namespace: q.Namespace, Prefixes: q.Prefixes, After: after, Limit: n}, func(r ThreadRow) error {
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
	w, err := s.walk(ctx, ThreadQuery{Namespace: q.Namespace, Prefixes: q.Prefixes, Limit: MaxThreadsSorted + 1}, func(r ThreadRow) error {
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

package service

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/historyd/historyd/auth"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/pagetoken"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
)

// Limits of Threads requests.
const (
	// DefaultThreadsPageSize is the page size of a Threads request that
	// names none.
	DefaultThreadsPageSize = 100
	// MaxThreadsPageSize is the largest page_size accepted.
	MaxThreadsPageSize = 1000
	// MaxThreadsPageSizeWithTurns is the largest page_size accepted with
	// include_turns, which derives every listed thread's turns.
	MaxThreadsPageSizeWithTurns = 100
	// MaxPageTokenBytes is the longest page_token accepted.
	MaxPageTokenBytes = 1024
)

// Threads implements historyd.v1.ThreadHistory.Threads. It names no
// thread, so tenant isolation lets every tenant's call through, and the
// handler itself keeps a tenant confined to thread-id prefixes to those
// prefixes (see listedPrefixes): the store walks nothing else, and the
// page token, sealed for the tenant and the listing (see listing), holds
// nothing but where under them the listing stopped.
func (s *Server) Threads(ctx context.Context, req *historydv1.ThreadsRequest) (*historydv1.ThreadsResponse, error) {
	q, err := threadsQuery(req)
	if err != nil {
		return nil, s.fail(ctx, "Threads", err)
	}
	prefixes, ok := listedPrefixes(ctx, req.GetThreadIdPrefix())
	sealedFor := listing(ctx, req, prefixes)
	// The token is read last: whether it fits depends on everything else.
	// A token for a listing that covers none of the tenant's threads was
	// never issued, so it fails like any other that was not.
	if q.After, err = s.openPageToken(sealedFor, req.GetPageToken()); err != nil {
		return nil, s.fail(ctx, "Threads", err)
	}
	if !ok {
		// Nothing the tenant may read is under the prefix asked for: the
		// store is not asked, and the answer is an empty store's.
		return &historydv1.ThreadsResponse{}, nil
	}
	q.Prefixes = prefixes
	page, err := s.store.Threads(ctx, q)
	if errors.Is(err, store.ErrTooManyToSort) {
		return nil, status.Error(codes.FailedPrecondition, "order THREADS_ORDER_LAST_ACTIVITY: "+strings.TrimPrefix(err.Error(), store.ErrTooManyToSort.Error()+": "))
	}
	if err != nil {
		return nil, s.fail(ctx, "Threads", err)
	}
	resp := &historydv1.ThreadsResponse{Threads: make([]*historydv1.ThreadInfo, len(page.Threads))}
	var failed []error
	for i, t := range page.Threads {
		info := &historydv1.ThreadInfo{ThreadId: t.ThreadID, CheckpointCount: t.Checkpoints, LastCheckpointId: t.LastID}
		if !t.FirstAt.IsZero() {
			info.FirstCheckpointAt = timestamppb.New(t.FirstAt)
		}
		if !t.LastAt.IsZero() {
			info.LastCheckpointAt = timestamppb.New(t.LastAt)
		}
		if t.History != nil {
			n := clampInt32(t.History.Total)
			info.TotalTurns, info.Numbering = &n, numbering(t.History.Numbering)
		}
		if t.Err != nil {
			st := toStatus(t.Err)
			info.Error = &historydv1.ThreadError{Code: int32(st.Code()), Message: st.Message()}
			failed = append(failed, t.Err)
		}
		resp.Threads[i] = info
	}
	if len(failed) > 0 {
		// The call succeeds, so its request log says nothing of these;
		// the operator learns of them here. Thread ids in the errors are
		// logged as their hashes (see RedactThreadIDs).
		s.log.WarnContext(ctx, "Threads listed threads it could not read in full; the caller was told which",
			"threads", len(failed), "code", toStatus(failed[0]).Code().String(), "err", oneLine(failed[0].Error()))
	}
	if page.Next != nil {
		resp.NextPageToken = s.pageTokens.Seal(sealedFor, encodeCursor(*page.Next))
	}
	return resp, nil
}

// listedPrefixes returns the thread-id prefixes a listing for asked
// covers, normalized, and false when it covers none. A caller without a
// tenant (no authentication) or with all_threads lists under asked; a
// tenant confined to prefixes lists under those of its prefixes that asked
// covers, or under asked itself when it lies within one of them.
func listedPrefixes(ctx context.Context, asked string) ([]string, bool) {
	t, ok := auth.TenantFromContext(ctx)
	if !ok || t.AllThreads {
		return backend.NormalizePrefixes([]string{asked}), true
	}
	var out []string
	for _, p := range t.ThreadPrefixes {
		switch {
		case strings.HasPrefix(asked, p):
			return []string{asked}, true
		case strings.HasPrefix(p, asked):
			out = append(out, p)
		}
	}
	out = backend.NormalizePrefixes(out)
	return out, len(out) > 0
}

// threadsQuery validates a Threads request, in field order but for the
// page token's contents, which Threads reads last.
func threadsQuery(req *historydv1.ThreadsRequest) (store.ThreadsQuery, error) {
	q := store.ThreadsQuery{Namespace: req.GetCheckpointNs(), Turns: req.GetIncludeTurns()}
	if err := firstError(checkText("thread_id_prefix", req.GetThreadIdPrefix(), MaxThreadIDBytes, false),
		checkText("checkpoint_ns", req.GetCheckpointNs(), MaxNamespaceBytes, false), checkPageSize(req)); err != nil {
		return q, err
	}
	q.Limit = int(req.GetPageSize())
	if q.Limit == 0 {
		q.Limit = DefaultThreadsPageSize
	}
	switch req.GetOrder() {
	case historydv1.ThreadsOrder_THREADS_ORDER_UNSPECIFIED, historydv1.ThreadsOrder_THREADS_ORDER_THREAD_ID:
		q.Order = store.ByThreadID
	case historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY:
		q.Order = store.ByLastActivity
	default:
		return q, &FieldError{"order", fmt.Sprintf("is %d, not a ThreadsOrder (THREADS_ORDER_THREAD_ID or THREADS_ORDER_LAST_ACTIVITY)", req.GetOrder())}
	}
	var err error
	if q.ActiveAfter, err = checkTime("last_activity_after", req.GetLastActivityAfter()); err != nil {
		return q, err
	}
	if q.ActiveBefore, err = checkTime("last_activity_before", req.GetLastActivityBefore()); err != nil {
		return q, err
	}
	if !q.ActiveAfter.IsZero() && !q.ActiveBefore.IsZero() && !q.ActiveBefore.After(q.ActiveAfter) {
		return q, &FieldError{"last_activity_before", fmt.Sprintf("is %s; it must be later than last_activity_after (%s)",
			q.ActiveBefore.Format(time.RFC3339Nano), q.ActiveAfter.Format(time.RFC3339Nano))}
	}
	if len(req.GetPageToken()) > MaxPageTokenBytes {
		return q, &FieldError{"page_token", fmt.Sprintf("is %d bytes; the limit is %d", len(req.GetPageToken()), MaxPageTokenBytes)}
	}
	return q, nil
}

func checkPageSize(req *historydv1.ThreadsRequest) *FieldError {
	n := req.GetPageSize()
	switch {
	case n < 0:
		return &FieldError{"page_size", fmt.Sprintf("is %d; must not be negative (0 means %d)", n, DefaultThreadsPageSize)}
	case req.GetIncludeTurns() && n > MaxThreadsPageSizeWithTurns:
		return &FieldError{"page_size", fmt.Sprintf("is %d; the limit is %d with include_turns", n, MaxThreadsPageSizeWithTurns)}
	case n > MaxThreadsPageSize:
		return &FieldError{"page_size", fmt.Sprintf("is %d; the limit is %d", n, MaxThreadsPageSize)}
	}
	return nil
}

// checkTime returns a timestamp field's time, zero when it is unset.
func checkTime(field string, ts *timestamppb.Timestamp) (time.Time, error) {
	if ts == nil {
		return time.Time{}, nil
	}
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, &FieldError{field, fmt.Sprintf("is not a valid timestamp: %v", err)}
	}
	return ts.AsTime(), nil
}

// listing is what a Threads page token is sealed for: the caller (its
// tenant, and the prefixes it lists under) and every field of the request
// but page_size, include_turns and page_token, which say nothing of where
// the listing goes on from. A token opens only for the listing it was
// issued for, so that it cannot be carried to another tenant or other
// filters, nor made up.
func listing(ctx context.Context, req *historydv1.ThreadsRequest, prefixes []string) []byte {
	tenant := ""
	if t, ok := auth.TenantFromContext(ctx); ok {
		tenant = "tenant " + t.Name
	}
	order := req.GetOrder()
	if order == historydv1.ThreadsOrder_THREADS_ORDER_UNSPECIFIED {
		order = historydv1.ThreadsOrder_THREADS_ORDER_THREAD_ID
	}
	fields := []string{"Threads", tenant, strconv.Itoa(len(prefixes))}
	fields = append(fields, prefixes...)
	fields = append(fields, req.GetThreadIdPrefix(), req.GetCheckpointNs(), order.String())
	for _, ts := range []*timestamppb.Timestamp{req.GetLastActivityAfter(), req.GetLastActivityBefore()} {
		if ts == nil {
			fields = append(fields, "")
		} else {
			fields = append(fields, ts.AsTime().Format(time.RFC3339Nano))
		}
	}
	return pagetoken.Listing(fields...)
}

// errPageToken is the one answer to every page token that does not open:
// whether it was made up, changed, issued to another tenant or for other
// filters, or under a key the server no longer holds, the caller is told
// the same.
var errPageToken = &FieldError{"page_token", "is not one this service issued for this listing: pass the next_page_token of the page before, with thread_id_prefix, checkpoint_ns, order and the time filters as they were, or none to start over"}

// openPageToken returns the cursor of a token sealed for listing; nil for
// no token.
func (s *Server) openPageToken(listing []byte, token string) (*store.ThreadCursor, error) {
	if token == "" {
		return nil, nil
	}
	b, err := s.pageTokens.Open(listing, token)
	if err != nil {
		return nil, errPageToken
	}
	c, ok := decodeCursor(b)
	if !ok {
		return nil, errPageToken
	}
	return &c, nil
}

// encodeCursor encodes where a listing stopped: the length of the last
// activity's time.Time binary form (0 for none), that form, then the
// thread id. The thread id is one under the caller's prefixes (the store
// walks no other), so the token, which authenticates but does not hide
// it, shows the caller nothing it may not read.
func encodeCursor(c store.ThreadCursor) []byte {
	var at []byte
	if !c.LastAt.IsZero() {
		at, _ = c.LastAt.MarshalBinary() // fails only for zone offsets no time.Time holds
	}
	b := binary.AppendUvarint(nil, uint64(len(at)))
	b = append(b, at...)
	return append(b, c.ThreadID...)
}

func decodeCursor(b []byte) (store.ThreadCursor, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return store.ThreadCursor{}, false
	}
	var c store.ThreadCursor
	if n > 0 && c.LastAt.UnmarshalBinary(b[k:k+int(n)]) != nil {
		return store.ThreadCursor{}, false
	}
	c.ThreadID = string(b[k+int(n):])
	return c, true
}

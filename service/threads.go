package service

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/historyd/historyd/auth"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/store"
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
// prefixes (see listedPrefixes).
func (s *Server) Threads(ctx context.Context, req *historydv1.ThreadsRequest) (*historydv1.ThreadsResponse, error) {
	q, err := threadsQuery(req)
	if err != nil {
		return nil, s.fail(ctx, "Threads", err)
	}
	prefixes, ok := listedPrefixes(ctx, req.GetThreadIdPrefix())
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
		resp.Threads[i] = info
	}
	if page.Next != nil {
		resp.NextPageToken = encodePageToken(req, *page.Next)
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
		return store.NormalizePrefixes([]string{asked}), true
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
	out = store.NormalizePrefixes(out)
	return out, len(out) > 0
}

// threadsQuery validates a Threads request, in field order, and reads its
// page token.
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
	if len(req.GetPageToken()) > MaxPageTokenBytes {
		return q, &FieldError{"page_token", fmt.Sprintf("is %d bytes; the limit is %d", len(req.GetPageToken()), MaxPageTokenBytes)}
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
	// The token is read last: whether it fits depends on the filters.
	if q.After, err = decodePageToken(req); err != nil {
		return q, err
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

// pageToken is what a Threads page token holds: where the listing
// stopped, and a hash of the filters it was issued for, so that a token
// is not used with others. It is opaque to callers: base64url of its
// JSON.
type pageToken struct {
	Filter string    `json:"f"`
	After  string    `json:"a"`
	LastAt time.Time `json:"t,omitzero"`
}

// filterHash hashes the fields a page token must be used with.
func filterHash(req *historydv1.ThreadsRequest) string {
	h := fnv.New64a()
	put := func(s string) {
		_ = binary.Write(h, binary.BigEndian, uint32(len(s)))
		h.Write([]byte(s))
	}
	put(req.GetThreadIdPrefix())
	put(req.GetCheckpointNs())
	order := req.GetOrder()
	if order == historydv1.ThreadsOrder_THREADS_ORDER_UNSPECIFIED {
		order = historydv1.ThreadsOrder_THREADS_ORDER_THREAD_ID
	}
	put(order.String())
	for _, ts := range []*timestamppb.Timestamp{req.GetLastActivityAfter(), req.GetLastActivityBefore()} {
		if ts == nil {
			put("")
		} else {
			put(ts.AsTime().Format(time.RFC3339Nano))
		}
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

func encodePageToken(req *historydv1.ThreadsRequest, c store.ThreadCursor) string {
	b, _ := json.Marshal(pageToken{Filter: filterHash(req), After: c.ThreadID, LastAt: c.LastAt})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(req *historydv1.ThreadsRequest) (*store.ThreadCursor, error) {
	tok := req.GetPageToken()
	if tok == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	var pt pageToken
	if err != nil || json.Unmarshal(b, &pt) != nil || pt.Filter == "" {
		return nil, &FieldError{"page_token", "is not a page token this service issued; pass the next_page_token of the page before, or none"}
	}
	if pt.Filter != filterHash(req) {
		return nil, &FieldError{"page_token", "was issued for another listing: thread_id_prefix, checkpoint_ns, order and the time filters must be those of the first page"}
	}
	return &store.ThreadCursor{ThreadID: pt.After, LastAt: pt.LastAt}, nil
}

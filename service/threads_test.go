package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/historyd/historyd/auth/authtest"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/storetest"
)

// listAll pages through Threads and returns the thread ids.
func listAll(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient, req *historydv1.ThreadsRequest) []string {
	t.Helper()
	var out []string
	for range 1000 {
		resp, err := c.Threads(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range resp.Threads {
			out = append(out, th.ThreadId)
		}
		if resp.NextPageToken == "" {
			return out
		}
		req.PageToken = resp.NextPageToken
	}
	t.Fatal("listing did not end")
	return nil
}

func TestThreads(t *testing.T) {
	m := storetest.NewMemory()
	for i := range 25 {
		storetest.PutThread(m, store.Ref{ThreadID: fmt.Sprintf("t/%02d", i)}, storetest.Base.Add(time.Duration(i)*time.Minute), 1+i%4)
	}
	storetest.Build(m, store.Ref{ThreadID: "demo"}, demoTurns)
	c := startServer(t, m)
	ctx := context.Background()

	all := listAll(t, ctx, c, &historydv1.ThreadsRequest{PageSize: 4})
	if len(all) != 26 || !slices.IsSorted(all) {
		t.Errorf("every thread, pages of 4: %q", all)
	}
	if got := listAll(t, ctx, c, &historydv1.ThreadsRequest{ThreadIdPrefix: "t/1"}); !slices.Equal(got, all[11:21]) {
		t.Errorf("prefix t/1: %q", got)
	}
	newest := listAll(t, ctx, c, &historydv1.ThreadsRequest{Order: historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY, PageSize: 7})
	if len(newest) != 26 || newest[0] != "t/24" || newest[24] != "demo" || newest[25] != "t/00" {
		t.Errorf("newest first: %q", newest)
	}
	after := timestamppb.New(storetest.Base.Add(20 * time.Minute))
	// t/20's one checkpoint is at +20m: not after it.
	if got := listAll(t, ctx, c, &historydv1.ThreadsRequest{LastActivityAfter: after, PageSize: 2}); !slices.Equal(got, []string{"t/21", "t/22", "t/23", "t/24"}) {
		t.Errorf("active after +20m: %q", got)
	}

	resp, err := c.Threads(ctx, &historydv1.ThreadsRequest{ThreadIdPrefix: "demo", IncludeTurns: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Threads) != 1 || resp.Threads[0].GetTotalTurns() != 4 || resp.Threads[0].TotalTurns == nil ||
		resp.Threads[0].Numbering != historydv1.TurnNumbering_TURN_NUMBERING_COMPLETE || resp.Threads[0].CheckpointCount == 0 ||
		!resp.Threads[0].FirstCheckpointAt.AsTime().Equal(storetest.Base) || resp.Threads[0].LastCheckpointId == "" {
		t.Errorf("demo with turns: %v", resp)
	}
	resp, err = c.Threads(ctx, &historydv1.ThreadsRequest{ThreadIdPrefix: "demo"})
	if err != nil || resp.Threads[0].TotalTurns != nil {
		t.Errorf("demo without include_turns: %v, %v; want no total_turns", resp, err)
	}

	// A token is for the listing it came from.
	first, err := c.Threads(ctx, &historydv1.ThreadsRequest{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]*historydv1.ThreadsRequest{
		"another prefix":  {PageToken: first.NextPageToken, ThreadIdPrefix: "t/"},
		"another order":   {PageToken: first.NextPageToken, Order: historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY},
		"a time filter":   {PageToken: first.NextPageToken, LastActivityBefore: after},
		"not a token":     {PageToken: "bm90IGEgdG9rZW4"},
		"not even base64": {PageToken: "!!"},
	} {
		_, err := c.Threads(ctx, req)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "page_token: ") {
			t.Errorf("%s: %v, want InvalidArgument naming page_token", name, err)
		}
	}
	if _, err := c.Threads(ctx, &historydv1.ThreadsRequest{PageToken: first.NextPageToken, PageSize: 5}); err != nil {
		t.Errorf("the same listing with another page size: %v", err)
	}
}

func TestThreadsValidation(t *testing.T) {
	c := startServer(t, storetest.NewMemory())
	ctx := context.Background()
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(storetest.Base.Add(d)) }
	for _, tt := range []struct {
		req   *historydv1.ThreadsRequest
		field string
		limit string
	}{
		{&historydv1.ThreadsRequest{ThreadIdPrefix: strings.Repeat("x", 513)}, "thread_id_prefix", "513 bytes; the limit is 512"},
		{&historydv1.ThreadsRequest{ThreadIdPrefix: "a\x00"}, "thread_id_prefix", "NUL"},
		{&historydv1.ThreadsRequest{CheckpointNs: strings.Repeat("n", 513)}, "checkpoint_ns", "the limit is 512"},
		{&historydv1.ThreadsRequest{PageSize: -1}, "page_size", "must not be negative"},
		{&historydv1.ThreadsRequest{PageSize: 1001}, "page_size", "the limit is 1000"},
		{&historydv1.ThreadsRequest{PageSize: 101, IncludeTurns: true}, "page_size", "the limit is 100 with include_turns"},
		{&historydv1.ThreadsRequest{PageToken: strings.Repeat("x", 1025)}, "page_token", "the limit is 1024"},
		{&historydv1.ThreadsRequest{Order: 9}, "order", "not a ThreadsOrder"},
		{&historydv1.ThreadsRequest{LastActivityAfter: &timestamppb.Timestamp{Seconds: 1 << 62}}, "last_activity_after", "not a valid timestamp"},
		{&historydv1.ThreadsRequest{LastActivityAfter: at(time.Hour), LastActivityBefore: at(time.Hour)}, "last_activity_before", "must be later than last_activity_after"},
	} {
		_, err := c.Threads(ctx, tt.req)
		st := status.Convert(err)
		var field string
		for _, d := range st.Details() {
			if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) == 1 {
				field = br.FieldViolations[0].Field
			}
		}
		if st.Code() != codes.InvalidArgument || field != tt.field || !strings.Contains(st.Message(), tt.limit) {
			t.Errorf("%v: %v (field %q), want InvalidArgument on %s saying %q", tt.req, err, field, tt.field, tt.limit)
		}
	}
}

// recordingBackend records the prefixes every thread walk was asked for.
type recordingBackend struct {
	store.Backend
	mu    sync.Mutex
	walks [][]string
}

func (r *recordingBackend) Threads(ctx context.Context, q store.ThreadQuery, fn func(store.ThreadRow) error) (store.ThreadWalk, error) {
	r.mu.Lock()
	r.walks = append(r.walks, slices.Clone(q.Prefixes))
	r.mu.Unlock()
	return r.Backend.Threads(ctx, q, fn)
}

// A tenant lists only the threads under its own prefixes, and a prefix
// outside them reads as a store without threads there: the store is
// never walked outside the tenant's prefixes.
func TestThreadsTenants(t *testing.T) {
	m := storetest.NewMemory()
	for _, id := range []string{"a/1", "a/2", "a/x/1", "ab/1", "b/1", "c/1"} {
		storetest.PutThread(m, store.Ref{ThreadID: id}, storetest.Base, 1)
	}
	rec := &recordingBackend{Backend: m}
	path := filepath.Join(t.TempDir(), "tokens.json")
	authtest.WriteFile(t, path, authtest.TokenFile(t,
		authtest.Tenant{Name: "a", Prefixes: []string{"a/", "c/"}, Tokens: []string{"token-a"}},
		authtest.Tenant{Name: "ops", AllThreads: true, Tokens: []string{"token-ops"}},
	))
	c := serveWith(t, rec, service.Options{Auth: newAuth(t, path)}).client(t)
	a, ops := withToken(context.Background(), "token-a"), withToken(context.Background(), "token-ops")
	for _, tt := range []struct {
		ctx    context.Context
		prefix string
		want   []string
	}{
		{a, "", []string{"a/1", "a/2", "a/x/1", "c/1"}},
		{a, "a", []string{"a/1", "a/2", "a/x/1"}},
		{a, "a/x", []string{"a/x/1"}},
		{a, "b/", nil},
		{a, "ab", nil},
		{ops, "", []string{"a/1", "a/2", "a/x/1", "ab/1", "b/1", "c/1"}},
		{ops, "a", []string{"a/1", "a/2", "a/x/1", "ab/1"}},
	} {
		for _, order := range []historydv1.ThreadsOrder{historydv1.ThreadsOrder_THREADS_ORDER_THREAD_ID, historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY} {
			rec.mu.Lock()
			rec.walks = nil
			rec.mu.Unlock()
			got := listAll(t, tt.ctx, c, &historydv1.ThreadsRequest{ThreadIdPrefix: tt.prefix, PageSize: 2, Order: order})
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("prefix %q, %v: %q, want %q", tt.prefix, order, got, tt.want)
			}
			if tt.ctx != a {
				continue
			}
			// Tenant a's listings walk the store under its prefixes only,
			// and not at all for a prefix outside them.
			rec.mu.Lock()
			walks := rec.walks
			rec.mu.Unlock()
			if tt.want == nil && len(walks) > 0 {
				t.Errorf("prefix %q outside tenant a's: the store was walked %q", tt.prefix, walks)
			}
			for _, w := range walks {
				if len(w) == 0 {
					t.Errorf("prefix %q: a walk of tenant a's listing under no prefix", tt.prefix)
				}
				for _, p := range w {
					if !strings.HasPrefix(p, "a/") && !strings.HasPrefix(p, "c/") {
						t.Errorf("prefix %q: the store was walked under %q", tt.prefix, p)
					}
				}
			}
		}
	}
	// What tenant a gets for "b/" is what an empty store answers.
	none, err := c.Threads(a, &historydv1.ThreadsRequest{ThreadIdPrefix: "b/"})
	if err != nil || len(none.Threads) != 0 || none.NextPageToken != "" {
		t.Errorf("tenant a, prefix b/: %v, %v", none, err)
	}
}

// Listing by last activity sorts every thread under the prefixes, so past
// store.MaxThreadsSorted it is refused, naming what to do instead.
func TestThreadsTooManyToSort(t *testing.T) {
	m := storetest.NewMemory()
	for i := range store.MaxThreadsSorted + 1 {
		m.PutBlobs(store.Ref{ThreadID: fmt.Sprintf("t/%05d", i)}, fmt.Sprintf("c%d", i), storetest.Base, nil)
	}
	c := startServer(t, m)
	ctx := context.Background()
	_, err := c.Threads(ctx, &historydv1.ThreadsRequest{Order: historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "more than 10000 threads") {
		t.Errorf("newest first over %d threads: %v", store.MaxThreadsSorted+1, err)
	}
	resp, err := c.Threads(ctx, &historydv1.ThreadsRequest{Order: historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY, ThreadIdPrefix: "t/0"})
	if err != nil || len(resp.Threads) != 100 {
		t.Errorf("newest first under t/0: %d threads, %v", len(resp.Threads), err)
	}
}

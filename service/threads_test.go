package service_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/historyd/historyd/auth/authtest"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/pagetoken"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
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
		storetest.PutThread(m, backend.Ref{ThreadID: fmt.Sprintf("t/%02d", i)}, storetest.Base.Add(time.Duration(i)*time.Minute), 1+i%4)
	}
	storetest.Build(m, backend.Ref{ThreadID: "demo"}, demoTurns)
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
	backend.Backend
	mu    sync.Mutex
	walks [][]string
}

func (r *recordingBackend) Threads(ctx context.Context, q backend.ThreadQuery, fn func(backend.ThreadRow) error) (backend.ThreadWalk, error) {
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
		storetest.PutThread(m, backend.Ref{ThreadID: id}, storetest.Base, 1)
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
		m.PutBlobs(backend.Ref{ThreadID: fmt.Sprintf("t/%05d", i)}, fmt.Sprintf("c%d", i), storetest.Base, nil)
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

// Page tokens are sealed for the caller and the listing: a token carried
// to another tenant, to other filters or to a server without the key, made
// up, or crafted in an unkeyed format is refused, with one message for
// every such token and every tenant; a token shows nothing but the
// caller's own thread ids, and servers sharing a key file continue each
// other's listings.
func TestThreadsPageTokens(t *testing.T) {
	m := storetest.NewMemory()
	for _, id := range []string{"a/1", "a/2", "b/1", "s/1", "s/2", "s/3"} {
		storetest.PutThread(m, backend.Ref{ThreadID: id}, storetest.Base, 1)
	}
	path := filepath.Join(t.TempDir(), "tokens.json")
	authtest.WriteFile(t, path, authtest.TokenFile(t,
		authtest.Tenant{Name: "a", Prefixes: []string{"a/", "s/"}, Tokens: []string{"token-a"}},
		authtest.Tenant{Name: "b", Prefixes: []string{"b/", "s/"}, Tokens: []string{"token-b"}},
		authtest.Tenant{Name: "ops", AllThreads: true, Tokens: []string{"token-ops"}},
	))
	keyFile := filepath.Join(t.TempDir(), "page-token-key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := func() *pagetoken.Keys {
		k, err := pagetoken.LoadFile(keyFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serve := func(k *pagetoken.Keys) historydv1.ThreadHistoryClient {
		return servertest.Start(t, server.Config{Store: store.Config{Backend: m}, Service: service.Options{Auth: newAuth(t, path)}, PageTokens: k}).Client(t)
	}
	c, replica, other := serve(keys()), serve(keys()), serve(nil)
	ctx := context.Background()
	a, b, ops := withToken(ctx, "token-a"), withToken(ctx, "token-b"), withToken(ctx, "token-ops")

	shared := &historydv1.ThreadsRequest{ThreadIdPrefix: "s/", PageSize: 1}
	first, err := c.Threads(a, shared)
	if err != nil || len(first.Threads) != 1 || first.NextPageToken == "" {
		t.Fatalf("tenant a's first page under s/: %v, %v", first, err)
	}
	tok := first.NextPageToken
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatalf("token %q is not URL-safe base64: %v", tok, err)
	}
	if !bytes.Contains(raw, []byte("s/1")) || bytes.Contains(raw, []byte("a/")) || bytes.Contains(raw, []byte("b/")) {
		t.Errorf("token holds %q; want the last listed id and nothing else of the store", raw)
	}
	next := func(cl historydv1.ThreadHistoryClient, ctx context.Context, req *historydv1.ThreadsRequest, tok string) error {
		r := proto.Clone(req).(*historydv1.ThreadsRequest)
		r.PageToken = tok
		_, err := cl.Threads(ctx, r)
		return err
	}
	if err := next(c, a, shared, tok); err != nil {
		t.Fatalf("tenant a's next page: %v", err)
	}
	if err := next(replica, a, shared, tok); err != nil {
		t.Errorf("tenant a's next page from a server with the same key file: %v", err)
	}

	// What the old, unkeyed format allowed: any cursor, with the filters'
	// FNV hash computed by the caller.
	crafted := func(after string) string {
		h := fnv.New64a()
		for _, s := range []string{"s/", "", "THREADS_ORDER_THREAD_ID", "", ""} {
			_ = binary.Write(h, binary.BigEndian, uint32(len(s)))
			h.Write([]byte(s))
		}
		j, _ := json.Marshal(map[string]string{"f": fmt.Sprintf("%016x", h.Sum64()), "a": after})
		return base64.RawURLEncoding.EncodeToString(j)
	}
	flipped := bytes.Clone(raw)
	flipped[0] ^= 1
	var messages []string
	for name, tt := range map[string]struct {
		c   historydv1.ThreadHistoryClient
		ctx context.Context
		req *historydv1.ThreadsRequest
		tok string
	}{
		"tenant b, the same prefix":     {c, b, shared, tok},
		"ops, the same prefix":          {c, ops, shared, tok},
		"another prefix":                {c, a, &historydv1.ThreadsRequest{ThreadIdPrefix: "a/"}, tok},
		"another order":                 {c, a, &historydv1.ThreadsRequest{ThreadIdPrefix: "s/", Order: historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY}, tok},
		"another namespace":             {c, a, &historydv1.ThreadsRequest{ThreadIdPrefix: "s/", CheckpointNs: "sub"}, tok},
		"a server without the key":      {other, a, shared, tok},
		"a byte changed":                {c, a, shared, base64.RawURLEncoding.EncodeToString(flipped)},
		"crafted, unkeyed, tenant a":    {c, a, shared, crafted("s/1")},
		"crafted, unkeyed, tenant b":    {c, b, shared, crafted("b/")},
		"not base64, tenant a":          {c, a, shared, "!!"},
		"not base64, tenant b":          {c, b, shared, "!!"},
		"outside the tenant's prefixes": {c, a, &historydv1.ThreadsRequest{ThreadIdPrefix: "b/"}, tok},
	} {
		err := next(tt.c, tt.ctx, tt.req, tt.tok)
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "page_token: ") {
			t.Errorf("%s: %v, want InvalidArgument naming page_token", name, err)
			continue
		}
		messages = append(messages, st.Message())
	}
	if slices.Sort(messages); len(slices.Compact(messages)) != 1 {
		t.Errorf("refused tokens are told apart: %q", slices.Compact(messages))
	}
	// A token sealed for one page size serves another, and include_turns
	// may change: neither says where the listing goes on from.
	if err := next(c, a, &historydv1.ThreadsRequest{ThreadIdPrefix: "s/", PageSize: 5, IncludeTurns: true}, tok); err != nil {
		t.Errorf("another page size, with turns: %v", err)
	}
}

// failingList fails List of one thread with err; every other read passes
// through.
type failingList struct {
	backend.Backend
	thread string
	err    error
}

func (f failingList) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	if ref.ThreadID == f.thread {
		return backend.Census{}, f.err
	}
	return f.Backend.List(ctx, ref, q, fn)
}

// With include_turns, a thread whose own values do not decode is listed
// with its error and the page holds the others as usual; a failure of the
// store fails the page. Neither shows a thread id in the log: threads
// appear as their hashes, as in request logs.
func TestThreadsReportsEachThreadsError(t *testing.T) {
	m := storetest.NewMemory()
	for _, id := range []string{"acme/1", "acme/3"} {
		storetest.PutThread(m, backend.Ref{ThreadID: id}, storetest.Base, 2)
	}
	bad := backend.Ref{ThreadID: "acme/../acme-evil/t2"}
	m.PutBlobs(bad, "1f0d-000000", storetest.Base, map[string]backend.Blob{"messages": {Type: "json", Data: []byte(`[{"not": "a message"`)}})
	var buf syncBuffer
	log := service.RedactThreadIDs(slog.New(slog.NewJSONHandler(&buf, nil)))
	salt := []byte("test salt")
	c := serveWith(t, m, service.Options{Logger: log, ThreadIDSalt: salt}).client(t)
	ctx := context.Background()

	resp, err := c.Threads(ctx, &historydv1.ThreadsRequest{IncludeTurns: true})
	if err != nil {
		t.Fatalf("a page holding one undecodable thread: %v", err)
	}
	var ids []string
	for _, th := range resp.Threads {
		ids = append(ids, th.ThreadId)
		switch th.ThreadId {
		case bad.ThreadID:
			if th.Error == nil || codes.Code(th.Error.Code) != codes.DataLoss || !strings.Contains(th.Error.Message, "1f0d-000000") ||
				th.TotalTurns != nil || th.CheckpointCount != 1 || th.LastCheckpointAt == nil {
				t.Errorf("the undecodable thread: %v; want DATA_LOSS naming its checkpoint, its count and times, no total_turns", th)
			}
		default:
			if th.Error != nil || th.GetTotalTurns() != 1 {
				t.Errorf("%s: %v; want 1 turn and no error", th.ThreadId, th)
			}
		}
	}
	if !slices.Equal(ids, []string{bad.ThreadID, "acme/1", "acme/3"}) {
		t.Errorf("listed %q", ids)
	}
	// Without include_turns nothing of the thread fails to read.
	if resp, err := c.Threads(ctx, &historydv1.ThreadsRequest{}); err != nil || len(resp.Threads) != 3 || resp.Threads[0].Error != nil {
		t.Errorf("without include_turns: %v, %v", resp, err)
	}

	// A store that fails for a listed thread fails the page, since the
	// next one would fail as well.
	down := serveWith(t, failingList{Backend: m, thread: "acme/3", err: backend.ErrUnavailable}, service.Options{Logger: log, ThreadIDSalt: salt}).client(t)
	if _, err := down.Threads(ctx, &historydv1.ThreadsRequest{IncludeTurns: true}); status.Code(err) != codes.Unavailable {
		t.Errorf("store unavailable for one listed thread: %v, want UNAVAILABLE", err)
	}

	logged := buf.String()
	for _, id := range []string{bad.ThreadID, "acme-evil", "acme/3"} {
		if strings.Contains(logged, id) {
			t.Errorf("the log shows thread id %q:\n%s", id, logged)
		}
	}
	for _, id := range []string{bad.ThreadID, "acme/3"} {
		if h := service.ShownThread(service.ThreadIDsHashed, salt, id); !strings.Contains(logged, "thread "+h) {
			t.Errorf("the log does not name %s by its hash %s:\n%s", id, h, logged)
		}
	}
}

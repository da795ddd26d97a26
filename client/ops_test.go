package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

func TestThreads(t *testing.T) {
	mem := storetest.NewMemory()
	for i := range 7 {
		storetest.PutThread(mem, backend.Ref{ThreadID: fmt.Sprintf("t/%d", i)}, storetest.Base.Add(time.Duration(i)*time.Hour), 2)
	}
	storetest.Build(mem, backend.Ref{ThreadID: "demo"}, storetest.Demo)
	mem.PutBlobs(backend.Ref{ThreadID: "demo-broken"}, "1f0d-000000", storetest.Base, map[string]backend.Blob{"messages": {Type: "json", Data: []byte(`[{`)}})
	c := serve(t, mem).dial(t)
	ctx := context.Background()

	page, err := c.Threads(ctx, client.ThreadsQuery{Prefix: "t/", PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Threads) != 3 || page.NextPageToken == "" || page.Threads[0].ID != "t/0" || page.Threads[0].Checkpoints != 2 ||
		!page.Threads[0].FirstAt.Equal(storetest.Base) || !page.Threads[0].LastAt.Equal(storetest.Base.Add(time.Second)) ||
		page.Threads[0].LastCheckpointID != "1f0d-000001" || page.Threads[0].Turns != -1 {
		t.Errorf("first page: %+v", page)
	}
	var ids []string
	for th, err := range c.AllThreads(ctx, client.ThreadsQuery{PageSize: 2, NewestFirst: true, ActiveAfter: storetest.Base.Add(3 * time.Hour)}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, th.ID)
	}
	if want := []string{"t/6", "t/5", "t/4", "t/3"}; !slices.Equal(ids, want) {
		t.Errorf("newest first after +3h: %q, want %q", ids, want)
	}
	page, err = c.Threads(ctx, client.ThreadsQuery{Prefix: "demo", IncludeTurns: true})
	if err != nil || len(page.Threads) != 2 || page.Threads[0].Turns != len(storetest.Demo) || page.Threads[0].Err != nil {
		t.Fatalf("demo with turns: %+v, %v", page, err)
	}
	// A thread the server could not read in full carries its error, as a
	// call of its own would fail.
	if broken := page.Threads[1]; broken.ID != "demo-broken" || status.Code(broken.Err) != codes.DataLoss || broken.Turns != -1 {
		t.Errorf("demo-broken with turns: %+v", broken)
	}
	_, err = c.Threads(ctx, client.ThreadsQuery{PageSize: -1})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("page size -1: %v", err)
	}
}

func TestDiff(t *testing.T) {
	mem := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "demo"}
	written := storetest.Build(mem, ref, storetest.Demo)
	c := serve(t, mem).dial(t)
	ctx := context.Background()

	d, err := c.Diff(ctx, "demo", client.DiffQuery{To: 2})
	if err != nil {
		t.Fatal(err)
	}
	if d.From.Outcome != client.Found || d.From.Turn != 1 || d.To.Turn != 2 || d.To.CheckpointID != written[1].End || d.Total != 4 ||
		d.To.Question != storetest.Demo[1].Question || d.To.EndedAt.IsZero() {
		t.Fatalf("ends: %+v %+v", d.From, d.To)
	}
	var area *client.KeyChange
	for i := range d.Changes {
		if d.Changes[i].Key == "sketch-ops/sketch_area/area_km2" {
			area = &d.Changes[i]
		}
	}
	if area == nil || area.Kind != client.Changed || area.From.Value != 11420.0 || area.To.Value != 12935.0 || area.To.Turn != 2 {
		t.Fatalf("area change: %+v", area)
	}
	patch, err := json.Marshal(area.Patch)
	if err != nil || string(patch) != `[{"op":"replace","path":"","value":12935}]` {
		t.Errorf("area patch: %s, %v", patch, err)
	}
	if len(d.Changes) != 2 {
		t.Errorf("changes 1 → 2: %+v; want the area and the name", d.Changes)
	}
	// The same answer with values as google.protobuf.Value.
	pd, err := c.Diff(ctx, "demo", client.DiffQuery{To: 2, ValueFormat: client.ProtoValues})
	if err != nil {
		t.Fatal(err)
	}
	if len(pd.Changes) != len(d.Changes) {
		t.Fatalf("Values: %d changes, JSON text %d", len(pd.Changes), len(d.Changes))
	}
	for i, p := range pd.Changes {
		j := d.Changes[i]
		if p.Key != j.Key || p.Kind != j.Kind || !reflect.DeepEqual(p.From.Value, j.From.Value) || !reflect.DeepEqual(p.To.Value, j.To.Value) ||
			!reflect.DeepEqual(p.Patch, j.Patch) || j.To.JSON == nil || p.To.JSON != nil {
			t.Errorf("key %q: as Values %+v, as JSON text %+v", p.Key, p, j)
		}
	}

	// Turn 4 added a key; with its unchanged keys listed too.
	d, err = c.Diff(ctx, "demo", client.DiffQuery{IncludeUnchanged: true})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]client.ChangeKind{}
	for _, ch := range d.Changes {
		kinds[ch.Key] = ch.Kind
	}
	if d.From.Turn != 3 || d.To.Turn != 4 || kinds["notes/lang"] != client.Added || kinds["sketch-ops/sketch_area/name"] != client.Unchanged || len(kinds) != 3 {
		t.Errorf("3 → 4 with unchanged: %+v, %v", d.To, kinds)
	}

	mem.Delete(ref, written[0].IDs)
	d, err = c.Diff(ctx, "demo", client.DiffQuery{From: 1, To: 9})
	if err != nil {
		t.Fatal(err)
	}
	if d.From.Outcome != client.NoLongerRetained || d.From.Question != storetest.Demo[0].Question || d.To.Outcome != client.NoSuchTurn || d.To.Turn != 9 ||
		len(d.Changes) != 0 || !slices.Equal(d.Retained, []int{2, 3, 4}) {
		t.Errorf("1 → 9, turn 1 pruned: %+v", d)
	}
	if _, err := c.Diff(ctx, "demo", client.DiffQuery{To: -3}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("to -3: %v", err)
	}
}

// A watch yields turns as they end, outlives the client's timeout, and
// resumes after the last turn it received when its server goes away.
func TestWatchTurns(t *testing.T) {
	mem := storetest.NewMemory()
	ref := backend.Ref{ThreadID: "w"}
	b := storetest.NewBuilder(mem, ref)
	b.Turn(storetest.Demo[0])
	cfg := server.Config{Store: store.Config{Backend: mem}}
	cfg.Watch.PollInterval = 10 * time.Millisecond
	first := servertest.Start(t, cfg, servertest.WithTCP())
	second := servertest.Start(t, cfg, servertest.WithTCP())
	// Calls go to the first server until it shuts down, then to the second.
	useSecond := make(chan struct{})
	dialer := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		addr := first.Addr()
		select {
		case <-useSecond:
			addr = second.Addr()
		default:
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	})
	c, err := client.Dial(servertest.Target, client.WithInsecure(), client.WithDialOptions(dialer), client.WithTimeout(100*time.Millisecond),
		client.WithRetry(3, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events := make(chan *client.WatchEvent, 10)
	done := make(chan error, 1)
	go func() {
		for ev, err := range c.WatchTurns(ctx, "w", client.WatchQuery{Keys: []string{"sketch-ops/sketch_area/name"}}) {
			if err != nil {
				done <- err
				return
			}
			events <- ev
		}
		done <- nil
	}()
	next := func() *client.WatchEvent {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case err := <-done:
			t.Fatalf("the watch ended: %v", err)
		case <-time.After(3 * time.Second):
			t.Fatal("no event within 3s")
		}
		return nil
	}
	b.Turn(storetest.Demo[1]) // turn 1 has ended
	if ev := next(); ev.Checkpoint || ev.State.Turn != 1 || ev.State.State["sketch-ops/sketch_area/name"].Value != "Severn" || len(ev.State.State) != 1 {
		t.Fatalf("turn 1: %+v", ev)
	}
	time.Sleep(300 * time.Millisecond) // past the client's timeout
	close(useSecond)
	first.Shutdown(time.Second)
	b.Turn(storetest.Demo[2]) // turn 2 has ended
	if ev := next(); ev.State.Turn != 2 || ev.State.State["sketch-ops/sketch_area/name"].Value != "Thames" || ev.Total != 3 {
		t.Fatalf("turn 2, from the second server: %+v", ev)
	}
	select {
	case ev := <-events:
		t.Errorf("an event after turn 2: %+v (turn 1 again?)", ev)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled && status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("after cancel: %v", err)
	}
}

// A watch outlives the server's maximum stream age: each time the server
// ends it, it is resumed at once after the last turn received, counting
// no failure, so that with no retries allowed it still yields every turn
// once.
func TestWatchTurnsResumesAtMaxAge(t *testing.T) {
	mem := storetest.NewMemory()
	b := storetest.NewBuilder(mem, backend.Ref{ThreadID: "w"})
	b.Turn(storetest.Demo[0])
	b.Turn(storetest.Demo[1]) // turn 1 has ended
	cfg := server.Config{Store: store.Config{Backend: mem}, Service: service.Options{StreamMaxAge: 100 * time.Millisecond}}
	cfg.Watch.PollInterval = 10 * time.Millisecond
	srv := &running{servertest.Start(t, cfg)}
	c := srv.dial(t, client.WithRetry(0, time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var turns []int
	for ev, err := range c.WatchTurns(ctx, "w", client.WatchQuery{}) {
		if err != nil {
			t.Fatalf("the watch ended after turns %v: %v", turns, err)
		}
		turns = append(turns, ev.State.Turn)
		if len(turns) == len(storetest.Demo)-1 {
			break
		}
		time.Sleep(250 * time.Millisecond) // past the maximum age, twice
		b.Turn(storetest.Demo[len(turns)+1])
	}
	if want := []int{1, 2, 3}; !slices.Equal(turns, want) {
		t.Errorf("turns %v, want %v each once", turns, want)
	}
}

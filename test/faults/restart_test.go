package faults

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/internal/testbin"
)

// maxRecovery is how soon after PostgreSQL accepts connections again the
// first call must succeed.
const maxRecovery = 2 * time.Second

var digits = regexp.MustCompile(`[0-9]+`)

// tally lists messages by how often they came, most frequent first.
func tally(m map[string]int) string {
	var lines []string
	for msg, n := range m {
		lines = append(lines, fmt.Sprintf("%6d × %s", n, msg))
	}
	sort.Sort(sort.Reverse(sort.StringSlice(lines)))
	return strings.Join(lines, "\n")
}

// outcome is one call made under load.
type outcome struct {
	start, end time.Time
	code       codes.Code
	msg        string
	wrong      error // an OK answer that was not what was written
}

// loadRecorder keeps every outcome, in the order calls ended.
type loadRecorder struct {
	mu  sync.Mutex
	all []outcome
}

func (r *loadRecorder) add(o outcome) {
	r.mu.Lock()
	r.all = append(r.all, o)
	r.mu.Unlock()
}

func (r *loadRecorder) snapshot() []outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outcome(nil), r.all...)
}

// upProbe polls PostgreSQL with fresh connections and records when it
// accepts them again after refusing them.
type upProbe struct {
	done chan struct{}
	// up is when the first connection succeeded after the last failure;
	// down is whether any failed. Read after done is closed.
	up   time.Time
	down bool
}

// probeUntilUp starts polling dsn every 5ms until a connection succeeds
// after at least one has failed, or until ctx ends.
func probeUntilUp(ctx context.Context, dsn string) *upProbe {
	p := &upProbe{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			conn, err := pgx.Connect(cctx, dsn)
			if err == nil {
				err = conn.Ping(cctx)
				conn.Close(context.Background())
			}
			cancel()
			switch {
			case err != nil:
				p.down = true
			case p.down:
				p.up = time.Now()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return p
}

// TestStoreRestartUnderLoad keeps several clients calling Snapshot while
// PostgreSQL is first stopped for two seconds and started again, then
// restarted with pg_ctl restart -m fast. Every answer must be either right
// or Unavailable, the process must stay up, and the first right answer must
// come within maxRecovery of PostgreSQL accepting connections again.
func TestStoreRestartUnderLoad(t *testing.T) {
	skipIfShort(t)
	bin := testbin.Build(t)
	c := startCluster(t, 0)
	pool := connect(t, c.DSN)
	public := pgx.Identifier{"public"}.Sanitize()
	checkpointTables(t, pool, public)
	th := writeThread(t, pool, public, "rivers", rivers)
	pool.Close() // the test's own connections must not outlive the restarts

	h := testbin.Start(t, bin, "--dsn", c.DSN)
	conn := dial(t, h.Addr)
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	client := historydv1.NewThreadHistoryClient(conn)

	const (
		workers     = 8
		callTimeout = 10 * time.Second
		maxCalls    = 200000 // bound on the whole test's calls
	)
	rec := &loadRecorder{}
	stop := make(chan struct{})
	var calls atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if calls.Add(1) > maxCalls {
					return
				}
				n := int32((w+i)%len(th.turns) + 1)
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				o := outcome{start: time.Now()}
				resp, err := client.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: th.id, Turn: n})
				cancel()
				o.end = time.Now()
				st := status.Convert(err)
				o.code, o.msg = st.Code(), st.Message()
				if err == nil {
					o.wrong = th.checkSnapshot(n, resp)
				}
				rec.add(o)
				if err != nil {
					time.Sleep(10 * time.Millisecond) // no busy loop while the store is down
				}
			}
		}()
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()

	type phase struct {
		name      string
		from, up  time.Time
		recovered time.Duration
	}
	var phases []phase
	// recover waits for the probe and then for a right answer after it.
	recoverFrom := func(name string, from time.Time, p *upProbe) {
		t.Helper()
		select {
		case <-p.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: PostgreSQL did not accept connections again within 60s", name)
		}
		if !p.down || p.up.IsZero() {
			t.Fatalf("%s: the probe never saw PostgreSQL refuse and then accept connections", name)
		}
		deadline := time.Now().Add(maxRecovery + 3*time.Second)
		for time.Now().Before(deadline) {
			for _, o := range rec.snapshot() {
				if o.code == codes.OK && o.wrong == nil && o.end.After(p.up) {
					phases = append(phases, phase{name, from, p.up, o.end.Sub(p.up)})
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		phases = append(phases, phase{name, from, p.up, -1})
	}

	time.Sleep(time.Second) // load against a healthy store first

	// Phase 1: stop, two seconds down, start.
	from := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	probe := probeUntilUp(ctx, c.DSN)
	c.run("halt", "fast")
	time.Sleep(2 * time.Second)
	h.RequireRunning(t)
	c.run("resume")
	recoverFrom("stop, 2s, start", from, probe)
	time.Sleep(time.Second)

	// Phase 2: pg_ctl restart -m fast, no pause.
	from = time.Now()
	probe = probeUntilUp(ctx, c.DSN)
	c.run("restart", "fast")
	recoverFrom("restart -m fast", from, probe)
	time.Sleep(time.Second)

	stopLoad()
	h.RequireRunning(t)

	// Every answer right or Unavailable.
	all := rec.snapshot()
	counts := map[codes.Code]int{}
	others := map[string]int{}
	unavailable := map[string]int{}
	var wrong []string
	for _, o := range all {
		counts[o.code]++
		if o.code == codes.Unavailable {
			unavailable[digits.ReplaceAllString(o.msg, "N")]++
		}
		switch {
		case o.wrong != nil:
			wrong = append(wrong, o.wrong.Error())
		case o.code != codes.OK && o.code != codes.Unavailable:
			others[fmt.Sprintf("%v: %s", o.code, o.msg)]++
		}
	}
	t.Logf("%d calls from %d clients: %d OK, %d Unavailable, %d other", len(all), workers, counts[codes.OK], counts[codes.Unavailable], len(all)-counts[codes.OK]-counts[codes.Unavailable])
	t.Logf("Unavailable messages (digits as N):\n%s", tally(unavailable))
	for _, p := range phases {
		var ok, unavailable int
		next := time.Now()
		for _, q := range phases {
			if q.from.After(p.from) && q.from.Before(next) {
				next = q.from
			}
		}
		for _, o := range all {
			if o.end.After(p.from) && o.end.Before(next) {
				switch o.code {
				case codes.OK:
					ok++
				case codes.Unavailable:
					unavailable++
				}
			}
		}
		if p.recovered < 0 {
			t.Errorf("%s: no right answer within %v of PostgreSQL accepting connections again", p.name, maxRecovery+3*time.Second)
			continue
		}
		t.Logf("%s: PostgreSQL accepted connections %v after the fault began; first right answer %v later (%d OK, %d Unavailable in the phase)",
			p.name, p.up.Sub(p.from).Round(time.Millisecond), p.recovered.Round(time.Millisecond), ok, unavailable)
		if p.recovered > maxRecovery {
			t.Errorf("%s: recovery took %v, want at most %v", p.name, p.recovered.Round(time.Millisecond), maxRecovery)
		}
		if p.name == "stop, 2s, start" && unavailable == 0 {
			t.Errorf("%s: no call saw Unavailable during a two-second outage; the load did not reach the store", p.name)
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		t.Errorf("%d wrong answers, e.g. %s", len(wrong), wrong[0])
	}
	if len(others) > 0 {
		t.Errorf("calls failed with codes other than Unavailable:\n%s", tally(others))
	}
	if counts[codes.OK] == 0 {
		t.Error("no call succeeded")
	}

	// Health follows the store back.
	serving := waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	t.Logf("health SERVING again %v after the restart's recovery", serving.Sub(phases[len(phases)-1].up).Round(time.Millisecond))
	h.RequireRunning(t)
}

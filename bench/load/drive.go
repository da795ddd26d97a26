package load

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Call is one request; worker is the caller's index (0..concurrency-1) and
// i the request's sequence number.
type Call func(ctx context.Context, worker, i int) error

// Result is what a run measured.
type Result struct {
	Concurrency int
	Requests    int // completed, errors included
	Errors      int
	FirstError  string
	Elapsed     time.Duration
	RPS         float64 // completed requests per second of wall time
	P50         time.Duration
	P95         time.Duration
	P99         time.Duration
	Max         time.Duration
	Mean        time.Duration
	Load1       float64 // 1-minute load average at the end of the run
}

func (r Result) String() string {
	return fmt.Sprintf("c=%d n=%d err=%d %.1f req/s p50=%s p95=%s p99=%s max=%s load=%.2f",
		r.Concurrency, r.Requests, r.Errors, r.RPS, ms(r.P50), ms(r.P95), ms(r.P99), ms(r.Max), r.Load1)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }

// Drive runs call from concurrency workers in a closed loop (each worker
// sends its next request when the previous one is answered) until
// requests calls have been made or maxTime has passed, whichever is first.
// requests ≤ 0 means no count limit; maxTime ≤ 0 means no time limit (one
// of the two must be set). Each call gets a 60 s deadline.
func Drive(ctx context.Context, concurrency, requests int, maxTime time.Duration, call Call) Result {
	if concurrency < 1 {
		concurrency = 1
	}
	if requests <= 0 && maxTime <= 0 {
		requests = 1
	}
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		errs     int
		firstErr string
		wg       sync.WaitGroup
	)
	deadline := time.Time{}
	if maxTime > 0 {
		deadline = time.Now().Add(maxTime)
	}
	start := time.Now()
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1024)
			localErrs := 0
			var localFirst string
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if requests > 0 && i >= requests {
					break
				}
				if !deadline.IsZero() && time.Now().After(deadline) {
					break
				}
				cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				t0 := time.Now()
				err := call(cctx, w, i)
				d := time.Since(t0)
				cancel()
				local = append(local, d)
				if err != nil {
					localErrs++
					if localFirst == "" {
						localFirst = err.Error()
					}
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			errs += localErrs
			if firstErr == "" {
				firstErr = localFirst
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := Summarize(lat)
	r.Concurrency = concurrency
	r.Errors, r.FirstError = errs, firstErr
	r.Elapsed = elapsed
	if elapsed > 0 {
		r.RPS = float64(len(lat)) / elapsed.Seconds()
	}
	r.Load1 = LoadAvg()[0]
	return r
}

// Summarize computes the latency percentiles of lat (nearest rank).
func Summarize(lat []time.Duration) Result {
	r := Result{Requests: len(lat)}
	if len(lat) == 0 {
		return r
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	r.Mean = sum / time.Duration(len(s))
	r.P50 = Percentile(s, 50)
	r.P95 = Percentile(s, 95)
	r.P99 = Percentile(s, 99)
	r.Max = s[len(s)-1]
	return r
}

// Percentile is the nearest-rank percentile p of sorted.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

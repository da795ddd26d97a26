package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/historyd/historyd/bench/load"
	"github.com/historyd/historyd/bench/prof"
)

// ProfileJob is one load to profile.
type ProfileJob struct {
	Name        string
	Op          load.Op
	Concurrency int
	// Duration bounds a CPU-profiled run; Requests, when set instead,
	// runs that many requests and takes no CPU profile (for memory).
	Duration time.Duration
	Requests int
	Target   func(worker, i int) load.Target
	// Warm targets are asked once before profiling.
	Warm []load.Target
}

// ProfileResult is what a profiled run measured.
type ProfileResult struct {
	Load      load.Result
	RSSGrowth int64
	IdleRSS   int64
	Mem       prof.Mem
	Report    string
}

// RunProfile starts the profiling binary bin against dsn, drives job, and
// writes <dir>/<name>.cpu.pprof, .allocs.pprof and .txt (the reports).
func RunProfile(ctx context.Context, bin, dsn, dir string, job ProfileJob) (*ProfileResult, error) {
	port, err := load.FreePort()
	if err != nil {
		return nil, err
	}
	hook := prof.Client{Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	s, err := load.Start(ctx, bin, dsn, filepath.Join(dir, job.Name+".log"), prof.EnvVar+"="+hook.Addr)
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	if err := hook.Wait(ctx); err != nil {
		return nil, err
	}
	for _, t := range job.Warm {
		if _, err := s.Do(ctx, job.Op, t); err != nil {
			return nil, fmt.Errorf("warm-up %s %v: %w", job.Op, t, err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	base, err := load.ReadMem(s.Pid)
	if err != nil {
		return nil, err
	}
	if err := load.ResetPeak(s.Pid); err != nil {
		return nil, err
	}
	if _, err := hook.Mem(ctx, true); err != nil {
		return nil, err
	}
	res := &ProfileResult{IdleRSS: base.RSS}
	prefix := filepath.Join(dir, job.Name)
	call := func(ctx context.Context, w, i int) error {
		_, err := s.Do(ctx, job.Op, job.Target(w, i))
		return err
	}
	var cpuErr error
	if job.Requests > 0 {
		res.Load = load.Drive(ctx, max(1, job.Concurrency), job.Requests, 0, call)
	} else {
		done := make(chan struct{})
		go func() { cpuErr = hook.CPU(ctx, job.Duration, prefix+".cpu.pprof"); close(done) }()
		res.Load = load.Drive(ctx, max(1, job.Concurrency), 0, job.Duration, call)
		<-done
	}
	if cpuErr != nil {
		return nil, cpuErr
	}
	if res.Load.Errors > 0 {
		return nil, fmt.Errorf("%d errors, first: %s", res.Load.Errors, res.Load.FirstError)
	}
	if res.RSSGrowth, err = growth(s, base); err != nil {
		return nil, err
	}
	if res.Mem, err = hook.Mem(ctx, false); err != nil {
		return nil, err
	}
	if err := hook.Allocs(ctx, prefix+".allocs.pprof"); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", job.Name, res.Load)
	fmt.Fprintf(&b, "process RSS: idle %s, peak growth +%s\n", mbText(res.IdleRSS), mbText(res.RSSGrowth))
	m := res.Mem
	fmt.Fprintf(&b, "Go heap: peak in use %s (heap sys %s, alloc %s at that moment); now in use %s, sys %s, released %s; %d GCs since start\n\n",
		mbText(int64(m.PeakHeapInuse)), mbText(int64(m.PeakHeapSys)), mbText(int64(m.PeakHeapAlloc)),
		mbText(int64(m.HeapInuse)), mbText(int64(m.HeapSys)), mbText(int64(m.HeapReleased)), m.NumGC)
	if job.Requests == 0 {
		fmt.Fprintf(&b, "== go tool pprof -top %s.cpu.pprof\n%s\n", job.Name, prof.Top(ctx, bin, prefix+".cpu.pprof"))
		fmt.Fprintf(&b, "== go tool pprof -top -cum %s.cpu.pprof\n%s\n", job.Name, prof.Top(ctx, bin, prefix+".cpu.pprof", "-cum"))
	}
	fmt.Fprintf(&b, "== go tool pprof -top -sample_index=alloc_space %s.allocs.pprof (since process start)\n%s\n", job.Name,
		prof.Top(ctx, bin, prefix+".allocs.pprof", "-sample_index=alloc_space"))
	res.Report = prefix + ".txt"
	return res, os.WriteFile(res.Report, []byte(b.String()), 0o644)
}

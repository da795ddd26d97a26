// Package prof profiles the real historyd binary. historyd serves no pprof
// endpoint, so the bench builds a profiling variant of cmd/historyd: the
// same sources plus one file (hook.go.in) added with `go build -overlay`,
// which, when HISTORYD_BENCH_PPROF names a loopback address, serves a CPU
// profile, the allocation profile and heap statistics there. The source
// tree is not touched, and the client stays in its own process, so the
// profiles show the server's work only.
package prof

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

//go:embed hook.go.in
var hook []byte

// EnvVar is the variable the hook reads.
const EnvVar = "HISTORYD_BENCH_PPROF"

// Build compiles the profiling variant of ./cmd/historyd into out.
func Build(ctx context.Context, repo, out string) error {
	dir, err := os.MkdirTemp("", "historyd-bench-overlay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "hook.go")
	if err := os.WriteFile(src, hook, 0o644); err != nil {
		return err
	}
	overlay, _ := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(repo, "cmd", "historyd", "zz_bench_profile_hook.go"): src},
	})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-overlay", ov, "-o", out, "./cmd/historyd")
	cmd.Dir = repo
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build -overlay ./cmd/historyd: %w\n%s", err, b)
	}
	return nil
}

// Client talks to the hook of a running profiling binary.
type Client struct{ Addr string }

func (c Client) get(ctx context.Context, path string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s: %s", path, resp.Status, b)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// Wait waits until the hook answers.
func (c Client) Wait(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Mem(ctx, false)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("profiling hook at %s: %w", c.Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CPU records a CPU profile for d into path.
func (c Client) CPU(ctx context.Context, d time.Duration, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.get(ctx, fmt.Sprintf("/cpu?seconds=%g", d.Seconds()), f)
}

// Allocs writes the allocation profile (every allocation since start,
// sampled) into path.
func (c Client) Allocs(ctx context.Context, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.get(ctx, "/allocs", f)
}

// Mem is the Go heap as the process sees it.
type Mem struct {
	HeapInuse     uint64 `json:"heap_inuse"`
	HeapSys       uint64 `json:"heap_sys"`
	HeapReleased  uint64 `json:"heap_released"`
	PeakHeapInuse uint64 `json:"peak_heap_inuse"`
	PeakHeapSys   uint64 `json:"peak_heap_sys"`
	PeakHeapAlloc uint64 `json:"peak_heap_alloc"`
	StackSys      uint64 `json:"stack_sys"`
	Sys           uint64 `json:"sys"`
	NumGC         uint64 `json:"num_gc"`
	NextGC        uint64 `json:"gogc_next"`
}

// Mem reads the heap statistics; with reset, the peak starts again from
// now.
func (c Client) Mem(ctx context.Context, reset bool) (Mem, error) {
	path := "/mem"
	if reset {
		path += "?reset=1"
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(c.get(ctx, path, pw)) }()
	var m Mem
	err := json.NewDecoder(pr).Decode(&m)
	pr.Close()
	return m, err
}

// Top runs `go tool pprof -top` with extra arguments on a profile of bin.
func Top(ctx context.Context, bin, profile string, args ...string) string {
	a := append([]string{"tool", "pprof", "-top", "-nodecount=25"}, args...)
	a = append(a, bin, profile)
	out, err := exec.CommandContext(ctx, "go", a...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("go %v: %v\n%s", a, err, out)
	}
	return string(out)
}

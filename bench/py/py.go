// Package py runs the benchmark's Python side (lgbench.py) with a given
// interpreter: LangGraph's own table setup and read-back, and the reference
// implementation's timing.
package py

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed lgbench.py
var script []byte

// Run runs `python lgbench.py args...` and decodes its JSON output into out.
func Run(ctx context.Context, python string, out any, args ...string) error {
	dir, err := os.MkdirTemp("", "historyd-bench-py-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "lgbench.py")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, python, append([]string{path}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s lgbench.py %s: %w\n%s", python, args[0], err, tail(stderr.String(), 3000))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("lgbench.py %s: output is not JSON: %w (%s)", args[0], err, tail(stdout.String(), 300))
	}
	return nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

package main

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/historyd/historyd/internal/testbin"
)

// TestVersionFromLinkFlags builds historyd the way the image build does,
// with -X for main.version and main.commit, so that renaming either
// variable fails here rather than shipping images that say "unknown".
func TestVersionFromLinkFlags(t *testing.T) {
	const ver, rev = "v0.0.0-test-7-g0123456", "0123456789abcdef0123456789abcdef01234567"
	bin := testbin.BuildWith(t, "-ldflags", "-X main.version="+ver+" -X main.commit="+rev)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("historyd version: %v", err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		fields[k] = strings.TrimSpace(v)
	}
	for k, want := range map[string]string{
		"version": ver, "commit": rev, "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH,
	} {
		if fields[k] != want {
			t.Errorf("historyd version: %s = %q, want %q (output %q)", k, fields[k], want, out)
		}
	}
	if _, ok := fields["modified"]; !ok {
		t.Errorf("historyd version: no modified line in %q", out)
	}

	wantLine := "historyd " + ver + " (commit " + rev + ", " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version", "--short"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("historyd %v: %v", args, err)
		}
		if string(out) != wantLine {
			t.Errorf("historyd %v = %q, want %q", args, out, wantLine)
		}
	}
	// --version is only an alias on its own; after a command it is that
	// command's (unknown) flag.
	if err := exec.Command(bin, "demo", "--version").Run(); err == nil {
		t.Error("historyd demo --version succeeded; want the unknown-flag failure")
	}
}

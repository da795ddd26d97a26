package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// serveHelp builds historyd from the enclosing module and returns what
// `historyd serve --help` lists: flag names and the variables naming them.
// Help asked for goes to stdout, and only stdout is read, so that a
// warning on stderr can never pass for a flag.
func serveHelp(t *testing.T) (flags, envs map[string]bool) {
	t.Helper()
	goTool := os.Getenv("GO")
	if goTool == "" {
		goTool = "go"
	}
	if _, err := exec.LookPath(goTool); err != nil {
		t.Fatalf("the go command is needed to build historyd for its --help: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "historyd")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/historyd")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/historyd: %v\n%s", err, out)
	}
	var stderr strings.Builder
	help := exec.Command(bin, "serve", "--help")
	help.Stderr = &stderr
	out, err := help.Output()
	if err != nil {
		t.Fatalf("historyd serve --help: %v\n%s%s", err, out, stderr.String())
	}
	flags, envs = map[string]bool{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\(env (HISTORYD_[A-Z0-9_]+)\)`).FindAllStringSubmatch(string(out), -1) {
		envs[m[1]] = true
	}
	// Guard against a help format these patterns no longer read: an empty
	// list would make every name below look unknown, or, worse, a check
	// that compares nothing.
	if len(flags) < 20 || len(envs) < 20 || !flags["dsn"] || !envs["HISTORYD_DSN"] {
		t.Fatalf("read %d flags and %d variables from historyd serve --help; its format changed?\n%s", len(flags), len(envs), out)
	}
	return flags, envs
}

// TestSettingsAreHistorydFlags: every --flag in the container's arguments
// and every HISTORYD_* variable it gets (literal, from a ConfigMap or from a
// Secret) must be one historyd serve knows. historyd ignores variables it
// does not know, so a misspelt HISTORYD_TLS_CRT would silently serve
// plaintext.
func TestSettingsAreHistorydFlags(t *testing.T) {
	flags, envs := serveHelp(t)
	for _, dir := range kustomizations(t) {
		t.Run(dir, func(t *testing.T) {
			o := render(t, dir)
			d := o.deployment(t)
			for _, c := range d.Spec.Template.Spec.Containers {
				if len(c.Command) > 0 && (len(c.Command) != 1 || c.Command[0] != "/historyd") {
					t.Errorf("container %s: command %q; the image's entrypoint is /historyd", c.Name, c.Command)
				}
				if len(c.Args) == 0 || c.Args[0] != "serve" {
					t.Fatalf("container %s: args %q, want serve first", c.Name, c.Args)
				}
				for _, a := range c.Args[1:] {
					if !strings.HasPrefix(a, "-") {
						continue
					}
					name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
					if !flags[name] {
						t.Errorf("container %s: historyd serve has no flag --%s", c.Name, name)
					}
				}
				env := resolveEnv(t, o, c)
				n := 0
				for name, v := range env {
					if !strings.HasPrefix(name, "HISTORYD_") {
						continue
					}
					n++
					if !envs[name] {
						t.Errorf("container %s: historyd serve reads no %s (set from %s)", c.Name, name, v.source)
					}
				}
				if n == 0 {
					t.Errorf("container %s: no HISTORYD_* variables; the ConfigMap is not reaching it", c.Name)
				}
				// A ConfigMap is for historyd's settings, and for the
				// standard OpenTelemetry variables historyd reads
				// (TestTracingSettings checks their names); anything else
				// (the Go runtime's) is set next to what it depends on, in
				// the Deployment.
				for _, from := range c.EnvFrom {
					if from.ConfigMapRef == nil {
						continue
					}
					for k := range o.configMaps[from.ConfigMapRef.Name].Data {
						if name := from.Prefix + k; !strings.HasPrefix(name, "HISTORYD_") && !strings.HasPrefix(name, "OTEL_") {
							t.Errorf("ConfigMap %s: %s is not a historyd setting", from.ConfigMapRef.Name, k)
						}
					}
				}
			}
		})
	}
}

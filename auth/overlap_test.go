package auth_test

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/auth/authtest"
)

// Tenants whose thread prefixes overlap ("a" and "ab": tenant a reads
// every thread of tenant ab) are warned about when the token file is
// loaded and whenever it is reloaded, each line naming both tenants and
// both prefixes; prefixes that end apart, and all_threads tenants, are
// not.
func TestOverlappingPrefixesWarned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	authtest.WriteFile(t, path, authtest.TokenFile(t,
		authtest.Tenant{Name: "a", Prefixes: []string{"a"}, Tokens: []string{"t-a"}},
		authtest.Tenant{Name: "ab", Prefixes: []string{"ab"}, Tokens: []string{"t-ab"}},
		authtest.Tenant{Name: "same", Prefixes: []string{"x/", "a"}, Tokens: []string{"t-same"}},
		authtest.Tenant{Name: "apart", Prefixes: []string{"c/", "cd/"}, Tokens: []string{"t-c"}},
		authtest.Tenant{Name: "ops", AllThreads: true, Tokens: []string{"t-ops"}},
	))
	var buf bytes.Buffer
	a, err := auth.NewAuthenticator(path, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range a.Policy().Overlaps() {
		got = append(got, o.Outer+":"+o.OuterPrefix+">"+o.Inner+":"+o.InnerPrefix)
	}
	want := []string{"a:a>ab:ab", "a:a>same:a", "same:a>ab:ab"}
	if !slices.Equal(got, want) {
		t.Errorf("overlaps %v, want %v", got, want)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) || !strings.Contains(lines[0], "level=WARN") ||
		!strings.Contains(lines[0], `tenant \"a\"'s thread prefix \"a\" covers tenant \"ab\"'s \"ab\"`) {
		t.Errorf("log at start:\n%s\nwant a warning per overlap naming both tenants", buf.String())
	}
	buf.Reset()
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != len(want) {
		t.Errorf("%d warnings at reload, want %d:\n%s", n, len(want), buf.String())
	}
}

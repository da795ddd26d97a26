package pagetoken_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/historyd/historyd/pagetoken"
)

const (
	keyA = "0123456789abcdef0123456789abcdef-a"
	keyB = "0123456789abcdef0123456789abcdef-b"
)

func writeKeys(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, lines ...string) *pagetoken.Keys {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, lines...)
	k, err := pagetoken.LoadFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	k := load(t, keyA)
	listing := pagetoken.Listing("tenant-a", "acme/", "")
	cursor := []byte("acme/thread-7")
	tok := k.Seal(listing, cursor)
	if got, err := k.Open(listing, tok); err != nil || !bytes.Equal(got, cursor) {
		t.Fatalf("Open(Seal) = %q, %v", got, err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for name, bad := range map[string]struct {
		listing []byte
		token   string
		keys    *pagetoken.Keys
	}{
		"another listing":           {pagetoken.Listing("tenant-b", "acme/", ""), tok, k},
		"fields moved across":       {pagetoken.Listing("tenant-a", "acme", "/"), tok, k},
		"a cursor byte changed":     {listing, flip(0), k},
		"a MAC byte changed":        {listing, flip(len(raw) - 1), k},
		"cut short":                 {listing, tok[:len(tok)-2], k},
		"shorter than a MAC":        {listing, base64.RawURLEncoding.EncodeToString(raw[:10]), k},
		"not base64":                {listing, "!!" + tok, k},
		"empty":                     {listing, "", k},
		"another key":               {listing, tok, load(t, keyB)},
		"another process's keys":    {listing, tok, pagetoken.PerProcess()},
		"a cursor only, unsealed":   {listing, base64.RawURLEncoding.EncodeToString(cursor), k},
		"sealed with another key":   {listing, load(t, keyB).Seal(listing, cursor), k},
		"sealed by another process": {listing, pagetoken.PerProcess().Seal(listing, cursor), k},
	} {
		if got, err := bad.keys.Open(bad.listing, bad.token); !errors.Is(err, pagetoken.ErrInvalid) || got != nil {
			t.Errorf("%s: %q, %v; want ErrInvalid", name, got, err)
		}
	}
	p := pagetoken.PerProcess()
	if got, err := p.Open(listing, p.Seal(listing, cursor)); err != nil || !bytes.Equal(got, cursor) || p.Shared() || !k.Shared() {
		t.Errorf("per-process keys: %q, %v, shared %v (file's %v)", got, err, p.Shared(), k.Shared())
	}
}

// A key is replaced without failing tokens in flight: the new key is
// added second, then moved first, then the old one dropped.
func TestRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, "# the page token keys", "", keyA)
	k, err := pagetoken.LoadFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	listing := pagetoken.Listing("x")
	old := k.Seal(listing, []byte("c"))
	steps := []struct {
		lines   []string
		oldOpen bool
	}{
		{[]string{keyA, keyB}, true},
		{[]string{keyB, keyA}, true},
		{[]string{keyB}, false},
	}
	for i, s := range steps {
		writeKeys(t, path, s.lines...)
		if err := k.Reload(); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Open(listing, old); (err == nil) != s.oldOpen {
			t.Errorf("step %d: a token of the old key opens: %v, want %v", i, err == nil, s.oldOpen)
		}
	}
	// Sealed under the new key: it opens wherever the new key is held.
	if _, err := load(t, keyA, keyB).Open(listing, k.Seal(listing, []byte("c"))); err != nil {
		t.Errorf("a token of the new key, where it is the second: %v", err)
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, tt := range map[string]struct {
		content string
		want    string
	}{
		"short key":  {"tooshort\n", "line 1: the key is 8 bytes; the least is 32"},
		"no key":     {"# nothing\n\n", "holds no key"},
		"second bad": {keyA + "\n\nshort\n", "line 3: the key is 5 bytes"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := pagetoken.LoadFile(path, nil); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming the file and saying %q", name, err, tt.want)
		}
	}
	if _, err := pagetoken.LoadFile(filepath.Join(dir, "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}

	// A reload that fails keeps the keys in force.
	path := filepath.Join(dir, "keys")
	writeKeys(t, path, keyA)
	k, err := pagetoken.LoadFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := k.Seal(nil, []byte("c"))
	writeKeys(t, path, "short")
	if err := k.Reload(); err == nil {
		t.Error("reload of a bad file: no error")
	}
	if _, err := k.Open(nil, tok); err != nil {
		t.Errorf("after a failed reload: %v", err)
	}
}

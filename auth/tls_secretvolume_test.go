package auth_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/auth/authtest"
)

// secretVolume lays files out the way the kubelet writes a Secret volume:
// each version in its own hidden directory, "..data" a symlink to the
// current one, and each key a symlink through "..data". An update writes a
// new directory, points "..data_tmp" at it, renames that over "..data" (the
// one atomic step, which switches every key at once) and removes the old
// directory.
type secretVolume struct {
	t       *testing.T
	dir     string
	version int
	current string
}

func newSecretVolume(t *testing.T, files map[string][]byte) *secretVolume {
	v := &secretVolume{t: t, dir: t.TempDir()}
	v.update(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func (v *secretVolume) update(files map[string][]byte) {
	t := v.t
	t.Helper()
	v.version++
	ts := filepath.Join(v.dir, fmt.Sprintf("..2026_12_01_00_%02d_00.000000000", v.version))
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	// historyd notices a change by the files' sizes and modification
	// times. The kubelet writes each version when the Secret changes,
	// minutes or more apart; here versions follow each other within
	// milliseconds, inside one tick of the filesystem's clock, and
	// certificates of equal size would look unchanged. So each version
	// gets the time its directory is named after.
	written := time.Date(2026, 12, 1, 0, v.version, 0, 0, time.UTC)
	for name, data := range files {
		authtest.WriteFile(t, filepath.Join(ts, name), data)
		if err := os.Chtimes(filepath.Join(ts, name), written, written); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if v.current != "" {
		if err := os.RemoveAll(v.current); err != nil {
			t.Fatal(err)
		}
	}
	v.current = ts
}

func (v *secretVolume) path(name string) string { return filepath.Join(v.dir, name) }

// A certificate rotated in a Kubernetes Secret volume is served from the
// next handshake on, without SIGHUP: the files historyd is given are
// symlinks whose targets change, and it compares what they point to.
func TestServerTLSFollowsSecretVolumeUpdates(t *testing.T) {
	ca := authtest.NewCA(t, "servers")
	first := ca.Server()
	vol := newSecretVolume(t, map[string][]byte{"tls.crt": first.CertPEM, "tls.key": first.KeyPEM})
	s, err := auth.NewServerTLS(vol.path("tls.crt"), vol.path("tls.key"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetCheckInterval(0)
	addr := tlsServer(t, s.Config())
	serial := func() string {
		t.Helper()
		got, err := servedSerial(t, addr, ca.Pool(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := serial(); got != first.Serial.String() {
		t.Fatalf("served %s, want the first certificate %s", got, first.Serial)
	}
	for i := range 3 {
		next := ca.Server()
		vol.update(map[string][]byte{"tls.crt": next.CertPEM, "tls.key": next.KeyPEM})
		if got := serial(); got != next.Serial.String() {
			t.Fatalf("update %d: served %s, want the rotated certificate %s", i+1, got, next.Serial)
		}
	}
}

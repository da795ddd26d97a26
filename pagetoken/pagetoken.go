// Package pagetoken seals a listing's cursor into a page token that a
// caller can neither forge nor carry to another listing: the token is the
// cursor followed by an HMAC-SHA256, under a server key, of the cursor and
// of what the listing is (its filters, its caller). Start from Keys:
// LoadFile reads the keys replicas share, PerProcess makes one of the
// process's own.
//
// A token authenticates its cursor; it does not hide it. What goes into a
// cursor must therefore be something the caller may read.
package pagetoken

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
)

// MinKeyBytes is the shortest key accepted: HMAC-SHA256's own strength.
// `openssl rand -hex 32` makes one (64 hex digits, used as text).
const MinKeyBytes = 32

// macBytes is how long a token's MAC is: all of HMAC-SHA256.
const macBytes = sha256.Size

// domain separates these MACs from any other use of the same key.
const domain = "historyd page token v1\x00"

// Keys are the keys page tokens are sealed and opened with: the first
// seals, every one opens, so that a key can be replaced without failing
// the listings in progress (see LoadFile). It is safe for concurrent use;
// Reload swaps in a file's keys atomically.
type Keys struct {
	path string // empty for PerProcess keys
	log  *slog.Logger
	mu   sync.Mutex // serialises reloads
	keys atomic.Pointer[[][]byte]
}

// PerProcess returns keys of one random key, the process's own: tokens
// it seals open only in this process, until it exits. Behind a Service
// balancing calls over several replicas a listing's next page then fails
// whenever it lands on another replica; replicas that share a listing
// need LoadFile and one key file.
func PerProcess() *Keys {
	key := make([]byte, MinKeyBytes)
	_, _ = rand.Read(key) // never fails; see crypto/rand.Read
	k := &Keys{}
	k.keys.Store(&[][]byte{key})
	return k
}

// LoadFile reads keys from a file of one key per line (its text, at least
// MinKeyBytes bytes; blank lines and lines starting with # are skipped):
// the first seals tokens, every one opens them. To replace a key without
// failing listings in progress, add the new one as the second line and
// reload every replica, then move it first and reload again, then drop
// the old one once tokens sealed with it have been used (a listing's next
// page is usually asked for within seconds). A file that does not load is
// an error here, unlike in Reload.
func LoadFile(path string, log *slog.Logger) (*Keys, error) {
	if log == nil {
		log = slog.Default()
	}
	keys, err := readFile(path)
	if err != nil {
		return nil, err
	}
	k := &Keys{path: path, log: log}
	k.keys.Store(&keys)
	return k, nil
}

func readFile(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("page token key file: %w", err)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if len(line) < MinKeyBytes {
			return nil, fmt.Errorf("page token key file %s, line %d: the key is %d bytes; the least is %d (openssl rand -hex 32 makes one)", path, n, len(line), MinKeyBytes)
		}
		keys = append(keys, bytes.Clone(line))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("page token key file %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("page token key file %s holds no key: want one per line, at least %d bytes each", path, MinKeyBytes)
	}
	return keys, nil
}

// Shared reports whether the keys come from a file, which replicas can
// share, rather than from PerProcess.
func (k *Keys) Shared() bool { return k.path != "" }

// Reload rereads the key file (PerProcess keys have none: it does
// nothing). When the file does not load, the keys in force stay in force
// and the error is logged and returned.
func (k *Keys) Reload() error {
	if k.path == "" {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	keys, err := readFile(k.path)
	if err != nil {
		k.log.Error("page token keys not reloaded; keeping the previous ones", "err", err)
		return err
	}
	k.keys.Store(&keys)
	k.log.Info("page token keys reloaded", "path", k.path, "keys", len(keys))
	return nil
}

// Listing encodes what a listing is, each field length-prefixed so that no
// two lists of fields encode alike: pass it to Seal and Open.
func Listing(fields ...string) []byte {
	var b []byte
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

func mac(key, listing, cursor []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain))
	m.Write(binary.AppendUvarint(nil, uint64(len(listing))))
	m.Write(listing)
	m.Write(cursor)
	return m.Sum(nil)
}

// Seal returns the page token of cursor for the listing: URL-safe base64
// of the cursor and its MAC under the first key.
func (k *Keys) Seal(listing, cursor []byte) string {
	key := (*k.keys.Load())[0]
	return base64.RawURLEncoding.EncodeToString(append(bytes.Clone(cursor), mac(key, listing, cursor)...))
}

// ErrInvalid is what Open returns for every token it does not open: not
// one of Seal's, sealed for another listing, or under a key no longer
// held. One error for all, so that a caller learns nothing from which.
var ErrInvalid = errors.New("not a page token sealed for this listing")

// Open returns the cursor a token Seal sealed for the listing, under any
// of the keys.
func (k *Keys) Open(listing []byte, token string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < macBytes {
		return nil, ErrInvalid
	}
	cursor, sum := b[:len(b)-macBytes], b[len(b)-macBytes:]
	ok := false
	for _, key := range *k.keys.Load() {
		// Every key is tried, whichever matches, so that the time taken
		// does not say which did.
		if hmac.Equal(mac(key, listing, cursor), sum) {
			ok = true
		}
	}
	if !ok {
		return nil, ErrInvalid
	}
	return cursor, nil
}

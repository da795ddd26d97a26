package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ServerTLS is the server side of TLS: the server's certificate and, for
// mutual TLS, the CA that client certificates must chain to. Certificates
// are rotated by replacing the files: each handshake checks (at most once a
// second) whether a file changed and reloads, and Reload forces it, for
// SIGHUP. A set of files that does not load (say, a certificate already
// replaced but its key not yet) leaves the previous set serving.
type ServerTLS struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger
	// checkEvery bounds how often handshakes stat the files.
	checkEvery time.Duration

	mu      sync.Mutex // serialises loads
	cur     atomic.Pointer[tlsFiles]
	checked atomic.Int64 // unix nanoseconds of the last check
}

type tlsFiles struct {
	cert  *tls.Certificate
	pool  *x509.CertPool // nil without a client CA
	stamp string         // the files' sizes and modification times
}

// NewServerTLS loads the server's certificate and key, and the client CA
// when clientCAFile is not empty, in which case every client must present a
// certificate that chains to it.
func NewServerTLS(certFile, keyFile, clientCAFile string, log *slog.Logger) (*ServerTLS, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLS needs both a certificate and a key file")
	}
	if log == nil {
		log = slog.Default()
	}
	s := &ServerTLS{certFile: certFile, keyFile: keyFile, caFile: clientCAFile, log: log, checkEvery: time.Second}
	f, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(f)
	s.checked.Store(time.Now().UnixNano())
	return s, nil
}

// ClientAuth reports whether client certificates are required.
func (s *ServerTLS) ClientAuth() bool { return s.caFile != "" }

// Config returns the tls.Config to serve with. It reads the current files
// on every handshake, so one Config serves through any number of reloads.
func (s *ServerTLS) Config() *tls.Config {
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			s.reloadIfChanged()
			return s.cur.Load().cert, nil
		},
	}
	if s.caFile == "" {
		return base
	}
	base.ClientAuth = tls.RequireAndVerifyClientCert
	base.ClientCAs = s.cur.Load().pool
	// The client CA pool is a field, not a callback, so a reloaded pool
	// is handed over as a per-handshake copy of the config.
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		s.reloadIfChanged()
		c := base.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs = s.cur.Load().pool
		return c, nil
	}
	return base
}

// Reload rereads the files now. On failure the previous certificate and CA
// stay in use; the error is logged and returned.
func (s *ServerTLS) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked()
}

func (s *ServerTLS) reloadLocked() error {
	s.checked.Store(time.Now().UnixNano())
	f, err := s.load()
	if err != nil {
		s.log.Error("TLS files not reloaded; keeping the previous certificate", "err", err)
		return err
	}
	old := s.cur.Swap(f)
	if old == nil || old.stamp != f.stamp {
		var notAfter time.Time
		if f.cert.Leaf != nil {
			notAfter = f.cert.Leaf.NotAfter
		}
		s.log.Info("TLS files reloaded", "cert", s.certFile, "client_ca", s.caFile, "not_after", notAfter)
	}
	return nil
}

// reloadIfChanged reloads when a file's size or modification time differs
// from the loaded set's. A failed load is retried on a later handshake, not
// on every one.
func (s *ServerTLS) reloadIfChanged() {
	now := time.Now().UnixNano()
	if now-s.checked.Load() < int64(s.checkEvery) {
		return
	}
	if !s.mu.TryLock() {
		return // another handshake is checking; serve what is loaded
	}
	defer s.mu.Unlock()
	s.checked.Store(now)
	if st, err := s.stamp(); err == nil && st == s.cur.Load().stamp {
		return
	}
	_ = s.reloadLocked()
}

func (s *ServerTLS) files() []string {
	fs := []string{s.certFile, s.keyFile}
	if s.caFile != "" {
		fs = append(fs, s.caFile)
	}
	return fs
}

func (s *ServerTLS) stamp() (string, error) {
	var out string
	for _, name := range s.files() {
		fi, err := os.Stat(name)
		if err != nil {
			return "", err
		}
		out += fmt.Sprintf("%d.%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return out, nil
}

func (s *ServerTLS) load() (*tlsFiles, error) {
	// The stamp is taken first: a file replaced during the load then
	// differs from it and is read again at the next check.
	st, err := s.stamp()
	if err != nil {
		return nil, fmt.Errorf("TLS files: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s with key %s: %w", s.certFile, s.keyFile, err)
	}
	f := &tlsFiles{cert: &cert, stamp: st}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		f.pool = x509.NewCertPool()
		if !f.pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS client CA %s: no PEM certificate in it", s.caFile)
		}
	}
	return f, nil
}

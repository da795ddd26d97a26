package auth_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/auth/authtest"
)

const hashA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")

func TestParseRejects(t *testing.T) {
	for _, tt := range []struct {
		name, file, want string
	}{
		{"not JSON", `tenants: []`, "token file"},
		{"unknown field", `{"tenants": [{"name": "a", "thread_prefix": ["a/"]}]}`, `unknown field "thread_prefix"`},
		{"trailing content", `{"tenants": []} {}`, "after the JSON object"},
		{"no name", `{"tenants": [{"thread_prefixes": ["a/"]}]}`, "name"},
		{"bad name", `{"tenants": [{"name": "a b", "thread_prefixes": ["a/"]}]}`, "name"},
		{"duplicate name", `{"tenants": [{"name": "a", "thread_prefixes": ["a/"]}, {"name": "a", "thread_prefixes": ["b/"]}]}`, "twice"},
		{"no threads", `{"tenants": [{"name": "a"}]}`, "thread_prefixes or all_threads"},
		{"both", `{"tenants": [{"name": "a", "all_threads": true, "thread_prefixes": ["a/"]}]}`, "exclude"},
		{"empty prefix", `{"tenants": [{"name": "a", "thread_prefixes": [""]}]}`, "all_threads"},
		{"token, not hash", `{"tenants": [{"name": "a", "thread_prefixes": ["a/"], "token_sha256": ["s3cret-token-value"]}]}`, "token_sha256[0]"},
		{"shared token", `{"tenants": [{"name": "a", "thread_prefixes": ["a/"], "token_sha256": ["` + hashA + `"]}, {"name": "b", "thread_prefixes": ["b/"], "token_sha256": ["` + strings.ToUpper(hashA) + `"]}]}`, `tenant "a"`},
		{"bad cert kind", `{"tenants": [{"name": "a", "thread_prefixes": ["a/"], "client_certs": ["email:x@y"]}]}`, "uri:"},
		{"shared cert", `{"tenants": [{"name": "a", "thread_prefixes": ["a/"], "client_certs": ["cn:x"]}, {"name": "b", "thread_prefixes": ["b/"], "client_certs": ["cn:x"]}]}`, `tenant "a"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := auth.Parse([]byte(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v, want an error mentioning %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret-token-value") {
				t.Errorf("error %q repeats a secret", err)
			}
		})
	}
}

func TestPolicy(t *testing.T) {
	p, err := auth.Parse([]byte(`{"tenants": [
		{"name": "a", "thread_prefixes": ["a/", "shared/a/"], "token_sha256": ["` + strings.ToUpper(hashA) + `"], "client_certs": ["uri:spiffe://t/a", "cn:agent-a"]},
		{"name": "ops", "all_threads": true, "client_certs": ["dns:ops.internal"]},
		{"name": "revoked", "thread_prefixes": ["r/"], "token_sha256": []}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, ok := p.ByToken("test")
	if !ok || a.Name != "a" {
		t.Fatalf("ByToken(test) = %v, %v", a, ok)
	}
	if _, ok := p.ByToken(hashA); ok {
		t.Error("the hash itself works as a token")
	}
	for id, want := range map[string]bool{"a/1": true, "shared/a/x": true, "b/1": false, "": false, "a": false, "shared/b": false} {
		if got := a.CanRead(id); got != want {
			t.Errorf("a.CanRead(%q) = %v, want %v", id, got, want)
		}
	}
	var none *auth.Tenant
	if none.CanRead("a/1") {
		t.Error("a nil tenant reads threads")
	}

	cert := func(cn string, dns []string, uris ...string) *x509.Certificate {
		c := &x509.Certificate{DNSNames: dns}
		c.Subject.CommonName = cn
		for _, u := range uris {
			parsed, _ := url.Parse(u)
			c.URIs = append(c.URIs, parsed)
		}
		return c
	}
	for _, tt := range []struct {
		name string
		cert *x509.Certificate
		want string // tenant, or "" for an error
	}{
		{"URI SAN", cert("", nil, "spiffe://t/a"), "a"},
		{"common name", cert("agent-a", nil), "a"},
		{"DNS SAN", cert("whoever", []string{"ops.internal"}), "ops"},
		{"nothing listed", cert("agent-b", []string{"b.internal"}), ""},
		{"two tenants", cert("agent-a", []string{"ops.internal"}), ""},
		{"same tenant twice", cert("agent-a", nil, "spiffe://t/a"), "a"},
	} {
		got, err := p.ByCertificate(tt.cert)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%s: tenant %q, want an error", tt.name, got.Name)
		case tt.want != "" && (err != nil || got.Name != tt.want):
			t.Errorf("%s: %v, %v; want tenant %q", tt.name, got, err, tt.want)
		}
	}
}

func TestReloadKeepsPolicyOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	authtest.WriteFile(t, path, authtest.TokenFile(t, authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"one"}}))
	a, err := auth.NewAuthenticator(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	authtest.WriteFile(t, path, authtest.TokenFile(t, authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"two"}}))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Policy().ByToken("two"); !ok {
		t.Fatal("reloaded token not in force")
	}
	authtest.WriteFile(t, path, []byte(`{"tenants": [`))
	if err := a.Reload(); err == nil {
		t.Fatal("truncated file reloaded without error")
	}
	if _, ok := a.Policy().ByToken("two"); !ok {
		t.Error("a failed reload dropped the tokens in force")
	}
	if _, err := auth.NewAuthenticator(path, nil); err == nil {
		t.Error("NewAuthenticator accepted a truncated file")
	}
}

// tlsServer accepts TLS connections on 127.0.0.1 and completes their
// handshakes.
func tlsServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return lis.Addr().String()
}

// servedSerial handshakes with the server and returns its certificate's
// serial number.
func servedSerial(t *testing.T, addr string, pool *x509.CertPool, client *tls.Certificate) (string, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	// TLS 1.3 reports a refused client certificate on the first read.
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != nil && !strings.Contains(err.Error(), "EOF") {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// Replacing the certificate files is picked up by the next handshake;
// files that do not load leave the previous certificate serving; Reload
// forces a reread.
func TestServerTLSReload(t *testing.T) {
	ca := authtest.NewCA(t, "servers")
	dir := t.TempDir()
	first := ca.Server()
	certFile, keyFile := first.WriteFiles(t, dir, "server")
	s, err := auth.NewServerTLS(certFile, keyFile, "", nil)
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

	second := ca.Server()
	second.WriteFiles(t, dir, "server")
	if got := serial(); got != second.Serial.String() {
		t.Errorf("after replacing the files: served %s, want %s", got, second.Serial)
	}

	// A certificate whose key has not been replaced yet does not load.
	authtest.WriteFile(t, certFile, ca.Server().CertPEM)
	if err := s.Reload(); err == nil {
		t.Error("Reload of a certificate with the wrong key succeeded")
	}
	if got := serial(); got != second.Serial.String() {
		t.Errorf("with mismatched files: served %s, want the previous %s", got, second.Serial)
	}

	third := ca.Server()
	third.WriteFiles(t, dir, "server")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != third.Serial.String() {
		t.Errorf("after Reload: served %s, want %s", got, third.Serial)
	}
}

// With a client CA, a client needs a certificate from it; replacing the
// CA file changes which clients are accepted.
func TestServerTLSClientCA(t *testing.T) {
	serverCA, oldCA, newCA := authtest.NewCA(t, "servers"), authtest.NewCA(t, "old clients"), authtest.NewCA(t, "new clients")
	dir := t.TempDir()
	certFile, keyFile := serverCA.Server().WriteFiles(t, dir, "server")
	caFile := filepath.Join(dir, "clients.pem")
	authtest.WriteFile(t, caFile, oldCA.PEM)
	s, err := auth.NewServerTLS(certFile, keyFile, caFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.ClientAuth() {
		t.Fatal("ClientAuth() = false with a client CA")
	}
	addr := tlsServer(t, s.Config())
	oldClient := oldCA.Client(authtest.Identity{CN: "old"}).Cert
	newClient := newCA.Client(authtest.Identity{CN: "new"}).Cert

	if _, err := servedSerial(t, addr, serverCA.Pool(), nil); err == nil {
		t.Error("handshake without a client certificate succeeded")
	}
	if _, err := servedSerial(t, addr, serverCA.Pool(), &oldClient); err != nil {
		t.Errorf("client of the configured CA: %v", err)
	}
	if _, err := servedSerial(t, addr, serverCA.Pool(), &newClient); err == nil {
		t.Error("client of another CA accepted")
	}
	authtest.WriteFile(t, caFile, newCA.PEM)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := servedSerial(t, addr, serverCA.Pool(), &newClient); err != nil {
		t.Errorf("client of the new CA after reload: %v", err)
	}
	if _, err := servedSerial(t, addr, serverCA.Pool(), &oldClient); err == nil {
		t.Error("client of the replaced CA still accepted")
	}
}

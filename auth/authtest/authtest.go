// Package authtest makes what tests of authentication need: a throwaway CA
// issuing server and client certificates, and token files.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/historyd/historyd/auth"
)

// CA is a certificate authority that lives for one test.
type CA struct {
	t    testing.TB
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
}

// NewCA returns a new CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{t: t, cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool returns a pool holding only the CA, for clients to verify servers.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Leaf is an issued certificate and its key.
type Leaf struct {
	// Cert is the certificate and key, ready for a tls.Config.
	Cert tls.Certificate
	// CertPEM and KeyPEM are the PEM encodings, for files.
	CertPEM, KeyPEM []byte
	// Serial is the certificate's serial number, to tell certificates
	// apart.
	Serial *big.Int
}

// Identity names what a certificate says about its holder.
type Identity struct {
	// CN is the subject common name.
	CN string
	// DNS are DNS SANs.
	DNS []string
	// URIs are URI SANs.
	URIs []string
	// IPs are IP SANs.
	IPs []net.IP
}

// Server issues a server certificate for localhost and 127.0.0.1.
func (ca *CA) Server() *Leaf {
	return ca.issue(Identity{CN: "localhost", DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate with the given identity.
func (ca *CA) Client(id Identity) *Leaf {
	return ca.issue(id, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(id Identity, usage x509.ExtKeyUsage) *Leaf {
	t := ca.t
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: id.CN},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     id.DNS,
		IPAddresses:  id.IPs,
	}
	for _, u := range id.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := &Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		Serial:  tmpl.SerialNumber,
	}
	l.Cert, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// WriteFiles writes the certificate and key into dir as name.crt and
// name.key and returns their paths.
func (l *Leaf) WriteFiles(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	WriteFile(t, certFile, l.CertPEM)
	WriteFile(t, keyFile, l.KeyPEM)
	return certFile, keyFile
}

// Tenant is one tenant of a token file, with its tokens in the clear.
type Tenant struct {
	// Name is the tenant's name.
	Name string
	// Prefixes are its thread_prefixes.
	Prefixes []string
	// AllThreads grants it every thread.
	AllThreads bool
	// Tokens are its bearer tokens, hashed when written.
	Tokens []string
	// ClientCerts are its certificate identities ("uri:…", "dns:…", "cn:…").
	ClientCerts []string
}

// TokenFile renders tenants as a token file, hashing their tokens.
func TokenFile(t testing.TB, tenants ...Tenant) []byte {
	t.Helper()
	type entry struct {
		Name           string   `json:"name"`
		ThreadPrefixes []string `json:"thread_prefixes,omitempty"`
		AllThreads     bool     `json:"all_threads,omitempty"`
		TokenSHA256    []string `json:"token_sha256"`
		ClientCerts    []string `json:"client_certs,omitempty"`
	}
	var f struct {
		Tenants []entry `json:"tenants"`
	}
	for _, tn := range tenants {
		e := entry{Name: tn.Name, ThreadPrefixes: tn.Prefixes, AllThreads: tn.AllThreads, ClientCerts: tn.ClientCerts, TokenSHA256: []string{}}
		for _, tok := range tn.Tokens {
			e.TokenSHA256 = append(e.TokenSHA256, auth.HashToken(tok))
		}
		f.Tenants = append(f.Tenants, e)
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// WriteFile writes data to path, replacing it, and fails the test on error.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

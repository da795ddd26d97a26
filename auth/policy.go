// Package auth decides who is calling historyd and which threads they may
// read. Callers are tenants, named in a token file that maps hashed bearer
// tokens and client-certificate identities to a tenant and the thread-id
// prefixes it owns. The package also builds the server's TLS configuration,
// reloading its certificate and client CA when their files change.
//
// # Token file
//
// The token file is JSON (chosen because it needs no parser beyond the
// standard library and every configuration tool can write it):
//
//	{
//	  "tenants": [
//	    {
//	      "name": "acme",
//	      "thread_prefixes": ["acme/"],
//	      "token_sha256": ["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],
//	      "client_certs": ["uri:spiffe://example.org/acme/agent", "dns:agent.acme.internal", "cn:acme-agent"]
//	    },
//	    {
//	      "name": "operators",
//	      "all_threads": true,
//	      "token_sha256": ["…"]
//	    }
//	  ]
//	}
//
// Fields of a tenant:
//
//   - name: required, unique, letters, digits, '.', '_' and '-' only (it is
//     logged).
//   - thread_prefixes: the thread ids the tenant may read are those starting
//     with one of these byte strings. End each with a delimiter ("acme/"), so
//     that "acme" does not also grant "acmecorp-…". Empty strings are refused.
//   - all_threads: grants every thread, for operators' tools. Exclusive with
//     thread_prefixes; a tenant must have one or the other.
//   - token_sha256: the lowercase hex SHA-256 of each bearer token the tenant
//     presents as "authorization: Bearer <token>". Compute it with
//     `printf %s "$TOKEN" | sha256sum`. Only hashes are stored, so a leaked
//     file does not leak tokens. Generate tokens with at least 128 bits of
//     randomness, e.g. `openssl rand -base64 32`.
//   - client_certs: identities of client certificates (verified against
//     --tls-client-ca) that act as the tenant: "uri:<URI SAN>",
//     "dns:<DNS SAN>" or "cn:<subject common name>".
//
// A token or certificate identity may belong to one tenant only. Unknown
// fields are errors, so that a misspelt key fails the load instead of
// silently granting or denying. A tenant may have no credentials: emptying
// its lists is how access is revoked without failing the reload.
package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Tenant is an authenticated caller: a name and the threads it may read.
// A Tenant is immutable once loaded.
type Tenant struct {
	// Name identifies the tenant in logs and rate limits.
	Name string
	// ThreadPrefixes lists the prefixes of the thread ids the tenant may read.
	ThreadPrefixes []string
	// AllThreads grants every thread.
	AllThreads bool
}

// CanRead reports whether the tenant may read the thread. A nil Tenant may
// read nothing, so a missing tenant fails closed.
func (t *Tenant) CanRead(threadID string) bool {
	if t == nil {
		return false
	}
	if t.AllThreads {
		return true
	}
	for _, p := range t.ThreadPrefixes {
		if strings.HasPrefix(threadID, p) {
			return true
		}
	}
	return false
}

// Policy is a loaded token file: which tenant each credential stands for.
// It is immutable; a reload builds a new one.
type Policy struct {
	tenants []*Tenant
	tokens  map[string]*Tenant // lowercase hex SHA-256 of the token
	certs   map[string]*Tenant // "uri:…", "dns:…" or "cn:…"
}

// Tenants returns the tenants in file order.
func (p *Policy) Tenants() []*Tenant { return p.tenants }

// Credentials counts the bearer token hashes and the client certificate
// identities the file lists, over all tenants: with neither, no call can
// authenticate.
func (p *Policy) Credentials() (tokens, certs int) { return len(p.tokens), len(p.certs) }

// Overlap is one tenant's thread prefix that another tenant's begins with
// (or equals): every thread under Inner is also under Outer, so tenant
// Outer reads tenant Inner's threads. The file allows it (a deliberate
// grant, such as an operator's prefix above several tenants', is valid),
// but it is more often a missing delimiter ("acme" beside "acme-eu/").
type Overlap struct {
	// Outer and OuterPrefix are the tenant whose prefix is the shorter,
	// and that prefix.
	Outer, OuterPrefix string
	// Inner and InnerPrefix are the tenant whose threads Outer reads, and
	// its prefix.
	Inner, InnerPrefix string
}

// String says which tenant reads which other's threads.
func (o Overlap) String() string {
	return fmt.Sprintf("tenant %q's thread prefix %q covers tenant %q's %q: %[1]q reads %[3]q's threads", o.Outer, o.OuterPrefix, o.Inner, o.InnerPrefix)
}

// Overlaps lists every pair of different tenants one of whose thread
// prefixes begins another's, in file order. all_threads tenants, which
// read everything by design, are left out.
func (p *Policy) Overlaps() []Overlap {
	var out []Overlap
	for _, outer := range p.tenants {
		for _, inner := range p.tenants {
			if outer == inner {
				continue
			}
			for _, op := range outer.ThreadPrefixes {
				for _, ip := range inner.ThreadPrefixes {
					// Equal prefixes are listed once, for the earlier tenant.
					if strings.HasPrefix(ip, op) && (ip != op || slices.Index(p.tenants, outer) < slices.Index(p.tenants, inner)) {
						out = append(out, Overlap{Outer: outer.Name, OuterPrefix: op, Inner: inner.Name, InnerPrefix: ip})
					}
				}
			}
		}
	}
	return out
}

type fileTenant struct {
	Name           string   `json:"name"`
	ThreadPrefixes []string `json:"thread_prefixes"`
	AllThreads     bool     `json:"all_threads"`
	TokenSHA256    []string `json:"token_sha256"`
	ClientCerts    []string `json:"client_certs"`
}

type file struct {
	Tenants []fileTenant `json:"tenants"`
}

// HashToken returns the lowercase hex SHA-256 of token, as written in the
// token file's token_sha256 lists.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// LoadFile reads and parses a token file.
func LoadFile(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Parse parses and checks a token file's contents. Any error rejects the
// whole file, so a half-valid file never takes effect.
func Parse(data []byte) (*Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("token file: content after the JSON object")
	}
	p := &Policy{tokens: map[string]*Tenant{}, certs: map[string]*Tenant{}}
	names := map[string]bool{}
	for i, ft := range f.Tenants {
		where := fmt.Sprintf("tenants[%d]", i)
		if !validName(ft.Name) {
			return nil, fmt.Errorf("%s: name %q: want 1-64 letters, digits, '.', '_' or '-'", where, ft.Name)
		}
		where = fmt.Sprintf("tenant %q", ft.Name)
		if names[ft.Name] {
			return nil, fmt.Errorf("%s: name used twice", where)
		}
		names[ft.Name] = true
		switch {
		case ft.AllThreads && len(ft.ThreadPrefixes) > 0:
			return nil, fmt.Errorf("%s: all_threads and thread_prefixes exclude each other", where)
		case !ft.AllThreads && len(ft.ThreadPrefixes) == 0:
			return nil, fmt.Errorf("%s: needs thread_prefixes or all_threads", where)
		}
		for _, pre := range ft.ThreadPrefixes {
			if pre == "" {
				// "" is a prefix of every id: granting everything must be
				// spelt all_threads.
				return nil, fmt.Errorf("%s: empty thread prefix; use all_threads to grant every thread", where)
			}
		}
		t := &Tenant{Name: ft.Name, ThreadPrefixes: ft.ThreadPrefixes, AllThreads: ft.AllThreads}
		for j, h := range ft.TokenSHA256 {
			h = strings.ToLower(h)
			if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
				// Not quoted: what was pasted here may be the token itself.
				return nil, fmt.Errorf("%s: token_sha256[%d] is not 64 hex digits; write the output of `printf %%s TOKEN | sha256sum`, not the token", where, j)
			}
			if other, dup := p.tokens[h]; dup {
				return nil, fmt.Errorf("%s: token_sha256 %s… is also tenant %q's", where, h[:8], other.Name)
			}
			p.tokens[h] = t
		}
		for _, id := range ft.ClientCerts {
			kind, val, ok := strings.Cut(id, ":")
			if !ok || val == "" || (kind != "uri" && kind != "dns" && kind != "cn") {
				return nil, fmt.Errorf("%s: client_certs entry %q: want uri:…, dns:… or cn:…", where, id)
			}
			if other, dup := p.certs[id]; dup {
				return nil, fmt.Errorf("%s: client_certs entry %q is also tenant %q's", where, id, other.Name)
			}
			p.certs[id] = t
		}
		p.tenants = append(p.tenants, t)
	}
	return p, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// ByToken returns the tenant a bearer token stands for. The lookup is by
// the token's SHA-256, so its timing depends on the hash, not on how much
// of a stored token a guess matches.
func (p *Policy) ByToken(token string) (*Tenant, bool) {
	t, ok := p.tokens[HashToken(token)]
	return t, ok
}

// CertIdentities lists the identities of a certificate in the token file's
// notation: each URI SAN, each DNS SAN, then the subject common name.
func CertIdentities(c *x509.Certificate) []string {
	var ids []string
	for _, u := range c.URIs {
		ids = append(ids, "uri:"+u.String())
	}
	for _, d := range c.DNSNames {
		ids = append(ids, "dns:"+d)
	}
	if c.Subject.CommonName != "" {
		ids = append(ids, "cn:"+c.Subject.CommonName)
	}
	return ids
}

// ByCertificate returns the tenant a verified client certificate stands
// for: the one tenant any of its identities is listed under. A certificate
// whose identities name two tenants is refused rather than resolved by
// order, since either choice could grant the wrong threads.
func (p *Policy) ByCertificate(c *x509.Certificate) (*Tenant, error) {
	var found *Tenant
	for _, id := range CertIdentities(c) {
		t, ok := p.certs[id]
		if !ok {
			continue
		}
		if found != nil && found != t {
			return nil, fmt.Errorf("client certificate names tenants %q and %q", found.Name, t.Name)
		}
		found = t
	}
	if found == nil {
		return nil, fmt.Errorf("client certificate (%s) belongs to no tenant", strings.Join(CertIdentities(c), ", "))
	}
	return found, nil
}

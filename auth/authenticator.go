package auth

import (
	"context"
	"crypto/x509"
	"log/slog"
	"sync"
	"sync/atomic"

	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Authenticator maps each call's credentials to a Tenant using the token
// file it was loaded from. Reload swaps in a new file's policy atomically,
// so calls in flight finish under the policy they started with.
type Authenticator struct {
	path   string
	log    *slog.Logger
	mu     sync.Mutex // serialises reloads, and guards onReload
	policy atomic.Pointer[Policy]
	// onReload is called after each reload that took effect.
	onReload []func()
}

// NewAuthenticator loads the token file at path. A file that does not load
// is an error here, unlike in Reload: a server must not start with no idea
// who may call it.
func NewAuthenticator(path string, log *slog.Logger) (*Authenticator, error) {
	if log == nil {
		log = slog.Default()
	}
	p, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	a := &Authenticator{path: path, log: log}
	a.policy.Store(p)
	a.warnOverlaps(p)
	return a, nil
}

// warnOverlaps logs a warning for each pair of tenants whose thread
// prefixes overlap, naming both, at start and at every reload.
func (a *Authenticator) warnOverlaps(p *Policy) {
	for _, o := range p.Overlaps() {
		a.log.Warn("token file: "+o.String()+"; end each prefix with a delimiter (\"acme/\") unless that is meant", "path", a.path)
	}
}

// Policy returns the policy in force.
func (a *Authenticator) Policy() *Policy { return a.policy.Load() }

// Reload rereads the token file. When the file does not load, the policy
// in force stays in force and the error is logged and returned: a typo
// during an edit must not lock every tenant out, nor let anyone in.
func (a *Authenticator) Reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, err := LoadFile(a.path)
	if err != nil {
		a.log.Error("token file not reloaded; keeping the previous one", "err", err)
		return err
	}
	a.policy.Store(p)
	a.log.Info("token file reloaded", "path", a.path, "tenants", len(p.Tenants()))
	a.warnOverlaps(p)
	for _, fn := range a.onReload {
		fn()
	}
	return nil
}

// OnReload has fn called after every reload that took effect, once the
// new policy is in force, before Reload returns: what holds credentials
// beyond one call (open streams) checks them again there. fn must not
// call Reload.
func (a *Authenticator) OnReload(fn func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.onReload = append(a.onReload, fn)
}

type tenantKey struct{}

// WithTenant returns ctx carrying the authenticated tenant.
func WithTenant(ctx context.Context, t *Tenant) context.Context {
	return context.WithValue(ctx, tenantKey{}, t)
}

// TenantFromContext returns the tenant Authenticate put in ctx.
func TenantFromContext(ctx context.Context) (*Tenant, bool) {
	t, ok := ctx.Value(tenantKey{}).(*Tenant)
	return t, ok && t != nil
}

// Authenticate finds the tenant of the call in ctx and returns ctx carrying
// it (see TenantFromContext). It has the shape of go-grpc-middleware's
// auth.AuthFunc.
//
// A bearer token ("authorization: Bearer <token>") and a verified client
// certificate are both credentials. A call may present either; when it
// presents both they must name the same tenant, so a certificate cannot
// widen what a token grants or the other way round. Every failure is
// Unauthenticated.
func (a *Authenticator) Authenticate(ctx context.Context) (context.Context, error) {
	p := a.policy.Load()
	var byToken, byCert *Tenant
	if len(metadata.ValueFromIncomingContext(ctx, "authorization")) > 0 {
		token, err := grpcauth.AuthFromMD(ctx, "bearer")
		if err != nil {
			return nil, err
		}
		t, ok := p.ByToken(token)
		if !ok {
			return nil, status.Error(codes.Unauthenticated, "bearer token not recognised")
		}
		byToken = t
	}
	if cert := verifiedClientCert(ctx); cert != nil {
		t, err := p.ByCertificate(cert)
		switch {
		case err == nil:
			byCert = t
		case byToken == nil:
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
		// A certificate that maps to no tenant does not spoil a good
		// token: with a shared client CA, hosts may hold certificates the
		// token file does not list.
	}
	switch {
	case byToken != nil && byCert != nil && byToken != byCert:
		return nil, status.Errorf(codes.Unauthenticated, "bearer token and client certificate belong to different tenants")
	case byToken != nil:
		return WithTenant(ctx, byToken), nil
	case byCert != nil:
		return WithTenant(ctx, byCert), nil
	}
	return nil, status.Error(codes.Unauthenticated, `no credentials: send "authorization: Bearer <token>" or a client certificate`)
}

// verifiedClientCert returns the leaf of the client's verified chain, or
// nil. Only verified chains count: PeerCertificates alone is whatever the
// client sent.
func verifiedClientCert(ctx context.Context) *x509.Certificate {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

package service_test

import (
	"context"
	"crypto/tls"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/auth/authtest"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// twoTenants is a store holding one thread of tenant a and one of tenant b,
// and a token file giving each tenant its prefix.
func twoTenants(t *testing.T) (*countingBackend, string) {
	t.Helper()
	m := storetest.NewMemory()
	storetest.Build(m, backend.Ref{ThreadID: "a/1"}, demoTurns)
	storetest.Build(m, backend.Ref{ThreadID: "b/1"}, demoTurns)
	path := filepath.Join(t.TempDir(), "tokens.json")
	authtest.WriteFile(t, path, authtest.TokenFile(t,
		authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"token-a"}},
		authtest.Tenant{Name: "b", Prefixes: []string{"b/"}, Tokens: []string{"token-b"}},
	))
	return newCounting(m), path
}

func newAuth(t *testing.T, path string) *auth.Authenticator {
	t.Helper()
	a, err := auth.NewAuthenticator(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// answer is everything a caller can see of one call: its messages (one
// for a unary call), code, message and details.
type answer struct {
	msgs []proto.Message
	code codes.Code
	msg  string
	det  []any
}

func (a answer) String() string {
	return a.code.String() + " " + a.msg
}

// first returns the call's first message, or nil.
func (a answer) first() proto.Message {
	if len(a.msgs) == 0 {
		return nil
	}
	return a.msgs[0]
}

func ask(ctx context.Context, c historydv1.ThreadHistoryClient, rpc, thread string, keys ...string) answer {
	var msgs []proto.Message
	var resp proto.Message
	var err error
	switch rpc {
	case "Snapshots":
		resp, err = c.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: thread, Keys: keys})
	case "Snapshot":
		resp, err = c.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: thread, Turn: 2, Keys: keys})
	case "Turns":
		resp, err = c.Turns(ctx, &historydv1.TurnsRequest{ThreadId: thread, IncludeKeysWritten: true})
	case "StreamSnapshots":
		msgs, err = readStream(ctx, c, &historydv1.StreamSnapshotsRequest{ThreadId: thread, Keys: keys})
	}
	if resp != nil && err == nil {
		msgs = []proto.Message{resp}
	}
	st := status.Convert(err)
	return answer{msgs: msgs, code: st.Code(), msg: st.Message(), det: st.Details()}
}

// readStream collects a StreamSnapshots call's messages.
func readStream(ctx context.Context, c historydv1.ThreadHistoryClient, req *historydv1.StreamSnapshotsRequest) ([]proto.Message, error) {
	stream, err := c.StreamSnapshots(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []proto.Message
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func sameAnswer(t *testing.T, what string, got, want answer) {
	t.Helper()
	if got.code != want.code || got.msg != want.msg || len(got.det) != len(want.det) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
	for i := range got.det {
		if !proto.Equal(got.det[i].(proto.Message), want.det[i].(proto.Message)) {
			t.Errorf("%s: detail %d = %v, want %v", what, i, got.det[i], want.det[i])
		}
	}
	if len(got.msgs) != len(want.msgs) {
		t.Errorf("%s: %d messages, want %d", what, len(got.msgs), len(want.msgs))
		return
	}
	for i := range got.msgs {
		if !proto.Equal(got.msgs[i], want.msgs[i]) {
			t.Errorf("%s: message %d differs:\n got %v\nwant %v", what, i, got.msgs[i], want.msgs[i])
		}
	}
}

// Tenant a reads its own threads, and for tenant b's existing thread gets
// exactly what it gets for threads that do not exist: the same code,
// message and body, for every method, malformed requests included; and
// the store is never asked about b's thread.
func TestTenantIsolation(t *testing.T) {
	b, path := twoTenants(t)
	s := serveWith(t, b, service.Options{Auth: newAuth(t, path)})
	c := s.client(t)
	ctxA := withToken(context.Background(), "token-a")

	own := ask(ctxA, c, "Snapshots", "a/1")
	if own.code != codes.OK || own.first().(*historydv1.SnapshotsResponse).Total != 4 {
		t.Fatalf("tenant a reading a/1: %v %v", own, own.first())
	}
	if got := ask(withToken(context.Background(), "token-b"), c, "Snapshots", "b/1"); got.code != codes.OK || got.first().(*historydv1.SnapshotsResponse).Total != 4 {
		t.Fatalf("tenant b reading b/1: %v", got)
	}
	asked := b.asked("b/1")

	if got := ask(ctxA, c, "StreamSnapshots", "a/1"); got.code != codes.OK || len(got.msgs) != 4 {
		t.Fatalf("tenant a streaming a/1: %v, %d messages", got, len(got.msgs))
	}
	for _, rpc := range []string{"Snapshots", "Snapshot", "Turns", "StreamSnapshots"} {
		unknownOwn := ask(ctxA, c, rpc, "a/never")
		if unknownOwn.code != codes.OK {
			t.Fatalf("%s of an unknown thread: %v", rpc, unknownOwn)
		}
		sameAnswer(t, rpc+" b/1 vs a/never", ask(ctxA, c, rpc, "b/1"), unknownOwn)
		sameAnswer(t, rpc+" b/never vs a/never", ask(ctxA, c, rpc, "b/never"), unknownOwn)
	}
	if snap := ask(ctxA, c, "Snapshot", "b/1").first().(*historydv1.SnapshotResponse); snap.GetNoSuchTurn() == nil || snap.Total != 0 {
		t.Errorf("Snapshot of b/1 as a = %v, want no_such_turn with total 0", snap)
	}
	// Validation is not skipped for forbidden threads, so a malformed
	// request cannot tell them apart either.
	bad := ask(ctxA, c, "Snapshots", "a/never", "")
	if bad.code != codes.InvalidArgument {
		t.Fatalf("empty key: %v", bad)
	}
	sameAnswer(t, "malformed b/1 vs a/never", ask(ctxA, c, "Snapshots", "b/1", ""), bad)
	badStream := ask(ctxA, c, "StreamSnapshots", "a/never", "")
	if badStream.code != codes.InvalidArgument {
		t.Fatalf("empty key in a stream: %v", badStream)
	}
	sameAnswer(t, "malformed stream b/1 vs a/never", ask(ctxA, c, "StreamSnapshots", "b/1", ""), badStream)

	if n := b.asked("b/1"); n != asked {
		t.Errorf("store asked about b/1 %d more times after tenant b's own read", n-asked)
	}
}

func TestUnauthenticated(t *testing.T) {
	b, path := twoTenants(t)
	s := serveWith(t, b, service.Options{Auth: newAuth(t, path)})
	c := s.client(t)
	for name, ctx := range map[string]context.Context{
		"no token":      context.Background(),
		"bad token":     withToken(context.Background(), "token-c"),
		"hash as token": withToken(context.Background(), auth.HashToken("token-a")),
		"empty token":   withToken(context.Background(), ""),
		"basic scheme":  metadata.AppendToOutgoingContext(context.Background(), "authorization", "Basic dG9rZW4tYQ=="),
	} {
		for _, rpc := range []string{"Snapshots", "StreamSnapshots"} {
			if got := ask(ctx, c, rpc, "a/1"); got.code != codes.Unauthenticated || len(got.msgs) != 0 {
				t.Errorf("%s %s: %v, want Unauthenticated and no body", rpc, name, got)
			}
		}
	}
	// Health and reflection need no credentials.
	conn := s.conn(t, nil)
	if r, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health without a token = %v, %v", r, err)
	}
	if svcs, err := listServices(conn); err != nil || !strings.Contains(svcs, "historyd.v1.ThreadHistory") {
		t.Errorf("reflection without a token = %q, %v", svcs, err)
	}
}

func listServices(conn *grpc.ClientConn) (string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		return "", err
	}
	defer stream.CloseSend()
	// A refused stream shows its status on Recv; Send only sees EOF.
	_ = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	r, err := stream.Recv()
	if err != nil {
		return "", err
	}
	var names []string
	for _, s := range r.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	return strings.Join(names, ","), nil
}

func TestReflectionOff(t *testing.T) {
	s := serveWith(t, storetest.NewMemory(), service.Options{DisableReflection: true})
	_, err := listServices(s.conn(t, nil))
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("reflection when off: %v, want Unimplemented", err)
	}
}

// Reloading the token file takes effect for the next call; a file that
// does not parse leaves the previous tokens working.
func TestTokenReload(t *testing.T) {
	b, path := twoTenants(t)
	a := newAuth(t, path)
	c := serveWith(t, b, service.Options{Auth: a}).client(t)
	read := func(token string) codes.Code {
		return ask(withToken(context.Background(), token), c, "Turns", "a/1").code
	}
	if got := read("token-a"); got != codes.OK {
		t.Fatalf("before reload: %v", got)
	}
	authtest.WriteFile(t, path, authtest.TokenFile(t, authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"token-a2"}}))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := read("token-a"); got != codes.Unauthenticated {
		t.Errorf("revoked token after reload: %v, want Unauthenticated", got)
	}
	if got := read("token-a2"); got != codes.OK {
		t.Errorf("new token after reload: %v, want OK", got)
	}
	authtest.WriteFile(t, path, []byte(`{"tenants": [{"name": "a", "thread_prefix": ["a/"]}]}`))
	if err := a.Reload(); err == nil {
		t.Fatal("reload of a misspelt file succeeded")
	}
	if got := read("token-a2"); got != codes.OK {
		t.Errorf("after a failed reload: %v, want the previous tokens to work", got)
	}
}

// mutualTLS is a CA of clients, and the server's TLS requiring
// certificates it issued, with a server certificate for "localhost".
func mutualTLS(t *testing.T) (*authtest.CA, *auth.ServerTLS) {
	t.Helper()
	ca := authtest.NewCA(t, "clients")
	dir := t.TempDir()
	certFile, keyFile := ca.Server().WriteFiles(t, dir, "server")
	caFile := filepath.Join(dir, "ca.pem")
	authtest.WriteFile(t, caFile, ca.PEM)
	stls, err := auth.NewServerTLS(certFile, keyFile, caFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ca, stls
}

// Client certificates map to tenants by URI SAN, DNS SAN or common name,
// over real TLS; a certificate no tenant lists is refused, and so is a
// token that names a different tenant from the certificate.
func TestClientCertificateTenants(t *testing.T) {
	ca, stls := mutualTLS(t)
	b, path := twoTenants(t)
	authtest.WriteFile(t, path, authtest.TokenFile(t,
		authtest.Tenant{Name: "a", Prefixes: []string{"a/"}, Tokens: []string{"token-a"}, ClientCerts: []string{"uri:spiffe://test/a", "cn:agent-a"}},
		authtest.Tenant{Name: "b", Prefixes: []string{"b/"}, ClientCerts: []string{"dns:agent.b.internal"}},
	))
	s := serveWith(t, b, service.Options{Auth: newAuth(t, path), TLS: stls.Config()})
	dial := func(leaf *authtest.Leaf) historydv1.ThreadHistoryClient {
		tc := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
		if leaf != nil {
			tc.Certificates = []tls.Certificate{leaf.Cert}
		}
		return historydv1.NewThreadHistoryClient(s.conn(t, tc))
	}
	total := func(a answer) int32 {
		if r, ok := a.first().(*historydv1.TurnsResponse); ok {
			return r.Total
		}
		return -1
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		leaf  *authtest.Leaf
		ctx   context.Context
		code  codes.Code
		a1    int32 // total seen for a/1
		b1    int32 // total seen for b/1
		maybe bool  // refused at the handshake: any failure code
	}{
		{name: "URI SAN", leaf: ca.Client(authtest.Identity{CN: "x", URIs: []string{"spiffe://test/a"}}), ctx: ctx, code: codes.OK, a1: 4, b1: 0},
		{name: "common name", leaf: ca.Client(authtest.Identity{CN: "agent-a"}), ctx: ctx, code: codes.OK, a1: 4, b1: 0},
		{name: "DNS SAN", leaf: ca.Client(authtest.Identity{CN: "y", DNS: []string{"agent.b.internal"}}), ctx: ctx, code: codes.OK, a1: 0, b1: 4},
		{name: "unlisted certificate", leaf: ca.Client(authtest.Identity{CN: "stranger"}), ctx: ctx, code: codes.Unauthenticated},
		{name: "unlisted certificate with a token", leaf: ca.Client(authtest.Identity{CN: "stranger"}), ctx: withToken(ctx, "token-a"), code: codes.OK, a1: 4, b1: 0},
		{name: "certificate and token of different tenants", leaf: ca.Client(authtest.Identity{DNS: []string{"agent.b.internal"}}), ctx: withToken(ctx, "token-a"), code: codes.Unauthenticated},
		{name: "no certificate", ctx: withToken(ctx, "token-a"), maybe: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(tt.leaf)
			a1 := ask(tt.ctx, c, "Turns", "a/1")
			if tt.maybe {
				if a1.code == codes.OK {
					t.Fatalf("without a client certificate: %v, want a refused handshake", a1)
				}
				return
			}
			if a1.code != tt.code {
				t.Fatalf("a/1: %v, want %v", a1, tt.code)
			}
			if tt.code != codes.OK {
				return
			}
			if got := total(a1); got != tt.a1 {
				t.Errorf("a/1 total = %d, want %d", got, tt.a1)
			}
			if got := total(ask(tt.ctx, c, "Turns", "b/1")); got != tt.b1 {
				t.Errorf("b/1 total = %d, want %d", got, tt.b1)
			}
		})
	}
}

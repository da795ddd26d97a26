package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
)

// Defaults for the options of Dial and New. The Python and TypeScript
// clients use the same ones (client/testdata/defaults.json records them, and
// each client's tests hold it to that file).
const (
	// DefaultTimeout bounds each call, retries and backoff included, and a
	// stream as a whole, when the caller's context has no earlier deadline.
	// A call that hangs (a peer gone without a reset, a proxy holding the
	// connection) then fails with DEADLINE_EXCEEDED instead of stalling the
	// agent turn waiting on it; the server caps every call at its own
	// --max-call-duration (30s by default) in any case.
	DefaultTimeout = 10 * time.Second
	// DefaultRetries is how many times a call that failed with UNAVAILABLE
	// is tried again. A restarting server or a store failover typically
	// clears within a few hundred milliseconds, which these cover.
	DefaultRetries = 3
	// DefaultBackoff is the wait before the first retry; each later retry
	// waits twice as long as the one before, with jitter.
	DefaultBackoff = 100 * time.Millisecond
	// maxBackoff caps one wait, so a long retry budget does not stall a
	// call for minutes.
	maxBackoff = 2 * time.Second
	// backoffJitter spreads each wait by up to this fraction either way, so
	// clients that failed together do not retry together.
	backoffJitter = 0.2
)

var (
	errNoHistory = status.Error(codes.FailedPrecondition, "historyd: no thread history to read from")
	errNoConn    = status.Error(codes.FailedPrecondition, "client has no connection")
	errClosed    = status.Error(codes.FailedPrecondition, "client is closed")
)

// Option configures a Client.
type Option func(*config)

type config struct {
	tls         *tls.Config
	insecure    bool
	token       string
	timeout     time.Duration
	retries     int
	backoff     time.Duration
	dialOptions []grpc.DialOption
	tracing     tracingConfig
}

// WithTLS makes Dial connect over TLS with cfg, for a private CA or client
// certificates. Without it Dial still uses TLS, verified against the system
// roots; New ignores it, as the connection it is given is already set up.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.tls = cfg }
}

// WithInsecure makes Dial connect in plaintext, and lets WithToken send its
// token over a connection without transport security. It is meant for local
// development and for a server reached through a trusted proxy or mesh.
func WithInsecure() Option {
	return func(c *config) { c.insecure = true }
}

// WithToken sends token on every call as "authorization: Bearer <token>".
// The token is refused on a connection without transport security, so a
// misconfigured deployment fails with UNAUTHENTICATED instead of leaking it,
// unless WithInsecure says plaintext is intended.
func WithToken(token string) Option {
	return func(c *config) { c.token = token }
}

// WithTimeout bounds each call, retries and backoff included (for
// StreamSnapshots, the whole stream), when the caller's context has no
// earlier deadline. The default is DefaultTimeout; zero leaves calls bounded
// by their context alone.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithRetry sets how many times a call that failed with UNAVAILABLE is tried
// again (0 disables retries) and the wait before the first retry, which
// doubles on each later one (with 20% jitter, each wait at most 2s). Only
// UNAVAILABLE is retried: every read is idempotent, but the other codes
// historyd returns (a bad request, a size limit, a value that cannot be
// decoded) would fail the same way again. StreamSnapshots resumes after the
// last turn it received, and counts only failures in a row: a turn received
// restores the whole budget.
func WithRetry(retries int, backoff time.Duration) Option {
	return func(c *config) { c.retries, c.backoff = max(retries, 0), backoff }
}

// WithDialOptions passes extra options to grpc.NewClient in Dial, such as a
// custom dialer or interceptors. New ignores them.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOptions = append(c.dialOptions, opts...) }
}

// Client reads thread history from a historyd server over gRPC. It
// implements ThreadHistory and is safe for concurrent use.
type Client struct {
	rpc   historydv1.ThreadHistoryClient
	owned *grpc.ClientConn // closed by Close; nil when the caller owns the connection
	// target is what Dial dialled, and insecure whether without TLS: what
	// a failure to connect is probed against (see transportMismatch).
	// Empty for a Client from New, whose connection is the caller's.
	target   string
	insecure bool
	timeout  time.Duration
	retries  int
	backoff  retry.BackoffFunc // the wait before retry n (from 1)
	closed   atomic.Bool
}

var _ ThreadHistory = (*Client)(nil)

// Dial returns a Client connected to target, a gRPC target such as
// "historyd.internal:8443" or "dns:///historyd:8443". The connection is made
// lazily, on the first call, so Dial fails only on a malformed target or
// conflicting options. Close releases the connection.
func Dial(target string, opts ...Option) (*Client, error) {
	cfg := configure(opts)
	if target == "" {
		return nil, errors.New("historyd: Dial: empty target")
	}
	if cfg.insecure && cfg.tls != nil {
		return nil, errors.New("historyd: Dial: WithTLS and WithInsecure contradict each other")
	}
	creds := insecure.NewCredentials()
	if !cfg.insecure {
		tc := cfg.tls
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(tc)
	}
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent("historyd-go-client"),
		grpc.WithStatsHandler(cfg.tracing.handler()),
	}, cfg.dialOptions...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, fmt.Errorf("historyd: Dial %q: %w", target, err)
	}
	c := newClient(conn, cfg)
	c.owned, c.target, c.insecure = conn, target, cfg.insecure
	return c, nil
}

// New returns a Client over a connection the caller set up and keeps owning:
// Close does not close it. Connection-level options (WithTLS, WithInsecure's
// transport half, WithDialOptions) do not apply; WithToken, WithTimeout and
// WithRetry do, per call. A nil conn gives a Client whose every call fails
// with FAILED_PRECONDITION rather than panicking.
func New(conn grpc.ClientConnInterface, opts ...Option) *Client {
	return newClient(conn, configure(opts))
}

func configure(opts []Option) config {
	cfg := config{timeout: DefaultTimeout, retries: DefaultRetries, backoff: DefaultBackoff}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg
}

// MaxResponseBytes is the largest response the client accepts: the server's
// default --max-response-bytes.
const MaxResponseBytes = 64 << 20

func newClient(conn grpc.ClientConnInterface, cfg config) *Client {
	c := &Client{
		timeout: cfg.timeout,
		retries: cfg.retries,
		backoff: retry.BackoffExponentialWithJitterBounded(cfg.backoff, backoffJitter, maxBackoff),
	}
	if isNil(conn) {
		return c
	}
	// A few turns of geometry pass gRPC's 4 MiB default; match the server's
	// default response limit instead.
	callOpts := []grpc.CallOption{grpc.MaxCallRecvMsgSize(MaxResponseBytes)}
	if cfg.token != "" {
		callOpts = append(callOpts, grpc.PerRPCCredentials(bearer{token: cfg.token, secure: !cfg.insecure}))
	}
	var interceptor grpc.UnaryClientInterceptor
	if cfg.retries > 0 {
		interceptor = retry.UnaryClientInterceptor(
			retry.WithMax(uint(cfg.retries)+1), // the library counts attempts, the first included
			retry.WithCodes(codes.Unavailable),
			retry.WithBackoff(c.backoff),
		)
	}
	c.rpc = historydv1.NewThreadHistoryClient(&callConn{conn: conn, opts: callOpts, interceptor: interceptor})
	return c
}

// isNil reports whether conn is nil or a typed nil pointer, either of which
// would panic on the first call.
func isNil(conn grpc.ClientConnInterface) bool {
	if conn == nil {
		return true
	}
	v := reflect.ValueOf(conn)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Close releases the connection Dial made; for a Client from New it only
// stops the Client, leaving the caller's connection open. Calls after Close
// fail with FAILED_PRECONDITION. Close is safe to call more than once.
func (c *Client) Close() error {
	if c == nil || c.closed.Swap(true) || c.owned == nil {
		return nil
	}
	return c.owned.Close()
}

// Snapshots implements ThreadHistory. WithNamespace, WithChannel, WithKeys,
// WithHead, WithValueFormat and WithRawValues apply; it ignores the other
// ReadOptions.
func (c *Client) Snapshots(ctx context.Context, threadID string, opts ...ReadOption) (*History, error) {
	o := NewReadConfig(opts...)
	ctx, cancel, err := c.begin(ctx)
	if err != nil {
		return nil, c.fail("Snapshots", threadID, err)
	}
	defer cancel()
	resp, err := c.rpc.Snapshots(ctx, &historydv1.SnapshotsRequest{ThreadId: threadID, CheckpointNs: o.Namespace, Keys: o.Keys, Channel: o.Channel,
		ValueFormat: o.wireFormat(), HeadCheckpointId: o.Head})
	if err != nil {
		return nil, c.fail("Snapshots", threadID, err)
	}
	h := &History{Total: int(resp.GetTotal()), Turns: make([]TurnState, 0, len(resp.GetTurns())), Numbering: fromNumbering(resp.GetNumbering()),
		Head: resp.GetHeadCheckpointId()}
	for n, ts := range resp.GetTurns() {
		t, err := fromTurnState(ts, resp.GetNumbering(), o)
		if err != nil {
			return nil, c.fail("Snapshots", threadID, status.Error(codes.Internal, err.Error()))
		}
		t.Turn = int(n)
		h.Turns = append(h.Turns, t)
	}
	slices.SortFunc(h.Turns, func(a, b TurnState) int { return a.Turn - b.Turn })
	return h, nil
}

// MaxTurn is the largest turn number a request carries. Turn fields are
// int32 on the wire (so that JSON carries them as numbers), and the server
// refuses a larger value with InvalidArgument rather than truncate it; the
// Client refuses one before sending.
const MaxTurn = math.MaxInt32

// wireTurn is the turn number n that a request carries in field, checked
// before anything is sent: 0 (the field's default; for Snapshot, a turn
// no thread has) to MaxTurn. Anything else is InvalidArgument naming the
// field and its range, never a number the caller did not ask for.
func wireTurn(field string, n int) (int32, error) {
	if n < 0 || n > MaxTurn {
		return 0, status.Errorf(codes.InvalidArgument, "%s %d: must be 0 to %d (turn numbers count from 1, 0 is the field's default; the wire carries them as int32)", field, n, MaxTurn)
	}
	return int32(n), nil
}

// Snapshot implements ThreadHistory. Turn 0, which no thread has, is
// answered with NoSuchTurn (Current asks it for the total); a negative turn
// or one past MaxTurn is refused with InvalidArgument before anything is
// sent. The ReadOptions of Snapshots apply; it ignores the others.
func (c *Client) Snapshot(ctx context.Context, threadID string, turn int, opts ...ReadOption) (*Snapshot, error) {
	o := NewReadConfig(opts...)
	wire, err := wireTurn("turn", turn)
	if err != nil {
		return nil, c.fail("Snapshot", threadID, err)
	}
	ctx, cancel, err := c.begin(ctx)
	if err != nil {
		return nil, c.fail("Snapshot", threadID, err)
	}
	defer cancel()
	resp, err := c.rpc.Snapshot(ctx, &historydv1.SnapshotRequest{ThreadId: threadID, Turn: wire, CheckpointNs: o.Namespace, Keys: o.Keys, Channel: o.Channel,
		ValueFormat: o.wireFormat(), HeadCheckpointId: o.Head})
	if err != nil {
		return nil, c.fail("Snapshot", threadID, err)
	}
	s := &Snapshot{Turn: turn, Total: int(resp.GetTotal()), Numbering: fromNumbering(resp.GetNumbering()), Head: resp.GetHeadCheckpointId()}
	for _, n := range resp.GetRetainedTurns() {
		s.Retained = append(s.Retained, int(n))
	}
	switch r := resp.GetResult().(type) {
	case *historydv1.SnapshotResponse_State:
		t, err := fromTurnState(r.State, resp.GetNumbering(), o)
		if err != nil {
			return nil, c.fail("Snapshot", threadID, status.Error(codes.Internal, err.Error()))
		}
		s.found(t)
	case *historydv1.SnapshotResponse_NoSuchTurn:
		s.Outcome = NoSuchTurn
	case *historydv1.SnapshotResponse_NoLongerRetained:
		s.Outcome = NoLongerRetained
		s.Question = r.NoLongerRetained.GetQuestion()
	default:
		// Guessing would be the one wrong answer: an empty state reads as
		// "the key was not there", which the server never said.
		return nil, c.fail("Snapshot", threadID, status.Error(codes.Internal, "response carries none of state, no_such_turn or no_longer_retained"))
	}
	return s, nil
}

// TurnInfo describes one turn without its state.
type TurnInfo struct {
	// Turn is the turn number, counted from 1.
	Turn int
	// Question is the text of the user's message that opened the turn.
	Question string
	// Retained says whether the turn's state can still be read.
	Retained bool
	// CheckpointID is the checkpoint the turn ended on; empty when not
	// retained.
	CheckpointID string
	// EndedAt is when the turn's last checkpoint was written; zero when not
	// retained or not recorded.
	EndedAt time.Time
	// KeysWritten lists, sorted, the keys whose last write was in this turn.
	// Only filled when the read used WithKeysWritten.
	KeysWritten []string
	// AnsweredWith lists, ascending, the other turns whose questions came
	// in the same input as this one's and were answered by the same run.
	AnsweredWith []int
}

// TurnIndex is every turn of a thread from 1 to its total, retained or not,
// and how sure their numbers are.
type TurnIndex struct {
	// Total is how many turns the thread has had.
	Total int
	// Turns lists turns 1..Total in order.
	Turns []TurnInfo
	// Numbering says how sure the turn numbers are.
	Numbering Numbering
	// Head is the checkpoint whose lineage the turns are numbered on: the
	// thread's newest checkpoint, or the one WithHead named.
	Head string
	// Forks lists the branches that leave the lineage, oldest fork point
	// first: each time the thread was rewound (a run started from an older
	// checkpoint, an update_state on one), the branch it abandoned.
	Forks []Fork
}

// Fork is a branch that leaves a thread's lineage.
type Fork struct {
	// From is the checkpoint on the lineage the abandoned branch left
	// from.
	From string
	// Turn is the turn From belongs to on the lineage: the conversation was
	// rewound to the end of this turn (0: before the first question).
	Turn int
	// Questions is how many turns the abandoned branch held at its newest
	// checkpoint.
	Questions int
	// Newest is the abandoned branch's newest checkpoint: read the branch
	// WithHead(Newest).
	Newest string
}

// fromFork converts a wire Fork.
func fromFork(f *historydv1.Fork) Fork {
	return Fork{From: f.GetFromCheckpointId(), Turn: int(f.GetTurn()), Questions: int(f.GetQuestions()), Newest: f.GetNewestCheckpointId()}
}

// Turns lists turns 1..total of a thread, retained or not, without their
// state: cheap enough for a UI to call on every render. WithNamespace,
// WithChannel, WithHead and WithKeysWritten apply; it ignores the other
// ReadOptions, WithKeys among them. TurnIndex reads the same with the
// thread's numbering, head and forks.
func (c *Client) Turns(ctx context.Context, threadID string, opts ...ReadOption) ([]TurnInfo, error) {
	idx, err := c.TurnIndex(ctx, threadID, opts...)
	if err != nil {
		return nil, err
	}
	return idx.Turns, nil
}

// TurnIndex is Turns with the thread's total and numbering: a UI showing
// turn numbers needs to know when they are estimated. The ReadOptions of
// Turns apply.
func (c *Client) TurnIndex(ctx context.Context, threadID string, opts ...ReadOption) (*TurnIndex, error) {
	o := NewReadConfig(opts...)
	ctx, cancel, err := c.begin(ctx)
	if err != nil {
		return nil, c.fail("Turns", threadID, err)
	}
	defer cancel()
	resp, err := c.rpc.Turns(ctx, &historydv1.TurnsRequest{ThreadId: threadID, CheckpointNs: o.Namespace, IncludeKeysWritten: o.KeysWritten, Channel: o.Channel,
		HeadCheckpointId: o.Head})
	if err != nil {
		return nil, c.fail("Turns", threadID, err)
	}
	idx := &TurnIndex{Total: int(resp.GetTotal()), Turns: make([]TurnInfo, 0, len(resp.GetTurns())), Numbering: fromNumbering(resp.GetNumbering()),
		Head: resp.GetHeadCheckpointId()}
	for _, f := range resp.GetForks() {
		idx.Forks = append(idx.Forks, fromFork(f))
	}
	for _, t := range resp.GetTurns() {
		info := TurnInfo{Turn: int(t.GetNumber()), Question: t.GetQuestion(), Retained: t.GetRetained(), CheckpointID: t.GetCheckpointId(), KeysWritten: t.GetKeysWritten(), AnsweredWith: ints(t.GetAnsweredWith())}
		if t.GetEndedAt() != nil {
			info.EndedAt = t.GetEndedAt().AsTime()
		}
		idx.Turns = append(idx.Turns, info)
	}
	return idx, nil
}

// begin checks the Client can make a call and applies the default timeout.
func (c *Client) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	switch {
	case c == nil || c.rpc == nil:
		return nil, nil, errNoConn
	case c.closed.Load():
		return nil, nil, errClosed
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if c.timeout > 0 {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > c.timeout {
			ctx, cancel := context.WithTimeout(ctx, c.timeout)
			return ctx, cancel, nil
		}
	}
	return ctx, func() {}, nil
}

// fail names the call and thread in err's text while keeping its status, so
// logs say what failed and status.FromError and status.Code still work.
//
// A call that could not connect because the server speaks the other of TLS
// and plaintext says so instead, with the code UNAVAILABLE, and matches
// ErrServerPlaintext or ErrServerTLS.
func (c *Client) fail(method, threadID string, err error) error {
	st, _ := status.FromError(err)
	if mismatch := c.transportMismatch(st); mismatch != nil {
		return &rpcError{method: method, threadID: threadID, st: status.New(codes.Unavailable, mismatchMessage(c.target, mismatch)), mismatch: mismatch}
	}
	return &rpcError{method: method, threadID: threadID, st: st}
}

// rpcError is a failed call. It carries the call's status unchanged:
// status.FromError returns it as the server sent it, details included.
type rpcError struct {
	method   string
	threadID string
	st       *status.Status
	mismatch error // ErrServerPlaintext, ErrServerTLS or nil
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("historyd %s(thread %q): %s: %s", e.method, e.threadID, e.st.Code(), e.st.Message())
}

// GRPCStatus returns the call's status, for status.FromError and
// status.Code.
func (e *rpcError) GRPCStatus() *status.Status { return e.st }

// Is lets errors.Is match the context errors a call ended with, so callers
// can test for context.DeadlineExceeded and context.Canceled as with any
// other context-bound call, and ErrServerPlaintext or ErrServerTLS when the
// call could not connect for that reason.
func (e *rpcError) Is(target error) bool {
	if e.mismatch != nil && target == e.mismatch {
		return true
	}
	switch target {
	case context.DeadlineExceeded:
		return e.st.Code() == codes.DeadlineExceeded
	case context.Canceled:
		return e.st.Code() == codes.Canceled
	}
	return false
}

// callConn applies the Client's per-call options and retry interceptor
// around any connection, so a connection from New gets the same behaviour
// as one Dial made, without the caller installing interceptors on it.
type callConn struct {
	conn        grpc.ClientConnInterface
	opts        []grpc.CallOption
	interceptor grpc.UnaryClientInterceptor
}

func (c *callConn) Invoke(ctx context.Context, method string, req, reply any, opts ...grpc.CallOption) error {
	opts = append(slices.Clip(c.opts), opts...)
	if c.interceptor == nil {
		return c.conn.Invoke(ctx, method, req, reply, opts...)
	}
	invoke := func(ctx context.Context, method string, req, reply any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
		return c.conn.Invoke(ctx, method, req, reply, opts...)
	}
	return c.interceptor(ctx, method, req, reply, nil, invoke, opts...)
}

func (c *callConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.conn.NewStream(ctx, desc, method, append(slices.Clip(c.opts), opts...)...)
}

// bearer is the per-call credential WithToken installs.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/postgres"
)

// Every flag of every command is bound here, to the settings its command
// reads: serve's to serveFlags, the operator commands' shared connection
// flags to cliContext, demo's to demoFlags (the operator commands' own
// flags, which no variable sets, are bound with the command, in cli_*.go).
// Each flag but those can also be set by an environment variable, whose
// name envFlags derives from the flag's, and which its help names. The
// defaults are the constants of the packages that apply them.

// serveFlags are historyd serve's flags; serveFlags.config turns them into
// the server's configuration.
type serveFlags struct {
	env *envFlags

	listen, dsn, schema, pooler, messages, state *string
	logFormat, states, reducers                  *string
	logThreadIDs, logThreadSalt                  *string
	logSample                                    *int
	grace                                        *time.Duration

	authTokens, tlsCert, tlsKey, tlsClientCA *string
	pageTokenKeys                            *string
	reflection                               *bool

	maxRequest, maxResponse *int64
	rateLimit               *float64
	rateBurst, maxStreams   *int
	maxDeadline             *time.Duration
	kaMinTime, kaTime       *time.Duration
	kaTimeout               *time.Duration

	cacheBytes   *int64
	cacheThreads *int
	cacheState   *int64

	watchInterval            *time.Duration
	watchPerTenant, watchMax *int
	watchMaxAge              *time.Duration

	metricsListen *string
	httpListen    *string
	metricsAll    *bool

	logLevel *string
}

// bindServeFlags defines historyd serve's flags on fs.
func bindServeFlags(fs *flag.FlagSet) *serveFlags {
	e := &envFlags{fs: fs, prefix: "HISTORYD_"}
	c := &serveFlags{env: e}
	c.listen = e.string("listen", server.DefaultListen, "address to serve gRPC on")
	c.dsn = e.string("dsn", "", "checkpoint store: postgres://…, postgresql://…, sqlite:///path/file.db or a .db file path (required)")
	c.schema = e.string("schema", "", "PostgreSQL schema holding the checkpoint tables (default: the search_path)")
	c.pooler = e.string("pooler", string(postgres.PoolerNone), "connection pooler between historyd and PostgreSQL: none, session, or transaction (PgBouncer's pool_mode = transaction: no session settings, no named prepared statements; the role must be SELECT-only)")
	c.messages = e.string("messages-channel", server.DefaultMessagesChannel, "channel holding the conversation's messages")
	c.states = e.string("state-channels", server.DefaultStateChannel, "comma-separated state channels a request may read (its channel field), the first read when it names none; e.g. tool_state,files,todos for deepagents")
	c.state = e.string("state-channel", "", "the one state channel served: the older spelling of --state-channels with one channel")
	c.reducers = e.string("channel-reducers", "", "reducer of each channel rebuilt from writes (a DeltaChannel's), as channel=reducer pairs separated by commas; reducers: messages, merge (key by key, null deletes: deepagents' files), tool_state (mcp-toolsets-runtime), last (default: messages for the messages channel, tool_state for tool_state, merge for any other)")
	c.logFormat = e.string("log-format", server.DefaultLogFormat, "log format: text or json")
	c.logLevel = e.string("log-level", server.DefaultLogLevel, "least severe records logged: debug, info, warn or error; successful health checks and reflection calls are logged at debug, other calls at info or above (warn: only failures other than INVALID_ARGUMENT, NOT_FOUND, UNAUTHENTICATED and CANCELLED)")
	c.logThreadIDs = e.string("log-thread-ids", server.DefaultLogThreadIDs, "how logs show thread ids: hash (first 12 hex digits of HMAC-SHA256 with --log-thread-salt) or omit; never as sent")
	c.logSample = e.int("log-call-sample", server.DefaultLogSuccessEvery, "log one successful ThreadHistory call in this many at info, the others at debug (1: every call); failed calls are always logged")
	c.logThreadSalt = e.string("log-thread-salt", "", "key of the thread id hash in logs, to find a thread's calls across restarts (default: random per process; prefer the environment variable)")
	c.grace = e.duration("shutdown-grace", server.DefaultShutdownGrace, "how long in-flight RPCs may run after SIGINT/SIGTERM")

	c.authTokens = e.string("auth-tokens", "", "token file (JSON) mapping SHA-256 hashes of bearer tokens, and client certificate identities, to tenants and the thread-id prefixes each may read; reread on SIGHUP (default: no authentication)")
	c.tlsCert = e.string("tls-cert", "", "PEM certificate (chain) to serve TLS with; reread when it changes (default: plaintext)")
	c.tlsKey = e.string("tls-key", "", "PEM private key of --tls-cert")
	c.pageTokenKeys = e.string("page-token-key-file", "", "file of the keys Threads page tokens are authenticated with (HMAC-SHA256): one per line, at least 32 bytes, the first signing, every one accepted; reread on SIGHUP. Replicas behind one Service must share it, or a listing's next page fails with INVALID_ARGUMENT on another replica (default: a random key per process)")
	c.tlsClientCA = e.string("tls-client-ca", "", "PEM CA bundle; when set every client must present a certificate it issued (health checks included), and --auth-tokens can map certificates to tenants")
	c.reflection = e.bool("reflection", true, "serve gRPC server reflection (open to every caller: it describes the API, no data)")

	c.maxRequest = e.size("max-request-bytes", server.DefaultMaxRequestBytes, "largest `size` of a request message accepted")
	c.maxResponse = e.size("max-response-bytes", server.DefaultMaxResponseBytes, "largest `size` of a response message sent; a larger Snapshots fails with RESOURCE_EXHAUSTED suggesting keys or StreamSnapshots")
	c.rateLimit = e.float("rate-limit", 0, "calls per second each tenant may make to ThreadHistory, as a token bucket; without --auth-tokens all callers share one bucket (default: unlimited)")
	c.rateBurst = e.int("rate-burst", 0, "calls a tenant may make at once after being idle (default: --rate-limit rounded up)")
	c.maxDeadline = e.duration("max-call-duration", server.DefaultMaxCallDuration, "longest a ThreadHistory call may run; a caller's later deadline, or none, is replaced by it")
	c.maxStreams = e.int("max-concurrent-streams", server.DefaultMaxConcurrentStreams, "calls in flight per client connection; more wait")
	c.kaMinTime = e.duration("keepalive-min-time", server.DefaultKeepaliveMinTime, "least time between a client's keepalive pings; clients pinging more often are disconnected")
	c.kaTime = e.duration("keepalive-time", server.DefaultKeepaliveTime, "how long a connection may be idle before the server pings it")
	c.kaTimeout = e.duration("keepalive-timeout", server.DefaultKeepaliveTimeout, "how long the server waits for a ping's answer before closing the connection")

	c.cacheBytes = e.size("cache-bytes", store.DefaultCacheBytes(), "memory the caches hold together: threads' turn indexes, refreshed incrementally, and encoded state versions, so that a warm Snapshot decodes nothing; each charged about what it holds, the least recently used dropped first. A thread whose index would take more than a quarter of it, or a state stored larger than a quarter, is read for each request and not kept (default: a quarter of GOMEMLIMIT when it is set, else "+
		sizeString(store.DefaultCacheBytesNoLimit)+"; 0: no caches)")
	c.cacheThreads = e.int("cache-threads", 0, "deprecated, --cache-bytes bounds the turn-index cache: also keep at most this many threads' indexes (0: no index cache; unset: as many as --cache-bytes holds)")
	c.cacheState = e.size("cache-state-bytes", 0, "deprecated, --cache-bytes bounds the state cache: also keep at most this much of it for encoded state versions (0: no state cache; unset: as much of --cache-bytes as is free)")

	c.watchInterval = e.duration("watch-poll-interval", service.DefaultWatchPollInterval,
		"how often a watched thread is read (WatchTurns; one reader per thread however many watch it), up to twice that while it does not change")
	c.watchPerTenant = e.int("watch-max-per-tenant", service.DefaultMaxWatchesPerTenant,
		"WatchTurns streams one tenant may hold open (without --auth-tokens, all callers together)")
	c.watchMax = e.int("watch-max", service.DefaultMaxWatches, "WatchTurns streams the server holds open")
	c.watchMaxAge = e.duration("watch-max-age", service.DefaultStreamMaxAge,
		"longest a WatchTurns stream (or a StreamSnapshots one, when --max-call-duration does not end it first) lasts; it then ends with UNAVAILABLE, and historyd's clients resume it at once from the last turn received, so no credential reads through one stream for longer (0: no maximum)")
	c.metricsListen = e.string("metrics-listen", "", "address of the HTTP listener for /metrics (Prometheus), /healthz and /readyz, e.g. localhost:9090; plaintext and unauthenticated, so keep it off networks clients use (default: off)")
	c.httpListen = e.string("http-listen", "", "address of the HTTP listener for the API as HTTP/JSON (/v1/...), Connect and gRPC-Web, and MCP (/mcp), e.g. localhost:8080; served with --tls-cert and --auth-tokens as gRPC is (default: off)")
	c.metricsAll = e.bool("metrics-all-methods", false, "export per-method gRPC metrics for grpc.health.v1 and server reflection too, not only historyd.v1.ThreadHistory")
	return c
}

// bindClientFlags defines the connection and output flags every operator
// command shares on fs, into c. The client certificate's variables are
// HISTORYD_CLIENT_CERT and HISTORYD_CLIENT_KEY, apart from serve's
// HISTORYD_TLS_CERT and HISTORYD_TLS_KEY, so that one environment can hold
// both.
func bindClientFlags(fs *flag.FlagSet, c *cliContext) *envFlags {
	e := &envFlags{fs: fs, prefix: "HISTORYD_", renamed: map[string]string{
		"tls-cert": "HISTORYD_CLIENT_CERT", "tls-key": "HISTORYD_CLIENT_KEY", "o": "HISTORYD_OUTPUT"}}
	c.addr = e.string("addr", server.DefaultListen, "historyd's gRPC address")
	c.plaintext = e.bool("plaintext", false, "connect without TLS (the default for a loopback --addr, 0.0.0.0 included, without TLS flags)")
	c.tlsCA = e.string("tls-ca", "", "PEM CA bundle to verify historyd's certificate with (default: the system roots)")
	c.tlsCert = e.string("tls-cert", "", "PEM client certificate, for a server that requires one")
	c.tlsKey = e.string("tls-key", "", "PEM private key of --tls-cert")
	c.serverName = e.string("tls-server-name", "", "name to verify historyd's certificate against (default: the host of --addr)")
	c.token = e.string("token", "", "bearer token (prefer the environment variable or --token-file)")
	c.tokenFile = e.string("token-file", "", "file holding the bearer token")
	c.timeout = e.duration("timeout", client.DefaultTimeout, "deadline of each call")
	c.output = e.string("o", outputTable, "output: table, for people, or json, for scripts")
	return e
}

// outputTable is the operator commands' default output, for people.
const outputTable = "table"

// demoFlags are historyd demo's flags.
type demoFlags struct {
	env              *envFlags
	out, dsn, schema *string
	force            *bool
}

// defaultDemoPath is where historyd demo writes by default.
const defaultDemoPath = "var/demo.db"

// bindDemoFlags defines historyd demo's flags on fs. Their variables
// start HISTORYD_DEMO_, apart from serve's, and --out's is
// HISTORYD_DEMO_PATH.
func bindDemoFlags(fs *flag.FlagSet) *demoFlags {
	e := &envFlags{fs: fs, prefix: "HISTORYD_DEMO_", renamed: map[string]string{"out": "HISTORYD_DEMO_PATH"}}
	return &demoFlags{
		env:    e,
		out:    e.string("out", defaultDemoPath, "SQLite file to write"),
		dsn:    e.string("dsn", "", "write to this database instead of --out: postgres://… or postgresql://… (or an SQLite DSN, as historyd serve takes)"),
		schema: e.string("schema", "", "PostgreSQL schema to write the tables in, created when missing (default: the search_path)"),
		force:  fs.Bool("force", false, "PostgreSQL: replace the demo threads an earlier demo wrote"),
	}
}

// A flag's 0 and a configuration's zero mean different things, and this
// is the one place a value crosses from one to the other. On a flag, 0
// turns a limit off, as serve's help says. In the configurations the flags
// fill in (store.Config, service.WatchConfig, server.RunConfig) a zero
// field is the field's documented default, and a negative one turns it
// off. (service.Frontend, whose zero fields are off, takes the flags'
// values as they are.)

// offAtZero is a flag's value as such a configuration reads it: 0, off,
// becomes -1.
func offAtZero[T ~int | ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// offAtZeroIfGiven is offAtZero for a flag that has no default of its
// own: the configuration's zero, its default, when neither the flag nor
// its variable was given.
func (e *envFlags) offAtZeroIfGiven(name string, v int) int {
	if !e.given(name) {
		return 0
	}
	return offAtZero(v)
}

// What a value of each kind must look like, in the words every message
// about a bad value uses, whether it came from a flag or a variable.
const (
	wantBool     = "true or false"
	wantDuration = "a duration such as 30s or 2m"
	wantInt      = "an integer"
	wantUint     = "a whole number, 0 or more"
	wantNumber   = "a number"
	wantSize     = "a size such as 64MiB: bytes, or a number with KiB, MiB or GiB"
)

// parseFlags parses a command's arguments. It reports done when the
// command must not run, with the exit code: 0 after --help, which prints
// the command's help to stdout; 2 after a bad argument, which prints one
// line to stderr naming the flag and what it takes, and a pointer to
// --help, rather than the whole help the flag package would print.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	usage := fs.Usage
	if usage == nil {
		usage = func() {
			fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
	}
	// While parsing, the flag package's own messages are silenced and each
	// value records what it was given, so that the one line can say it.
	var bad *badValue
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	fs.VisitAll(func(f *flag.Flag) { f.Value = &recordingValue{Value: f.Value, name: f.Name, bad: &bad} })
	err := fs.Parse(args)
	fs.VisitAll(func(f *flag.Flag) { f.Value = f.Value.(*recordingValue).Value })
	fs.Usage = usage
	fs.SetOutput(stdout)

	hint := fmt.Sprintf(`(run "%s --help" for its flags)`, fs.Name())
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return 0, true
	case err != nil:
		fmt.Fprintf(stderr, "%s: %s %s\n", fs.Name(), describeParseError(err, bad), hint)
		return 2, true
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q %s\n", fs.Name(), fs.Arg(0), hint)
		return 2, true
	}
	return 0, false
}

// badValue is a value a flag refused.
type badValue struct {
	name, value, want string
}

// recordingValue wraps a flag's value while it is parsed, to record a
// value it refuses.
type recordingValue struct {
	flag.Value
	name string
	bad  **badValue
}

func (v *recordingValue) Set(s string) error {
	err := v.Value.Set(s)
	if err != nil {
		*v.bad = &badValue{name: v.name, value: s, want: wantOf(v.Value, err)}
	}
	return err
}

// IsBoolFlag keeps boolean flags usable without a value.
func (v *recordingValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// wantOf says what a flag's value must look like: a value type's own Want
// when it has one, the standard kinds by their Go type, and otherwise
// what its Set said.
func wantOf(v flag.Value, err error) string {
	if w, ok := v.(interface{ Want() string }); ok {
		return w.Want()
	}
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case bool:
			return wantBool
		case time.Duration:
			return wantDuration
		case int, int64:
			return wantInt
		case uint, uint64:
			return wantUint
		case float64:
			return wantNumber
		}
	}
	return err.Error()
}

// describeParseError is the flag package's error in the project's words,
// with flags written as they are documented, --name.
func describeParseError(err error, bad *badValue) string {
	if bad != nil {
		return fmt.Sprintf("--%s %q: want %s", bad.name, bad.value, bad.want)
	}
	msg := err.Error()
	for prefix, say := range map[string]string{
		"flag provided but not defined: -": "unknown flag --%s",
		"flag needs an argument: -":        "--%s needs a value",
	} {
		if name, ok := strings.CutPrefix(msg, prefix); ok {
			return fmt.Sprintf(say, strings.TrimLeft(name, "-"))
		}
	}
	return msg
}

// envFlags defines typed flags whose defaults come from environment
// variables, and says so in their help. A variable's name is the flag's,
// upper-cased, with its dashes as underscores, after prefix
// (--max-call-duration: HISTORYD_MAX_CALL_DURATION), unless renamed names
// it otherwise. An environment value that does not parse is kept as an
// error for the command to report: silently falling back to the built-in
// default could, for a limit, mean no limit at all.
type envFlags struct {
	fs      *flag.FlagSet
	prefix  string
	renamed map[string]string
	errs    []error
	// fromEnv holds the variables that were set.
	fromEnv map[string]bool
}

// env returns the name of flag name's variable.
func (e *envFlags) env(name string) string {
	if env, ok := e.renamed[name]; ok {
		return env
	}
	return e.prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

func (e *envFlags) err() error { return errors.Join(e.errs...) }

// lookup returns the variable of flag name, its value, if set, and the
// flag's help text naming the variable.
func (e *envFlags) lookup(name, help string) (env, v string, ok bool, helpEnv string) {
	env = e.env(name)
	v, ok = os.LookupEnv(env)
	if ok {
		if e.fromEnv == nil {
			e.fromEnv = map[string]bool{}
		}
		e.fromEnv[env] = true
	}
	return env, v, ok, fmt.Sprintf("%s (env %s)", help, env)
}

// given reports whether the flag name was given, on the command line or
// by its variable.
func (e *envFlags) given(name string) bool {
	set := false
	e.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set || e.fromEnv[e.env(name)]
}

func (e *envFlags) bad(env, v, want string) {
	e.errs = append(e.errs, fmt.Errorf("%s=%q: want %s", env, v, want))
}

func (e *envFlags) string(name, def, help string) *string {
	_, v, ok, help := e.lookup(name, help)
	if ok {
		def = v
	}
	return e.fs.String(name, def, help)
}

func (e *envFlags) duration(name string, def time.Duration, help string) *time.Duration {
	env, v, ok, help := e.lookup(name, help)
	if ok {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		} else {
			e.bad(env, v, wantDuration)
		}
	}
	return e.fs.Duration(name, def, help)
}

func (e *envFlags) bool(name string, def bool, help string) *bool {
	env, v, ok, help := e.lookup(name, help)
	if ok {
		if b, err := strconv.ParseBool(v); err == nil {
			def = b
		} else {
			e.bad(env, v, wantBool)
		}
	}
	return e.fs.Bool(name, def, help)
}

func (e *envFlags) int(name string, def int, help string) *int {
	env, v, ok, help := e.lookup(name, help)
	if ok {
		if n, err := strconv.Atoi(v); err == nil {
			def = n
		} else {
			e.bad(env, v, wantInt)
		}
	}
	return e.fs.Int(name, def, help)
}

func (e *envFlags) float(name string, def float64, help string) *float64 {
	env, v, ok, help := e.lookup(name, help)
	if ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			def = f
		} else {
			e.bad(env, v, wantNumber)
		}
	}
	return e.fs.Float64(name, def, help)
}

func (e *envFlags) size(name string, def int64, help string) *int64 {
	env, v, ok, help := e.lookup(name, help)
	b := byteSize(def)
	if ok {
		if err := b.Set(v); err != nil {
			e.bad(env, v, wantSize)
		}
	}
	e.fs.Var(&b, name, help)
	return (*int64)(&b)
}

// byteSize is a flag.Value for sizes: plain bytes or a KiB, MiB or GiB
// suffix.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	n      int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return errors.New("want " + wantSize)
	}
	*b = byteSize(n * mult)
	return nil
}

// sizeString writes n as a size flag shows it.
func sizeString(n int64) string { b := byteSize(n); return b.String() }

// Want says what Set accepts, for the message about a bad value.
func (b *byteSize) Want() string { return wantSize }

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range sizeUnits {
		if n >= u.n && n%u.n == 0 && u.n > 1 {
			return fmt.Sprintf("%d%s", n/u.n, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}

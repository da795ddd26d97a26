package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	_ "modernc.org/sqlite" // the "sqlite" driver, to write the test file

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
	"github.com/historyd/historyd/tracing"
	"github.com/historyd/historyd/tracing/tracingtest"
)

// tracedThread is the thread the tracing tests read: long enough that the
// redaction of its bare form applies, and easy to find in exported bytes.
const tracedThread = "acme/conversation-4242-private"

// quiet discards what tracing.FromEnv logs.
var quiet = slog.New(slog.DiscardHandler)

// traceSalt keys the thread hash in the tracing tests.
var traceSalt = []byte("tracing-test-salt")

// threadHash is what logs and spans show for thread under traceSalt.
func threadHash(thread string) string {
	mac := hmac.New(sha256.New, traceSalt)
	mac.Write([]byte(thread))
	return hex.EncodeToString(mac.Sum(nil))[:12]
}

// writeTracedThread writes two turns of tracedThread with w.
func writeTracedThread(w storetest.Writer) {
	storetest.Build(w, backend.Ref{ThreadID: tracedThread}, []storetest.Turn{
		{Question: "sketch the Severn", Writes: map[string]any{"area": 11420}},
		{Question: "now the Thames", Writes: map[string]any{"area": 12935}},
	})
}

// pgTraceBackend creates a schema with PostgresSaver's tables in the
// database HISTORYD_TEST_DSN names and writes the traced thread into it.
func pgTraceBackend(t *testing.T) (dsn, schema string) {
	t.Helper()
	dsn = storetest.PostgresDSN(t)
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	schema = fmt.Sprintf("tracing_test_%d", rand.Uint64())
	q := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range append([]string{"CREATE SCHEMA " + q}, saver.PostgresPython.DDL(q)...) {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+q+" CASCADE") })
	exec := func(ctx context.Context, query string, args ...any) error {
		_, err := admin.Exec(ctx, query, args...)
		return err
	}
	writeTracedThread(storetest.NewSaverWriter(t, saver.NewWriter(saver.PostgresPython, exec, q)))
	return dsn, schema
}

// sqliteTraceBackend writes the traced thread into a SqliteSaver file.
func sqliteTraceBackend(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	exec := func(ctx context.Context, query string, args ...any) error {
		_, err := db.ExecContext(ctx, query, args...)
		return err
	}
	for _, stmt := range append([]string{saver.SQLiteWAL}, saver.SQLitePython.DDL("")...) {
		if err := exec(context.Background(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	w := storetest.NewSaverWriter(t, saver.NewWriter(saver.SQLitePython, exec, ""))
	writeTracedThread(w)
	w.Close()
	return path
}

// hostTracing is an agent host's own tracing, apart from historyd's: its
// provider exports to rcv, synchronously, under service.name agent-host.
func hostTracing(t *testing.T, rcv *tracingtest.Receiver) *sdktrace.TracerProvider {
	t.Helper()
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpointURL(rcv.Endpoint(tracing.ProtocolGRPC)))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("agent-host"))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// TestTracing reads a turn twice through the Go client inside an agent
// host's span, with historyd's tracing configured from OTEL_* variables
// pointing at a real OTLP receiver, and checks what reached it: the host's
// span, the client's span under it, historyd's RPC span under that (the
// trace context crossed the wire), the store's index and state spans under
// the RPC span, and the backend's statement spans under those; a cold read
// and a warm one telling themselves apart; and no thread id anywhere in
// what was exported. PostgreSQL's spans are otelpgx's, exported over OTLP
// gRPC; SQLite's are the backend's own, exported over OTLP/HTTP.
func TestTracing(t *testing.T) {
	for _, tt := range []struct {
		name, protocol, dbSystem string
		open                     func(t *testing.T) servertest.Option
	}{
		{"postgres", tracing.ProtocolGRPC, "postgresql", func(t *testing.T) servertest.Option {
			return servertest.WithDSN(pgTraceBackend(t))
		}},
		{"sqlite", tracing.ProtocolHTTPProtobuf, "sqlite", func(t *testing.T) servertest.Option {
			return servertest.WithDSN("sqlite://"+sqliteTraceBackend(t), "")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rcv := tracingtest.Start(t)
			rcv.SetEnv(t, tt.protocol)
			t.Setenv("OTEL_SERVICE_NAME", "")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
			tr, err := tracing.FromEnv(t.Context(), "v-test", quiet)
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Enabled() {
				t.Fatal("tracing off with OTEL_EXPORTER_OTLP_ENDPOINT set")
			}
			srv := servertest.Start(t, server.Config{
				TracerProvider: tr.TracerProvider(),
				Service:        service.Options{ThreadIDSalt: traceSalt},
			}, tt.open(t))

			host := hostTracing(t, rcv)
			c, err := client.Dial(servertest.Target, client.WithInsecure(),
				client.WithDialOptions(srv.Dialer()), client.WithTracing(host, propagation.TraceContext{}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()

			var turnSpans [2]string
			for i := range turnSpans {
				ctx, span := host.Tracer("agent").Start(t.Context(), "agent turn")
				snap, err := c.Snapshot(ctx, tracedThread, 1)
				span.End()
				if err != nil {
					t.Fatalf("Snapshot: %v", err)
				}
				if snap.Outcome != client.Found {
					t.Fatalf("Snapshot outcome %v, want found", snap.Outcome)
				}
				turnSpans[i] = span.SpanContext().SpanID().String()
			}
			srv.Close()
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}

			spans := rcv.WaitFor(t, 10*time.Second, "two traced Snapshots", func(s []tracingtest.Span) bool {
				return len(tracingtest.Named(s, "historyd.v1.ThreadHistory/Snapshot")) == 4 &&
					len(tracingtest.Named(s, store.SpanReadState)) == 2
			})
			for i, parentID := range turnSpans {
				parent := find(t, spans, func(s tracingtest.Span) bool { return s.SpanIDHex() == parentID })
				call := only(t, "client span of call "+fmt.Sprint(i+1), tracingtest.Children(spans, parent))
				if call.Name != "historyd.v1.ThreadHistory/Snapshot" || call.Kind != tracepb.Span_SPAN_KIND_CLIENT || call.Resource["service.name"] != "agent-host" {
					t.Fatalf("call %d: under the host's span %s (%v, %s), want the client's span", i+1, call.Name, call.Kind, call.Resource["service.name"])
				}
				rpc := only(t, "RPC span of call "+fmt.Sprint(i+1), tracingtest.Children(spans, call))
				if rpc.Name != "historyd.v1.ThreadHistory/Snapshot" || rpc.Kind != tracepb.Span_SPAN_KIND_SERVER {
					t.Fatalf("call %d: under the client's span %s (%v), want historyd's RPC span", i+1, rpc.Name, rpc.Kind)
				}
				wantAttrs(t, rpc, map[string]any{
					"rpc.method":               "historyd.v1.ThreadHistory/Snapshot",
					"rpc.response.status_code": "OK",
					string(service.AttrThread): threadHash(tracedThread),
				})
				for k, want := range map[string]string{"service.name": "historyd", "service.version": "v-test", "deployment.environment.name": "test"} {
					if got := rpc.Resource[k]; got != want {
						t.Errorf("RPC span resource %s = %v, want %q", k, got, want)
					}
				}

				index := only(t, store.SpanIndex, tracingtest.Named(tracingtest.Children(spans, rpc), store.SpanIndex))
				state := only(t, store.SpanReadState, tracingtest.Named(tracingtest.Children(spans, rpc), store.SpanReadState))
				if i == 0 {
					// Cold: the whole thread listed (an empty first
					// checkpoint, then four per turn), the messages read,
					// one state decoded.
					wantAttrs(t, index, map[string]any{
						string(store.AttrIndexCache): "miss", string(store.AttrIndexListed): int64(9),
						string(store.AttrIndexCheckpoints): int64(9), string(store.AttrIndexTurns): int64(2),
					})
					if n, _ := index.Attr(string(store.AttrIndexMessagesRead)); n == nil || n.(int64) < 1 {
						t.Errorf("cold index span: %s = %v, want at least 1", store.AttrIndexMessagesRead, n)
					}
					wantAttrs(t, state, map[string]any{
						string(store.AttrStateChannel): "tool_state", string(store.AttrStateTurns): int64(1),
						string(store.AttrStateCacheHits): int64(0), string(store.AttrStateCacheMisses): int64(1),
						string(store.AttrStateDeltaRebuild): false,
					})
					if n, _ := state.Attr(string(store.AttrStateBytesDecoded)); n == nil || n.(int64) < 1 {
						t.Errorf("cold state span: %s = %v, want the state's bytes", store.AttrStateBytesDecoded, n)
					}
					checkStatements(t, spans, index, tt.dbSystem, "checkpoint")
					checkStatements(t, spans, state, tt.dbSystem, "checkpoint")
				} else {
					// Warm: only what is newer listed (nothing), the state
					// from the cache.
					wantAttrs(t, index, map[string]any{
						string(store.AttrIndexCache): "hit", string(store.AttrIndexListed): int64(0),
						string(store.AttrIndexCheckpoints): int64(9),
					})
					wantAttrs(t, state, map[string]any{
						string(store.AttrStateCacheHits): int64(1), string(store.AttrStateCacheMisses): int64(0),
					})
					checkStatements(t, spans, index, tt.dbSystem, "checkpoint")
				}
			}
			if rcv.Contains(tracedThread) {
				t.Errorf("the thread id %q reached the collector:\n%s", tracedThread, tracingtest.Describe(spans))
			}
		})
	}
}

// checkStatements requires parent to have statement spans below it (a
// pool wait or a connection may come between), each a client span of
// dbSystem carrying its statement's text, which mentions table, and no
// arguments.
func checkStatements(t *testing.T, spans []tracingtest.Span, parent tracingtest.Span, dbSystem, table string) {
	t.Helper()
	var stmts []tracingtest.Span
	var walk func(tracingtest.Span)
	walk = func(p tracingtest.Span) {
		for _, c := range tracingtest.Children(spans, p) {
			if c.Name == "SELECT" {
				stmts = append(stmts, c)
			}
			walk(c)
		}
	}
	walk(parent)
	if len(stmts) == 0 {
		t.Fatalf("no SELECT span under %s; spans:\n%s", parent.Name, tracingtest.Describe(spans))
	}
	for _, s := range stmts {
		if s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("statement span kind %v, want client", s.Kind)
		}
		wantAttrs(t, s, map[string]any{"db.system.name": dbSystem, "db.operation.name": "SELECT"})
		if q, _ := s.Attr("db.query.text"); q == nil || !strings.Contains(q.(string), table) {
			t.Errorf("statement span db.query.text = %v, want a statement reading %s", q, table)
		}
		for k := range s.Attrs() {
			if strings.Contains(k, "parameter") || strings.Contains(k, "args") {
				t.Errorf("statement span records its arguments: %s", k)
			}
		}
	}
}

// TestTracingRedactsFailedCalls: a call that fails with a message naming
// the thread (DATA_LOSS names thread, checkpoint and channel) leaves the
// thread's hash in historyd's span and only the code in the client's,
// never the id; with ThreadIDsOmitted the RPC span carries no thread
// attribute at all.
func TestTracingRedactsFailedCalls(t *testing.T) {
	for name, mode := range map[string]service.ThreadIDLogging{"hashed": service.ThreadIDsHashed, "omitted": service.ThreadIDsOmitted} {
		t.Run(name, func(t *testing.T) {
			rcv := tracingtest.Start(t)
			rcv.SetEnv(t, tracing.ProtocolGRPC)
			tr, err := tracing.FromEnv(t.Context(), "v-test", quiet)
			if err != nil {
				t.Fatal(err)
			}
			mem := storetest.NewMemory()
			ref := backend.Ref{ThreadID: tracedThread}
			written := storetest.Build(mem, ref, []storetest.Turn{{Question: "q", Writes: map[string]any{"k": 1}}})
			msgs, err := backend.Values(t.Context(), mem, ref, "messages", []string{written[0].End})
			if err != nil {
				t.Fatal(err)
			}
			// The turn's last checkpoint holds a state no decoder reads
			// (0xc1 is never used in msgpack).
			mem.PutBlobs(ref, written[0].End+"-z", storetest.Base.Add(time.Hour), map[string]backend.Blob{
				"messages": msgs[0], "tool_state": {Type: format.TypeMsgpack, Data: []byte{0xc1}},
			})
			srv := servertest.Start(t, server.Config{
				Store:          store.Config{Backend: mem},
				TracerProvider: tr.TracerProvider(),
				Service:        service.Options{ThreadIDSalt: traceSalt, ThreadIDs: mode},
			})
			host := hostTracing(t, rcv)
			c, err := client.Dial(servertest.Target, client.WithInsecure(), client.WithRetry(0, 0),
				client.WithDialOptions(srv.Dialer()), client.WithTracing(host, propagation.TraceContext{}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Snapshot(t.Context(), tracedThread, 1)
			if status.Code(err) != codes.DataLoss || !strings.Contains(err.Error(), tracedThread) {
				t.Fatalf("Snapshot = %v, want DATA_LOSS naming the thread (what this test redacts)", err)
			}
			srv.Close()
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := rcv.WaitFor(t, 10*time.Second, "the failed call's spans", func(s []tracingtest.Span) bool {
				return len(tracingtest.Named(s, "historyd.v1.ThreadHistory/Snapshot")) == 2
			})
			rpc := find(t, spans, func(s tracingtest.Span) bool {
				return s.Name == "historyd.v1.ThreadHistory/Snapshot" && s.Kind == tracepb.Span_SPAN_KIND_SERVER
			})
			call := find(t, spans, func(s tracingtest.Span) bool {
				return s.Name == "historyd.v1.ThreadHistory/Snapshot" && s.Kind == tracepb.Span_SPAN_KIND_CLIENT
			})
			msg := rpc.GetStatus().GetMessage()
			shown := threadHash(tracedThread)
			if mode == service.ThreadIDsOmitted {
				shown = "<thread>"
				if v, ok := rpc.Attr(string(service.AttrThread)); ok {
					t.Errorf("RPC span has %s = %v with thread ids omitted", service.AttrThread, v)
				}
			} else {
				wantAttrs(t, rpc, map[string]any{string(service.AttrThread): shown})
			}
			if rpc.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR || !strings.Contains(msg, shown) || !strings.Contains(msg, "tool_state") {
				t.Errorf("RPC span status %v %q, want an error naming %s and the channel", rpc.GetStatus().GetCode(), msg, shown)
			}
			if got := call.GetStatus().GetMessage(); got != codes.DataLoss.String() {
				t.Errorf("client span status message %q, want only the code %q", got, codes.DataLoss)
			}
			state := find(t, spans, func(s tracingtest.Span) bool { return s.Name == store.SpanReadState })
			if got := state.GetStatus().GetMessage(); got != "decode" {
				t.Errorf("state span status message %q, want the error's kind, decode", got)
			}
			if rcv.Contains(tracedThread) {
				t.Errorf("the thread id %q reached the collector:\n%s", tracedThread, tracingtest.Describe(spans))
			}
		})
	}
}

// TestTracingOff: with no collector configured nothing is installed, and
// a server built without a provider serves as before.
func TestTracingOff(t *testing.T) {
	for k, v := range map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ""} {
		t.Setenv(k, v)
	}
	tr, err := tracing.FromEnv(t.Context(), "v-test", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled() || tr.TracerProvider() != nil {
		t.Fatal("tracing on with no endpoint set")
	}
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "t"}, []storetest.Turn{{Question: "q", Writes: map[string]any{"k": 1}}})
	srv := servertest.Start(t, server.Config{Store: store.Config{Backend: mem}, TracerProvider: tr.TracerProvider()})
	c := client.New(srv.Conn(t))
	if snap, err := c.Snapshot(t.Context(), "t", 1); err != nil || snap.Outcome != client.Found {
		t.Fatalf("Snapshot = %v, %v", snap, err)
	}
	if _, err := server.New(t.Context(), server.Config{Store: store.Config{Backend: mem, TracerProvider: sdktrace.NewTracerProvider()}}); err == nil {
		t.Error("New accepted Store.TracerProvider set by hand")
	}
}

func find(t *testing.T, spans []tracingtest.Span, match func(tracingtest.Span) bool) tracingtest.Span {
	t.Helper()
	for _, s := range spans {
		if match(s) {
			return s
		}
	}
	t.Fatalf("no such span among:\n%s", tracingtest.Describe(spans))
	return tracingtest.Span{}
}

func only(t *testing.T, what string, spans []tracingtest.Span) tracingtest.Span {
	t.Helper()
	if len(spans) != 1 {
		t.Fatalf("%d spans for %s, want one:\n%s", len(spans), what, tracingtest.Describe(spans))
	}
	return spans[0]
}

func wantAttrs(t *testing.T, s tracingtest.Span, want map[string]any) {
	t.Helper()
	for k, w := range want {
		if got, ok := s.Attr(k); !ok || got != w {
			t.Errorf("span %s: %s = %v (%T), want %v (%T)", s.Name, k, got, got, w, w)
		}
	}
}

package postgres_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/historyd/historyd/auth"
	"github.com/historyd/historyd/auth/authtest"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// victims is how many threads another tenant holds beside acme's three:
// more than a listing visits or sorts in one call (store.MaxThreadsVisited,
// store.MaxThreadsSorted), so that a listing that strayed outside acme's
// prefix would be told apart by its cursor, its refusal or its count.
const victims = 12_000

// TestThreadsOfOneTenantAmongAnother: tenant acme/ lists its 3 threads
// in a store that also holds 12,000 under victim/, on a database of each
// collation. Everything acme is answered (pages, page tokens, refusals) is
// the same whether the victim's threads number 1 or 12,000, and no page
// token holds a byte of a victim's id. Where thread_id does not sort
// bytewise, acme's listings are refused (the same refusal either way)
// until the optional index is created, and answered in full after.
func TestThreadsOfOneTenantAmongAnother(t *testing.T) {
	for _, l := range storetest.PostgresLocales {
		t.Run(l.Name, func(t *testing.T) {
			dsn := storetest.PostgresDatabase(t, l)
			admin, schema, ro := storetest.PostgresSchema(t, dsn, saver.PostgresPython)
			w := storetest.NewPostgresWriter(t, admin, schema, saver.PostgresPython)
			for i, id := range []string{"acme/alpha", "acme/beta", "acme/gamma"} {
				storetest.PutThread(w, backend.Ref{ThreadID: id}, storetest.Base.Add(time.Duration(i)*time.Hour), 2)
			}
			storetest.PutThread(w, backend.Ref{ThreadID: victimID(0)}, storetest.Base.Add(30*time.Minute), 1)

			path := filepath.Join(t.TempDir(), "tokens.json")
			authtest.WriteFile(t, path, authtest.TokenFile(t, authtest.Tenant{Name: "acme", Prefixes: []string{"acme/"}, Tokens: []string{"token-acme"}}))
			a, err := auth.NewAuthenticator(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := servertest.Start(t, server.Config{Service: service.Options{Auth: a}}, servertest.WithDSN(ro, schema)).Client(t)
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer token-acme")

			few := answers(t, ctx, c)
			addVictims(t, admin, schema)
			if many := answers(t, ctx, c); many != few {
				t.Errorf("acme's answers with 1 victim thread:\n%s\nwith %d:\n%s", few, victims, many)
			}
			if l.Bytewise {
				if !strings.Contains(few, `"acme/gamma"`) || strings.Contains(few, "code ") {
					t.Errorf("acme's answers:\n%s", few)
				}
				return
			}
			if !strings.Contains(few, "code FailedPrecondition") || strings.Contains(few, "acme/alpha") {
				t.Errorf("acme's answers without the index:\n%s\nwant every listing refused", few)
			}
			stmt := `CREATE INDEX ON ` + pgx.Identifier{schema, "checkpoints"}.Sanitize() + ` (thread_id COLLATE "C")`
			if _, err := admin.Exec(context.Background(), stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
			many := answers(t, ctx, c)
			if !strings.Contains(many, `"acme/gamma"`) || strings.Contains(many, "code ") {
				t.Errorf("acme's answers with the index:\n%s", many)
			}
			if _, err := admin.Exec(context.Background(), `DELETE FROM `+pgx.Identifier{schema, "checkpoints"}.Sanitize()+` WHERE thread_id ^@ 'victim/' AND thread_id <> $1`, victimID(0)); err != nil {
				t.Fatal(err)
			}
			if few := answers(t, ctx, c); many != few {
				t.Errorf("acme's answers with the index, %d victim threads:\n%s\nwith 1:\n%s", victims, many, few)
			}
		})
	}
}

func victimID(i int) string { return fmt.Sprintf("victim/user-%05d-medical-chat", i) }

// addVictims copies the one victim thread into victims-1 more, by SQL: as
// many writes through a saver would take minutes.
func addVictims(t *testing.T, admin *pgxpool.Pool, schema string) {
	t.Helper()
	for _, table := range []string{"checkpoints", "checkpoint_blobs", "checkpoint_writes"} {
		q := pgx.Identifier{schema, table}.Sanitize()
		stmt := fmt.Sprintf(`INSERT INTO %[1]s
SELECT (jsonb_populate_record(r, jsonb_build_object('thread_id', format('victim/user-%%s-medical-chat', lpad(i::text, 5, '0'))))).*
FROM %[1]s r, generate_series(1, %[2]d) i WHERE r.thread_id = $1`, q, victims-1)
		if _, err := admin.Exec(context.Background(), stmt, victimID(0)); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var n int
	if err := admin.QueryRow(context.Background(), `SELECT count(DISTINCT thread_id) FROM `+pgx.Identifier{schema, "checkpoints"}.Sanitize()).Scan(&n); err != nil || n != victims+3 {
		t.Fatalf("%d threads, %v; want %d", n, err, victims+3)
	}
}

// answers is everything tenant acme is told by the listings a host makes:
// every page of each, in thread-id order, by last activity, with a time
// filter, and under a narrower prefix, as text. It fails t when a page
// token holds any part of a victim's id.
func answers(t *testing.T, ctx context.Context, c historydv1.ThreadHistoryClient) string {
	t.Helper()
	var out strings.Builder
	for _, req := range []*historydv1.ThreadsRequest{
		{PageSize: 1},
		{PageSize: 2, IncludeTurns: true},
		{Order: historydv1.ThreadsOrder_THREADS_ORDER_LAST_ACTIVITY, PageSize: 1},
		{LastActivityAfter: timestamppb.New(storetest.Base.Add(time.Minute)), PageSize: 1},
		{ThreadIdPrefix: "acme/b"},
		{ThreadIdPrefix: "victim/"},
	} {
		fmt.Fprintf(&out, "%s:\n", prototext.Format(req))
		for range 10 {
			resp, err := c.Threads(ctx, req)
			if err != nil {
				st := status.Convert(err)
				fmt.Fprintf(&out, "  code %s: %s\n", st.Code(), st.Message())
				break
			}
			fmt.Fprintf(&out, "  %s\n", prototext.Format(resp))
			if resp.NextPageToken == "" {
				break
			}
			raw, err := base64.RawURLEncoding.DecodeString(resp.NextPageToken)
			if err != nil {
				t.Fatalf("page token %q: %v", resp.NextPageToken, err)
			}
			if strings.Contains(string(raw), "victim") || strings.Contains(string(raw), "medical") {
				t.Errorf("page token of %s holds %q: another tenant's thread id", prototext.Format(req), raw)
			}
			req.PageToken = resp.NextPageToken
		}
		req.PageToken = ""
	}
	return out.String()
}

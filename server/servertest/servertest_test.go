package servertest_test

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/historyd/historyd/demo"
	historydv1 "github.com/historyd/historyd/gen/historyd/v1"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/storetest"
)

// WithDSN opens the store as historyd serve does; WithTCP serves it on a
// loopback address too.
func TestServeDemoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := demo.Write(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	threads, err := demo.Threads()
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, server.Config{}, servertest.WithDSN("sqlite://"+path, ""), servertest.WithTCP())
	if srv.Addr() == "" {
		t.Fatal("no TCP address with WithTCP")
	}
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, th := range threads {
		// In memory and over TCP alike.
		for _, c := range []historydv1.ThreadHistoryClient{srv.Client(t), historydv1.NewThreadHistoryClient(conn)} {
			resp, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: th.ID})
			if err != nil || int(resp.Total) != th.Turns {
				t.Errorf("Turns(%s) = %v, %v; want total %d", th.ID, resp, err, th.Turns)
			}
		}
	}
	if _, err := servertest.New(context.Background(), server.Config{Store: store.Config{Backend: storetest.NewMemory()}}, servertest.WithDSN("sqlite://"+path, "")); err == nil {
		t.Error("both WithDSN and a Backend accepted")
	}
}

// Close stops serving, and a second Close is harmless.
func TestClose(t *testing.T) {
	srv, err := servertest.New(context.Background(), server.Config{Store: store.Config{Backend: storetest.NewMemory()}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := srv.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := historydv1.NewThreadHistoryClient(conn)
	if _, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "t"}); err != nil {
		t.Fatalf("before Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Turns(context.Background(), &historydv1.TurnsRequest{ThreadId: "t"}); err == nil {
		t.Error("a call after Close succeeded")
	}
}

package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/service"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/storetest"
)

// A client and a server that disagree about TLS: the call fails with
// UNAVAILABLE, in one line saying which the server speaks and which option
// to change, and errors.Is tells the two apart; other failures to connect
// keep gRPC's words.
func TestTransportMismatch(t *testing.T) {
	cert, _ := selfSigned(t)
	tlsSrv := servertest.Start(t, server.Config{Store: store.Config{Backend: storetest.NewMemory()},
		Service: service.Frontend{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}}, servertest.WithTCP())
	plainSrv := servertest.Start(t, server.Config{Store: store.Config{Backend: storetest.NewMemory()}}, servertest.WithTCP())
	closed := freePort(t)
	hangsUp := hangingUp(t)

	for _, tt := range []struct {
		name, addr string
		opts       []client.Option
		want       error
		text       string
	}{
		{"plaintext to a TLS server", tlsSrv.Addr(), []client.Option{client.WithInsecure()}, client.ErrServerTLS,
			"historyd at " + tlsSrv.Addr() + " speaks TLS, not plaintext: dial it without client.WithInsecure() (client.WithTLS for a private CA)"},
		{"TLS to a plaintext server", plainSrv.Addr(), nil, client.ErrServerPlaintext,
			"historyd at " + plainSrv.Addr() + " speaks plaintext, not TLS: dial it with client.WithInsecure()"},
		{"TLS to a plaintext server, dns:///", "dns:///" + plainSrv.Addr(), nil, client.ErrServerPlaintext,
			"historyd at dns:///" + plainSrv.Addr() + " speaks plaintext, not TLS: dial it with client.WithInsecure()"},
		{"nothing listening", closed, []client.Option{client.WithInsecure()}, nil, "connection refused"},
		// gRPC's words vary here (EOF, a broken pipe): only that they are not
		// taken for a mismatch.
		{"a server that hangs up", hangsUp, []client.Option{client.WithInsecure()}, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.Dial(tt.addr, append([]client.Option{client.WithRetry(0, 0)}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Snapshot(context.Background(), "t", 1)
			st, _ := status.FromError(err)
			if st.Code() != codes.Unavailable {
				t.Fatalf("error = %v, want UNAVAILABLE", err)
			}
			if !strings.Contains(st.Message(), tt.text) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error = %q, want one line with %q", err, tt.text)
			}
			for _, mismatch := range []error{client.ErrServerPlaintext, client.ErrServerTLS} {
				if got := errors.Is(err, mismatch); got != (mismatch == tt.want) {
					t.Errorf("errors.Is(err, %v) = %v", mismatch, got)
				}
			}
		})
	}
}

// freePort is a loopback address nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// hangingUp is a loopback address whose server closes every connection at
// once, as neither a TLS nor a gRPC server does.
func hangingUp(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	return l.Addr().String()
}

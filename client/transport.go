package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrServerPlaintext and ErrServerTLS are what errors.Is finds in a call's
// error when the call could not connect because the server speaks the
// other of TLS and plaintext: plaintext to a client dialled with TLS (the
// default), TLS to one dialled WithInsecure. The error's status is
// UNAVAILABLE and its message says, in one line, which the server speaks
// and which option to change, where gRPC alone would say "tls: first
// record does not look like a TLS handshake" or "error reading server
// preface: EOF".
var (
	ErrServerPlaintext = errors.New("the server speaks plaintext, not TLS")
	ErrServerTLS       = errors.New("the server speaks TLS, not plaintext")
)

// probeTimeout bounds the probe a failed call waits for.
const probeTimeout = 2 * time.Second

// transportMismatch is the error of a call that failed to connect because
// the server at target speaks the other of TLS and plaintext, or nil. Only
// a failure to connect is looked into, and only for a client Dial made to a
// target naming one TCP address (host:port, dns:///host:port): the target
// is asked directly, once, by a TLS handshake that verifies nothing and is
// closed without a request. A TLS server answers in TLS; a plaintext one
// answers with bytes that are not a TLS record.
func (c *Client) transportMismatch(st *status.Status) error {
	if c == nil || c.target == "" || st.Code() != codes.Unavailable || !connectFailure(st.Message()) {
		return nil
	}
	addr, ok := tcpAddress(c.target)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	switch speaks := probe(ctx, addr); {
	case speaks == speaksPlaintext && !c.insecure:
		return ErrServerPlaintext
	case speaks == speaksTLS && c.insecure:
		return ErrServerTLS
	}
	return nil
}

// mismatchMessage is what a call that failed on ErrServerPlaintext or
// ErrServerTLS says: one line, naming the option to change.
func mismatchMessage(target string, mismatch error) string {
	if mismatch == ErrServerPlaintext {
		return fmt.Sprintf("historyd at %s speaks plaintext, not TLS: dial it with client.WithInsecure()", target)
	}
	return fmt.Sprintf("historyd at %s speaks TLS, not plaintext: dial it without client.WithInsecure() (client.WithTLS for a private CA)", target)
}

// connectFailure reports whether a status message is gRPC's for a
// connection that could not be set up, rather than one the server sent.
func connectFailure(msg string) bool {
	return strings.HasPrefix(msg, "connection error:") || strings.Contains(msg, "server preface")
}

// tcpAddress is the one host:port a gRPC target names, if it names one.
func tcpAddress(target string) (string, bool) {
	addr := strings.TrimPrefix(target, "dns:///")
	if strings.Contains(addr, "/") || strings.HasPrefix(addr, "unix:") {
		return "", false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if !strings.Contains(err.Error(), "missing port") {
			return "", false
		}
		host, port = strings.Trim(addr, "[]"), "443" // gRPC's default port
	}
	if host == "" {
		return "", false
	}
	return net.JoinHostPort(host, port), true
}

type speaks int

const (
	speaksUnknown speaks = iota
	speaksPlaintext
	speaksTLS
)

// probe tells whether the server at addr speaks TLS or plaintext.
func probe(ctx context.Context, addr string) speaks {
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return speaksUnknown
	}
	defer raw.Close()
	host, _, _ := net.SplitHostPort(addr)
	// What is asked is the protocol, not who answers: nothing is verified,
	// and the connection is closed without a request.
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: host, NextProtos: []string{"h2"}})
	err = conn.HandshakeContext(ctx)
	var header tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case err == nil, errors.As(err, &alert):
		return speaksTLS // an alert is a TLS server refusing this handshake
	case errors.As(err, &header):
		return speaksPlaintext
	}
	return speaksUnknown // hung up, or timed out: says nothing either way
}

package server

import (
	"net/http"
)

// HTTPHandler serves what historyd offers over HTTP beside gRPC, on the
// listener RunConfig.HTTPListen names: the ThreadHistory API as HTTP/JSON,
// Connect and gRPC-Web (mountAPI), and the Model Context Protocol at /mcp
// (mountMCP). Every route reaches the same handlers through the same
// interceptor chain as a gRPC call, so authentication, tenant isolation,
// limits, redaction and metrics are gRPC's. It is built once, by New.
func (s *Server) HTTPHandler() http.Handler { return s.http }

// newHTTPHandler builds the HTTP surface's routes.
func (s *Server) newHTTPHandler() http.Handler {
	mux := http.NewServeMux()
	s.mountAPI(mux)
	s.mountMCP(mux)
	return mux
}

package server

import "net/http"

// mountAPI mounts the ThreadHistory API on mux as HTTP/JSON, Connect and
// gRPC-Web.
func (s *Server) mountAPI(mux *http.ServeMux) {}

package server

import "net/http"

// mountMCP mounts the Model Context Protocol's Streamable HTTP transport
// at /mcp.
func (s *Server) mountMCP(mux *http.ServeMux) {}

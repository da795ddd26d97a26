package service

import (
	"context"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Serving reports whether the health service says SERVING for the server
// as a whole: true while Watch finds the store reachable, false while it
// does not and for good after Shutdown. HTTP readiness probes use it, so
// that they and gRPC health checks never disagree.
func (s *Handlers) Serving() bool {
	r, err := s.health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

package service

import (
	"strings"
	"testing"
)

// TestReflectionShowsComments checks that reflection serves the documented
// descriptors, so `grpcurl describe` shows the API's comments.
func TestReflectionShowsComments(t *testing.T) {
	d, err := loadDocumented()
	if err != nil {
		t.Fatal(err)
	}
	desc, err := d.FindDescriptorByName("historyd.v1.SnapshotRequest")
	if err != nil {
		t.Fatal(err)
	}
	loc := desc.ParentFile().SourceLocations().ByDescriptor(desc)
	if !strings.Contains(loc.LeadingComments, "names one turn") {
		t.Errorf("SnapshotRequest comments = %q; want the proto's documentation", loc.LeadingComments)
	}
	if _, err := d.FindDescriptorByName("grpc.health.v1.HealthCheckRequest"); err != nil {
		t.Errorf("health descriptors not resolvable: %v", err)
	}
}

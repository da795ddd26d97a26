package buildinfo_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/historyd/historyd/buildinfo"
)

func TestDescribe(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	stamped := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/historyd/historyd", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	for _, tt := range []struct {
		name                    string
		bi                      *debug.BuildInfo
		linkVersion, linkCommit string
		version, commit, goVer  string
		modified                string
	}{
		{"no build information", nil, "", "", "unknown", "unknown", runtime.Version(), "unknown"},
		{"local build without VCS stamp", &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"}}, "", "",
			"unknown", "unknown", "go1.99.1", "unknown"},
		{"module version and VCS stamp", stamped, "", "", "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "go1.99.1", "true"},
		{"link-time values win", stamped, "v1.2.4-3-gfedcba9-dirty", "fedcba9876543210fedcba9876543210fedcba98",
			"v1.2.4-3-gfedcba9-dirty", "fedcba9876543210fedcba9876543210fedcba98", "go1.99.1", "true"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := buildinfo.Describe(tt.bi, tt.linkVersion, tt.linkCommit)
			want := buildinfo.Info{Version: tt.version, Commit: tt.commit, Modified: tt.modified, GoVersion: tt.goVer, Platform: platform}
			if got != want {
				t.Errorf("Describe = %+v, want %+v", got, want)
			}
		})
	}
}

// A test binary carries build information, so Read fills the Go version
// from it and every field is set.
func TestRead(t *testing.T) {
	got := buildinfo.Read("v9.9.9", "")
	if got.Version != "v9.9.9" || got.GoVersion != runtime.Version() || got.Commit == "" || got.Modified == "" {
		t.Errorf("Read = %+v", got)
	}
}

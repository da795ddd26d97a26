// Package buildinfo says which build of historyd is running: its version,
// the commit it was built from, whether that tree had uncommitted changes,
// and the Go toolchain and platform. `historyd version` prints it and the
// metrics' historyd_build_info gauge carries it, so that both always agree.
//
// The values come from the build information the Go toolchain embeds
// (runtime/debug.ReadBuildInfo): the module version, set for
// `go install …@vX.Y.Z` and derived from version control tags otherwise,
// and the revision when the build stamped version control information.
// Builds that know better, such as the container image's, set a version
// and commit at link time; cmd/historyd holds those variables (see its
// version.go) and passes them to Read.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Unknown is what a field says when the build did not record it.
const Unknown = "unknown"

// Info is what a binary knows about its own build. Every field is set;
// what the build did not record is Unknown.
type Info struct {
	// Version is the release, e.g. v1.2.3 or v1.2.4-3-gfedcba9-dirty.
	Version string
	// Commit is the full revision the binary was built from.
	Commit string
	// Modified is "true" when the tree had uncommitted changes, "false"
	// when it had none.
	Modified string
	// GoVersion is the toolchain that built the binary, e.g. go1.26.1.
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
}

// Read returns the running binary's Info: the embedded build information,
// overridden by linkVersion and linkCommit where they are not empty (they
// are set deliberately, so they win).
func Read(linkVersion, linkCommit string) Info {
	bi, _ := debug.ReadBuildInfo()
	return Describe(bi, linkVersion, linkCommit)
}

// Describe is Read for any build information (nil when the binary
// carries none) and link-time values.
func Describe(bi *debug.BuildInfo, linkVersion, linkCommit string) Info {
	b := Info{
		Version: Unknown, Commit: Unknown, Modified: Unknown,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		// "(devel)" is what a build outside a module version reports.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			b.Version = v
		}
		if bi.GoVersion != "" {
			b.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				b.Modified = s.Value
			}
		}
	}
	if linkVersion != "" {
		b.Version = linkVersion
	}
	if linkCommit != "" {
		b.Commit = linkCommit
	}
	return b
}

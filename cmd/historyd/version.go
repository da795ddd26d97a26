package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
)

// version and commit are set at link time by builds that know them better
// than the Go toolchain does, such as the container image's (make image):
//
//	go build -ldflags "-X main.version=$(git describe --tags --always --dirty) -X main.commit=$(git rev-parse HEAD)" ./cmd/historyd
//
// Left empty, they come from the build information the toolchain embeds:
// the module version (set for `go install …@vX.Y.Z`) and, when the build
// stamped version control information, the revision.
var (
	version string
	commit  string
)

const versionHelp = `Usage: historyd version [--short]

Print historyd's version, the commit it was built from, whether the tree had
uncommitted changes, and the Go toolchain and platform, one "name value" pair
a line. "historyd --version" is "historyd version --short".

Flags:
`

var versionCommand = command{
	name:    "version",
	summary: "print historyd's version, commit and Go version",
	flags: func(fs *flag.FlagSet) func(context.Context) error {
		short := fs.Bool("short", false, "print one line: historyd VERSION (commit COMMIT, GO VERSION, PLATFORM)")
		fs.Usage = func() {
			fmt.Fprint(fs.Output(), versionHelp)
			fs.PrintDefaults()
		}
		return func(context.Context) error {
			b := currentBuild()
			if *short {
				fmt.Fprintln(os.Stdout, b.line())
				return nil
			}
			b.writeTo(os.Stdout)
			return nil
		}
	},
}

// versionAlias turns the conventional top-level "--version" (or Go's
// "-version") into "version --short".
func versionAlias(args []string) []string {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		return []string{"version", "--short"}
	}
	return args
}

// buildVersion is what the binary knows about its own build.
type buildVersion struct {
	version, commit, modified, goVersion, platform string
}

// currentBuild combines the link-time variables with the embedded build
// information; the variables win, since they are set deliberately.
func currentBuild() buildVersion {
	bi, _ := debug.ReadBuildInfo()
	return describeBuild(bi, version, commit)
}

// describeBuild is currentBuild for any build information (nil when the
// binary carries none) and link-time values.
func describeBuild(bi *debug.BuildInfo, linkVersion, linkCommit string) buildVersion {
	b := buildVersion{
		version: "unknown", commit: "unknown", modified: "unknown",
		goVersion: runtime.Version(), platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		// "(devel)" is what a build outside a module version reports.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			b.version = v
		}
		if bi.GoVersion != "" {
			b.goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.commit = s.Value
			case "vcs.modified":
				b.modified = s.Value
			}
		}
	}
	if linkVersion != "" {
		b.version = linkVersion
	}
	if linkCommit != "" {
		b.commit = linkCommit
	}
	return b
}

func (b buildVersion) writeTo(w io.Writer) {
	fmt.Fprintf(w, "version  %s\ncommit   %s\nmodified %s\ngo       %s\nplatform %s\n",
		b.version, b.commit, b.modified, b.goVersion, b.platform)
}

func (b buildVersion) line() string {
	return fmt.Sprintf("historyd %s (commit %s, %s, %s)", b.version, b.commit, b.goVersion, b.platform)
}

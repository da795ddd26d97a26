package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/historyd/historyd/buildinfo"
)

// version and commit are set at link time by builds that know them better
// than the Go toolchain does, such as the container image's (make image):
//
//	go build -ldflags "-X main.version=$(git describe --tags --always --dirty) -X main.commit=$(git rev-parse HEAD)" ./cmd/historyd
//
// Left empty, they come from the build information the toolchain embeds
// (see package buildinfo), which `historyd version` and the
// historyd_build_info metric both report.
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
				fmt.Fprintln(os.Stdout, buildLine(b))
				return nil
			}
			writeBuild(os.Stdout, b)
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

// currentBuild combines the link-time variables with the embedded build
// information; the variables win, since they are set deliberately.
func currentBuild() buildinfo.Info { return buildinfo.Read(version, commit) }

func writeBuild(w io.Writer, b buildinfo.Info) {
	fmt.Fprintf(w, "version  %s\ncommit   %s\nmodified %s\ngo       %s\nplatform %s\n",
		b.Version, b.Commit, b.Modified, b.GoVersion, b.Platform)
}

func buildLine(b buildinfo.Info) string {
	return fmt.Sprintf("historyd %s (commit %s, %s, %s)", b.Version, b.Commit, b.GoVersion, b.Platform)
}

// Package version holds acpflow's version, sent to agents as clientInfo and
// printed by `acpflow version` and `acpflow --version`.
//
// A release build sets all three variables with -ldflags -X (GoReleaser:
// .goreleaser.yaml). A build from a checkout (`go build`, `go install
// ./cmd/...`) leaves them empty and takes the commit and its time from what
// Go stamps into the binary (debug.ReadBuildInfo: vcs.revision, vcs.time);
// `go install github.com/acpflow/acpflow/cmd/acpflow@v1.2.3` stamps the
// module's version instead.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Dev is the version of a build that says none.
const Dev = "0.1.0-dev"

// Set at build time, e.g.
// -ldflags "-X github.com/acpflow/acpflow/internal/version.Version=v1.2.3
// -X github.com/acpflow/acpflow/internal/version.Commit=<sha>
// -X github.com/acpflow/acpflow/internal/version.Date=<RFC 3339>".
// Version is Dev when not set, and after init the module's version where
// Go stamped one.
var (
	Version = Dev
	Commit  = ""
	Date    = ""
)

func init() {
	if bi, ok := debug.ReadBuildInfo(); ok {
		b := resolve(build{Version, Commit, Date, false, false}, bi)
		Version, Commit, Date, modified, committed = b.version, b.commit, b.date, b.modified, b.committed
	}
}

var (
	// modified says the checkout the binary was built from had changes not
	// committed (vcs.modified): its commit is not all of its source.
	modified bool
	// committed says Date is the commit's time (vcs.time), not the
	// build's: Go records no build time, so that builds are reproducible.
	committed bool
)

// build is what a binary says of itself.
type build struct {
	version, commit, date string
	modified, committed   bool
}

// resolve fills what -ldflags left unset in b from the build info: what -X
// sets always wins, so a release says what its tag and commit are.
func resolve(b build, bi *debug.BuildInfo) build {
	if b.version == Dev && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		b.version = bi.Main.Version
	}
	var vcsCommit, vcsTime string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			vcsCommit = s.Value
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if b.commit != "" || vcsCommit == "" {
		// A commit given by the build is what the build says it is.
		return b
	}
	b.commit, b.modified = vcsCommit, dirty
	if b.date == "" && vcsTime != "" {
		b.date, b.committed = vcsTime, true
	}
	return b
}

// Line is what `acpflow version` prints, name first:
//
//	acpflow v1.2.3 (commit 0123abcd…, built 2026-12-02T18:00:00Z, go1.26.8 linux/amd64)
//
// with "unknown" for a commit or date the build did not record; a build
// from a checkout says when its commit was made instead, and whether the
// checkout had changes.
func Line(name string) string {
	commit := orUnknown(Commit)
	if modified {
		commit += " with changes not committed"
	}
	date := "built " + orUnknown(Date)
	if committed {
		date = "committed " + Date
	}
	return fmt.Sprintf("%s %s (commit %s, %s, %s %s/%s)", name, Version, commit, date,
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

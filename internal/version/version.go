// Package version says which forkfuzz is running: the module version and
// the commit the binary was built from, so every report and JSON record
// names the harness that produced it.
//
// The commit comes from the linker when `make build` stamps it (commit
// and commitTime below; the Makefile builds with -buildvcs=false), else
// from the VCS information go build records (runtime/debug.ReadBuildInfo),
// else the binary is "forkfuzz devel".
package version

import (
	"runtime/debug"
	"strings"
)

// Set by the linker: go build -ldflags "-X
// github.com/forkfuzz/forkfuzz/internal/version.commit=REV[-dirty]
// -X github.com/forkfuzz/forkfuzz/internal/version.commitTime=TIME".
// REV is the full commit hash, -dirty marks a tree with uncommitted
// changes; TIME is the commit's time (RFC 3339).
var commit, commitTime string

// String is "forkfuzz MODULE-VERSION (commit REV[, modified], TIME)", or
// "forkfuzz devel" when the binary knows no commit (go test, go run or
// go build outside a VCS checkout or with -buildvcs=false, unstamped).
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	return format(bi, commit, commitTime)
}

// format is String for build information bi and the linker's stamp
// (stamped "REV[-dirty]", at), which wins over bi's VCS settings.
func format(bi *debug.BuildInfo, stamped, at string) string {
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			if stamped == "" {
				at = s.Value
			}
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if stamped != "" {
		rev, modified = strings.CutSuffix(stamped, "-dirty")
	}
	if rev == "" {
		return "forkfuzz " + v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	extra := []string{"commit " + rev}
	if modified {
		extra = append(extra, "modified")
	}
	if at != "" {
		extra = append(extra, at)
	}
	return "forkfuzz " + v + " (" + strings.Join(extra, ", ") + ")"
}

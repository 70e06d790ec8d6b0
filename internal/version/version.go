// Package version says which forkfuzz is running: the module version and
// the VCS commit the binary was built from (runtime/debug.ReadBuildInfo),
// so every report and JSON record names the harness that produced it.
package version

import (
	"runtime/debug"
	"strings"
)

// String is "forkfuzz MODULE-VERSION (commit REV[, modified], TIME)", or
// "forkfuzz devel" when the binary carries no build information (go test,
// go run outside a VCS checkout).
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "forkfuzz devel"
	}
	return format(bi)
}

func format(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "forkfuzz " + v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	var extra []string
	extra = append(extra, "commit "+rev)
	if modified {
		extra = append(extra, "modified")
	}
	if at != "" {
		extra = append(extra, at)
	}
	return "forkfuzz " + v + " (" + strings.Join(extra, ", ") + ")"
}

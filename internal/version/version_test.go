package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	vcs := func(rev, modified, at string) []debug.BuildSetting {
		s := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
		if at != "" {
			s = append(s, debug.BuildSetting{Key: "vcs.time", Value: at})
		}
		return s
	}
	devel := debug.Module{Version: "(devel)"}
	for _, c := range []struct {
		name        string
		bi          *debug.BuildInfo
		stamped, at string
		want        string
	}{
		{"no build info", &debug.BuildInfo{}, "", "", "forkfuzz devel"},
		{"go test", &debug.BuildInfo{Main: devel}, "", "", "forkfuzz devel"},
		{"go build, clean", &debug.BuildInfo{Main: devel, Settings: vcs("0123456789abcdef0123", "false", "2026-12-03T05:00:00Z")}, "", "",
			"forkfuzz devel (commit 0123456789ab, 2026-12-03T05:00:00Z)"},
		{"go build, modified", &debug.BuildInfo{Main: devel, Settings: vcs("0123456789abcdef0123", "true", "2026-12-03T05:00:00Z")}, "", "",
			"forkfuzz devel (commit 0123456789ab, modified, 2026-12-03T05:00:00Z)"},
		{"make build, clean", &debug.BuildInfo{Main: devel}, "fedcba9876543210fedcba9876543210fedcba98", "2026-12-04T10:00:00+01:00",
			"forkfuzz devel (commit fedcba987654, 2026-12-04T10:00:00+01:00)"},
		{"make build, dirty", &debug.BuildInfo{Main: devel}, "fedcba9876543210fedcba9876543210fedcba98-dirty", "2026-12-04T10:00:00+01:00",
			"forkfuzz devel (commit fedcba987654, modified, 2026-12-04T10:00:00+01:00)"},
		{"make build without a commit time", &debug.BuildInfo{Main: devel}, "fedcba9876543210-dirty", "",
			"forkfuzz devel (commit fedcba987654, modified)"},
		{"the stamp wins over VCS information", &debug.BuildInfo{Main: devel, Settings: vcs("0123456789abcdef0123", "true", "2026-12-03T05:00:00Z")},
			"fedcba9876543210fedcba98", "2026-12-04T10:00:00Z", "forkfuzz devel (commit fedcba987654, 2026-12-04T10:00:00Z)"},
		{"a module version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "", "", "forkfuzz v1.2.3"},
		{"a module version and a stamp", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "abc", "", "forkfuzz v1.2.3 (commit abc)"},
	} {
		if got := format(c.bi, c.stamped, c.at); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if s := String(); !strings.HasPrefix(s, "forkfuzz ") {
		t.Fatalf("String() = %q", s)
	}
}

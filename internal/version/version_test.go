package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-12-03T05:00:00Z"}}}
	if got, want := format(bi), "forkfuzz devel (commit 0123456789ab, modified, 2026-12-03T05:00:00Z)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := format(&debug.BuildInfo{}); got != "forkfuzz devel" {
		t.Fatalf("no build info: %q", got)
	}
	if s := String(); !strings.HasPrefix(s, "forkfuzz ") {
		t.Fatalf("String() = %q", s)
	}
}

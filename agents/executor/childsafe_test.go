package executor

import (
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/internal/childsafe"
)

// childAllow are the functions outside this module that child code may
// call, and why (internal/childsafe: everything else outside the package
// is forbidden, and the module's own packages are followed and checked by
// the same rules).
var childAllow = map[string]string{
	"sync/atomic": "compiler intrinsics on amd64: plain or locked loads and stores, no runtime call",
	"(encoding/binary.littleEndian).PutUint64": "a byte-order store into a slice, inlined; allocates nothing",
}

// childConfig is the rule's configuration for this package.
func childConfig() childsafe.Config {
	return childsafe.Config{
		Dir:        ".",
		PkgPath:    "github.com/forkfuzz/forkfuzz/agents/executor",
		Follow:     []string{"github.com/forkfuzz/forkfuzz/"},
		Allow:      childAllow,
		ChildFlag:  [2]string{"machine", "inChild"},
		ChildFiles: "child_",
	}
}

// TestChildSafe holds the code a forked child runs to the rule of doc.go
// (no allocation, maps, interfaces, defer, fmt, ...): every function
// reachable from a fork site's child branch is marked //forkfuzz:childsafe,
// lives in a child_*.go file and passes internal/childsafe's rules. A
// violation would not fail any other test: it deadlocks a child now and
// then, which shows up later as an executor hang.
func TestChildSafe(t *testing.T) {
	start := time.Now()
	res, err := childsafe.Check(childConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Findings {
		t.Errorf("%s", f)
	}
	t.Logf("entries:\n\t%s", strings.Join(res.Entries, "\n\t"))
	t.Logf("%d functions reachable from a child:\n\t%s", len(res.Reachable), strings.Join(res.Reachable, "\n\t"))
	t.Logf("host-only parts of child code:\n\t%s", strings.Join(res.HostOnly, "\n\t"))
	t.Logf("followed into other packages:\n\t%s", strings.Join(res.Followed, "\n\t"))
	t.Logf("marked, in assembly (reviewed by hand):\n\t%s", strings.Join(res.Assembly, "\n\t"))
	if len(res.Unreachable) > 0 {
		t.Logf("marked but not reachable from a fork site:\n\t%s", strings.Join(res.Unreachable, "\n\t"))
	}
	if len(res.Entries) == 0 {
		t.Error("no fork sites found: is the analysis broken?")
	}
	t.Logf("checked in %v", time.Since(start).Round(time.Millisecond))
}

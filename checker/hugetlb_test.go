package checker

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestHugetlbUnjudged: a program with a hugetlb region is not judged (the
// model does not follow hugetlb semantics yet): no finding, whatever the
// observation says, and a note naming the region and why.
func TestHugetlbUnjudged(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4\nregion r1 memfd-hugetlb-shared pages=512\n" +
		"store r1 off=0x0 count=1 stride=0x8\nfork f0\nf0: check\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := &obs.Observation{Ops: make([]obs.OpResult, len(p.Ops))}
	v := Check(p, o)
	if len(v.Findings) != 0 || len(v.Notes) != 1 || !strings.Contains(v.Notes[0], "not judged") ||
		!strings.Contains(v.Notes[0], "r1 (memfd-hugetlb-shared)") {
		t.Fatalf("verdict %+v: want no findings and a not-judged note naming r1", v)
	}
}

// TestHugetlbNoSpec: no spec (what the C reproducer and replays judge
// against) for a program with a hugetlb region.
func TestHugetlbNoSpec(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 hugetlb-private pages=512\nfork f0\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSpec(p, ""); err == nil || !strings.Contains(err.Error(), "r0 (hugetlb-private)") {
		t.Fatalf("NewSpec: %v, want an error naming r0", err)
	}
}

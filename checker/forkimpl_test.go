package checker

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// A parent PMD still write-protected after the latest fork's child was
// reaped is a pagetable finding; 0 is clean.
func TestForkImplPMDAfterWait(t *testing.T) {
	p := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=1024 thp=off\nstore r0 off=0x0 count=4 stride=0x1000\nfork f0\nwait f0\n")
	for _, wp := range []int{0, 1} {
		o := Expected(p)
		ev := obs.ForkEvidence{Fork: 0, Op: 1, Verdict: obs.EvDeferred, Probe: "exclusive", PMDsWP: 2, PMDsWPAfterWait: wp, AtWait: 2}
		if wp > 0 {
			ev.WPAfterWait = []uint64{0x3f0000000000}
		}
		o.ForkImpl = &obs.ForkImpl{Profile: "async-fork", Forks: []obs.ForkEvidence{ev}}
		v := Check(p, o)
		found := false
		for _, f := range v.Findings {
			if f.Signature == "pagetable:pmd-rw-not-restored-after-wait" {
				found = true
				if !strings.Contains(f.Explanation, "0x3f0000000000") {
					t.Errorf("explanation lacks the PMD: %s", f.Explanation)
				}
			} else {
				t.Errorf("unexpected finding %s: %s", f.Signature, f.Explanation)
			}
		}
		if found != (wp > 0) {
			t.Errorf("%d write-protected PMDs after the wait: finding %v", wp, found)
		}
	}
}

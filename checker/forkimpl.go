package checker

import (
	"fmt"
	"strings"
)

// checkForkImpl judges the fork-implementation evidence (obs.ForkImpl):
//
//	pagetable:pmd-rw-not-restored-after-wait  right after the child of the
//	    main process's latest fork was reaped, a PTE-table PMD of the
//	    parent over the arena is still write-protected (forkfuzz_pmd
//	    module): no copy can be in flight then, so Async-fork left the
//	    parent's PMD without its RW bit.
//
// Whether the implementation took effect at all is not judged here: that
// is a harness question (obs.CheckForkImpl, agents.ForkImplTarget).
func (c *comparer) checkForkImpl() {
	fi := c.o.ForkImpl
	if fi == nil {
		return
	}
	for _, f := range fi.Forks {
		if f.PMDsWPAfterWait <= 0 {
			continue
		}
		var addrs []string
		for _, a := range f.WPAfterWait {
			addrs = append(addrs, fmt.Sprintf("%#x", a))
		}
		c.col.add(Finding{Oracle: OraclePageTable, Signature: "pagetable:pmd-rw-not-restored-after-wait", View: -1, Op: f.AtWait, Region: -1,
			Explanation: fmt.Sprintf("fork f%d (op %d, %s): right after its child was reaped by op %d, %d PTE-table PMDs of the parent over the arena are still write-protected (forkfuzz_pmd): %s; it was the latest fork, so no copy of the parent's page tables can be in flight",
				f.Fork, f.Op, fi.Profile, f.AtWait, f.PMDsWPAfterWait, strings.Join(addrs, " "))})
	}
}

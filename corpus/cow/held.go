package cow

import (
	"fmt"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// Held reports what the executor's page census found at the body's fork
// (the program's last fork) and whether the kind's pages were there as
// cow.c requires before it runs a case: cow.c skips a case whose THP did
// not populate or whose page did not swap out, while a forkfuzz program
// runs anyway, on whatever pages it got. note is "" when they were there
// (or the kind requires nothing), else what was missing: "not swapped",
// "no THP", "not PMD-mapped", "not PTE-mapped", "no hugetlb", or
// "unchecked" for a program without a fork (no census).
func Held(c *Case, o *obs.Observation) (summary, note string) {
	need := c.Kind.Group != NonAnon && c.Kind.Name != "base"
	if o == nil || len(o.ForkPages) == 0 {
		if need {
			return "no page census (no fork)", "unchecked"
		}
		return "no page census (no fork)", ""
	}
	fp := o.ForkPages[0]
	for _, f := range o.ForkPages {
		if f.Fork > fp.Fork {
			fp = f
		}
	}
	summary = fmt.Sprintf("at f%d: %d resident, %d swapped", fp.Fork, fp.Present, fp.Swapped)
	if fp.Flags {
		summary += fmt.Sprintf(", %d THP (%d PMD-mapped), %d hugetlb", fp.THP, fp.PMDMapped, fp.Hugetlb)
	}
	name := c.Kind.Name
	switch {
	case !need:
	case strings.Contains(name, "hugetlb"):
		if fp.Flags && fp.Hugetlb == 0 {
			note = "no hugetlb"
		} else if !fp.Flags {
			note = "unchecked"
		}
	case strings.HasSuffix(name, "-swap"):
		if fp.Swapped == 0 {
			note = "not swapped"
		}
	case !fp.Flags:
		note = "unchecked" // no kpageflags
	case fp.THP == 0:
		note = "no THP"
	case name == "thp" && c.Body.Group == Anon && fp.PMDMapped == 0:
		note = "not PMD-mapped"
	case name == "thp-pte" && fp.THP <= fp.PMDMapped:
		note = "not PTE-mapped"
	}
	return summary, note
}

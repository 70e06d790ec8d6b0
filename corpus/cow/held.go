package cow

import (
	"fmt"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// Held reports what the executor's page census found at the body's fork
// (the program's last fork) and whether the kind's pages were there as
// cow.c requires before it runs a case (cow.c skips a case whose THP did
// not populate or whose page did not swap out; a forkfuzz program runs
// anyway, on whatever pages it got). ok is true for kinds without a
// requirement and programs without a fork (nothing to census).
func Held(c *Case, o *obs.Observation) (summary string, ok bool) {
	if o == nil || len(o.ForkPages) == 0 {
		return "no page census", true
	}
	fp := o.ForkPages[0]
	for _, f := range o.ForkPages {
		if f.Fork > fp.Fork {
			fp = f
		}
	}
	summary = fmt.Sprintf("at f%d: %d resident, %d swapped", fp.Fork, fp.Present, fp.Swapped)
	if fp.Flags {
		summary += fmt.Sprintf(", %d THP (%d PMD-mapped)", fp.THP, fp.PMDMapped)
	}
	name := c.Kind.Name
	switch {
	case c.Kind.Group != Anon && c.Kind.Group != AnonTHP:
		ok = true
	case strings.HasSuffix(name, "-swap"):
		ok = fp.Swapped > 0
	case !fp.Flags:
		ok = true // no kpageflags: cannot tell
	case name == "base":
		ok = fp.Present > 0 && fp.THP == 0
	case name == "thp" && c.Body.Group == Anon:
		ok = fp.PMDMapped > 0
	case name == "thp-pte":
		ok = fp.THP > fp.PMDMapped
	case strings.HasPrefix(name, "thp"):
		ok = fp.THP > 0
	default:
		ok = true
	}
	return summary, ok
}

// HeldNote is the short note a result cell carries when the kind's pages
// were not there ("" when they were).
func HeldNote(c *Case, ok bool) string {
	if ok {
		return ""
	}
	if strings.HasSuffix(c.Kind.Name, "-swap") {
		return "not swapped"
	}
	return "no THP"
}

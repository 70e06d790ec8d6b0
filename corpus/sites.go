package corpus

import (
	"errors"
	"strconv"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// SiteDirective is a comment line of a program file saying where a
// fork's injected fault is meant to hit:
//
//	# site f0 fail_nth: fail_page_alloc: pte_alloc_one <- __pte_alloc <- copy_page_range
//	# site f0 childfail: failslab: ...
//
// The site is the kernel's fault-injection report as a run records it
// (obs.Rollback.Site: the fault's kind, then the innermost frames
// first); a directive may give only the innermost frames. A fork's K-th
// failure point moves with the executor's own mappings and with the
// kernel's fork, so a replay checks the site and aims the program at it
// (campaign.Aim) instead of passing a run that failed another allocation.
const SiteDirective = "site"

// AnySite is a directive's site for a fault that may hit any allocation
// but must hit one: `# site f0 fail_nth: *`. A replay whose fork did not
// fail (K not reached, or K hit an allocation with a fallback, reported
// or failed silently, obs.Rollback.Silent) tested nothing and is aimed
// like one that hit another site.
const AnySite = "*"

// AimWindow bounds how far from a program's K a replay looks for the K
// that hits its fault site, either way (campaign.Aim; the C reproducer's
// AIM_WINDOW).
const AimWindow = 12

// FaultSite is one site directive: the fork operation it names (an index
// into the program's Ops), whether it is the child's fault (childfail)
// and the site.
type FaultSite struct {
	Op    int
	Child bool
	Site  string
	Line  int // the directive's 1-based line in the file
}

// ParseSites reads the site directives of program p's file (name, text,
// as ParseFile read it). Errors are *FileError naming the directive's
// line: a malformed directive, a fork p does not have, a fork without
// fail_nth (childfail), two directives for one fault.
func ParseSites(name string, text []byte, p *prog.Program) ([]FaultSite, error) {
	var out []FaultSite
	var errs []error
	fail := func(line int, msg string) {
		errs = append(errs, &FileError{File: name, Line: line, Err: errors.New(msg)})
	}
	for n, line := range strings.Split(string(text), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
		if !ok {
			continue
		}
		rest, ok = strings.CutPrefix(strings.TrimSpace(rest), SiteDirective+" ")
		if !ok {
			continue
		}
		head, site, ok := strings.Cut(rest, ":")
		site = strings.TrimSpace(site)
		f := strings.Fields(head)
		if !ok || len(f) != 2 || site == "" || (f[1] != "fail_nth" && f[1] != "childfail") {
			fail(n+1, `site directive: want "# site fN fail_nth: SITE" or "# site fN childfail: SITE"`)
			continue
		}
		fs := FaultSite{Op: -1, Child: f[1] == "childfail", Site: site, Line: n + 1}
		for i, op := range p.Ops {
			if op.Kind == prog.OpFork && "f"+strconv.Itoa(op.Fork) == f[0] {
				fs.Op = i
			}
		}
		switch {
		case fs.Op < 0:
			fail(n+1, "site directive: the program has no fork "+f[0])
			continue
		case !fs.Child && p.Ops[fs.Op].FailNth <= 0, fs.Child && p.Ops[fs.Op].ChildFail <= 0:
			fail(n+1, "site directive: fork "+f[0]+" has no "+f[1])
			continue
		}
		dup := false
		for _, e := range out {
			dup = dup || e.Op == fs.Op && e.Child == fs.Child
		}
		if dup {
			fail(n+1, "site directive: a second site for fork "+f[0]+"'s "+f[1])
			continue
		}
		out = append(out, fs)
	}
	return out, errors.Join(errs...)
}

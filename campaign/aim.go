package campaign

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// A fork's K-th failure point (fail_nth=K) is the K-th allocation fork
// makes, and the executor's own mappings are copied before or after the
// program's: when the Go runtime's mappings differ from the run that
// showed a finding, the same K fails another allocation, and the finding
// does not come back (docs/rollback.md, "Replaying fail_nth"); a child's
// (childfail) moves the same way with the page tables Async-fork's
// child copies. Every run records where the fault hit (obs.Rollback.Site,
// ChildFault.Site); a replay aims at the site the finding's run
// recorded, trying the K nearby until the kernel reports the same one.

// aimWindow bounds how far from the recorded K aiming looks, either way.
const aimWindow = corpus.AimWindow

// AimRuns is the most runs Aim needs for one fork: K and aimWindow
// either side.
const AimRuns = 2*aimWindow + 1

// Fault names one injected fault of a program: the one fork operation
// Op's forking thread meets (prog.Op.FailNth) or, with Child, the one its
// child meets before user space (prog.Op.ChildFail).
type Fault struct {
	Op    int  `json:"op"`
	Child bool `json:"child,omitempty"`
}

func (f Fault) String() string {
	if f.Child {
		return fmt.Sprintf("op %d childfail", f.Op)
	}
	return fmt.Sprintf("op %d fail_nth", f.Op)
}

// Attr is the program attribute f's failure point is: fail_nth or
// childfail.
func (f Fault) Attr() string {
	if f.Child {
		return "childfail"
	}
	return "fail_nth"
}

// K is f's failure point in p.
func (f Fault) K(p *prog.Program) int { return *f.nth(&p.Ops[f.Op]) }

// DirectiveSites makes Sites of a program file's site directives
// (corpus.ParseSites); nil for none.
func DirectiveSites(l []corpus.FaultSite) Sites {
	var s Sites
	for _, e := range l {
		if s == nil {
			s = Sites{}
		}
		s[Fault{Op: e.Op, Child: e.Child}] = e.Site
	}
	return s
}

// nth returns the field of op that f's failure point is.
func (f Fault) nth(op *prog.Op) *int {
	if f.Child {
		return &op.ChildFail
	}
	return &op.FailNth
}

// Sites maps each injected fault to where the kernel reported it hit.
type Sites map[Fault]string

// FaultSite is one entry of Sites, as a list holds it (JSON).
type FaultSite struct {
	Fault
	Site string `json:"site"`
}

// List returns s's entries in fault order.
func (s Sites) List() []FaultSite {
	var out []FaultSite
	for _, f := range slices.SortedFunc(maps.Keys(s), cmpFault) {
		out = append(out, FaultSite{f, s[f]})
	}
	return out
}

// SitesOf makes Sites of a list (nil for none).
func SitesOf(l []FaultSite) Sites {
	if len(l) == 0 {
		return nil
	}
	s := make(Sites, len(l))
	for _, e := range l {
		s[e.Fault] = e.Site
	}
	return s
}

func cmpFault(a, b Fault) int {
	if a.Op != b.Op {
		return a.Op - b.Op
	}
	if a.Child == b.Child {
		return 0
	}
	if b.Child {
		return -1
	}
	return 1
}

// AimSites returns where each fault injected into a fork (fail_nth, and
// childfail) hit in observation o, for the faults the kernel reported.
func AimSites(o *obs.Observation) Sites {
	if o == nil {
		return nil
	}
	var out Sites
	add := func(f Fault, site string) {
		if out == nil {
			out = Sites{}
		}
		out[f] = site
	}
	for _, rb := range o.Rollbacks {
		if rb.Cause == obs.CauseFailNth && rb.Injection == obs.InjInjected && rb.Site != "" && rb.FailNth > 0 {
			add(Fault{Op: rb.Op}, rb.Site)
		}
		if c := rb.Child; c != nil && c.FailNth > 0 && c.Injection == obs.InjInjected && c.Site != "" {
			add(Fault{Op: rb.Op, Child: true}, c.Site)
		}
	}
	return out
}

// OnSite says whether every fault of sites hit its site in o.
func OnSite(o *obs.Observation, sites Sites) bool {
	for f, want := range sites {
		if !hits(o, f, want) {
			return false
		}
	}
	return true
}

// SiteMatches says whether a fault the kernel reported at site got hit
// the site want: the same report, or want is its innermost frames (a
// corpus file's directive may name fewer frames than the kernel prints),
// or want is corpus.AnySite (any reported site).
func SiteMatches(got, want string) bool {
	return got != "" && (got == want || want == corpus.AnySite || strings.HasPrefix(got, want+" <- "))
}

// Missed says, for each fault of sites that run o could have injected
// at its site but did not, what happened instead: the kernel reported
// the fault at another site, failed an allocation that asks for no
// warning (obs.Rollback.Silent: never a reported site), or the fork met
// fewer failure points than its K (the fork or the child did not fail).
// A fault the kernel could not inject (no fail-nth) or did not report
// on a kernel that reports none (the simulated one) is not missed: o
// cannot tell. nil when o exercised every fault of sites.
func Missed(o *obs.Observation, sites Sites) []string {
	if o == nil {
		return nil
	}
	var out []string
	for _, f := range slices.SortedFunc(maps.Keys(sites), cmpFault) {
		want := sites[f]
		r, ok := faultIn(o, f)
		switch {
		case !ok:
		case r.inj == obs.InjNotReached:
			out = append(out, fmt.Sprintf("fork f%d's %s=%d was not reached (fewer failure points), not %s", r.fork, f.Attr(), r.k, want))
		case r.inj == obs.InjInjected && r.site != "" && !SiteMatches(r.site, want):
			out = append(out, fmt.Sprintf("fork f%d's %s=%d hit %s, not %s", r.fork, f.Attr(), r.k, r.site, want))
		case r.inj == obs.InjInjected && r.silent:
			out = append(out, fmt.Sprintf("fork f%d's %s=%d hit %s, not %s", r.fork, f.Attr(), r.k, silentSite, want))
		case r.inj == obs.InjInjected && want == corpus.AnySite && !r.failed:
			out = append(out, fmt.Sprintf("fork f%d's %s=%d was injected and the %s went on (the allocation has a fallback), not %s", r.fork, f.Attr(), r.k, map[bool]string{false: "fork", true: "child"}[f.Child], want))
		}
	}
	return out
}

// hits says whether fault f hit site want in run o: the kernel reported
// it there, or want is corpus.AnySite and f was injected (a kernel that
// reports no sites, the simulated one, injects too) and made something
// fail: not an allocation the kernel fails silently, nor one whose
// fallback let the fork (or the child) go on as if nothing failed.
func hits(o *obs.Observation, f Fault, want string) bool {
	if want == corpus.AnySite {
		r, _ := faultIn(o, f)
		return r.inj == obs.InjInjected && !r.silent && r.failed
	}
	return SiteMatches(siteOf(o, f), want)
}

// siteName is how notes name site want.
func siteName(want string) string {
	if want == corpus.AnySite {
		return "any allocation: " + want
	}
	return want
}

// faultRun is what a run recorded of one fault: the fork's number,
// the injection outcome, the site the kernel reported (silent: none, on
// a kernel that reports them), whether it made something fail (the fork
// returned an error, a deferred copy failed, the child died before user
// space), K and the failure points left over when K was not reached.
type faultRun struct {
	fork           int
	inj, site      string
	silent, failed bool
	k, left        int
}

// silentSite is how notes name an allocation the kernel failed without a
// report (obs.Rollback.Silent).
const silentSite = "an allocation that asks for no warning (__GFP_NOWARN: the kernel fails it without a report)"

// faultIn is run o's record of fault f (ok false: none, or no o).
func faultIn(o *obs.Observation, f Fault) (r faultRun, ok bool) {
	if o == nil {
		return r, false
	}
	for _, rb := range o.Rollbacks {
		switch {
		case rb.Op != f.Op:
		case !f.Child && rb.Cause == obs.CauseFailNth:
			return faultRun{rb.Fork, rb.Injection, rb.Site, rb.Silent, rb.Errno != 0 || copyFailed(o, rb.Fork), rb.FailNth, rb.Remaining}, true
		case f.Child && rb.Child != nil:
			return faultRun{rb.Fork, rb.Child.Injection, rb.Child.Site, rb.Child.Silent, rb.CopyKilled(), rb.Child.FailNth, rb.Child.Remaining}, true
		}
	}
	return r, false
}

// copyFailed says whether run o's fork f had its deferred copy fail of
// an injected fault after fork returned (obs.EvInjectedCopyFail: the
// simulated Async-fork model, whose fork's fail_nth counts on into the
// child's background copy).
func copyFailed(o *obs.Observation, f int) bool {
	for _, e := range o.Events {
		if e.Kind == obs.EvInjectedCopyFail && e.Fork == f {
			return true
		}
	}
	return false
}

// siteOf returns the site fault f hit in o ("" if it was not injected
// or not reported).
func siteOf(o *obs.Observation, f Fault) string {
	if r, _ := faultIn(o, f); r.inj == obs.InjInjected {
		return r.site
	}
	return ""
}

// Aim returns p with the failure point of each fault in sites moved to
// where the kernel reports the recorded site, if a run of p hits another
// one; at most maxRuns runs. note says what moved, or why nothing could
// be aimed; runs is what it spent. What its runs showed is dropped:
// callers that judge the kernel by them use AimJudged.
func Aim(ctx context.Context, t agents.Target, p *prog.Program, sites Sites, opt agents.Options, maxRuns int) (q *prog.Program, note string, runs int) {
	r := AimJudged(ctx, t, p, sites, opt, maxRuns)
	return r.Prog, r.Note, r.Runs
}

// AimResult is what AimJudged did.
type AimResult struct {
	Prog *prog.Program // p aimed (p itself when nothing moved)
	Note string        // what moved, or why nothing could be aimed
	Runs int
	// Failed is the first of its runs that showed an issue (a kernel
	// report, an oracle finding), on the site or off it: aiming runs the
	// kernel under test, and a bug one of its runs shows must not be
	// lost because the run was only meant to find a K. A failing run on
	// the site ends aiming there: Prog is then Failed.Prog.
	Failed *AimRun
}

// AimRun is one of AimJudged's runs.
type AimRun struct {
	Prog    *prog.Program
	Obs     *obs.Observation
	Verdict *judge.Verdict
}

// AimJudged is Aim that judges each run (judge.Judge) and keeps the
// first that showed an issue.
func AimJudged(ctx context.Context, t agents.Target, p *prog.Program, sites Sites, opt agents.Options, maxRuns int) (r AimResult) {
	r.Prog = p
	var notes []string
	for _, f := range slices.SortedFunc(maps.Keys(sites), cmpFault) {
		want := sites[f]
		q := r.Prog
		if f.Op < 0 || f.Op >= len(q.Ops) || q.Ops[f.Op].Kind != prog.OpFork || *f.nth(&q.Ops[f.Op]) <= 0 {
			continue
		}
		k0 := *f.nth(&q.Ops[f.Op])
		fork, attr := q.Ops[f.Op].Fork, f.Attr()
		left, silent := 0, false // the last run's failure points left over (K not reached); its fault hit a silent allocation
		try := func(k int) bool {
			if r.Runs >= maxRuns || ctx.Err() != nil {
				return false
			}
			c := q.Clone()
			*f.nth(&c.Ops[f.Op]) = k
			r.Runs++
			o, err := t.Run(c, opt)
			v, herr := judge.Judge(c, o, err)
			left = notReached(o, f)
			fr, _ := faultIn(o, f)
			silent = fr.inj == obs.InjInjected && fr.silent
			onSite := err == nil && hits(o, f, want)
			if herr == nil && !v.OK() && r.Failed == nil {
				r.Failed = &AimRun{Prog: c, Obs: o, Verdict: v}
				where := "off the recorded site"
				if onSite {
					where = "on the recorded site"
				}
				notes = append(notes, fmt.Sprintf("fork f%d %s=%d showed %s (%s)", fork, attr, k, strings.Join(v.Signatures(), ", "), where))
			}
			if !onSite {
				return false
			}
			r.Prog = c
			return true
		}
		if try(k0) {
			notes = append(notes, fmt.Sprintf("fork f%d %s=%d hit the recorded site again", fork, attr, k0))
			continue
		}
		// K not reached: the fork met K-left failure points, and the
		// search goes down from its last one (no K past it can fail).
		center, why := k0, "hit another site"
		if silent {
			why = "hit " + silentSite
		}
		if left > 0 && k0-left >= 1 {
			center, why = k0-left, fmt.Sprintf("was not reached (the fork has %d failure points)", k0-left)
		}
		found := center != k0 && try(center)
		for d := 1; d <= aimWindow && !found && r.Runs < maxRuns; d++ {
			found = center == k0 && try(center+d) || center-d > 0 && try(center-d)
		}
		if found {
			notes = append(notes, fmt.Sprintf("fork f%d %s=%d %s; %s=%d hits the recorded one (%s)", fork, attr, k0, why, attr, *f.nth(&r.Prog.Ops[f.Op]), siteName(want)))
		} else {
			notes = append(notes, fmt.Sprintf("fork f%d: no %s within %d of %d hit the recorded site (%s) in %d runs", fork, attr, aimWindow, center, siteName(want), r.Runs))
		}
	}
	r.Note = strings.Join(notes, "; ")
	if err := ctx.Err(); err != nil {
		r.Note += fmt.Sprintf(" (aiming stopped after %d runs: %v)", r.Runs, err)
	}
	return r
}

// notReached is how many failure points fault f had left in run o when
// its fork (or child) met fewer than its K (obs.InjNotReached); 0 if it
// was reached, or o cannot tell.
func notReached(o *obs.Observation, f Fault) int {
	if r, _ := faultIn(o, f); r.inj == obs.InjNotReached {
		return r.left
	}
	return 0
}

// Nearby returns p with fault f's failure point at the i-th K Aim tries
// (i = 0: p's own K, then K+1, K-1, K+2, ... within aimWindow), for
// callers that try one K a run, such as replays on fresh targets; nil if
// i is past the window, the K is not positive, or f is not one of p's
// faults.
func Nearby(p *prog.Program, f Fault, i int) *prog.Program {
	if i < 0 || i > 2*aimWindow || f.Op < 0 || f.Op >= len(p.Ops) || p.Ops[f.Op].Kind != prog.OpFork || *f.nth(&p.Ops[f.Op]) <= 0 {
		return nil
	}
	d := (i + 1) / 2
	if i%2 == 0 {
		d = -d
	}
	k := *f.nth(&p.Ops[f.Op]) + d
	if k <= 0 {
		return nil
	}
	q := p.Clone()
	*f.nth(&q.Ops[f.Op]) = k
	return q
}

// stepAimRuns bounds the runs aiming one minimization step may take.
const stepAimRuns = 9

// aimStep handles a minimization candidate q that did not reproduce in
// its run (observation o): removing an operation that maps memory before
// the failing allocation moves the failure point. When sites holds one
// fault, q has one fork injecting that kind of fault, and the run hit
// another site, it returns q aimed at the site (nil if none nearby hits
// it) and the runs spent, at most maxRuns.
func aimStep(ctx context.Context, t agents.Target, q *prog.Program, o *obs.Observation, sites Sites, opt agents.Options, maxRuns int) (*prog.Program, int) {
	if len(sites) != 1 || o == nil || maxRuns <= 0 {
		return nil, 0
	}
	var want string
	var kind Fault
	for f, s := range sites {
		kind, want = f, s
	}
	f := Fault{Op: -1, Child: kind.Child}
	for i := range q.Ops {
		if q.Ops[i].Kind == prog.OpFork && *f.nth(&q.Ops[i]) > 0 {
			if f.Op >= 0 {
				return nil, 0
			}
			f.Op = i
		}
	}
	if f.Op < 0 || hits(o, f, want) {
		return nil, 0
	}
	a, _, runs := Aim(ctx, t, q, Sites{f: want}, opt, min(maxRuns, stepAimRuns))
	if a == q {
		return nil, runs
	}
	return a, runs
}

package gate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// The fixes phase (Config.Fixes, `forkfuzz ci --fixes PROG`): a patch
// that claims to fix bugs comes with their reproducers. Each runs
// Config.FixRuns times on the baseline (the kernel without the patch)
// and as often on the kernel under test, alternating: the claim holds
// when the baseline shows a finding at least once and the patched kernel
// never does. A reproducer the patched kernel still fails fails the gate
// (exit 1); one the baseline never failed cannot confirm anything (exit
// 2: the gate was asked a question it could not answer).

// Fix statuses.
const (
	FixFixed       = "fixed"       // baseline k/N (k >= 1), patched 0/N
	FixNotFixed    = "not-fixed"   // the patched kernel still shows it
	FixUnconfirmed = "unconfirmed" // the baseline never showed it (or could not run it)
)

// FixCase is the claim of one reproducer.
type FixCase struct {
	Path    string `json:"path"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Program string `json:"program"`
	// Signatures shown on each kernel, with how many runs showed each.
	Baseline        map[string]int `json:"baseline_signatures,omitempty"`
	Patched         map[string]int `json:"patched_signatures,omitempty"`
	BaselineRuns    int            `json:"baseline_runs"`
	BaselineFailed  int            `json:"baseline_failed"`
	PatchedRuns     int            `json:"patched_runs"`
	PatchedFailed   int            `json:"patched_failed"`
	BaselineCommand string         `json:"baseline_command,omitempty"`
	PatchedCommand  string         `json:"patched_command,omitempty"`
	Note            string         `json:"note,omitempty"`
	// OffSite counts patched runs not counted because a fork's injected
	// fault hit another allocation than in the baseline's failing run
	// (obs.Rollback.Site): they did not test the same failure. Aimed is
	// the reproducer with its fail_nth moved to where the patched kernel
	// reports the baseline's site (campaign.Aim), run from then on.
	OffSite int    `json:"off_site,omitempty"`
	Aimed   string `json:"aimed_program,omitempty"`
	// SitesUnknown: the reproducer injects a fault, the baseline's runs
	// reported no site for it (a crash leaves no observation), and the
	// patched kernel passed: whether its runs failed the same allocation
	// cannot be told, so the fix is not confirmed.
	SitesUnknown bool `json:"sites_unknown,omitempty"`
	// RunMode: the reproducer is a finding's program whose run collected
	// no kernel coverage or took no census (its directory's seed file
	// says "kcov off", "census off"); it runs that way on both kernels.
	RunMode
	prog *prog.Program
	// sites: where the baseline's first failing run injected its faults
	// (campaign.AimSites); aimed: the program the patched kernel runs
	// once aimed; aimTried: aiming was tried.
	sites    campaign.Sites
	aimed    *prog.Program
	aimTried bool
	// passSites: the sites of the patched passes counted before sites
	// was known (reconcile checks them then); baseSites: the sites of a
	// passing baseline run, for when its failing runs reported none (a
	// kernel crash leaves no observation).
	passSites []campaign.Sites
	baseSites campaign.Sites
}

// injects says whether c's reproducer injects a fault into a fork.
func (c *FixCase) injects() bool {
	return c.prog != nil && (len(c.prog.Injected()) > 0 || len(c.prog.ChildInjected()) > 0)
}

// reconcile settles the sites c's patched runs are judged against once
// the runs are over: the baseline's failing run's, else (when those
// runs reported none) a passing baseline run's; a patched pass counted
// before they were known that hit other sites is moved to OffSite.
func (c *FixCase) reconcile() {
	if c.sites == nil && c.baseSites != nil && c.BaselineFailed > 0 {
		c.sites = c.baseSites
		c.Note = appendNote(c.Note, "fault sites from a passing baseline run (its failing runs reported none)")
	}
	if c.sites == nil {
		c.SitesUnknown = c.BaselineFailed > 0 && len(c.passSites) > 0
		return
	}
	for _, got := range c.passSites {
		on := true
		for f, want := range c.sites {
			on = on && campaign.SiteMatches(got[f], want)
		}
		if !on {
			c.PatchedRuns--
			c.OffSite++
		}
	}
	c.passSites = nil
}

// Rate is "k/N on the baseline, k/N patched".
func (c *FixCase) Rate() string {
	return fmt.Sprintf("baseline %d/%d, patched %d/%d", c.BaselineFailed, c.BaselineRuns, c.PatchedFailed, c.PatchedRuns)
}

// LoadFixes reads the reproducers of a --fixes list: program files
// (one program, or several separated by "====" lines) or directories of
// them (*.ffz). Errors name the file and line.
func LoadFixes(paths []string) ([]FixCase, error) {
	var out []FixCase
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("--fixes: %w", err)
		}
		var cases []CorpusCase
		if st.IsDir() {
			cases, err = loadRegress(p)
		} else {
			var b []byte
			if b, err = fsutil.ReadFileLimited(p, corpus.MaxFileSize); err == nil {
				cases, err = regressCases("fixes", p, p, b)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("--fixes: %w", err)
		}
		for _, c := range cases {
			out = append(out, FixCase{Path: c.Path, Program: string(c.prog.Format()), prog: c.prog, RunMode: seedMode(filepath.Dir(c.Path))})
		}
	}
	return out, nil
}

// fixesShare is what the fuzz phase leaves for the fixes phase, of left:
// each claim runs FixRuns times on each kernel, a run taking at most the
// longest corpus replay (2 s at least) and each baseline run allowed a VM
// restart (as long as the boot phase: the baseline is expected to fail,
// often with a kernel BUG), plus a tenth; half of left at most.
func (g *gate) fixesShare(left time.Duration) time.Duration {
	run := 2 * time.Second
	for _, c := range g.res.Corpus {
		run = max(run, time.Duration(c.Seconds*float64(time.Second)))
	}
	per := 2*run + g.res.phaseDuration("boot")
	need := time.Duration(len(g.cfg.Fixes)*g.cfg.FixRuns) * per
	return min(left/2, need+need/10)
}

// fixes runs every fix claim on both kernels until stop.
func (g *gate) fixes(ph *Phase, stop time.Time) {
	cases := g.res.Fixes
	if len(cases) == 0 {
		ph.Skipped = "no --fixes"
		return
	}
	n := g.cfg.FixRuns
	bt, err := g.takeBaseline()
	if err != nil {
		ph.Error = "opening the baseline: " + err.Error()
		for i := range cases {
			cases[i].Status, cases[i].Reason = FixUnconfirmed, "the baseline did not come up: "+err.Error()
		}
		return
	}
	b := &budgetTarget{Target: bt}
	b.setStop(stop)
	g.tut.setStop(stop)
	g.fixStop = stop
	total := 0
	for k := 0; k < n && time.Now().Before(stop) && g.ctx.Err() == nil; k++ {
		for i := range cases {
			c := &cases[i]
			total += g.fixRun(c, b, true)
			total += g.fixRun(c, g.tut, false)
		}
	}
	for i := range cases {
		c := &cases[i]
		c.BaselineCommand = g.replayCmd(c.Path, true, c.RunMode)
		c.PatchedCommand = g.replayCmd(c.Path, false, c.RunMode)
		c.reconcile()
		c.Status, c.Reason = fixVerdict(c, n)
	}
	ph.Note = fmt.Sprintf("%d reproducers, up to %d runs each on the baseline and the patched kernel, %d runs", len(cases), n, total)
}

// fixRun runs claim c once on the baseline or the patched kernel t and
// counts the run; it returns the judged target runs it took. A patched run that
// passed while a fork's fault hit another allocation than in the
// baseline's failing run tested something else: it is not counted, and
// the first such run aims the reproducer at the baseline's site
// (campaign.Aim) and runs the aimed program instead.
func (g *gate) fixRun(c *FixCase, t agents.Target, baseline bool) int {
	opt := c.RunMode.options(g.cfg.Corrupt)
	p := c.prog
	if !baseline && c.aimed != nil {
		p = c.aimed
	}
	runs := 1
	t0 := time.Now()
	o, err := t.Run(p, opt)
	took := time.Since(t0)
	v, herr := judge.Judge(p, o, err)
	if herr != nil {
		if !errors.Is(herr, errBudget) {
			c.Note = appendNote(c.Note, "harness error: "+herr.Error())
		}
		return 0 // the phase counts judged runs
	}
	sigs, trouble := kernelSigs(v.Signatures())
	if len(trouble) > 0 && len(sigs) == 0 {
		// An executor death or a hang alone proves nothing yet: the
		// run is decided by one more (a hang's with a longer timeout),
		// as the confirm phase decides the kernel under test's.
		d := g.fixDecide(c, t, p, opt, trouble, took, baseline)
		if !d.counted {
			return runs + d.runs
		}
		runs += d.runs
		o, sigs = d.o, d.sigs
	}
	if !baseline && len(sigs) == 0 && len(c.sites) > 0 && !campaign.OnSite(o, c.sites) {
		c.OffSite++
		if c.aimTried {
			return runs
		}
		c.aimTried = true
		a := campaign.AimJudged(g.ctx, t, c.prog, c.sites, opt, campaign.AimRuns)
		q := a.Prog
		runs += a.Runs
		c.Note = appendNote(c.Note, "patched kernel: "+a.Note)
		if f := a.Failed; f != nil {
			// The patched kernel showed an issue while aiming: a
			// failing patched run, wherever its fault hit.
			if ks, _ := kernelSigs(f.Verdict.Signatures()); len(ks) > 0 {
				c.countRun(false, ks)
			}
		}
		if q == c.prog {
			return runs
		}
		c.aimed, c.Aimed = q, string(q.Format())
		return runs + g.fixRun(c, t, false)
	}
	c.countRun(baseline, sigs)
	switch {
	case baseline && len(sigs) > 0 && c.sites == nil:
		c.sites = campaign.AimSites(o)
	case baseline && c.baseSites == nil:
		c.baseSites = campaign.AimSites(o)
	case !baseline && len(sigs) == 0 && c.sites == nil && c.injects():
		c.passSites = append(c.passSites, campaign.AimSites(o))
	}
	return runs
}

// fixDecision is what a fix run that showed harness trouble alone came
// to after one more run: counted (with the signatures and observation
// to count it by: the trouble again, the kernel's report, or a pass) or
// not, and the target runs it took.
type fixDecision struct {
	counted bool
	o       *obs.Observation
	sigs    []string
	runs    int
}

// fixDecide runs p once more after a run of claim c on t showed harness
// trouble alone (an executor death or hang, took long): a hang gets
// twice that time (at least twice the program timeout, a minute),
// within the fixes phase's stop. The trouble coming back counts the run
// as failing with it (the kernel's doing, as for the kernel under test:
// campaign.CameBack); a kernel report counts with that; a pass counts as
// a pass; anything else (a harness error, other trouble, no time left)
// is not counted, and the note says so.
func (g *gate) fixDecide(c *FixCase, t agents.Target, p *prog.Program, opt agents.Options, trouble []string, took time.Duration, baseline bool) fixDecision {
	side := map[bool]string{false: "patched kernel", true: "baseline"}[baseline]
	what := fmt.Sprintf("harness trouble on the %s (%s)", side, strings.Join(trouble, ", "))
	hang := false
	for _, s := range trouble {
		_, h := campaign.HarnessTrouble(s)
		hang = hang || h
	}
	if hang {
		left := time.Until(g.fixStop)
		if left < took+time.Second {
			c.Note = appendNote(c.Note, what+": not counted, no time left to run it again with a longer timeout")
			return fixDecision{}
		}
		opt.Timeout = min(max(confirmTimeoutScale*took, confirmTimeoutScale*g.cfg.ProgramTimeout, time.Minute), left-time.Second)
		what += fmt.Sprintf(", run again with a timeout of %v", opt.Timeout.Round(time.Second))
	}
	o, err := t.Run(p, opt)
	v, herr := judge.Judge(p, o, err)
	if herr != nil {
		c.Note = appendNote(c.Note, what+": not counted, the second run gave no verdict ("+herr.Error()+")")
		return fixDecision{runs: 0}
	}
	sigs, again := kernelSigs(v.Signatures())
	var back []string
	for _, s := range trouble {
		if ok, _ := campaign.CameBack(s, v); ok {
			back = append(back, s)
		}
	}
	switch {
	case len(sigs) > 0:
		c.Note = appendNote(c.Note, what+": counted as the second run's "+strings.Join(sigs, ", "))
		return fixDecision{counted: true, o: o, sigs: sigs, runs: 1}
	case len(back) > 0:
		c.Note = appendNote(c.Note, what+": it came back, counted as a failing run")
		return fixDecision{counted: true, o: o, sigs: back, runs: 1}
	case len(again) > 0:
		c.Note = appendNote(c.Note, what+": not counted, the second run showed other trouble ("+strings.Join(again, ", ")+")")
		return fixDecision{runs: 1}
	}
	c.Note = appendNote(c.Note, what+": not again, counted as the second run's pass")
	return fixDecision{counted: true, o: o, runs: 1}
}

// kernelSigs splits a run's signatures into the kernel's and harness
// trouble (campaign.HarnessTrouble).
func kernelSigs(all []string) (kernel, trouble []string) {
	for _, s := range all {
		if t, _ := campaign.HarnessTrouble(s); t {
			trouble = append(trouble, s)
		} else {
			kernel = append(kernel, s)
		}
	}
	return kernel, trouble
}

// countRun counts a judged run of c on the baseline or the patched
// kernel that showed sigs (none: it passed).
func (c *FixCase) countRun(baseline bool, sigs []string) {
	side, failed, shown := &c.PatchedRuns, &c.PatchedFailed, &c.Patched
	if baseline {
		side, failed, shown = &c.BaselineRuns, &c.BaselineFailed, &c.Baseline
	}
	*side++
	if len(sigs) == 0 {
		return
	}
	*failed++
	if *shown == nil {
		*shown = map[string]int{}
	}
	for _, s := range sigs {
		(*shown)[s]++
	}
}

// fixVerdict judges one claim after the runs.
func fixVerdict(c *FixCase, n int) (string, string) {
	switch {
	case c.PatchedFailed > 0:
		return FixNotFixed, fmt.Sprintf("the patched kernel still fails it (%s): %s", c.Rate(), sigList(c.Patched))
	case c.BaselineFailed == 0 && c.BaselineRuns == 0:
		return FixUnconfirmed, "it never ran on the baseline"
	case c.BaselineFailed == 0:
		return FixUnconfirmed, fmt.Sprintf("the baseline never failed it (%s): the fix cannot be confirmed", c.Rate())
	case c.PatchedRuns < n && c.OffSite > 0:
		return FixUnconfirmed, fmt.Sprintf("it ran %d of %d times on the patched kernel where the baseline failed; %d more runs injected their fault at another allocation than the baseline's failing run (%s) and test nothing: %s",
			c.PatchedRuns, n, c.OffSite, siteList(c.sites), c.Rate())
	case c.PatchedRuns < n:
		return FixUnconfirmed, fmt.Sprintf("it ran %d of %d times on the patched kernel (budget or harness errors): %s", c.PatchedRuns, n, c.Rate())
	case c.SitesUnknown:
		return FixUnconfirmed, fmt.Sprintf("the baseline's runs reported no fault-injection site, so the patched kernel's passing runs may have failed another allocation than the baseline's: %s", c.Rate())
	}
	return FixFixed, fmt.Sprintf("present on the baseline (%s), absent on the patched kernel: %s", sigList(c.Baseline), c.Rate())
}

// siteList names fault-injection sites by fault.
func siteList(sites campaign.Sites) string {
	var out []string
	for _, e := range sites.List() {
		out = append(out, fmt.Sprintf("%v: %s", e.Fault, e.Site))
	}
	return strings.Join(out, "; ")
}

func sigList(m map[string]int) string {
	var out []string
	for s, k := range m {
		out = append(out, fmt.Sprintf("%s %dx", s, k))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func appendNote(note, s string) string {
	if note == "" {
		return s
	}
	if strings.Contains(note, s) {
		return note
	}
	return note + "; " + s
}

// fixCounts counts the claims by status.
func (r *Result) fixCounts() (fixed, notFixed, unconfirmed int) {
	for _, c := range r.Fixes {
		switch c.Status {
		case FixFixed:
			fixed++
		case FixNotFixed:
			notFixed++
		default:
			unconfirmed++
		}
	}
	return
}

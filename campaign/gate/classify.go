package gate

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/internal/oracle"
)

// classify sets every finding's status and groups.
func (g *gate) classify() {
	r := g.res
	now := g.now()
	warned := map[*KnownIssue]bool{}
	for _, e := range g.cfg.Known.Expired(now) {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s: known issue %q expired on %s and no longer matches", e.Where, e.Pattern, e.Expires.Format("2006-01-02")))
		warned[e] = true
	}
	if g.cfg.Known != nil {
		for _, e := range g.cfg.Known.Entries {
			if cls := e.Waives(); cls != "" {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s: known issue %q waives %s on release %q, target %q", e.Where, e.Pattern, cls, or(e.Release, "*"), or(e.Target, "*")))
			}
		}
	}
	for i := range r.Findings {
		f := &r.Findings[i]
		k, _ := g.cfg.Known.Match(f.Signature, r.Kernel.Release, r.Kernel.Target, now)
		switch {
		case k != nil:
			f.Status, f.KnownIssue = StatusKnown, k.Where
			f.StatusReason = fmt.Sprintf("known issue (%s): %s", k.Where, k.Reason)
		case f.Baseline != nil && f.Baseline.Reproduced >= baselineNeed(f.Signature):
			f.Status = StatusPreexisting
			f.StatusReason = fmt.Sprintf("also fails on the baseline (%s)", f.Baseline.shownOf())
		case f.Baseline != nil && f.Baseline.Reproduced > 0:
			// Harness trouble the baseline showed once: neither
			// pre-existing (one such run can be the host's doing) nor
			// new (it may be the baseline's too).
			f.Status = StatusUnconfirmed
			f.StatusReason = fmt.Sprintf("harness trouble the baseline showed on %s, fewer than the %d that make it pre-existing: "+
				"the gate can neither blame the kernel under test nor clear it (files: %s)", f.Baseline.shownOf(), baselineNeed(f.Signature), f.Dir)
		case trouble(f):
			// What its replays showed that a known issue waives does not
			// make the event the kernel's.
			f.ReplayShowed = slices.DeleteFunc(f.ReplayShowed, func(sig string) bool {
				k, _ := g.cfg.Known.Match(sig, r.Kernel.Release, r.Kernel.Target, now)
				return k != nil
			})
			_, hang := isTrouble(f)
			f.Status, f.StatusReason = troubleStatus(f, hang)
		default:
			f.Status = StatusNew
			switch {
			case g.cfg.OpenBaseline == nil:
				f.StatusReason = "no baseline given"
			case f.Baseline == nil:
				f.StatusReason = "not replayed on the baseline (budget spent or baseline unavailable)"
			case f.Baseline.Runs == 0 && f.Baseline.Inconclusive > 0:
				f.StatusReason = "not shown on the baseline, but " + f.Baseline.inconclusiveNote() +
					": the comparison is inconclusive, and an incomplete gate never passes a kernel"
			case f.Baseline.Runs == 0 && f.Baseline.OffSite > 0:
				f.StatusReason = fmt.Sprintf("not shown on the baseline, but none of its %d runs injected the fault where the finding's run did (%s): "+
					"the comparison is inconclusive, and an incomplete gate never passes a kernel", f.Baseline.OffSite, f.Baseline.Note)
			case f.Baseline.Runs == 0:
				f.StatusReason = "not replayed on the baseline: " + f.Baseline.Note
			default:
				f.StatusReason = fmt.Sprintf("passes on the baseline (0/%d replays)", f.Baseline.Runs)
				if n := f.Baseline.inconclusiveNote(); n != "" {
					f.StatusReason += "; " + n
				}
			}
		}
	}
	g.group()
}

// group unites findings whose reproducers are the same program, or whose
// first bad (process, op, region, page) on the same program coincides.
func (g *gate) group() {
	fs := g.res.Findings
	parent := make([]int, len(fs))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	why := map[int][]string{}
	owner := map[string]int{}
	unite := func(i int, key, reason string) {
		if j, ok := owner[key]; ok {
			a, b := find(i), find(j)
			if a != b {
				parent[a] = b
				why[i] = append(why[i], reason)
			}
			return
		}
		owner[key] = i
	}
	for i := range fs {
		f := &fs[i]
		if f.Minimized != "" {
			unite(i, "min:"+progHash(f.reproProg), "same minimized program")
		}
		if f.origEv != nil {
			e := f.origEv
			unite(i, fmt.Sprintf("ev:%s:%d:%d:%d:%d", progHash(f.origProg), e.Proc, e.Op, e.Region, e.Page), "same first bad (process, op, page) in the same program")
		}
		if f.Evidence != nil {
			e := f.Evidence
			unite(i, fmt.Sprintf("ev:%s:%d:%d:%d:%d", progHash(f.reproProg), e.Proc, e.Op, e.Region, e.Page), "same first bad (process, op, page) in the same program")
		}
	}
	// A reproducer that shows other findings' signatures too is their
	// reproducer as well.
	bySig := map[string]int{}
	for i := range fs {
		bySig[fs[i].Signature] = i
	}
	for i := range fs {
		for _, s := range fs[i].reproSigs {
			if j, ok := bySig[s]; ok && j != i {
				unite(i, "sig:"+s, "one reproducer shows both signatures")
				unite(j, "sig:"+s, "one reproducer shows both signatures")
			}
		}
	}
	members := map[int][]int{}
	var roots []int
	for i := range fs {
		r := find(i)
		if _, ok := members[r]; !ok {
			roots = append(roots, r)
		}
		members[r] = append(members[r], i)
	}
	// fs is sorted by signature, so roots are in order of their first signature.
	sort.Slice(roots, func(a, b int) bool { return members[roots[a]][0] < members[roots[b]][0] })
	g.res.Groups = nil
	c := &g.res.Counts
	for n, r := range roots {
		gr := Group{ID: fmt.Sprintf("G%d", n+1)}
		whys := map[string]bool{}
		hasNew, hasPre, hasKnown, hasUnconfirmed := false, false, false, false
		for _, i := range members[r] {
			f := &fs[i]
			f.Group = gr.ID
			gr.Signatures = append(gr.Signatures, f.Signature)
			for _, w := range why[i] {
				if !whys[w] {
					whys[w] = true
					gr.Why = append(gr.Why, w)
				}
			}
			switch f.Status {
			case StatusNew:
				hasNew = true
				c.New++
			case StatusPreexisting:
				hasPre = true
				c.Preexisting++
			case StatusHarnessFlake:
				c.HarnessFlakes++
			case StatusUnconfirmed:
				hasUnconfirmed = true
				c.Unconfirmed++
			default:
				hasKnown = true
				c.Known++
			}
		}
		switch {
		case hasNew:
			gr.Status = StatusNew
			c.NewGroups++
		case hasUnconfirmed:
			gr.Status = StatusUnconfirmed
			c.UnconfirmedGroups++
		case hasPre:
			gr.Status = StatusPreexisting
			c.PreexistingGroups++
		case hasKnown:
			gr.Status = StatusKnown
			c.KnownGroups++
		default:
			gr.Status = StatusHarnessFlake
			c.HarnessFlakeGroups++
		}
		g.res.Groups = append(g.res.Groups, gr)
	}
	c.Groups = len(g.res.Groups)
	c.Findings = len(fs)
}

// finish fills the oracle cases, the outcome and the exit status.
func (g *gate) finish() {
	r := g.res
	g.oracleCases()
	r.Elapsed = time.Since(g.start)
	r.ElapsedS = r.Elapsed.Seconds()
	if g.ctx.Err() != nil {
		r.Interrupted = true
	}
	if g.tut != nil {
		if n := g.tut.refused.Load(); n > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%d target runs (minimization, replays) were refused because the budget was spent; reproducibility counts may be low", n))
		}
		if n := g.tut.uncorrupted.Load(); n > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("the test-only corruption %q did not apply to %d runs; they ran again without it", g.cfg.Corrupt, n))
		}
	}
	var flakes []string
	for _, f := range r.Findings {
		if f.Status == StatusHarnessFlake {
			// At least the run that showed it: a fuzz phase abandoned at
			// the hard stop leaves no per-signature counts.
			n := max(g.sigRuns[f.Signature], 1)
			r.HarnessFlakeRuns += n
			flakes = append(flakes, fmt.Sprintf("%s (%d run(s), reproduced 0/%d)", f.Signature, n, f.Replays))
		}
	}
	r.MaxHarnessFlakes = g.cfg.MaxHarnessFlakes
	flakeNote := ""
	if len(flakes) > 0 {
		flakeNote = fmt.Sprintf("%d run(s) with an unreproduced executor death (%s; at most %d tolerated, --max-harness-flakes)",
			r.HarnessFlakeRuns, strings.Join(flakes, ", "), g.cfg.MaxHarnessFlakes)
		r.Warnings = append(r.Warnings, "harness: "+flakeNote+": not counted against the kernel; see each finding's executor-stderr.txt, executor-state.txt and console.txt")
	}
	g.outcome(flakeNote)
}

// oracleCases fills a case per oracle (of the table, then those only
// findings name): what it judged, its findings by status, or why it does
// not apply to the target.
func (g *gate) oracleCases() {
	r := g.res
	qemu := strings.HasPrefix(r.Kernel.Target, "qemu") || r.Kernel.Image != ""
	var names []string
	for _, in := range oracle.Table {
		names = append(names, string(in.Name))
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	for _, f := range r.Findings {
		if !have[f.Oracle] {
			have[f.Oracle] = true
			names = append(names, f.Oracle)
		}
	}
	r.Oracles = nil
	for _, n := range names {
		oc := OracleCase{Oracle: n}
		oc.Judgments, oc.Needs = g.judgments(n)
		in, _ := oracle.Lookup(oracle.Name(n))
		if in.Class == oracle.Kernel && in.Name != "" && !qemu {
			oc.NotApplicable = "only QEMU targets watch a kernel console"
		}
		if in.Class == oracle.Executor && strings.HasPrefix(r.Kernel.Target, "sim") {
			oc.NotApplicable = "the simulated kernel has no executor process"
		}
		for _, f := range r.Findings {
			if f.Oracle != n {
				continue
			}
			oc.NotApplicable = ""
			switch f.Status {
			case StatusNew:
				oc.New++
			case StatusKnown:
				oc.Known++
			case StatusHarnessFlake, StatusUnconfirmed:
				oc.HarnessFlakes++
			default:
				oc.Preexisting++
			}
		}
		r.Oracles = append(r.Oracles, oc)
	}
}

// outcome sets the gate's outcome, exit status and reason: new findings
// fail it, harness trouble, an interrupt or too few programs make it an
// error.
func (g *gate) outcome(flakeNote string) {
	r := g.res
	for i := range r.Fixes {
		if r.Fixes[i].Status == "" {
			r.Fixes[i].Status, r.Fixes[i].Reason = FixUnconfirmed, "the fixes phase did not run (an earlier harness error, or no kernel under test came up)"
		}
	}
	fixed, notFixed, unconfirmedFixes := r.fixCounts()
	switch {
	case notFixed > 0:
		r.Outcome, r.ExitCode = "fail", ExitFindings
		r.Reason = fmt.Sprintf("%d of %d claimed fixes do not hold: %s", notFixed, len(r.Fixes), fixesWith(r, FixNotFixed))
		if r.Counts.NewGroups > 0 {
			r.Reason += fmt.Sprintf("; also %d new finding group(s)", r.Counts.NewGroups)
		}
	case r.Counts.NewGroups > 0:
		r.Outcome, r.ExitCode = "fail", ExitFindings
		var sigs []string
		for _, gr := range r.Groups {
			if gr.Status == StatusNew {
				sigs = append(sigs, gr.ID+" "+strings.Join(gr.Signatures, ", "))
			}
		}
		r.Reason = fmt.Sprintf("%d new finding group(s): %s", r.Counts.NewGroups, strings.Join(sigs, "; "))
		if r.harnessErr != "" {
			r.Reason += "; also a harness error: " + r.harnessErr
		}
	case r.harnessErr != "":
		r.Outcome, r.ExitCode, r.Reason = "error", ExitError, "harness error: "+r.harnessErr
	case r.Counts.Unconfirmed > 0:
		var sigs []string
		for _, f := range r.Findings {
			if f.Status == StatusUnconfirmed {
				sigs = append(sigs, f.Signature)
			}
		}
		r.Outcome, r.ExitCode = "error", ExitError
		r.Reason = fmt.Sprintf("harness trouble undecided (%s: never replayed, or shown once on the baseline): the gate can neither blame the kernel nor clear it; no new finding otherwise", strings.Join(sigs, ", "))
	case harnessErrorsTooMany(r.HarnessErrors, r.Programs):
		r.Outcome, r.ExitCode, r.Reason = "error", ExitError, fmt.Sprintf("harness unhealthy: %d runs gave no verdict (harness errors) against %d that did; no new finding, but the gate cannot vouch for the kernel", r.HarnessErrors, r.Programs)
	case r.HarnessFlakeRuns > int64(g.cfg.MaxHarnessFlakes):
		r.Outcome, r.ExitCode, r.Reason = "error", ExitError, "harness unhealthy: "+flakeNote+"; no new finding, but the gate cannot vouch for the kernel"
	case unconfirmedFixes > 0:
		r.Outcome, r.ExitCode = "error", ExitError
		r.Reason = fmt.Sprintf("%d of %d claimed fixes could not be confirmed (%s): no new finding otherwise", unconfirmedFixes, len(r.Fixes), fixesWith(r, FixUnconfirmed))
	case r.Interrupted:
		r.Outcome, r.ExitCode, r.Reason = "error", ExitError, "interrupted before the budget was spent, no new finding so far: not a pass"
	case r.Programs < int64(r.MinPrograms):
		r.Outcome, r.ExitCode, r.Reason = "error", ExitError, fmt.Sprintf("only %d programs ran, fewer than --min-programs %d", r.Programs, r.MinPrograms)
	case r.FuzzPrograms < int64(r.MinFuzzPrograms):
		r.Outcome, r.ExitCode, r.Reason = "error", ExitError, r.fewFuzzed()
	default:
		r.Outcome, r.ExitCode = "pass", ExitPass
		r.Reason = fmt.Sprintf("no new finding in %d programs", r.Programs)
		if n := r.Counts.Known + r.Counts.Preexisting; n > 0 {
			r.Reason += fmt.Sprintf(" (%d known, %d pre-existing findings, in %d groups)", r.Counts.Known, r.Counts.Preexisting, r.Counts.Groups-r.Counts.HarnessFlakeGroups)
		}
		if fixed > 0 {
			r.Reason += fmt.Sprintf("; %d claimed fix(es) confirmed: %s", fixed, fixesWith(r, FixFixed))
		}
		if flakeNote != "" {
			r.Reason += "; " + flakeNote + ", not counted against the kernel"
		}
	}
}

// fewFuzzed says why too few fuzzed programs make r no pass.
func (r *Result) fewFuzzed() string {
	return fmt.Sprintf("only %d programs fuzzed, fewer than --min-fuzz-programs %d: the gate tested its %d corpus programs alone (the fuzz phase: %s)",
		r.FuzzPrograms, r.MinFuzzPrograms, r.CorpusPrograms, r.phaseNote("fuzz"))
}

// phaseNote is what phase name's record says: skipped, its error or
// note, "did not run".
func (r *Result) phaseNote(name string) string {
	for _, ph := range r.Phases {
		if ph.Name != name {
			continue
		}
		switch {
		case ph.Skipped != "":
			return "skipped, " + ph.Skipped
		case ph.Error != "":
			return "error, " + ph.Error
		case ph.Note != "":
			return ph.Note
		}
		return fmt.Sprintf("ran %.0f s", ph.Seconds)
	}
	return "did not run"
}

// harnessErrorsTooMany: more than a tenth of the runs gave no verdict (a
// harness error: the agent or the target failed, not the program), too
// many for a pass to mean the kernel passed what the gate meant to run.
func harnessErrorsTooMany(errs, programs int64) bool {
	return errs > 1 && errs*10 > programs+errs
}

// fixesWith lists the fix claims of one status with their rates.
func fixesWith(r *Result, status string) string {
	var out []string
	for _, c := range r.Fixes {
		if c.Status == status {
			out = append(out, fmt.Sprintf("%s (%s)", c.Path, c.Rate()))
		}
	}
	return strings.Join(out, ", ")
}

// trouble: f is harness trouble with a clean console (isTrouble).
func trouble(f *FindingRecord) bool {
	t, _ := isTrouble(f)
	return t
}

// judgments is how much oracle o had to judge over the gate's runs, and
// what it needs (the table's unit): an oracle that judged nothing passed
// nothing.
func (g *gate) judgments(o string) (int, string) {
	t := g.tally
	in, ok := oracle.Lookup(oracle.Name(o))
	if !ok {
		return t.Runs, oracle.Runs.String()
	}
	n := map[oracle.Unit]int{oracle.Runs: t.Runs, oracle.Pages: t.Pages, oracle.Views: t.Views, oracle.Ops: t.Ops,
		oracle.Forks: t.Forks, oracle.PipeReads: t.PipeReads, oracle.Cells: t.Cells, oracle.Rollbacks: t.Rollbacks}[in.Judges]
	return n, in.Judges.String()
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

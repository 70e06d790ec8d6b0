package gate

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// shiftTarget is a kernel whose fork makes shift more allocations before
// the simulated kernel's (fewer when negative): its fail_nth K fails the
// simulated kernel's K-shift-th (for K <= shift one of its own, which
// fails like the simulated kernel's first), and it reports that points
// 4-6 are in the page-table copy (where async-rollback-partial breaks
// the rollback) and the others elsewhere.
type shiftTarget struct {
	agents.Target
	shift int
	// siteAt, when set, are the simulated kernel's failure points
	// reported at the copy_page_range site instead of 4-6.
	siteAt []int
}

func (s *shiftTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	q := p.Clone()
	for i := range q.Ops {
		if q.Ops[i].FailNth > 0 {
			q.Ops[i].FailNth = max(q.Ops[i].FailNth-s.shift, 1)
		}
	}
	o, err := s.Target.Run(q, opt)
	if o != nil {
		for j := range o.Rollbacks {
			rb := &o.Rollbacks[j]
			rb.Site = "sim: elsewhere"
			if s.siteAt == nil && rb.FailNth >= 4 && rb.FailNth <= 6 || slices.Contains(s.siteAt, rb.FailNth) {
				rb.Site = "sim: copy_page_range"
			}
			rb.FailNth = p.Ops[rb.Op].FailNth
		}
	}
	return o, err
}

// rollbackPartial shows async-rollback-partial's broken rollback when its
// fork's fault is the simulated kernel's 4th to 6th failure point.
const rollbackPartial = "forkfuzz v1\nregion r0 anon-private pages=1024 thp=off\nregion r1 anon-private pages=1024 thp=off\n" +
	"store r0 off=0x0 count=4 stride=0x200000\nstore r1 off=0x0 count=4 stride=0x200000\nfork f0 fail_nth=4\nwait f0\n"

// shiftKernel is the simulated Async-fork kernel with mutant behind a
// shiftTarget.
func shiftKernel(t *testing.T, mutant string, shift int) agents.Target {
	t.Helper()
	s, err := sim.NewTarget(sim.Config{Mode: sim.Async, Mutant: mutant, SchedSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &shiftTarget{Target: s, shift: shift}
}

// rollbackCorpus writes rollbackPartial, after header, as the only
// program of a corpus directory under dir and returns the directory.
func rollbackCorpus(t *testing.T, dir, header string) string {
	t.Helper()
	corpusDir := filepath.Join(dir, "corpus")
	if err := os.MkdirAll(corpusDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corpusDir, "rollback-partial.ffz"), []byte(header+rollbackPartial), 0o644); err != nil {
		t.Fatal(err)
	}
	return corpusDir
}

// rollbackFinding is the gate's finding of rollbackPartial from the
// corpus, nil if none.
func rollbackFinding(r *Result) *FindingRecord {
	for i := range r.Findings {
		if strings.HasPrefix(r.Findings[i].Source, "corpus:") && r.Findings[i].Signature == "pagetable:pmd-rw-not-restored" {
			return &r.Findings[i]
		}
	}
	return nil
}

// A claimed fix of a fail_nth reproducer is judged where the baseline
// failed: a patched kernel whose K-th failure point is another
// allocation passes without testing anything, so its runs are aimed at
// the baseline's site first.
func TestFixAimedAtBaselineSite(t *testing.T) {
	p, err := prog.Parse([]byte(rollbackPartial))
	if err != nil {
		t.Fatal(err)
	}
	kernel := func(mutant string, shift int) agents.Target { return shiftKernel(t, mutant, shift) }
	tests := []struct {
		name    string
		patched agents.Target
		status  string
		aimedK  int
		reason  string
	}{
		// Without aiming, K=4 fails the patched kernel's first point
		// and passes: "fixed", while the bug is still there at K=7.
		{"still broken", kernel("async-rollback-partial", 3), FixNotFixed, 7, "pmd-rw-not-restored"},
		{"fixed", kernel("", 3), FixFixed, 7, "absent on the patched kernel"},
		{"never there", kernel("async-rollback-partial", -20), FixUnconfirmed, 0, "injected their fault at another allocation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fixes := []FixCase{{Path: filepath.Join(t.TempDir(), "repro.ffz"), Program: rollbackPartial, prog: p}}
			r := Run(context.Background(), Config{
				Open:         func() (agents.Target, error) { return tc.patched, nil },
				OpenBaseline: func() (agents.Target, error) { return kernel("async-rollback-partial", 0), nil },
				Kernel:       KernelIdentity{Target: "sim-async"}, Baseline: &KernelIdentity{Target: "sim-async"},
				Budget: 20 * time.Second, Seed: 1, Workdir: filepath.Join(t.TempDir(), "w"), MinPrograms: 1, Fixes: fixes, FixRuns: 3,
			})
			if len(r.Fixes) != 1 {
				t.Fatalf("%d fix cases", len(r.Fixes))
			}
			f := r.Fixes[0]
			if f.Status != tc.status || !strings.Contains(f.Reason, tc.reason) {
				t.Fatalf("status %s (%s), want %s with %q; note %q", f.Status, f.Reason, tc.status, tc.reason, f.Note)
			}
			if tc.aimedK > 0 {
				q, err := prog.Parse([]byte(f.Aimed))
				if err != nil || q.Ops[2].FailNth != tc.aimedK {
					t.Fatalf("aimed program %q (%v), want fail_nth=%d; note %q", f.Aimed, err, tc.aimedK, f.Note)
				}
			}
			if f.OffSite == 0 || !strings.Contains(f.Note, "patched kernel: fork f0") {
				t.Errorf("off-site runs %d, note %q: want the first patched run off the site and the aiming said", f.OffSite, f.Note)
			}
		})
	}
}

// A fail_nth finding is compared with the baseline where it failed: a
// baseline whose K-th failure point is another allocation would pass
// without testing anything, and the finding would be called new (the
// kernel under test blamed) while the baseline has the same bug.
func TestBaselineAimedAtFindingSite(t *testing.T) {
	dir := t.TempDir()
	corpusDir := rollbackCorpus(t, dir, "")
	kernel := func(shift int) agents.Target { return shiftKernel(t, "async-rollback-partial", shift) }
	r := Run(context.Background(), Config{
		Open:         func() (agents.Target, error) { return kernel(0), nil },
		OpenBaseline: func() (agents.Target, error) { return kernel(3), nil },
		Kernel:       KernelIdentity{Target: "sim-async"}, Baseline: &KernelIdentity{Target: "sim-async"},
		Budget: 20 * time.Second, Seed: 1, Workdir: filepath.Join(dir, "w"), MinPrograms: 1, CorpusDirs: []string{corpusDir},
	})
	f := rollbackFinding(r)
	if f == nil {
		t.Fatalf("no finding from the corpus program; findings %+v", r.Findings)
	}
	if f.Status != StatusPreexisting || f.Baseline == nil || f.Baseline.OffSite == 0 || !strings.Contains(f.Baseline.Note, "fail_nth=7 hits the recorded one") {
		t.Fatalf("%s: status %s (%s), baseline %+v: want pre-existing after aiming at fail_nth=7", f.Signature, f.Status, f.StatusReason, f.Baseline)
	}
}

// Fresh targets whose fork's K-th failure point is another allocation do
// not call a fail_nth finding flaky: their runs tested something else,
// are counted apart, and move K a step for the next fresh target until
// one hits the recorded site.
func TestFreshOffSite(t *testing.T) {
	for _, tc := range []struct {
		name         string
		shift        int
		reproducible bool
		want         string
	}{
		{"aimed", 3, true, "aimed: fail_nth=7 hits the recorded site on fresh targets"},
		{"never there", -20, false, "not validated on fresh VMs (no K within 12 of the reproducer's hit the recorded site)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			corpusDir := rollbackCorpus(t, dir, "")
			kernel := func(shift int) agents.Target { return shiftKernel(t, "async-rollback-partial", shift) }
			r := Run(context.Background(), Config{
				Open:      func() (agents.Target, error) { return kernel(0), nil },
				OpenFresh: func() (agents.Target, error) { return kernel(tc.shift), nil },
				Kernel:    KernelIdentity{Target: "sim-async"},
				Budget:    20 * time.Second, Seed: 1, Workdir: filepath.Join(dir, "w"), MinPrograms: 1, CorpusDirs: []string{corpusDir},
			})
			f := rollbackFinding(r)
			if f == nil || f.Fresh == nil {
				t.Fatalf("no fresh validation of the corpus finding: %+v", f)
			}
			v := f.Fresh
			t.Logf("%s", f.Reproducibility())
			if v.OffSite == 0 || !strings.Contains(f.Reproducibility(), tc.want) || (v.Reproduced >= freshWant) != tc.reproducible {
				t.Fatalf("fresh %+v: %s; want %q, reproducible %v", v, f.Reproducibility(), tc.want, tc.reproducible)
			}
			if !tc.reproducible && v.Runs != 0 {
				t.Fatalf("fresh %+v: runs off the site counted", v)
			}
		})
	}
}

// A regression program's site directive holds its fork's fault where the
// program was written for: on a kernel whose K-th failure point is
// another allocation, the run passes without testing the rollback, so
// the gate aims the program at the site, and skips it (not pass) when
// nothing nearby hits it.
func TestCorpusAimedAtSite(t *testing.T) {
	const directive = "# site f0 fail_nth: sim: copy_page_range\n"
	tests := []struct {
		name, header, mutant string
		shift                int
		status, note         string
		aimedK               int
	}{
		// Without the directive K=4 is the shifted kernel's first
		// failure point: a pass that never reached the broken rollback.
		{"no directive", "", "async-rollback-partial", 3, "pass", "", 0},
		{"aimed at the bug", directive, "async-rollback-partial", 3, "fail", "fail_nth=7 hits the recorded one", 7},
		{"aimed, fixed", directive, "", 3, "pass", "fail_nth=7 hits the recorded one", 7},
		{"on site", directive, "async-rollback-partial", 0, "fail", "", 0},
		{"never there", directive, "async-rollback-partial", -20, "skipped", "not exercised: the run missed the fault site", 0},
		// The site is the simulated kernel's 7th point, where the rollback
		// works; aiming passes the 4th to 6th, which show the bug: a
		// kernel bug one of its runs showed is the case's, not dropped.
		{"bug seen while aiming", directive, "async-rollback-partial", 3, "fail", "fork f0 fail_nth=7 showed pagetable:pmd-rw-not-restored (off the recorded site)", 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			corpusDir := rollbackCorpus(t, dir, tc.header)
			open := func() (agents.Target, error) { return shiftKernel(t, tc.mutant, tc.shift), nil }
			if tc.name == "bug seen while aiming" {
				open = func() (agents.Target, error) {
					k := shiftKernel(t, tc.mutant, tc.shift).(*shiftTarget)
					k.siteAt = []int{7}
					return k, nil
				}
			}
			r := Run(context.Background(), Config{
				Open:   open,
				Kernel: KernelIdentity{Target: "sim-async"}, Budget: 8 * time.Second, Seed: 1,
				Workdir: filepath.Join(dir, "w"), MinPrograms: 1, CorpusDirs: []string{corpusDir},
			})
			var c *CorpusCase
			for i := range r.Corpus {
				if r.Corpus[i].Name == "corpus/rollback-partial.ffz" {
					c = &r.Corpus[i]
				}
			}
			if c == nil {
				t.Fatalf("corpus case not replayed: %+v", r.Corpus)
			}
			if c.Status != tc.status || !strings.Contains(c.Note, tc.note) {
				t.Fatalf("status %s (note %q, signatures %v), want %s with %q", c.Status, c.Note, c.Signatures, tc.status, tc.note)
			}
			if tc.status == "fail" && !slices.Contains(c.Signatures, "pagetable:pmd-rw-not-restored") {
				t.Errorf("signatures %v, want the broken rollback", c.Signatures)
			}
			if tc.aimedK > 0 {
				q, err := prog.Parse([]byte(c.Aimed))
				if err != nil || q.Ops[2].FailNth != tc.aimedK || c.OffSite != 1 {
					t.Fatalf("aimed program %q (%v), off-site runs %d: want fail_nth=%d after one", c.Aimed, err, c.OffSite, tc.aimedK)
				}
			}
		})
	}
}

// claimRollbackFix runs an 8-second gate claiming rollbackPartial is
// fixed on patched, against baseline (3 runs each), and returns the
// claim.
func claimRollbackFix(t *testing.T, patched, baseline agents.Target) FixCase {
	t.Helper()
	return claimFix(t, patched, baseline, rollbackPartial)
}

// claimFix runs an 8-second gate claiming the program text is fixed on
// patched, against baseline (3 runs each), and returns the claim.
func claimFix(t *testing.T, patched, baseline agents.Target, text string) FixCase {
	t.Helper()
	p, err := prog.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	fixes := []FixCase{{Path: filepath.Join(t.TempDir(), "repro.ffz"), Program: text, prog: p}}
	r := Run(context.Background(), Config{
		Open:         func() (agents.Target, error) { return patched, nil },
		OpenBaseline: func() (agents.Target, error) { return baseline, nil },
		Kernel:       KernelIdentity{Target: "sim-async"}, Baseline: &KernelIdentity{Target: "sim-async"},
		Budget: 8 * time.Second, Seed: 1, Workdir: filepath.Join(t.TempDir(), "w"), MinPrograms: 1, Fixes: fixes, FixRuns: 3,
	})
	if len(r.Fixes) != 1 {
		t.Fatalf("%d fix cases", len(r.Fixes))
	}
	return r.Fixes[0]
}

// hangOnce is a target whose first run of program want hangs.
type hangOnce struct {
	agents.Target
	want string
	hung bool
}

func (h *hangOnce) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if !h.hung && string(p.Format()) == h.want {
		h.hung = true
		return nil, &executor.CrashError{Hang: true, Status: "no answer within 1m0s", State: "State: R (running)\n"}
	}
	return h.Target.Run(p, opt)
}

// A claimed fix is not called not-fixed because the patched kernel's
// executor hung once (a loaded host): the run is decided by a second one
// with a longer timeout, which passes.
func TestFixIgnoresHarnessTrouble(t *testing.T) {
	patched := &hangOnce{Target: shiftKernel(t, "", 0), want: rollbackPartial}
	f := claimRollbackFix(t, patched, shiftKernel(t, "async-rollback-partial", 0))
	if !patched.hung {
		t.Fatal("the patched kernel never hung")
	}
	if f.Status != FixFixed || f.PatchedFailed != 0 || !strings.Contains(f.Note, "harness trouble on the patched kernel (executor-hang), run again with a timeout of") ||
		!strings.Contains(f.Note, "not again, counted as the second run's pass") {
		t.Fatalf("status %s (%s), patched %d/%d failed, note %q: want the hang decided by a pass", f.Status, f.Reason, f.PatchedFailed, f.PatchedRuns, f.Note)
	}
}

// hangAlways is a kernel on which program want always hangs, whatever
// its timeout; timeouts are the Options.Timeout of its runs.
type hangAlways struct {
	agents.Target
	want     string
	timeouts []time.Duration
}

func (h *hangAlways) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if string(p.Format()) == h.want {
		h.timeouts = append(h.timeouts, opt.Timeout)
		return nil, &executor.CrashError{Hang: true, Status: "no answer", State: "State: D (disk sleep)\n"}
	}
	return h.Target.Run(p, opt)
}

// hangRepro is a reproducer without an injected fault (so no fault site
// to match): a fork and a store while the child reads.
const hangRepro = "forkfuzz v1\nregion r0 anon-private pages=64 thp=off\nstore r0 off=0x0 count=4 stride=0x1000\nfork f0\nstore r0 off=0x0 count=1 stride=0x1000\nwait f0\n"

// A fix for a hang bug used to be unconfirmed whatever happened (the
// fixes phase counted no hang on either side). A hang that comes back
// with a longer timeout now counts: on the baseline it shows the bug
// (fixed when the patched kernel passes), on the patched kernel it
// fails the claim. (A reproducer that injects a fault stays unconfirmed
// when the baseline hangs: the hang leaves no fault site to compare the
// patched runs with, TestFixSitesUnknown.)
func TestFixOfHang(t *testing.T) {
	p, err := prog.Parse([]byte(hangRepro))
	if err != nil {
		t.Fatal(err)
	}
	want := string(p.Format())
	for _, tc := range []struct {
		name        string
		patchedHang bool
		want        string
	}{{"baseline hangs", false, FixFixed}, {"both hang", true, FixNotFixed}} {
		t.Run(tc.name, func(t *testing.T) {
			base := &hangAlways{Target: shiftKernel(t, "", 0), want: want}
			var patched agents.Target = shiftKernel(t, "", 0)
			if tc.patchedHang {
				patched = &hangAlways{Target: patched, want: want}
			}
			f := claimFix(t, patched, base, hangRepro)
			if f.Status != tc.want {
				t.Fatalf("status %s (%s), note %q: want %s", f.Status, f.Reason, f.Note, tc.want)
			}
			if f.Baseline["executor-hang"] == 0 || !strings.Contains(f.Note, "it came back, counted as a failing run") {
				t.Fatalf("baseline signatures %v, note %q: want the hang counted", f.Baseline, f.Note)
			}
			if len(base.timeouts) < 2 || base.timeouts[0] != 0 || base.timeouts[1] == 0 {
				t.Fatalf("baseline run timeouts %v: want the second run of a hang with a longer timeout", base.timeouts)
			}
		})
	}
}

// crashOn is a kernel that crashes (a kernel report, no observation)
// whenever it runs program want.
type crashOn struct {
	agents.Target
	want string
}

func (c *crashOn) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if string(p.Format()) == c.want {
		return nil, &vm.KernelReportError{Title: "BUG: unable to handle page fault in copy_pte_range", Kind: "bug", Console: "[ 9.1] BUG: unable to handle page fault\n"}
	}
	return c.Target.Run(p, opt)
}

// A baseline that crashes on a fail_nth reproducer leaves no observation,
// so no fault site: a patched kernel that passes may have failed another
// allocation, and the claim is not confirmed (it was "fixed").
func TestFixSitesUnknown(t *testing.T) {
	f := claimRollbackFix(t, shiftKernel(t, "", 3), &crashOn{Target: shiftKernel(t, "", 0), want: rollbackPartial})
	if f.BaselineFailed == 0 || f.Status != FixUnconfirmed || !f.SitesUnknown || !strings.Contains(f.Reason, "reported no fault-injection site") {
		t.Fatalf("status %s (%s), baseline %d/%d failed, sites unknown %v: want unconfirmed", f.Status, f.Reason, f.BaselineFailed, f.BaselineRuns, f.SitesUnknown)
	}
}

// Aiming a corpus case (up to 25 runs) stops at the end of the replay
// phase's share: on a slow guest it used to run on past it, into the
// fuzz phase's time.
func TestCorpusAimWithinShare(t *testing.T) {
	dir := t.TempDir()
	corpusDir := rollbackCorpus(t, dir, "# site f0 fail_nth: sim: copy_page_range\n")
	r := Run(context.Background(), Config{
		Open: func() (agents.Target, error) {
			return &slowRuns{Target: shiftKernel(t, "", -20), d: 400 * time.Millisecond}, nil
		},
		Kernel: KernelIdentity{Target: "sim-async"}, Budget: 12 * time.Second, Seed: 1,
		Workdir: filepath.Join(dir, "w"), MinPrograms: 1, CorpusDirs: []string{corpusDir},
	})
	for _, ph := range r.Phases {
		if ph.Name == "replay" && ph.Seconds > ph.ShareSeconds+1 {
			t.Fatalf("the replay phase took %.1f s of a %.1f s share", ph.Seconds, ph.ShareSeconds)
		}
	}
	for _, c := range r.Corpus {
		if c.Name == "corpus/rollback-partial.ffz" && (c.Status != "skipped" || !strings.Contains(c.Note, "aiming stopped after")) {
			t.Fatalf("status %s, note %q: want skipped, aiming cut at the share's end", c.Status, c.Note)
		}
	}
}

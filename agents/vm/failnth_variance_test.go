package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// TestQEMUFailNthPoints measures how many failure points one fork of the
// same program has, run after run in one VM: fail_nth far beyond the end
// reads back what was left, so FailNth-Remaining is the fork's total. It
// logs the total beside what the executor's address space held at the fork
// (all VMAs, VMAs below the arena, VmPTE), which is what moves it
// (docs/rollback.md, "Replaying fail_nth").
func TestQEMUFailNthPoints(t *testing.T) {
	image, text := failNthSetup(t)
	const far = 100000
	p := mustParse(t, strings.Replace(text, "\nfork f0\n", "\nfork f0 fail_nth=100000\n", 1))
	tg := bootTarget(t, image, nil, 2*time.Minute, nil)
	const warmup = 3 // the executor's first programs still grow its page tables
	runs := 10
	if s := os.Getenv("FORKFUZZ_FAILNTH_RUNS"); s != "" {
		if n, err := time.ParseDuration(s + "s"); err == nil {
			runs = int(n.Seconds())
		}
	}
	totals := map[int]int{}
	for i := 0; i < warmup+runs; i++ {
		rb := runRollback(t, tg, p)
		if rb.Injection != obs.InjNotReached || rb.Remaining <= 0 {
			t.Fatalf("run %d: injection %q remaining %d (%s)", i, rb.Injection, rb.Remaining, rb.Reason)
		}
		total := far - rb.Remaining
		if i >= warmup {
			totals[total]++
		}
		t.Logf("run %d: %d failure points; VMAs %d (%d below the arena), VmPTE %d kB", i, total, rb.VMAsBefore, rb.VMAsBelowArena, rb.VmPTEBefore)
	}
	t.Logf("totals over %d runs after %d warm-up runs: %v", runs, warmup, totals)
	best, lo, hi := 0, 1<<30, 0
	for total, n := range totals {
		best = max(best, n)
		lo, hi = min(lo, total), max(hi, total)
	}
	// The goal is one count in 9 of 10 runs: reached 10/10 in the
	// helper's runs, 5/10 in a CI run (189 five times, then 186 five
	// times) and again 5/10 with the arena tried below the Go heap (the
	// same 189/186 around the 8th program, with the same 46 VMAs and
	// VmPTE: what moved was after the program's VMAs). It is reported,
	// not asserted; what is asserted is the spread, and
	// TestQEMUFailNthReplays asserts that a K inside the program's VMAs
	// replays. Before the
	// executor fixed the kernel's stack cache, the Go heap's page tables
	// and the PIDs (agents/executor/stackcache.go), 8 runs gave 160-166
	// points.
	t.Logf("the most common count covers %d of %d runs (goal: 9 in 10); spread %d..%d", best, runs, lo, hi)
	if hi-lo > 4 {
		t.Errorf("after %d warm-up runs, failure points range over %d..%d; want a spread of at most 4", warmup, lo, hi)
	}
}

// TestQEMUFailNthReplays is the replay a fail_nth finding depends on: the
// K that fails the fork's first `pte_alloc_one <- copy_huge_pmd` point
// (r0's huge PMD, unless a Go heap VMA copied before the arena has one)
// is found once, then run 10 more times in the same VM, as a finding's
// replays are; at least 9 must fail that same site (issue 14's goal).
// Both placements of the program's regions: "arena low" (below the Go
// heap: fork reaches the program's points first; the generator places
// 90% of fail_nth programs there) and the top. The runs follow each other
// without pauses: Linux does not rate-limit fault-injection reports
// (TestQEMUFaultReportBurst); a point that never reports is an allocation
// that asks for no warning (obs.Rollback.Silent). Measured: top K=79, low
// K=32, 10 of 10 replays each.
func TestQEMUFailNthReplays(t *testing.T) {
	image, text := failNthSetup(t)
	tg := bootTarget(t, image, nil, 2*time.Minute, nil)
	for _, arena := range []prog.Arena{prog.ArenaLow, prog.ArenaTop} {
		t.Run("arena-"+arena.String(), func(t *testing.T) {
			p := mustParse(t, text)
			p.Arena = arena
			failNthReplays(t, tg, p)
		})
	}
}

func failNthReplays(t *testing.T, tg *Target, p0 *prog.Program) {
	fork := p0.ForkOp(0)
	if fork < 0 {
		t.Fatal("the program has no fork f0")
	}
	run := func(k int) *obs.Rollback {
		t.Helper()
		p := p0.Clone()
		p.Ops[fork].FailNth = k
		rb := runRollback(t, tg, p)
		if rb.Injection == obs.InjInjected && rb.Site == "" && !rb.Silent {
			t.Errorf("fail_nth=%d: injected with no site and not marked silent", k)
		}
		return &rb
	}
	for i := 0; i < 3; i++ { // warm-up, as in TestQEMUFailNthPoints
		run(100000)
	}
	const site = "copy_huge_pmd"
	k := 0
	for n := 1; n <= 120 && k == 0; n++ {
		rb := run(n)
		if rb.Injection == obs.InjNotReached {
			t.Skipf("no failure point of the fork is in %s (fork passed all %d points): the guest gave r0 no huge PMD", site, n-1)
		}
		if rb.Silent {
			t.Logf("fail_nth=%d: silent (an allocation that asks for no warning)", n)
		} else {
			t.Logf("fail_nth=%d: %s", n, rb.Site)
		}
		if strings.Contains(rb.Site, site) {
			k = n
		}
	}
	if k == 0 {
		t.Skipf("none of the first 120 failure points is in %s: the guest gave r0 no huge PMD", site)
	}
	same, offPart := 0, 0
	var got []string
	for i := 0; i < 10; i++ {
		rb := run(k)
		first, _, _ := strings.Cut(rb.Site, " <- ")
		got = append(got, fmt.Sprintf("%s/%s", rb.Injection, first))
		if rb.Injection == obs.InjInjected && strings.Contains(rb.Site, site) {
			same++
		}
		// Below the Go heap the failure strikes in the program's part
		// (the executor's sentinel, agents/executor/sentinel.go); at the
		// top it is not measured. The sentinel reads a minor fault of
		// its thread as "the fork copied it"; the one misread seen had
		// a known cause, now fixed (docs/rollback.md), but a page
		// migration could still fault, so one miss is logged, two fail.
		if wantPart := map[prog.Arena]string{prog.ArenaLow: obs.PartProgram}[p0.Arena]; rb.Errno != 0 && rb.Part != wantPart {
			offPart++
			t.Logf("arena %v: fail_nth=%d failed the fork in part %q (%s), want %q", p0.Arena, k, rb.Part, rb.PartUnknown, wantPart)
		}
	}
	if offPart > 1 {
		t.Errorf("arena %v: fail_nth=%d failed the fork in another part than the program's in %d of 10 replays, want at most 1", p0.Arena, k, offPart)
	}
	t.Logf("arena %v: fail_nth=%d hit %s in %d of 10 replays: %v", p0.Arena, k, site, same, got)
	if same < 9 {
		t.Errorf("arena %v: fail_nth=%d failed %s in %d of 10 replays, want at least 9: %v", p0.Arena, k, site, same, got)
	}
}

// failNthSetup skips without QEMU or a reference kernel with fault
// injection, and returns the kernel image and corpus/rollback/vmas.ffz.
func failNthSetup(t *testing.T) (image, text string) {
	t.Helper()
	needQEMU(t)
	image = referenceKernel(t)
	if cfg, src, err := kernel.FindConfig(image); err == nil && !cfg.On("CONFIG_FAULT_INJECTION") {
		t.Skipf("%s has no CONFIG_FAULT_INJECTION (per %s)", image, src)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "corpus/rollback/vmas.ffz"))
	if err != nil {
		t.Fatal(err)
	}
	return image, string(b)
}

// runRollback runs p, whose one fork carries fail_nth, and returns that
// fork's rollback measurement.
func runRollback(t *testing.T, tg *Target, p *prog.Program) obs.Rollback {
	t.Helper()
	o, err := tg.Run(p, agents.Options{NoCover: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Rollbacks) != 1 {
		t.Fatalf("%d rollback measurements, want 1", len(o.Rollbacks))
	}
	return o.Rollbacks[0]
}

// TestQEMUFailNthInjects: fork f0 fail_nth=3 of the rollback corpus's
// vmas program fails the fork on the reference kernel, and the executor
// says where (the failslab report). A refactor once left fail_nth's
// value in a dead stack frame: the fork then succeeded, the read-back
// still said "injected", and only TestQEMUFailNthReplays' 15-minute hunt
// for a site noticed.
func TestQEMUFailNthInjects(t *testing.T) {
	image, text := failNthSetup(t)
	tg := bootTarget(t, image, nil, 2*time.Minute, nil)
	p := mustParse(t, strings.Replace(text, "\nfork f0\n", "\nfork f0 fail_nth=3\n", 1))
	rb := runRollback(t, tg, p)
	t.Logf("fail_nth=3: injection %s, errno %d, site %q", rb.Injection, rb.Errno, rb.Site)
	if rb.Injection != obs.InjInjected || rb.Errno == 0 || rb.Site == "" {
		t.Fatalf("fail_nth=3 did not fail the fork where it said: %+v", rb)
	}
}

// TestQEMUFaultReportBurst injects 24 faults within a second or two (a
// program whose 24 forks each fail their first failure point) and wants
// every one reported at the same site: Linux 6.1 does not rate-limit
// fault-injection reports (FAULT_ATTR_INITIALIZER's ratelimit_state is
// RATELIMIT_STATE_INIT_DISABLED), so a fault without a report is one in an
// allocation that asks for no warning (obs.Rollback.Silent), never a
// report the kernel dropped. Aiming (campaign.Aim) and the C reproducer
// rely on it: they step past a silent point at once.
func TestQEMUFaultReportBurst(t *testing.T) {
	image, _ := failNthSetup(t)
	const forks = 24
	var b strings.Builder
	b.WriteString("forkfuzz v1\nregion r0 anon-private pages=4 thp=off\nstore r0 off=0x0 count=4 stride=0x1000\n")
	for f := 0; f < forks; f++ {
		fmt.Fprintf(&b, "fork f%d fail_nth=1\nwait f%d\n", f, f)
	}
	p := mustParse(t, b.String())
	tg := bootTarget(t, image, nil, 2*time.Minute, nil)
	t0 := time.Now()
	o, err := tg.Run(p, agents.Options{NoCover: true})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	if len(o.Rollbacks) != forks {
		t.Fatalf("%d rollback measurements, want %d", len(o.Rollbacks), forks)
	}
	sites := map[string]int{}
	for _, rb := range o.Rollbacks {
		if rb.Injection != obs.InjInjected {
			t.Fatalf("fork f%d: injection %q (%s), want injected", rb.Fork, rb.Injection, rb.Reason)
		}
		site := rb.Site
		if rb.Silent {
			site = "(silent)"
		}
		sites[site]++
	}
	t.Logf("%d faults in one run of %v: %v", forks, took.Round(time.Millisecond), sites)
	if len(sites) != 1 || sites[""] > 0 || sites["(silent)"] > 0 {
		t.Errorf("the same failure point of %d forks gave sites %v; want one reported site for all", forks, sites)
	}
}

package vm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// TestQEMUFailNthPoints measures how many failure points one fork of the
// same program has, run after run in one VM: fail_nth far beyond the end
// reads back what was left, so FailNth-Remaining is the fork's total. It
// logs the total beside what the executor's address space held at the fork
// (all VMAs, VMAs below the arena, VmPTE), which is what moves it
// (docs/rollback.md, "Replaying fail_nth").
func TestQEMUFailNthPoints(t *testing.T) {
	needQEMU(t)
	image := referenceKernel(t)
	if cfg, src, err := kernel.FindConfig(image); err == nil && !cfg.On("CONFIG_FAULT_INJECTION") {
		t.Skipf("%s has no CONFIG_FAULT_INJECTION (per %s)", image, src)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "corpus/rollback/vmas.ffz"))
	if err != nil {
		t.Fatal(err)
	}
	const far = 100000
	p := mustParse(t, strings.Replace(string(b), "\nfork f0\n", "\nfork f0 fail_nth=100000\n", 1))
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
		o, err := tg.Run(p, agents.Options{NoCover: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Rollbacks) != 1 {
			t.Fatalf("%d rollback measurements, want 1", len(o.Rollbacks))
		}
		rb := o.Rollbacks[0]
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
	best := 0
	for _, n := range totals {
		best = max(best, n)
	}
	// Before the executor fixed the kernel's stack cache, the Go heap's
	// page tables and the PIDs (agents/executor/stackcache.go), 8 runs
	// gave 160-166 points, no two thirds of them the same.
	if best*10 < runs*9 {
		t.Errorf("after %d warm-up runs, the most common count of failure points covers %d of %d runs; want 9 in 10", warmup, best, runs)
	}
}

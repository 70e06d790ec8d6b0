package main

import (
	"strings"
	"testing"
)

// TestSweepSim sweeps every failure point of a fork on the simulated
// Async-fork kernel: clean without a mutant, and the rollback mutant is
// found with a reproducer that carries its fail_nth.
func TestSweepSim(t *testing.T) {
	code, out, errs := forkfuzz(t, "sweep", "--target", "sim", "--fork", "async", "../../corpus/rollback/vmas.ffz")
	if code != exitClean || !strings.Contains(out, "failure points") || !strings.Contains(out, "0 findings") ||
		!strings.Contains(out, "probes before the sweep (failure points per run, no fault): 9 9 9: settled") {
		t.Fatalf("clean: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	code, out, errs = forkfuzz(t, "sweep", "--target", "sim", "--fork", "async", "--mutant", "async-rollback-partial", "../../corpus/rollback/vmas.ffz")
	if code != exitFindings || !strings.Contains(out, "FAIL pagetable:pmd-rw-not-restored at fork f0 fail_nth=") || !strings.Contains(out, "fork f0 fail_nth=") {
		t.Fatalf("mutant: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

// TestSweepNativeWithoutFailNth: the host kernel has no fail-nth here;
// the sweep must say so and fail, never report a clean sweep.
func TestSweepNativeWithoutFailNth(t *testing.T) {
	code, out, errs := forkfuzz(t, "sweep", "--max", "2", "../../corpus/rollback/vmas.ffz")
	if strings.Contains(errs, "not available on this target") {
		if code != exitError || strings.Contains(out, "0 findings") {
			t.Fatalf("exit %d\nstdout: %s", code, out)
		}
		return
	}
	t.Skipf("the host kernel injects faults (exit %d): %s", code, out)
}

// TestSweepChildSim sweeps the child's side of a fork (--child) on the
// simulated Async-fork kernel: every failure point of the child's copy
// kills the child with SIGKILL and is clean; the rollback mutant is found
// with a reproducer that carries its childfail.
func TestSweepChildSim(t *testing.T) {
	code, out, errs := forkfuzz(t, "sweep", "--child", "--target", "sim", "--fork", "async", "../../corpus/rollback/vmas.ffz")
	if code != exitClean || !strings.Contains(out, "the child's side: 2 failure points before user space") || !strings.Contains(out, "child died 2 times (signal 9 x2)") || !strings.Contains(out, "0 findings") {
		t.Fatalf("clean: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	code, out, errs = forkfuzz(t, "sweep", "--child", "--target", "sim", "--fork", "async", "--mutant", "async-rollback-partial", "../../corpus/rollback/vmas.ffz")
	if code != exitFindings || !strings.Contains(out, "FAIL pagetable:pmd-rw-not-restored at fork f0 childfail=") || !strings.Contains(out, "fork f0 childfail=") {
		t.Fatalf("mutant: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/campaign/sweep"
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

// partLine says what a sweep learnt about the program's part.
func TestSweepPartLine(t *testing.T) {
	for _, tc := range []struct {
		fr   sweep.ForkResult
		want string
	}{
		{sweep.ForkResult{ProgramPoints: 56, ProgramPointsMax: 56, Parts: map[string]int{"program": 48, "runtime": 1}},
			"program's part: failure points 1..56 (fork's set-up, the executor's image, the program's regions: the same on every run); failed runs that stopped in the program's part 48, past it (the Go runtime's memory) 1, unmeasured 0"},
		{sweep.ForkResult{ProgramPoints: 49, ProgramPointsMax: 52, Parts: map[string]int{"program": 13, "runtime": 1}},
			"failure points 1..49 to 52 (--stride)"},
		{sweep.ForkResult{ProgramPoints: -1, ProgramPointsMax: -1, PartNote: "not measured: arena top", Parts: map[string]int{"": 7}},
			"program's part: unknown (not measured: arena top); failed runs that stopped in the program's part 0, past it (the Go runtime's memory) 0, unmeasured 7"},
		{sweep.ForkResult{ProgramPoints: -1, ProgramPointsMax: -1, Parts: map[string]int{"program": 7}},
			"program's part: unknown (no failed run stopped past the program's memory)"},
	} {
		if got := partLine(tc.fr); !strings.Contains(got, tc.want) {
			t.Errorf("partLine(%+v) = %q, want it to contain %q", tc.fr, got, tc.want)
		}
	}
}

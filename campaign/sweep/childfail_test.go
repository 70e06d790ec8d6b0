package sweep

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// childFailProg forks a parent with two whole PMDs of touched private
// pages (Async-fork defers those to the child's copy) and a partial one;
// the child writes and looks if it survives.
const childFailProg = `forkfuzz v1
region r0 anon-private pages=1024 thp=off
region r1 anon-private pages=8 thp=off
store r0 off=0x0 count=1024 stride=0x1000
store r1 off=0x0 count=8 stride=0x1000
fork f0
f0: store r0 off=0x8 count=4 stride=0x1000
f0: check
wait f0
store r0 off=0x10 count=1024 stride=0x1000
check
`

// TestQEMUChildFail boots the Async-fork kernel of ../shared/kernels once
// (--fork-impl async-fork, async_fork.seq_fix=1, the forkfuzz_pmd module
// built for it) and injects faults into the child's side of a fork: with
// childfail far beyond its failure points the child passes them all and
// runs; childfail=1 and the middle one strike the child's copy of the
// page tables, the child dies with SIGKILL before user space and the
// parent is intact (no finding: maps, content, PMD RW bits, page tables,
// write pass); the last one is the copy's or the harness's SIGSTOP
// notification. Runs whose child ran before it was armed are repeated.
func TestQEMUChildFail(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a QEMU VM: skipped under -short")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("qemu-system-x86_64 is missing under CI")
		}
		t.Skip("qemu-system-x86_64 not installed: cannot boot the Async-fork kernel")
	}
	image := os.Getenv("FORKFUZZ_ASYNCFORK_KERNEL")
	if image == "" {
		image = filepath.Join(repoRoot(t), "../shared/kernels/bzImage-6.1.192-asyncfork")
	}
	if _, err := os.Stat(image); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Async-fork kernel is missing under CI (../shared/kernels beside the clone): %v", err)
		}
		t.Skipf("no Async-fork kernel (%v): set FORKFUZZ_ASYNCFORK_KERNEL or provide ../shared/kernels/bzImage-6.1.192-asyncfork", err)
	}
	var mods []string
	ko := filepath.Join(repoRoot(t), "kernel/testdata/forkfuzz_pmd-6.1.192-g4e939dd86bb5.ko")
	if vmg, err := kernel.ModuleVermagic(ko); err == nil && strings.HasPrefix(vmg, "6.1.192-g4e939dd86bb5 ") {
		mods = append(mods, ko)
	} else {
		t.Logf("no forkfuzz_pmd module for this kernel (%v): PMD RW bits not checked", err)
	}
	raw, err := vm.New(vm.Config{Kernel: image, Modules: mods, Agent: staticAgent(t), Accel: "auto", Workdir: t.TempDir(),
		TargetFile: &vm.TargetFile{Cmdline: "async_fork.seq_fix=1"}, BootTimeout: 120 * time.Second, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	tg := &agents.ForkImplTarget{Target: raw, Profile: "async-fork"}
	defer tg.Close()
	p, err := prog.Parse([]byte(childFailProg))
	if err != nil {
		t.Fatal(err)
	}
	fi := p.ForkOp(0)
	run := func(k int) (*obs.Rollback, *judge.Verdict) {
		t.Helper()
		q := p.Clone()
		q.Ops[fi].ChildFail = k
		if k < 0 {
			q.Ops[fi].ChildFail, q.Ops[fi].ChildOOM = 0, uint64(-k)
		}
		for try := 1; ; try++ {
			o, err := tg.Run(q, agents.Options{})
			if err != nil {
				t.Fatalf("childfail=%d: %v", k, err)
			}
			v, err := judge.Judge(q, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(o.Rollbacks) != 1 || o.Rollbacks[0].Child == nil {
				t.Fatalf("childfail=%d: no record of the child's fault: %+v", k, o.Rollbacks)
			}
			rb := &o.Rollbacks[0]
			t.Logf("childfail=%d: %+v; parent: pmd %s, %d/%d PMDs after; write pass %d faults / %d pages; PageTables %d -> %d kB; issues %v",
				k, *rb.Child, rb.PMDSource, len(rb.PMDAfter), len(rb.PMDBefore), rb.Faults, rb.WritePages, rb.PageTablesBefore, rb.PageTablesAfter, v.Issues)
			for _, f := range o.ForkImpl.Forks {
				t.Logf("evidence f%d: %s, %d write-protected PMDs after the fork, %d after the wait", f.Fork, f.Verdict, f.PMDsWP, f.PMDsWPAfterWait)
			}
			if rb.Child.Ran == "" {
				return rb, v
			}
			// The child ran before it was armed: the run says nothing
			// about K (sweep does the same).
			if try == 8 {
				t.Fatalf("childfail=%d: the child ran before it was armed 8 times in a row", k)
			}
		}
	}

	// Count the child's failure points before user space.
	rb, v := run(prog.MaxFailNth)
	if c := rb.Child; c.Injection != obs.InjNotReached || c.Outcome != obs.ChildStopped || len(v.Issues) != 0 {
		t.Fatalf("probe: %+v, issues %v", c, v.Issues)
	}
	points := prog.MaxFailNth - rb.Child.Remaining
	t.Logf("the child passes %d failure points before user space", points)
	if points < 2 {
		t.Fatalf("the child has %d failure points before user space: under Async-fork its copy of the page tables allocates (PMD and PTE tables)", points)
	}
	for _, k := range []int{1, points / 2} {
		rb, v := run(k)
		c := rb.Child
		if c.Injection != obs.InjInjected || c.Phase != obs.PhaseCopy || c.Outcome != obs.ChildDied || c.Signal != 9 {
			t.Errorf("childfail=%d: %+v; want the fault injected in the child's copy and the child killed with SIGKILL", k, c)
		}
		if len(v.Issues) != 0 || !rb.Comparable {
			t.Errorf("childfail=%d: the parent is not judged intact (comparable %v): %v", k, rb.Comparable, v.Issues)
		}
		if len(mods) > 0 && strings.HasPrefix(rb.PMDSource, "absent") {
			t.Errorf("childfail=%d: PMD flags not read: %s", k, rb.PMDSource)
		}
	}
	// child_oom: a limit of one page above what the child's own memory
	// cgroup holds stops its copy of the page tables; a generous one does
	// not.
	rb, v = run(-4096)
	if c := rb.Child; c.Injection != obs.InjInjected || c.Outcome != obs.ChildDied || c.Signal != 9 || len(v.Issues) != 0 {
		t.Errorf("child_oom=4096: %+v, issues %v; want the limit reached and the child killed with SIGKILL, the parent intact", c, v.Issues)
	}
	rb, v = run(-(64 << 20))
	if c := rb.Child; c.Injection != obs.InjNotReached || c.Outcome != obs.ChildStopped || len(v.Issues) != 0 {
		t.Errorf("child_oom=64MiB: %+v, issues %v; want no limit reached, the child alive", c, v.Issues)
	}

	// The last point is the copy's last, or the harness's own: the
	// kernel allocates the SIGCHLD that tells the parent the child
	// stopped when none is pending in the parent yet (do_signal_stop);
	// the child survives that one. The count moves by a few between runs
	// (the executor's Go runtime mappings are part of what the child
	// copies: 35-38 here), so the point may not be reached at all.
	rb, v = run(points)
	switch c := rb.Child; {
	case len(v.Issues) != 0:
		t.Errorf("childfail=%d (the last): issues %v", points, v.Issues)
	case c.Phase == obs.PhaseCopy && c.Outcome == obs.ChildDied && c.Signal == 9:
	case c.Phase == obs.PhaseChild && strings.Contains(c.Site, "do_signal_stop") && c.Outcome == obs.ChildStopped:
	case c.Phase == obs.PhaseChild && c.Outcome == obs.ChildStopped && !strings.Contains(c.Site, " <- "):
		// The child survived outside the copy, and the kernel log held
		// the report's first line without its stack ("failslab"), so
		// which allocation it was cannot be told.
		t.Logf("childfail=%d: the child survived a fault outside the copy whose stack the log did not hold (%q)", points, c.Site)
	case c.Injection == obs.InjNotReached && c.Outcome == obs.ChildStopped:
		t.Logf("childfail=%d: not reached this time (%d points)", points, points-c.Remaining)
	default:
		t.Errorf("childfail=%d (the last): %+v; want the copy's last point (child killed), the SIGSTOP notification or no fault (child alive)", points, c)
	}
}

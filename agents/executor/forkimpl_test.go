package executor

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// On the host kernel (stock fork) the evidence says every fork of the main
// process copied eagerly: the probe page is shared with the held-off child.
// A child the scheduler ran before the evidence was read (SCHED_FIFO
// holds it off, but not always on a busy host: 3 runs in 30 here) makes
// that fork's verdict unknown, honestly; such a run is retried, up to 5.
func TestForkImplStockEvidence(t *testing.T) {
	var o *obs.Observation
	for try := 1; ; try++ {
		_, o = run(t, "forkfuzz v1\nregion r0 anon-private pages=600 thp=off\nregion r1 anon-shared pages=2\nstore r0 off=0x0 count=600 stride=0x1000\nstore r1 off=0x0 count=2 stride=0x1000\nfork f0\nfork f1\nf1: store r0 off=0x8 count=1\nwait f1\nwait f0\n", Options{ForkImpl: "stock"})
		if o.ForkImpl == nil || o.ForkImpl.Profile != "stock" || len(o.ForkImpl.Forks) != 2 {
			t.Fatalf("evidence %+v, want two forks", o.ForkImpl)
		}
		early := false
		for _, f := range o.ForkImpl.Forks {
			early = early || f.Verdict == obs.EvUnknown && strings.Contains(f.Why, "the child ran before the evidence was read")
		}
		if !early || try == 5 {
			break
		}
		t.Logf("run %d: a child ran before the evidence was read: again", try)
	}
	for _, f := range o.ForkImpl.Forks {
		if !f.Pinned {
			t.Skipf("this process cannot run SCHED_FIFO (%+v): a shared probe page proves nothing here", f)
		}
		if f.Verdict != obs.EvEager || f.Probe != "shared" || f.Pages != 600 || f.Exclusive != 0 {
			t.Errorf("f%d: %+v, want eager, probe shared, 600 private pages none exclusive (r1 is shared memory)", f.Fork, f)
		}
	}
	if err := obs.CheckForkImpl(o); err != nil {
		t.Error(err)
	}
	o.ForkImpl.Profile = "async-fork"
	if err := obs.CheckForkImpl(o); err == nil {
		t.Error("eager forks pass the async-fork check")
	}
	// Without a profile there is no evidence and no pinning.
	_, o = run(t, "forkfuzz v1\nregion r0 anon-private pages=1 thp=off\nfork f0\nwait f0\n", Options{})
	if o.ForkImpl != nil {
		t.Errorf("evidence without a profile: %+v", o.ForkImpl)
	}
}

// A profile whose knob the kernel lacks is a harness error naming it.
func TestForkImplMissingKnob(t *testing.T) {
	if slices.Contains(AvailableForkImpls(), "async-fork") {
		t.Skip("this kernel has Async-fork")
	}
	p, _ := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=1 thp=off\nfork f0\nwait f0\n"))
	_, err := executor(t).Run(p, Options{ForkImpl: "async-fork"})
	if err == nil || !strings.Contains(err.Error(), "does not have it (no /sys/fs/cgroup/memory.async_fork)") {
		t.Errorf("async-fork on a kernel without it: %v", err)
	}
	if _, err := os.Stat("/proc/self/use_odf"); err != nil {
		if _, err := executor(t).Run(p, Options{ForkImpl: "odf"}); err == nil {
			t.Error("odf on a kernel without /proc/PID/use_odf ran")
		}
	}
}

// childRanRaw reads schedstat without allocating: this process has run,
// a missing one cannot tell.
func TestChildRanRaw(t *testing.T) {
	var e forkEv
	if err := e.init(); err != nil {
		t.Fatal(err)
	}
	if s := e.childRanRaw(os.Getpid()); !strings.HasPrefix(s, "schedstat ") || len(strings.Fields(s)) != 4 {
		t.Errorf("this process: %q, want schedstat RUN WAIT SLICES", s)
	}
	if s := e.childRanRaw(1 << 30); s != "" {
		t.Errorf("a missing process: %q", s)
	}
	if n := testing.AllocsPerRun(20, func() { e.childRanRaw(1 << 30) }); n != 0 {
		t.Errorf("%v allocations per call", n)
	}
}

package sim

import (
	"fmt"
	"testing"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

const childFailProg = `forkfuzz v1
region r0 anon-private pages=1024 thp=off
region r1 anon-private pages=8 thp=off
store r0 off=0x0 count=1024 stride=0x1000
store r1 off=0x0 count=8 stride=0x1000
fork f0 childfail=%d
f0: store r0 off=0x8 count=4 stride=0x1000
f0: check
wait f0
store r0 off=0x10 count=1024 stride=0x1000
check
`

func childFailRun(t *testing.T, cfg Config, k int) (*obs.Rollback, *checker.Verdict) {
	t.Helper()
	p, err := prog.Parse([]byte(fmt.Sprintf(childFailProg, k)))
	if err != nil {
		t.Fatal(err)
	}
	o, _, err := Run(p, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Rollbacks) != 1 || o.Rollbacks[0].Child == nil {
		t.Fatalf("childfail=%d: no record of the child's fault: %+v", k, o.Rollbacks)
	}
	return &o.Rollbacks[0], checker.Check(p, o)
}

// TestChildFailSim: the Async-fork model's child copy has failure points;
// every one of them kills the child with SIGKILL and leaves the parent
// with every PMD writable again, which the checker passes; past the last
// one the child runs. Eager fork has none. The rollback-partial mutant
// (RW restored only under the VMA being copied) is caught.
func TestChildFailSim(t *testing.T) {
	async := Config{Mode: Async}
	rb, v := childFailRun(t, async, prog.MaxFailNth)
	if c := rb.Child; c.Injection != obs.InjNotReached || c.Outcome != obs.ChildStopped || len(v.Findings) != 0 {
		t.Fatalf("probe: %+v, %v", c, v.Findings)
	}
	points := prog.MaxFailNth - rb.Child.Remaining
	t.Logf("the simulated child's copy has %d failure points", points)
	if points < 2 {
		t.Fatalf("the simulated child copy has %d failure points, want the PTE tables of r0 at least", points)
	}
	for k := 1; k <= points; k++ {
		rb, v := childFailRun(t, async, k)
		c := rb.Child
		if c.Injection != obs.InjInjected || c.Phase != obs.PhaseCopy || c.Outcome != obs.ChildDied || c.Signal != 9 {
			t.Fatalf("childfail=%d: %+v", k, c)
		}
		if len(v.Findings) != 0 {
			t.Fatalf("childfail=%d: %v", k, v.Findings)
		}
		for _, e := range rb.PMDAfter {
			if !e.RW {
				t.Fatalf("childfail=%d: PMD %#x still write-protected after the failed copy", k, e.Addr)
			}
		}
	}
	if rb, _ := childFailRun(t, Config{Mode: Eager}, 1); rb.Child.Injection != obs.InjNotReached || rb.Child.Remaining != 1 {
		t.Fatalf("eager: %+v: the child has no failure point before user space", rb.Child)
	}
	if _, ok := LookupMutant("async-rollback-partial"); !ok {
		t.Fatal("no mutant async-rollback-partial")
	}
	caught := false
	for k := 1; k <= points && !caught; k++ {
		_, v := childFailRun(t, Config{Mode: Async, Mutant: "async-rollback-partial"}, k)
		for _, f := range v.Findings {
			if f.Signature == "pagetable:pmd-rw-not-restored" {
				caught = true
			}
		}
	}
	if !caught {
		t.Fatal("async-rollback-partial: no childfail point shows pmd-rw-not-restored")
	}
}

package sim

import (
	"reflect"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func mustParse(t *testing.T, s string) *prog.Program {
	t.Helper()
	p, err := prog.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Two VMAs with pages in 3 PMDs: the fast path write-protects them all.
const twoVMAs = `forkfuzz v1
region r0 anon-private pages=1024 thp=off
region r1 anon-private pages=16 thp=off
store r0 off=0x0 count=2 stride=0x200000
store r1 off=0x0 count=1 stride=0x8
fork f0
store r0 off=0x8 count=1 stride=0x8
wait f0
`

// TestAsyncPMDsWriteProtectedDuringCopy reads the parent's PMD RW bits
// through the page-table API while the copy is in flight and after it.
func TestAsyncPMDsWriteProtectedDuringCopy(t *testing.T) {
	p := mustParse(t, twoVMAs)
	k, _ := NewKernel(Config{Mode: Async})
	x := &machine{k: k, p: p, wordCap: DefaultWordCap, procs: make([]*proc, 2), memfds: make([]*File, len(p.Regions))}
	x.o = newObs(p)
	x.procs[0] = &proc{mm: k.newMM()}
	x.setup(x.procs[0].mm)
	mm := x.procs[0].mm
	x.exec(0)
	x.exec(1)
	x.exec(2) // fork: copy in flight (the scheduler's copier speed decides progress)
	for _, c := range k.copies {
		c.speed = 0 // hold the copier
	}
	wp := 0
	for _, e := range mm.PMDEntries() {
		if !e.RW {
			wp++
		}
	}
	if wp != 3 {
		t.Fatalf("after the fast path %d PMDs are write-protected, want 3: %+v", wp, mm.PMDEntries())
	}
	x.exec(3) // the parent writes under a write-protected PMD: PMD-level sync
	if e := mm.PMDEntries()[0]; !e.RW {
		t.Fatalf("the PMD the parent wrote is still write-protected")
	}
	x.exec(4) // wait: the copy completes first
	for _, e := range mm.PMDEntries() {
		if !e.RW {
			t.Fatalf("PMD %#x still write-protected after the copy", e.Addr)
		}
	}
	if len(k.Events()) != 0 {
		t.Fatal(k.Events())
	}
}

// TestAsyncRollbackRestoresRW injects an allocation failure at every
// position of the fork and checks the PMD RW bits; the rollback mutant must
// leave some write-protected, and the page-table oracle must say so.
func TestAsyncRollbackRestoresRW(t *testing.T) {
	p := mustParse(t, twoVMAs)
	failures, caught := 0, 0
	for nth := 1; nth <= 12; nth++ {
		for _, mutant := range []string{"", "async-rollback-partial"} {
			o, k, err := Run(p, Config{Mode: Async, Mutant: mutant, FailNth: nth}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(k.Injected()) > 0 && mutant == "" {
				failures++
			}
			sigs, _ := KernelFindings(o)
			bad := false
			for _, e := range k.mmEntries() {
				if !e.RW {
					bad = true
				}
			}
			if mutant == "" && (len(sigs) > 0 || bad) {
				t.Errorf("fail-nth %d: clean rollback left PMDs write-protected: %v", nth, o.Events)
			}
			if mutant != "" && len(sigs) > 0 {
				caught++
				if !strings.Contains(eventsText(o.Events), "pmd-rw") {
					t.Errorf("unexpected event: %v", o.Events)
				}
			}
			if is := Judge(p, o); mutant == "" && len(is) > 0 {
				t.Errorf("fail-nth %d: clean run judged bad: %v", nth, is)
			}
		}
	}
	if failures == 0 || caught == 0 {
		t.Fatalf("injected failures %d, rollback mutant caught %d times", failures, caught)
	}
}

// TestReplayExact: the same program on the same target replays exactly
// (same interleaving, same injected failures, same observation).
func TestReplayExact(t *testing.T) {
	for _, mode := range []Mode{Eager, OnDemand, Async} {
		tg, _ := NewTarget(Config{Mode: mode, SchedSeed: 99, FailRate: 0.3})
		for i, p := range benchPrograms(40) {
			a, _ := tg.Run(p, execOpts)
			b, _ := tg.Run(p, execOpts)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%v: program %d does not replay exactly", mode, i)
			}
		}
	}
}

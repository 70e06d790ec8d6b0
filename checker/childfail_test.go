package checker

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

const childFailProg = `forkfuzz v1
region r0 anon-private pages=1024 thp=off
store r0 off=0x0 count=1024 stride=0x1000
fork f0 childfail=2
f0: store r0 off=0x0 count=1 stride=0x8
f0: check
wait f0
`

// childFailObs is an observation of childFailProg in which the fault
// injected into the child's copy killed it with signal sig before user
// space: the child took no view and ran nothing; wait reaped it.
func childFailObs(t *testing.T, sig int) (*prog.Program, *obs.Observation) {
	t.Helper()
	p, err := prog.Parse([]byte(childFailProg))
	if err != nil {
		t.Fatal(err)
	}
	o := Expected(p)
	o.Ops[2], o.Ops[3] = obs.OpResult{}, obs.OpResult{}
	o.Ops[4].Ret = uint64(sig)
	var views []obs.View
	for _, v := range o.Views {
		if v.Proc == 0 {
			views = append(views, v)
		}
	}
	o.Views = views
	base := prog.Base(0)
	pmds := []obs.PMDEntry{{Addr: base, Present: true, RW: true}, {Addr: base + prog.PMDSize, Present: true, RW: true}}
	o.Rollbacks = []obs.Rollback{{
		Fork: 0, Op: 1, At: 4, Cause: obs.CauseChildFail, ChildrenBefore: []int{}, ChildrenAfter: []int{}, Comparable: true,
		MapsBefore: "m", MapsAfter: "m", DigestBefore: 7, DigestAfter: 7, PagesBefore: 1024, PagesAfter: 1024,
		WritePages: 1024, Faults: 1024, PageTablesBefore: 900, PageTablesAfter: 900, VmPTEBefore: 80, VmPTEAfter: 80,
		PMDSource: "module x", PMDBefore: pmds, PMDAfter: append([]obs.PMDEntry(nil), pmds...),
		Child: &obs.ChildFault{FailNth: 2, Injection: obs.InjInjected, Phase: obs.PhaseCopy,
			Site: "fail_page_alloc: pte_alloc_one <- __pte_alloc <- copy_pte_range", Outcome: obs.ChildDied, Signal: sig},
	}}
	return p, o
}

// TestChildFailKilled: a child killed with SIGKILL by its failed copy,
// the parent intact, is clean; the rollback oracle still judges the
// parent, and any other death of the child is reported.
func TestChildFailKilled(t *testing.T) {
	p, o := childFailObs(t, sigKILL)
	if v := Check(p, o); len(v.Findings) != 0 {
		t.Fatalf("clean: %v", v.Findings)
	}
	for _, c := range []struct {
		name string
		edit func(rb *obs.Rollback, o *obs.Observation)
		want string
	}{
		{"segfault", func(rb *obs.Rollback, o *obs.Observation) { rb.Child.Signal = 11; o.Ops[4].Ret = 11 }, "rollback:child-copy-signal"},
		{"exit", func(rb *obs.Rollback, o *obs.Observation) {
			rb.Child.Signal, rb.Child.Status = 0, 1
			o.Ops[4].Ret = 0x100
		}, "rollback:child-copy-signal"},
		{"no fault", func(rb *obs.Rollback, o *obs.Observation) {
			rb.Child.Injection, rb.Child.Remaining, rb.Child.Site, rb.Child.Phase = obs.InjNotReached, 3, "", ""
		}, "rollback:child-died"},
		{"pmd", func(rb *obs.Rollback, o *obs.Observation) { rb.PMDAfter[1].RW = false }, "pagetable:pmd-rw-not-restored"},
		{"leak", func(rb *obs.Rollback, o *obs.Observation) { rb.PageTablesAfter += 64 }, "rollback:pagetables-leak"},
		{"content", func(rb *obs.Rollback, o *obs.Observation) { rb.DigestAfter++ }, "rollback:content-changed"},
		{"maps", func(rb *obs.Rollback, o *obs.Observation) { rb.MapsAfter = "n" }, "rollback:maps-changed"},
		{"faults", func(rb *obs.Rollback, o *obs.Observation) { rb.Faults = 5000 }, "rollback:fault-storm"},
		{"child ran", func(rb *obs.Rollback, o *obs.Observation) {
			e := Expected(p)
			o.Ops[2] = e.Ops[2]
		}, "child-exit:killed-child-ran"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, o := childFailObs(t, sigKILL)
			c.edit(&o.Rollbacks[0], o)
			v := Check(p, o)
			got := sigs(v)
			if len(got) == 0 || got[0] != c.want {
				t.Fatalf("got %v, want %s first", got, c.want)
			}
			if c.want == "rollback:child-copy-signal" && !strings.Contains(v.Findings[0].Explanation, "childfail=2") {
				t.Fatalf("explanation does not name the injection: %s", v.Findings[0].Explanation)
			}
		})
	}
	// The same observation without the record: the child's missing views
	// and its status are findings (and the measurement is missing).
	p, o = childFailObs(t, sigKILL)
	o.Rollbacks = nil
	got := strings.Join(sigs(Check(p, o)), " ")
	if !strings.Contains(got, "rollback:missing") {
		t.Fatalf("no record: %v", got)
	}
}

// TestChildFailSurvived: a child that reached user space runs normally
// and is judged by its views; a fault that struck its copy without
// killing it is noted.
func TestChildFailSurvived(t *testing.T) {
	p, err := prog.Parse([]byte(childFailProg))
	if err != nil {
		t.Fatal(err)
	}
	o := Expected(p)
	o.Rollbacks = []obs.Rollback{{Fork: 0, Op: 1, At: 4, Cause: obs.CauseChildFail, PageTablesBefore: -1, PageTablesAfter: -1, VmPTEBefore: -1, VmPTEAfter: -1,
		PMDSource: "absent: test", Child: &obs.ChildFault{FailNth: 2, Injection: obs.InjInjected, Phase: obs.PhaseCopy, Outcome: obs.ChildStopped}}}
	v := Check(p, o)
	if len(v.Findings) != 0 {
		t.Fatalf("survived: %v", v.Findings)
	}
	if !strings.Contains(strings.Join(v.Notes, "\n"), "did not kill it") {
		t.Fatalf("no note on the surviving child: %v", v.Notes)
	}
}

// TestChildOOMKilled: a child whose memory cgroup limit killed it before
// user space (child_oom) is judged like a failed copy.
func TestChildOOMKilled(t *testing.T) {
	p, err := prog.Parse([]byte(strings.Replace(childFailProg, "childfail=2", "child_oom=0x1000", 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, o := childFailObs(t, sigKILL)
	o.Rollbacks[0].Child = &obs.ChildFault{ChildOOM: 0x1000, Injection: obs.InjInjected, Phase: obs.PhaseCopy, Outcome: obs.ChildDied, Signal: sigKILL,
		Memcg: "memory.events of the child's group: max +3, oom +1, oom_kill +1"}
	if v := Check(p, o); len(v.Findings) != 0 {
		t.Fatalf("clean: %v", v.Findings)
	}
	o.Rollbacks[0].Child.Injection = obs.InjNotReached
	v := Check(p, o)
	if got := sigs(v); len(got) == 0 || got[0] != "rollback:child-died" || !strings.Contains(v.Findings[0].Explanation, "child_oom=4096") {
		t.Fatalf("died within the limit: %v", v.Findings)
	}
}

// TestNewSpecCopyKilled: the spec of the run in which the child of a
// childfail fork dies of its failed copy expects the child's operations
// not to run and its wait to report SIGKILL; the ordinary spec expects the
// child to run and exit 0. The C reproducer follows the first once it
// sees the child die.
func TestNewSpecCopyKilled(t *testing.T) {
	p, err := prog.Parse([]byte(childFailProg))
	if err != nil {
		t.Fatal(err)
	}
	killed, err := NewSpecCopyKilled(p, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(killed.Findings) != 0 {
		t.Fatalf("the model rejects its own copy-killed run: %v", killed.Findings)
	}
	normal, err := NewSpec(p, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		s        *Spec
		childRan bool
		status   uint64
	}{{"copy killed", killed, false, sigKILL}, {"normal", normal, true, 0}} {
		e := c.s.Expected
		if e.Ops[2].Ran != c.childRan || e.Ops[3].Ran != c.childRan {
			t.Errorf("%s: the child's operations ran %v/%v, want %v", c.name, e.Ops[2].Ran, e.Ops[3].Ran, c.childRan)
		}
		if e.Ops[4].Ret != c.status {
			t.Errorf("%s: wait f0 returns %#x, want %#x", c.name, e.Ops[4].Ret, c.status)
		}
		childViews := 0
		for _, v := range e.Views {
			if v.Proc == 1 {
				childViews++
			}
		}
		if (childViews > 0) != c.childRan {
			t.Errorf("%s: %d views of the child, want them only if it ran", c.name, childViews)
		}
	}
	if _, err := NewSpecCopyKilled(p, "", 0); err == nil {
		t.Error("NewSpecCopyKilled accepts a store as the fork")
	}
}

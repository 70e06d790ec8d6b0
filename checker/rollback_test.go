package checker

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

const failedForkProg = `forkfuzz v1
region r0 anon-private pages=4 thp=default
store r0 off=0x0 count=4 stride=0x1000
fork f0 fail_nth=3
wait f0
`

// failedForkObs is a clean observation of failedForkProg in which the
// injected fault made fork fail with ENOMEM and nothing else changed.
func failedForkObs(t *testing.T) (*prog.Program, *obs.Observation) {
	t.Helper()
	p, err := prog.Parse([]byte(failedForkProg))
	if err != nil {
		t.Fatal(err)
	}
	o := Expected(p)
	o.Ops[1].Errno, o.Ops[1].Ret = eNOMEM, 0
	o.Ops[2].Errno, o.Ops[2].Ret = eCHILD, 0
	var views []obs.View
	for _, v := range o.Views {
		if v.Proc == 0 {
			views = append(views, v)
		}
	}
	o.Views = views
	base := prog.Base(0)
	maps := "3f0000000000-3f0000004000 rw-p 00000000 00:00 0 \n"
	o.Rollbacks = []obs.Rollback{{
		Fork: 0, Op: 1, At: 1, Cause: obs.CauseFailNth, FailNth: 3, Injection: obs.InjInjected,
		Setup: []string{"/sys/kernel/debug/failslab/ignore-gfp-wait=N"}, Errno: eNOMEM,
		ChildrenBefore: []int{}, ChildrenAfter: []int{}, Comparable: true,
		MapsBefore: maps, MapsAfter: maps, DigestBefore: 0x1234, DigestAfter: 0x1234, PagesBefore: 4, PagesAfter: 4,
		WritePages: 4, BaselineFaults: 0, Faults: 4, PassNanos: 1000,
		PageTablesBefore: 1000, PageTablesAfter: 1000, VmPTEBefore: 60, VmPTEAfter: 60,
		PMDSource: "module /sys/kernel/debug/forkfuzz_pmd/pmds",
		PMDBefore: []obs.PMDEntry{{Addr: base, Present: true, RW: true}, {Addr: base + prog.PMDSize, Present: true, Huge: true}},
		PMDAfter:  []obs.PMDEntry{{Addr: base, Present: true, RW: true}, {Addr: base + prog.PMDSize, Present: true, Huge: true}},
	}}
	return p, o
}

func sigs(v *Verdict) []string {
	var out []string
	for _, f := range v.Findings {
		out = append(out, f.Signature)
	}
	return out
}

// TestRollbackOracle shows that each kind of rollback failure is found,
// with the injected fault named, and that a clean failed fork passes.
func TestRollbackOracle(t *testing.T) {
	p, clean := failedForkObs(t)
	if v := Check(p, clean); len(v.Findings) != 0 {
		t.Fatalf("clean failed fork: %v", v.Findings)
	}
	for _, c := range []struct {
		name string
		edit func(o *obs.Observation, rb *obs.Rollback)
		want string // signature; "" for none
	}{
		{"eagain is documented", func(o *obs.Observation, rb *obs.Rollback) { rb.Errno, o.Ops[1].Errno = eAGAIN, eAGAIN }, ""},
		{"efault", func(o *obs.Observation, rb *obs.Rollback) { rb.Errno, o.Ops[1].Errno = eFAULT, eFAULT }, "rollback:errno"},
		{"child left", func(o *obs.Observation, rb *obs.Rollback) { rb.ChildrenAfter = []int{4242} }, "rollback:child-exists"},
		{"maps", func(o *obs.Observation, rb *obs.Rollback) {
			rb.MapsAfter = "3f0000000000-3f0000002000 rw-p 00000000 00:00 0 \n3f0000002000-3f0000004000 r--p 00000000 00:00 0 \n"
		}, "rollback:maps-changed"},
		{"content", func(o *obs.Observation, rb *obs.Rollback) { rb.DigestAfter++ }, "rollback:content-changed"},
		{"page lost", func(o *obs.Observation, rb *obs.Rollback) { rb.PagesAfter-- }, "rollback:content-changed"},
		{"fault storm", func(o *obs.Observation, rb *obs.Rollback) { rb.Faults = 4 + FaultSlack + 1 }, "rollback:fault-storm"},
		{"faults within bound", func(o *obs.Observation, rb *obs.Rollback) { rb.Faults = 4 + FaultSlack }, ""},
		{"page tables leak", func(o *obs.Observation, rb *obs.Rollback) { rb.PageTablesAfter += 24 }, "rollback:pagetables-leak"},
		{"parent's own tables grew", func(o *obs.Observation, rb *obs.Rollback) { rb.PageTablesAfter += 24; rb.VmPTEAfter += 24 }, ""},
		{"page tables unknown", func(o *obs.Observation, rb *obs.Rollback) { rb.PageTablesAfter, rb.PageTablesBefore = -1, 5000 }, ""},
		{"pmd rw not restored", func(o *obs.Observation, rb *obs.Rollback) { rb.PMDAfter[0].RW = false }, "pagetable:pmd-rw-not-restored"},
		{"pmd ro before, no other child", func(o *obs.Observation, rb *obs.Rollback) { rb.PMDBefore[0].RW, rb.PMDAfter[0].RW = false, false }, "pagetable:pmd-rw-not-restored"},
		{"pmd ro while another child may copy", func(o *obs.Observation, rb *obs.Rollback) {
			rb.PMDBefore[0].RW, rb.PMDAfter[0].RW = false, false
			rb.ChildrenBefore, rb.ChildrenAfter = []int{77}, []int{77}
		}, ""},
		{"huge pmd write-protected (copy-on-write)", func(o *obs.Observation, rb *obs.Rollback) { rb.PMDBefore[1].RW = true }, ""},
		{"pmd lost", func(o *obs.Observation, rb *obs.Rollback) { rb.PMDAfter = rb.PMDAfter[:1] }, "rollback:pmd-lost"},
		{"module absent", func(o *obs.Observation, rb *obs.Rollback) {
			rb.PMDSource, rb.PMDAfter = "absent: no module", []obs.PMDEntry{{Addr: prog.Base(0), Present: true}}
		}, ""},
		{"not comparable", func(o *obs.Observation, rb *obs.Rollback) { rb.Comparable = false; rb.DigestAfter++ }, ""},
		{"no measurement", func(o *obs.Observation, rb *obs.Rollback) { o.Rollbacks = nil }, "rollback:missing"},
		{"duplicate record", func(o *obs.Observation, rb *obs.Rollback) { o.Rollbacks = append(o.Rollbacks, *rb) }, "observation:rollback-record"},
		{"failed without injection", func(o *obs.Observation, rb *obs.Rollback) { rb.Injection, rb.Remaining = obs.InjNotReached, 5 }, "errno:fork"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, o := failedForkObs(t)
			c.edit(o, &o.Rollbacks[0])
			v := Check(p, o)
			got := sigs(v)
			if c.want == "" {
				if len(got) != 0 {
					t.Fatalf("findings %v, want none", v.Findings)
				}
				return
			}
			if len(got) != 1 || got[0] != c.want {
				t.Fatalf("findings %v, want exactly %s", v.Findings, c.want)
			}
			if c.want != "observation:rollback-record" && c.want != "errno:fork" && !strings.Contains(v.Findings[0].Explanation, "fork f0") {
				t.Fatalf("explanation does not name the fork: %s", v.Findings[0].Explanation)
			}
			if strings.HasPrefix(c.want, "rollback:") && c.want != "rollback:missing" && !strings.Contains(v.Findings[0].Explanation, "failure point 3 inside fork (fail_nth=3)") {
				t.Fatalf("explanation does not state the injected fault: %s", v.Findings[0].Explanation)
			}
		})
	}
}

// TestRollbackKilledChild judges a measurement taken after a killed child
// was reaped.
func TestRollbackKilledChild(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4\nstore r0 off=0x0 count=4 stride=0x1000\nfork f0\nkill f0\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	mk := func() *obs.Observation {
		o := Expected(p)
		o.Rollbacks = []obs.Rollback{{Fork: 0, Op: 1, At: 3, Cause: obs.CauseKill, ChildrenBefore: []int{}, ChildrenAfter: []int{}, Comparable: true,
			MapsBefore: "m", MapsAfter: "m", WritePages: 4, Faults: 4, PageTablesBefore: -1, PageTablesAfter: -1, VmPTEBefore: 8, VmPTEAfter: 8,
			PMDSource: "module x", PMDBefore: []obs.PMDEntry{{Addr: prog.Base(0), Present: true, RW: true}}, PMDAfter: []obs.PMDEntry{{Addr: prog.Base(0), Present: true, RW: true}}}}
		return o
	}
	if v := Check(p, mk()); len(v.Findings) != 0 {
		t.Fatalf("clean: %v", v.Findings)
	}
	o := mk()
	o.Rollbacks[0].PMDAfter[0].RW = false
	if got := sigs(Check(p, o)); len(got) != 1 || got[0] != "pagetable:pmd-rw-not-restored" {
		t.Fatalf("pmd: %v", got)
	}
	o = mk()
	o.Rollbacks[0].ChildrenAfter = []int{99}
	if got := sigs(Check(p, o)); len(got) != 1 || got[0] != "rollback:child-exists" {
		t.Fatalf("child: %v", got)
	}
	o = mk()
	o.Rollbacks[0].Faults = 1000
	if got := sigs(Check(p, o)); len(got) != 1 || got[0] != "rollback:fault-storm" {
		t.Fatalf("faults: %v", got)
	}
}

// TestPageTablesLeakWithOtherProcesses: PageTables is machine-wide, so the
// page tables of the program's other live processes must not be taken
// for a leak of the measured fork (issue 13: on the reference kernel,
// "fork f0; kill f0; fork f1; wait f0; wait f1" was flagged because f1's
// 192 kB were counted).
func TestPageTablesLeakWithOtherProcesses(t *testing.T) {
	const issue13 = "forkfuzz v1\nregion r0 anon-private pages=1 thp=default\nfork f0\nkill f0\nfork f1\nwait f0\nwait f1\n"
	for _, c := range []struct {
		name, prog string
		at         int // the wait of f0
		edit       func(o *obs.Observation, rb *obs.Rollback)
		want       string // signature; "" for none
		note       string // a note the verdict must carry
	}{
		{"sibling alive, not measured (older executor)", issue13, 3, func(o *obs.Observation, rb *obs.Rollback) {
			rb.PageTablesAfter += 192
		}, "", "not judged: the program's process f1 was alive"},
		{"sibling alive, its VmPTE measured", issue13, 3, func(o *obs.Observation, rb *obs.Rollback) {
			rb.PageTablesAfter += 192
			rb.OthersMeasured, rb.OthersVmPTEAfter, rb.OthersAfter = true, 192, []int{4242}
		}, "", ""},
		{"sibling alive, measured, PGD not in VmPTE", issue13, 3, func(o *obs.Observation, rb *obs.Rollback) {
			rb.PageTablesAfter += 192 + LeakSlackKB + OtherProcSlackKB
			rb.OthersMeasured, rb.OthersVmPTEAfter, rb.OthersAfter = true, 192, []int{4242}
		}, "", ""},
		{"sibling alive, measured, and a real leak", issue13, 3, func(o *obs.Observation, rb *obs.Rollback) {
			rb.PageTablesAfter += 192 + 40
			rb.OthersMeasured, rb.OthersVmPTEAfter, rb.OthersAfter = true, 192, []int{4242}
		}, "rollback:pagetables-leak", ""},
		{"sibling reaped before the measurement", "forkfuzz v1\nregion r0 anon-private pages=1 thp=default\nfork f0\nkill f0\nfork f1\nwait f1\nwait f0\n", 4,
			func(o *obs.Observation, rb *obs.Rollback) { rb.PageTablesAfter += 192 }, "rollback:pagetables-leak", ""},
		{"older sibling alive across both measurements", "forkfuzz v1\nregion r0 anon-private pages=1 thp=default\nfork f0\nfork f1\nkill f1\nwait f1\nwait f0\n", 3,
			func(o *obs.Observation, rb *obs.Rollback) {
				rb.Fork, rb.Op, rb.PageTablesAfter = 1, 1, rb.PageTablesAfter+64
			}, "", "not judged: the program's process f0 was alive"},
		{"sibling's fork failed: no process", issue13, 3, func(o *obs.Observation, rb *obs.Rollback) {
			o.Ops[2].Errno, o.Ops[2].Ret = eNOMEM, 0
			o.Ops[4].Errno, o.Ops[4].Ret = eCHILD, 0
			rb.PageTablesAfter += 192
		}, "rollback:pagetables-leak", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := prog.Parse([]byte(c.prog))
			if err != nil {
				t.Fatal(err)
			}
			o := Expected(p)
			o.Rollbacks = []obs.Rollback{{Fork: 0, Op: 0, At: c.at, Cause: obs.CauseKill, ChildrenBefore: []int{}, ChildrenAfter: []int{},
				MapsBefore: "m", MapsAfter: "m", WritePages: 1, Faults: 1, PageTablesBefore: 1000, PageTablesAfter: 1000, VmPTEBefore: 60, VmPTEAfter: 60,
				PMDSource: "absent: test"}}
			c.edit(o, &o.Rollbacks[0])
			v := Check(p, o)
			var got []string
			for _, f := range v.Findings {
				if f.Oracle == "rollback" || f.Oracle == "pagetable" {
					got = append(got, f.Signature)
				}
			}
			if c.want == "" && len(got) != 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
				t.Fatalf("rollback findings %v, want %q\n%s", got, c.want, v.Report())
			}
			if c.note != "" && !strings.Contains(strings.Join(v.Notes, "\n"), c.note) {
				t.Fatalf("notes %q lack %q", v.Notes, c.note)
			}
		})
	}
}

package judge

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

const testProg = "forkfuzz v1\nregion r0 anon-private pages=1\nstore r0 off=0x0\nfork f0\nwait f0\n"

func mustParse(t *testing.T, s string) *prog.Program {
	t.Helper()
	p, err := prog.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOracles: every kind of finding, from every target, reaches the
// verdict with the right typed oracle.
func TestOracles(t *testing.T) {
	p := mustParse(t, testProg)
	kr := &vm.KernelReportError{Title: "WARNING in copy_pte_range", Kind: "warning", Report: "WARNING: ...", Console: "console"}
	cases := []struct {
		name   string
		obs    func() *obs.Observation // nil: no observation
		err    error
		oracle checker.Oracle
		sig    string
		files  []string
	}{
		{name: "executor crash", err: &executor.CrashError{Status: "signal: killed"}, oracle: "executor-crash", sig: "executor-crash"},
		{name: "executor hang", err: &executor.CrashError{Hang: true}, oracle: "executor-hang", sig: "executor-hang"},
		{name: "kernel report", err: kr, oracle: "kernel-warning", sig: "kernel-warning/WARNING-in-copy_pte_range", files: []string{"console.txt", "kernel-report.txt"}},
		{name: "kernel report with an observation", obs: func() *obs.Observation { return checker.Expected(p) }, err: kr, oracle: "kernel-warning", sig: "kernel-warning/WARNING-in-copy_pte_range"},
		{name: "recorded event (from the wire)", err: agents.Record(kr), oracle: "kernel-warning", sig: "kernel-warning/WARNING-in-copy_pte_range", files: []string{"console.txt"}},
		{name: "wrapped event", err: fmt.Errorf("vm 1: %w", &executor.CrashError{}), oracle: "executor-crash", sig: "executor-crash"},
		{name: "lost store in the child", obs: func() *obs.Observation {
			o := checker.Expected(p)
			o.Views[0].Words, o.Views[0].Pages = nil, nil
			return o
		}, oracle: checker.OracleSnapshot},
		{name: "wrong errno", obs: func() *obs.Observation {
			o := checker.Expected(p)
			o.Ops[2].Errno = 12
			o.Ops[2].Ret = 0
			return o
		}, oracle: checker.OracleErrno},
		{name: "main process fault event", obs: func() *obs.Observation {
			o := checker.Expected(p)
			o.Events = append(o.Events, obs.NewEvent(obs.EvMainFault, "main process faulted: SIGSEGV"))
			return o
		}, oracle: checker.OracleCrash, sig: "crash:main-process-fault"},
		{name: "PMD RW event", obs: func() *obs.Observation {
			o := checker.Expected(p)
			o.Events = append(o.Events, obs.ForkEvent(obs.EvPMDRWNotRestored, 0, "sim: PMD still write-protected"))
			return o
		}, oracle: checker.OraclePageTable, sig: "pagetable:pmd-rw-not-restored"},
		{name: "write fault hang event", obs: func() *obs.Observation {
			o := checker.Expected(p)
			o.Events = append(o.Events, obs.NewEvent(obs.EvWriteFaultHang, "sim: would hang"))
			return o
		}, oracle: checker.OraclePageTable, sig: "pagetable:write-fault-hang"},
		{name: "unexpected view", obs: func() *obs.Observation {
			o := checker.Expected(p)
			o.Views = append(o.Views, obs.View{Proc: 7, At: obs.AtStart})
			return o
		}, oracle: checker.OracleUnexpectedView, sig: "unexpected-view"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o *obs.Observation
			if c.obs != nil {
				o = c.obs()
			}
			v, err := Judge(p, o, c.err)
			if err != nil {
				t.Fatalf("harness error: %v", err)
			}
			if v.OK() {
				t.Fatalf("no issue: %s", v.Report())
			}
			is := v.Issues[0]
			if is.Oracle != c.oracle {
				t.Errorf("oracle %q, want %q (%s)", is.Oracle, c.oracle, is.Signature)
			}
			if c.sig != "" && is.Signature != c.sig {
				t.Errorf("signature %q, want %q", is.Signature, c.sig)
			}
			if c.sig == "" && !strings.HasPrefix(is.Signature, string(c.oracle)+":") {
				t.Errorf("signature %q does not name oracle %q", is.Signature, c.oracle)
			}
			for _, f := range c.files {
				if _, ok := is.Files[f]; !ok {
					t.Errorf("file %s missing from %v", f, is.Files)
				}
			}
			if o == nil && v.Judged.Observation {
				t.Error("judged an observation that was not there")
			}
		})
	}
}

func TestHarnessErrorIsNeverAnIssue(t *testing.T) {
	p := mustParse(t, testProg)
	if v, err := Judge(p, nil, errors.New("qemu would not start")); err == nil {
		t.Fatalf("a harness error became a verdict: %+v", v)
	}
	if _, err := Judge(p, nil, nil); err == nil {
		t.Fatal("no observation and no error was judged")
	}
}

func TestCleanRunSaysWhatWasJudged(t *testing.T) {
	p := mustParse(t, testProg)
	v, err := Judge(p, checker.Expected(p), nil)
	if err != nil || !v.OK() {
		t.Fatalf("the model's own prediction is judged wrong: %v %s", err, v.Report())
	}
	if v.Judged.Ops != 3 || v.Judged.Views == 0 || v.Judged.Pages == 0 {
		t.Errorf("judged %+v", v.Judged)
	}
	if s := v.Summary(); !strings.Contains(s, "judged 3 ops") {
		t.Errorf("summary %q", s)
	}
}

// TestSkippedOpsReachTheUser: an operation the target skipped passes no
// oracle silently; the verdict lists it with its reason.
func TestSkippedOpsReachTheUser(t *testing.T) {
	p := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=1\nstore r0 off=0x0\nuffdwp r0 off=0x0 len=0x1000\nfork f0\nwait f0\n")
	o := checker.Expected(p)
	o.Ops[1] = obs.OpResult{Skip: "userfaultfd write-protect needs UFFD_FEATURE_WP_ASYNC (Linux 6.7+)"}
	v, err := Judge(p, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Skipped) != 1 || v.Skipped[0].Op != 1 || !strings.Contains(v.Skipped[0].Reason, "WP_ASYNC") {
		t.Fatalf("skipped %+v\n%s", v.Skipped, v.Report())
	}
	if !strings.Contains(v.Summary(), "1 ops skipped") || !strings.Contains(v.Report(), "skipped: op 1 `uffdwp") {
		t.Errorf("the user is not told:\n%s", v.Report())
	}
	var tl Tally
	tl.Add(v)
	if tl.SkippedOps["uffdwp"] != 1 || !strings.Contains(tl.String(), "uffdwp 1") {
		t.Errorf("tally %+v: %s", tl, tl.String())
	}
}

// TestInjectedFailureExcuses: the simulated kernel's injected fork failure
// excuses the fork's errno and the missing child, nothing else.
func TestInjectedFailureExcuses(t *testing.T) {
	p := mustParse(t, testProg)
	o := checker.Expected(p)
	o.Ops[1].Errno, o.Ops[1].Ret = 12, ^uint64(0)
	o.Ops[2].Errno, o.Ops[2].Ret = 10, ^uint64(0)
	var views []obs.View
	for _, w := range o.Views {
		if w.Proc == 0 {
			views = append(views, w)
		}
	}
	o.Views = views
	if v, _ := Judge(p, o, nil); v.OK() {
		t.Fatal("a failed fork with no injection passed")
	}
	o.Events = append(o.Events, obs.ForkEvent(obs.EvInjectedForkFail, 0, "sim: fork f0: allocation 3 failed"))
	v, _ := Judge(p, o, nil)
	if !v.OK() || v.Judged.Excused == 0 {
		t.Fatalf("injected failure not excused (excused %d):\n%s", v.Judged.Excused, v.Report())
	}
}

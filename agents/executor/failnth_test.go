package executor

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

const rollbackProg = `forkfuzz v1
region r0 anon-private pages=600 thp=on
region r1 anon-shared pages=8 thp=default
region r2 memfd-shared pages=8 thp=default
region r3 memfd-private pages=8 thp=default
store r0 off=0x0 count=600 stride=0x1000
store r1 off=0x8 count=8 stride=0x1000
store r2 off=0x10 count=8 stride=0x1000
store r3 off=0x18 count=4 stride=0x1000
fork f0%s
kill f0
wait f0
check
`

// TestRollbackAfterKill measures the parent around a fork whose child is
// killed before it runs: nothing may change, and the write pass takes at
// most one fault per page (copy-on-write after fork).
func TestRollbackAfterKill(t *testing.T) {
	_, o := run(t, strings.Replace(rollbackProg, "%s", "", 1), Options{})
	if len(o.Rollbacks) != 1 {
		t.Fatalf("want 1 rollback measurement, got %d (events %v)", len(o.Rollbacks), o.Events)
	}
	rb := o.Rollbacks[0]
	t.Logf("kill: pages %d, write pass %d pages, faults before %d after %d (%.2f ms), PageTables %d->%d kB, VmPTE %d->%d kB, children %v->%v, pmd %s",
		rb.PagesBefore, rb.WritePages, rb.BaselineFaults, rb.Faults, float64(rb.PassNanos)/1e6,
		rb.PageTablesBefore, rb.PageTablesAfter, rb.VmPTEBefore, rb.VmPTEAfter, rb.ChildrenBefore, rb.ChildrenAfter, rb.PMDSource)
	if rb.Cause != obs.CauseKill || rb.Errno != 0 || !rb.Comparable || rb.At != 6 {
		t.Fatalf("rollback %+v", rb)
	}
	if rb.MapsBefore == "" || rb.MapsBefore != rb.MapsAfter {
		t.Fatalf("maps before:\n%s\nafter:\n%s", rb.MapsBefore, rb.MapsAfter)
	}
	if rb.DigestBefore == 0 || rb.DigestBefore != rb.DigestAfter || rb.PagesBefore != rb.PagesAfter {
		t.Fatalf("content digest %#x/%d -> %#x/%d", rb.DigestBefore, rb.PagesBefore, rb.DigestAfter, rb.PagesAfter)
	}
	// 600 + 8 + 8 writable pages; the memfd-private region is skipped.
	if rb.WritePages != 616 {
		t.Fatalf("write pass touched %d pages, want 616", rb.WritePages)
	}
	if rb.Faults > int64(rb.WritePages) {
		t.Fatalf("write pass after the kill took %d faults for %d pages", rb.Faults, rb.WritePages)
	}
	if len(rb.ChildrenAfter) != 0 {
		t.Fatalf("children after the killed child was reaped: %v", rb.ChildrenAfter)
	}
}

// TestFailNthUnsupported checks that a kernel without fail-nth makes the
// executor say so and run the fork without injection, never pretend.
func TestFailNthUnsupported(t *testing.T) {
	if _, err := os.Stat(failNthPath); err == nil {
		t.Skip("this kernel has " + failNthPath + "; the QEMU test covers injection")
	}
	_, o := run(t, strings.Replace(rollbackProg, "%s", " fail_nth=1", 1), Options{})
	if len(o.Rollbacks) != 1 {
		t.Fatalf("want 1 rollback, got %d", len(o.Rollbacks))
	}
	rb := o.Rollbacks[0]
	if rb.Injection != obs.InjUnsupported || !strings.Contains(rb.Reason, failNthPath) || rb.Errno != 0 {
		t.Fatalf("rollback %+v", rb)
	}
	if !hasEvent(o.Events, obs.EvInjectNotApplied, "fail_nth=1 not injected") {
		t.Fatalf("no event says the fault was not injected: %v", o.Events)
	}
}

func TestParsePMDs(t *testing.T) {
	in := "# forkfuzz_pmd pid 42\n3f0000000000 pwh\n3f0000200000 p--\n0x3f0000400000 ---\n"
	got, err := ParsePMDs([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []obs.PMDEntry{{Addr: 0x3f0000000000, Present: true, RW: true, Huge: true}, {Addr: 0x3f0000200000, Present: true}, {Addr: 0x3f0000400000}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: got %+v want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"zz pw-\n", "3f0000000000 pw\n", "3f0000000000 xw-\n", "3f0000000000\n"} {
		if _, err := ParsePMDs([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// wpIn counts what countWPPMDs counts, from ParsePMDs's entries.
func wpIn(es []obs.PMDEntry, lo, hi uint64) int {
	n := 0
	for _, e := range es {
		if e.Addr >= lo && e.Addr < hi && e.Present && !e.RW && !e.Huge {
			n++
		}
	}
	return n
}

func TestCountWPPMDs(t *testing.T) {
	const lo, hi = 0x3f0000000000, 0x3f0000600000
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"# forkfuzz_pmd pid 42\n3f0000000000 pwh\n3f0000200000 p--\n3f0000400000 p--\n3f0000600000 p--\n7f0000000000 p--\n", 2},
		{"3effffe00000 p--\n3f0000000000 ---\n3f0000200000 pw-\n3f0000400000 p-h\n", 0},
		{"", 0},
		{"3f0000200000 p--", 1}, // no final newline
		{"3f0000200000 p-\n", -1},
		{"3f0000200000 x--\n", -1},
		{"3F0000200000 p--\n", -1}, // the module prints lower case
		{"0x3f0000200000 p--\n", -1},
		{"3f0000200000  p--\n", -1},
		{"11234567890abcdef0 p--\n", -1}, // 17 digits
	} {
		if got := countWPPMDs([]byte(tc.in), lo, hi); got != tc.want {
			t.Errorf("countWPPMDs(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func FuzzParsePMDs(f *testing.F) {
	f.Add([]byte("3f0000000000 pwh\n# c\n\n3f0000200000 ---\n"))
	f.Add([]byte("3f0000200000 p--\n3f0000400000 p--"))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := ParsePMDs(b)
		// The fast counter accepts a subset of what ParsePMDs does,
		// and must then agree with it.
		const lo, hi = 0x3f0000000000, 0x3f0000600000
		if n := countWPPMDs(b, lo, hi); n >= 0 {
			if err != nil {
				t.Fatalf("countWPPMDs accepts %q (%d) but ParsePMDs: %v", b, n, err)
			}
			if w := wpIn(es, lo, hi); n != w {
				t.Fatalf("countWPPMDs(%q) = %d, ParsePMDs counts %d", b, n, w)
			}
		}
	})
}

// TestOOMMemcg runs a fork under a memory cgroup limit far too small for
// it: fork must fail with ENOMEM and leave the parent as it was; with a
// generous limit it succeeds. Needs root and a cgroup v2 hierarchy where
// this process may get a group of its own (the VM guest has one).
func TestOOMMemcg(t *testing.T) {
	if _, err := memcgDir(); err != nil {
		t.Skipf("no memory cgroup for the executor here: %v", err)
	}
	_, o := run(t, strings.Replace(rollbackProg, "%s", " oom_memcg=0x1000", 1), Options{})
	if len(o.Rollbacks) != 1 {
		t.Fatalf("rollbacks: %+v, events %v", o.Rollbacks, o.Events)
	}
	rb := o.Rollbacks[0]
	t.Logf("oom_memcg=4096: errno %d, %s; setup %v", rb.Errno, rb.Memcg, rb.Setup)
	if rb.Cause != obs.CauseOOMMemcg || !rb.MemcgHit || rb.Errno != 12 {
		t.Fatalf("rollback %+v", rb)
	}
	if rb.MapsBefore != rb.MapsAfter || rb.DigestBefore != rb.DigestAfter || rb.Faults > int64(rb.WritePages)+32 {
		t.Fatalf("parent changed: %+v", rb)
	}
	_, o = run(t, strings.Replace(rollbackProg, "%s", " oom_memcg=0x10000000", 1), Options{})
	if rb := o.Rollbacks[0]; rb.Errno != 0 || rb.MemcgHit {
		t.Fatalf("oom_memcg=256MiB: %+v", rb)
	}
}

func TestParseFaultSite(t *testing.T) {
	log := []string{
		"something else",
		"FAULT_INJECTION: forcing a failure.",
		"name failslab, interval 1, probability 0, space 0, times -1",
		"CPU: 1 PID: 212 Comm: forkfuzz Not tainted 6.1.192 #1",
		"Call Trace:",
		" should_fail_ex.cold+0x5/0xa",
		" mm_alloc+0x1/0xa",
		"FAULT_INJECTION: forcing a failure.",
		"name failslab, interval 1, probability 0, space 0, times -1",
		"CPU: 1 PID: 212 Comm: forkfuzz Not tainted 6.1.192 #1",
		"Call Trace:",
		" <TASK>",
		" dump_stack_lvl+0x44/0x5c",
		" should_fail_ex.cold+0x5/0xa",
		" should_failslab+0x9/0x20",
		" kmem_cache_alloc+0x5a/0x300",
		" ? vm_area_dup+0x1e/0xa0",
		" vm_area_dup+0x1e/0xa0",
		" dup_mmap+0x1ad/0x6a0",
		" copy_process+0x1b2e/0x1c50",
		" kernel_clone+0x9b/0x3e0",
		" __do_sys_clone+0x66/0x90",
		" do_syscall_64+0x3b/0x90",
		" </TASK>",
	}
	want := "failslab: vm_area_dup <- dup_mmap <- copy_process <- kernel_clone <- __do_sys_clone"
	if got := ParseFaultSite(log); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if got := ParseFaultSite(log[:1]); got != "" {
		t.Fatalf("no report: %q", got)
	}
}

// TestRollbackCorruptionBites runs a real fork whose child is killed and
// falsifies the write pass: the checker must report the fault storm, and
// nothing on the honest run.
func TestRollbackCorruptionBites(t *testing.T) {
	text := strings.Replace(rollbackProg, "%s", "", 1)
	p, o := run(t, text, Options{})
	if v := checker.Check(p, o); len(v.Findings) != 0 {
		t.Fatalf("honest run: %v", v.Findings)
	}
	p, o = run(t, text, Options{Corrupt: "rollback-fault-storm"})
	v := checker.Check(p, o)
	if len(v.Findings) != 1 || v.Findings[0].Signature != "rollback:fault-storm" {
		t.Fatalf("corrupted run: %v", v.Findings)
	}
	if _, err := executor(t).Run(p, Options{Corrupt: "rollback-pmd-rw"}); err == nil && !strings.HasPrefix(o.Rollbacks[0].PMDSource, "absent") {
		t.Log("module present: rollback-pmd-rw applied")
	}
}

// TestWriteHangWatchdog makes the write pass after a fork hang for real
// (a page registered with userfaultfd that nobody serves) and expects the
// watchdog to end the executor with status 71 and say why on stderr.
func TestWriteHangWatchdog(t *testing.T) {
	var stderr testutil.SyncBuffer
	r := &Remote{
		Command: func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = []string{"FORKFUZZ_TEST_SERVE_EXECUTOR=1", "FORKFUZZ_ROLLBACK_WRITE_TIMEOUT=1s"}
			return cmd
		},
		Timeout: 30 * time.Second,
		Stderr:  &stderr,
	}
	defer r.Close()
	p, err := prog.Parse([]byte(strings.Replace(rollbackProg, "%s", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	o, err := r.Run(p, Options{Corrupt: "rollback-write-hang"})
	if err == nil {
		t.Skipf("the trap did not work here (no userfaultfd?): %v", o.Events)
	}
	var ce *CrashError
	if !errors.As(err, &ce) || ce.Hang || !strings.Contains(ce.Status, "71") {
		t.Fatalf("got %v, want the executor to exit with status 71; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "rollback:write-hang") {
		t.Fatalf("stderr does not say rollback:write-hang:\n%s", stderr.String())
	}
}

// hasEvent reports whether es has an event of kind k whose text contains s.
func hasEvent(es []obs.Event, k obs.EventKind, s string) bool {
	for _, e := range es {
		if e.Kind == k && strings.Contains(e.Text, s) {
			return true
		}
	}
	return false
}

// TestDescendantsVmPTE: the page tables of this process's children (and
// theirs) are found, so the rollback oracle can tell them from a leak.
func TestDescendantsVmPTE(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a child: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var kb int64
	var pids []int
	var ok bool
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if kb, pids, ok = descendantsVmPTE(); ok && len(pids) >= 2 {
			break
		}
	}
	if !ok {
		t.Skip("/proc/PID/task/TID/children is missing (CONFIG_PROC_CHILDREN off)")
	}
	if len(pids) < 2 || !slices.Contains(pids, cmd.Process.Pid) || kb <= 0 {
		t.Fatalf("descendants %v (want the shell %d and its sleep), VmPTE %d kB", pids, cmd.Process.Pid, kb)
	}
	t.Logf("%d descendants, %d kB of page tables", len(pids), kb)
}

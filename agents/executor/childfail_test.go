package executor

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

func TestPutPath(t *testing.T) {
	var b [64]byte
	putPath(b[:], 4242, "/task/#/fail-nth")
	if got := string(b[:clen(b[:])]); got != "/proc/4242/task/4242/fail-nth" {
		t.Fatalf("putPath: %q", got)
	}
}

// A fault report as the Async-fork kernel logs it (verbose=2) for the
// child's copy, and one for the SIGSTOP notification of the same child.
const copyFault = `FAULT_INJECTION: forcing a failure.
name fail_page_alloc, interval 1, probability 0, space 0, times 1
CPU: 1 PID: 212 Comm: forkfuzz Not tainted 6.1.192-g4e939dd86bb5 #1
Call Trace:
 <TASK>
 dump_stack_lvl+0x44/0x5c
 should_fail_ex.cold+0x5/0xa
 __alloc_pages+0x91/0x2f0
 pte_alloc_one+0x13/0x40
 __pte_alloc+0x15/0x100
 __copy_page_range+0x8e5/0xb30
 async_fork_copy_vma+0xb0/0x1d0
 async_fork_cpr_rest+0x71/0x120
 schedule_tail+0x4d/0x60
 ret_from_fork+0x9/0x30
 </TASK>`

const stopFault = `FAULT_INJECTION: forcing a failure.
name failslab, interval 1, probability 0, space 0, times 1
CPU: 0 PID: 212 Comm: forkfuzz Not tainted 6.1.192-g4e939dd86bb5 #1
Call Trace:
 <TASK>
 dump_stack_lvl+0x44/0x5c
 should_fail_ex.cold+0x5/0xa
 should_failslab+0x5/0x10
 kmem_cache_alloc+0x44/0x2f0
 __sigqueue_alloc+0x90/0x120
 __send_signal_locked+0x1a0/0x3b0
 do_notify_parent_cldstop+0x150/0x1e0
 do_signal_stop+0x110/0x220
 get_signal+0x6a0/0x8a0
 </TASK>`

func TestFaultPhase(t *testing.T) {
	for _, c := range []struct {
		log   string
		pid   int
		phase string
		site  string
	}{
		{copyFault, 212, obs.PhaseCopy, "fail_page_alloc: pte_alloc_one <- __pte_alloc <- __copy_page_range <- async_fork_copy_vma <- async_fork_cpr_rest <- schedule_tail"},
		{stopFault, 212, obs.PhaseChild, "failslab: __sigqueue_alloc <- __send_signal_locked <- do_notify_parent_cldstop <- do_signal_stop <- get_signal"},
		{copyFault, 213, obs.PhaseOther, ""},
		{"nothing here", 212, "", ""},
	} {
		lines := strings.Split(c.log, "\n")
		if got := FaultPhase(lines, c.pid); got != c.phase {
			t.Errorf("pid %d: phase %q, want %q\n%s", c.pid, got, c.phase, c.log)
		}
		if c.site != "" {
			if got := ParseFaultSite(lines); got != c.site {
				t.Errorf("site %q, want %q", got, c.site)
			}
		}
	}
}

// childProg is rollbackProg whose child runs (no kill).
func childProg(attr string) string {
	return strings.Replace(strings.Replace(rollbackProg, "%s", attr, 1), "kill f0\n", "f0: store r0 off=0x0 count=1 stride=0x8\n", 1)
}

// TestChildFailUnsupported: on a kernel without fail-nth the executor
// says the child's fault was not injected and the child runs normally.
func TestChildFailUnsupported(t *testing.T) {
	if _, err := os.Stat(failNthPath); err == nil {
		t.Skip("this kernel has " + failNthPath + "; the QEMU test covers injection")
	}
	p, o := run(t, childProg(" childfail=1"), Options{})
	if len(o.Rollbacks) != 1 || o.Rollbacks[0].Child == nil {
		t.Fatalf("rollbacks %+v", o.Rollbacks)
	}
	c := o.Rollbacks[0].Child
	if c.Injection != obs.InjUnsupported || !strings.Contains(c.Reason, failNthPath) {
		t.Fatalf("child fault %+v", c)
	}
	if !hasEvent(o.Events, obs.EvInjectNotApplied, "childfail=1 not injected") {
		t.Fatalf("no event says the fault was not injected: %v", o.Events)
	}
	if v := checker.Check(p, o); len(v.Findings) != 0 {
		t.Fatalf("findings: %v", v.Findings)
	}
}

// TestChildOOMStock: with child_oom on a stock kernel the child is born
// into its own memory cgroup, has nothing to copy before user space, is
// stopped there, moved back and runs; nothing is reached.
func TestChildOOMStock(t *testing.T) {
	if _, err := memcgDir(); err != nil {
		t.Skipf("no memory cgroup for the executor here: %v", err)
	}
	p, o := run(t, childProg(" child_oom=0x1000"), Options{})
	if len(o.Rollbacks) != 1 || o.Rollbacks[0].Child == nil {
		t.Fatalf("rollbacks %+v, events %v", o.Rollbacks, o.Events)
	}
	c := o.Rollbacks[0].Child
	t.Logf("child_oom=4096 on the host: %+v", c)
	if c.Injection == obs.InjUnsupported {
		t.Skipf("child_oom not applied here: %s", c.Reason)
	}
	if c.Outcome != obs.ChildStopped || !strings.Contains(c.Memcg, "memory.events of the child's group") {
		t.Fatalf("child fault %+v", c)
	}
	if v := checker.Check(p, o); len(v.Findings) != 0 {
		t.Fatalf("findings: %v", v.Findings)
	}
}

// The executor can read the kernel log while another task still prints
// its fault's stack (seen: a site of "failslab" alone): readReport reads
// again until the stack has ended, and never waits when no report began
// or the stack is whole.
func TestReadReportWaitsForStack(t *testing.T) {
	full := strings.Split(stopFault, "\n")
	for _, c := range []struct {
		name   string
		chunks [][]string // what successive reads return
		want   string
		reads  int
	}{
		{"whole at once", [][]string{full}, "failslab: __sigqueue_alloc <- __send_signal_locked <- do_notify_parent_cldstop <- do_signal_stop <- get_signal", 1},
		{"stack later", [][]string{full[:2], nil, full[2:7], full[7:]}, "failslab: __sigqueue_alloc <- __send_signal_locked <- do_notify_parent_cldstop <- do_signal_stop <- get_signal", 4},
		{"no report", [][]string{{"random: crng init done"}}, "", 1},
		{"stack never ends", [][]string{full[:2]}, "failslab", 51},
	} {
		t.Run(c.name, func(t *testing.T) {
			reads, slept := 0, time.Duration(0)
			read := func() []string {
				reads++
				if reads <= len(c.chunks) {
					return c.chunks[reads-1]
				}
				return nil
			}
			lines := readReport(read, func(d time.Duration) { slept += d })
			if got := ParseFaultSite(lines); got != c.want || reads != c.reads {
				t.Fatalf("site %q after %d reads; want %q after %d", got, reads, c.want, c.reads)
			}
			if slept > stackWait {
				t.Fatalf("waited %v, more than %v", slept, stackWait)
			}
		})
	}
}

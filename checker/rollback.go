package checker

// The rollback oracle (issue 6): a fork that fails, whether a fault was
// injected into it (prog.Op.FailNth, /proc/thread-self/fail-nth) or it ran
// out of memory, must leave the parent exactly as it was; so must a child
// killed before it ran. The executor measures the main process around such
// forks (obs.Rollback); this file judges the measurements.
//
// What each finding means:
//
//	rollback:errno               an injected fault made fork fail with an errno
//	                             fork(2) does not document for it (ENOMEM, EAGAIN)
//	rollback:child-exists        a child is left after a failed fork, or a
//	                             killed child is still there after it was reaped
//	rollback:maps-changed        /proc/self/maps of the arena differs
//	rollback:content-changed     the content digest of the arena differs
//	rollback:fault-storm         writing every page once took more minor faults
//	                             than pages (+ slack): a write that faults again
//	                             and again, what a PMD left write-protected
//	                             looks like from user space
//	rollback:pagetables-leak     PageTables (system) grew more than the parent's
//	                             own VmPTE: page tables of the dead child stayed
//	pagetable:pmd-rw-not-restored a PTE-table PMD of the parent that was writable
//	                             before the fork is write-protected after it
//	                             (forkfuzz_pmd module)
//	rollback:pmd-lost            a PMD present before the fork is gone after it
//	rollback:missing             a fork with fail_nth ran but the observation
//	                             has no measurement of it
//	rollback:child-copy-signal   a fault injected into the child's side of a
//	                             fork (childfail) killed it before user space
//	                             with a signal other than SIGKILL, or it exited
//	                             (a failed Async-fork copy kills with SIGKILL)
//	rollback:child-died          the child of a childfail fork died before
//	                             user space although no fault was injected
//	                             into it
//
// The write pass bound: after fork (failed or not), an anonymous private
// page whose PTE fork write-protected takes exactly one write fault (the
// kernel reuses or copies the page and maps it writable); a shared page is
// never write-protected by fork; a huge page takes one fault for 512 pages.
// So a pass that writes each page once takes at most one fault per page.
// More than WritePages+FaultSlack faults cannot come from copy-on-write.
// A write that never resolves hangs the pass; the executor's watchdog then
// ends the executor (a crash finding whose console line says
// rollback:write-hang).

import (
	"fmt"
	"slices"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Tolerances of the rollback oracle.
const (
	// FaultSlack allows for faults of the forking thread that are not
	// writes to arena pages (its stack, a signal frame).
	FaultSlack = 32
	// LeakSlackKB allows for page tables other processes allocated between
	// the measurements (the executor re-reads a few times and keeps the
	// smallest difference; a real leak stays).
	LeakSlackKB = 16
	// OtherProcSlackKB allows, per other process of the program alive at
	// a measurement, for page tables PageTables counts and its VmPTE does
	// not (its PGD).
	OtherProcSlackKB = 8
)

// forkPred is the errno prediction for fork operation i.
func (m *machine) forkPred(i int) pred {
	op := &m.p.Ops[i]
	if m.failFork == i+1 && !m.checking() {
		return certain(eNOMEM, "NewSpec: the injected fork fails")
	}
	if (op.FailNth == 0 && op.OOMMemcg == 0) || !m.checking() {
		return certain(eOK, "fork succeeds")
	}
	rb := rollbackOf(m.o, i)
	switch {
	case rb != nil && rb.MemcgHit:
		return unpredictable(fmt.Sprintf("fork reached its memory cgroup limit (oom_memcg=%d): it may fail; rollback:errno judges the errno", op.OOMMemcg))
	case rb == nil:
		return unpredictable("the observation has no measurement of the injected fork (see rollback:missing)")
	case rb.Injection == obs.InjInjected:
		return unpredictable(fmt.Sprintf("a fault was injected into fork (fail_nth=%d): it may fail or, where the kernel tolerates the failure, succeed; rollback:errno judges the errno", op.FailNth))
	case rb.Injection == obs.InjNotReached:
		return certain(eOK, fmt.Sprintf("fork succeeds: fail_nth=%d was never reached (fork passed %d failure points)", op.FailNth, op.FailNth-rb.Remaining))
	}
	if op.FailNth == 0 {
		return certain(eOK, "fork succeeds: it stayed within its memory cgroup limit ("+rb.Memcg+")")
	}
	return certain(eOK, "fork succeeds: fail_nth was not injected ("+rb.Reason+")")
}

func rollbackOf(o *obs.Observation, op int) *obs.Rollback {
	if o == nil {
		return nil
	}
	for i := range o.Rollbacks {
		if o.Rollbacks[i].Op == op {
			return &o.Rollbacks[i]
		}
	}
	return nil
}

// injectedWhere states the injected faults of rollback rb, for explanations.
func injectedWhere(p *prog.Program, rb *obs.Rollback) string {
	s := fmt.Sprintf("fork f%d (%s)", rb.Fork, opRef(p, rb.Op))
	switch {
	case rb.Cause == obs.CauseKill:
		s += fmt.Sprintf(", child killed with SIGKILL before it ran and reaped by %s", opRef(p, rb.At))
	case rb.Child != nil:
		c := rb.Child
		switch {
		case c.ChildOOM > 0 && c.Injection == obs.InjInjected:
			s += fmt.Sprintf(": the child's memory cgroup reached its limit before user space (child_oom=%d; the kernel's report: %s)", c.ChildOOM, phaseName(c.Phase))
			if c.Site != "" {
				s += " (" + c.Site + ")"
			}
		case c.ChildOOM > 0 && c.Injection == obs.InjNotReached:
			s += fmt.Sprintf(": the child stayed within its memory cgroup limit before user space (child_oom=%d)", c.ChildOOM)
		case c.ChildOOM > 0:
			s += fmt.Sprintf(": child_oom=%d not applied (%s)", c.ChildOOM, c.Reason)
		case c.Injection == obs.InjInjected:
			s += fmt.Sprintf(": a fault was injected at failure point %d of the child's context before user space (childfail=%d, struck in %s)", c.FailNth, c.FailNth, phaseName(c.Phase))
			if c.Site != "" {
				s += " (" + c.Site + ")"
			}
			if c.Silent {
				s += " (an allocation that asks for no warning: the kernel printed no report)"
			}
		case c.Injection == obs.InjNotReached:
			s += fmt.Sprintf(": childfail=%d was not reached (the child passed %d failure points before user space), no fault injected", c.FailNth, c.FailNth-c.Remaining)
		default:
			s += fmt.Sprintf(": childfail=%d not injected (%s)", c.FailNth, c.Reason)
		}
		if c.Memcg != "" {
			s += " [" + c.Memcg + "]"
		}
		switch {
		case c.Outcome == obs.ChildDied && c.Signal != 0:
			s += fmt.Sprintf("; the child died before user space, killed by signal %d, and was reaped by %s", c.Signal, opRef(p, rb.At))
		case c.Outcome == obs.ChildDied:
			s += fmt.Sprintf("; the child exited with code %d before user space", c.Status)
		case c.Outcome == obs.ChildStopped:
			s += "; the child reached user space"
		}
	case rb.Cause == obs.CauseOOMMemcg:
		s += fmt.Sprintf(": run under a memory cgroup limit, %s", map[bool]string{true: "which it reached", false: "which it did not reach"}[rb.MemcgHit])
	case rb.Injection == obs.InjInjected:
		s += fmt.Sprintf(": a fault was injected at failure point %d inside fork (fail_nth=%d)", rb.FailNth, rb.FailNth)
		if rb.Site != "" {
			s += " (" + rb.Site + ")"
		}
		if rb.Silent {
			s += " (an allocation that asks for no warning: the kernel printed no report)"
		}
	case rb.Injection == obs.InjNotReached:
		s += fmt.Sprintf(": fail_nth=%d was not reached (fork passed %d failure points), no fault injected", rb.FailNth, rb.FailNth-rb.Remaining)
	default:
		s += fmt.Sprintf(": fail_nth=%d not injected (%s)", rb.FailNth, rb.Reason)
	}
	if len(rb.Setup) > 0 {
		s += " [fault injection: " + strings.Join(rb.Setup, "; ") + "]"
	}
	if rb.Memcg != "" {
		s += " [" + rb.Memcg + "]"
	}
	if rb.Errno != 0 {
		s += fmt.Sprintf("; fork returned %s", errnoName(rb.Errno))
	}
	return s
}

// checkRollbacks judges every rollback measurement of the observation.
func (c *comparer) checkRollbacks() {
	seen := map[int]bool{}
	pmdNoted := false
	for k := range c.o.Rollbacks {
		rb := &c.o.Rollbacks[k]
		if rb.Op < 0 || rb.Op >= len(c.p.Ops) || c.p.Ops[rb.Op].Kind != prog.OpFork || c.p.Ops[rb.Op].Fork != rb.Fork ||
			rb.At < rb.Op || rb.At >= len(c.p.Ops) || seen[rb.Op] {
			c.col.add(Finding{Oracle: OracleObservation, Signature: "observation:rollback-record", View: -1, Op: -1, Region: -1,
				Explanation: fmt.Sprintf("rollback measurement %d names fork f%d at op %d (after op %d), which does not match the program", k, rb.Fork, rb.Op, rb.At)})
			continue
		}
		seen[rb.Op] = true
		if strings.HasPrefix(rb.Memcg, "unsupported") {
			c.col.note("fork f%d: oom_memcg was not applied, the fork ran without a memory limit: %s", rb.Fork, rb.Memcg)
		}
		if ch := rb.Child; ch != nil && ch.Injection == obs.InjUnsupported {
			c.col.note("fork f%d: the fault into the child's side (childfail=%d, child_oom=%d) was not applied, the child ran without it: %s", rb.Fork, ch.FailNth, ch.ChildOOM, ch.Reason)
		}
		if ch := rb.Child; ch != nil && ch.Ran != "" {
			c.col.note("fork f%d: the child had run before it was armed (%s): the fault may have missed the start of its copy", rb.Fork, ch.Ran)
		}
		if ch := rb.Child; ch != nil && ch.Injection == obs.InjInjected && ch.Outcome == obs.ChildStopped {
			c.col.note("fork f%d: the fault injected into the child (%s, %s) did not kill it: it reached user space, and its views judge what it got", rb.Fork, phaseName(ch.Phase), ch.Site)
		}
		if rb.Cause == obs.CauseFailNth && rb.Injection == obs.InjUnsupported {
			c.col.note("fork f%d: fail_nth=%d was not injected, the fork ran without it: %s", rb.Fork, rb.FailNth, rb.Reason)
		}
		if rb.MemoryNote != "" {
			c.col.note("fork f%d: content and write-pass checks: %s", rb.Fork, rb.MemoryNote)
		}
		if rb.PageTablesNote != "" && !pmdNoted {
			c.col.note("fork f%d: page-table leak check: %s", rb.Fork, rb.PageTablesNote)
		}
		if strings.HasPrefix(rb.PMDSource, "absent") && !pmdNoted {
			pmdNoted = true
			c.col.note("PMD flags were not read (%s); the rollback oracle relied on its behavioural checks", rb.PMDSource)
		}
		if others := othersAlive(c.p, c.o, rb); len(others) > 0 && !rb.OthersMeasured && rb.PageTablesBefore >= 0 {
			c.col.note("fork f%d: page-table leak check: not judged: %s alive at a measurement, and their page tables count in the machine-wide PageTables too (this executor did not measure them)",
				rb.Fork, forkList(others))
		}
		for _, f := range judgeRollback(c.p, c.o, rb) {
			c.col.add(f)
		}
	}
	for _, i := range c.p.Injected() {
		if c.o.Ops[i].Ran && !seen[i] && !c.m.racyFault {
			c.col.add(Finding{Oracle: OracleRollback, Signature: "rollback:missing", View: -1, Op: i, Region: -1,
				Explanation: fmt.Sprintf("%s ran with fault injection, but the observation has no rollback measurement of it: the injection and the parent's state after it cannot be judged", opRef(c.p, i))})
		}
	}
}

// othersAlive lists the forks, other than rb's, whose process may be alive
// at one of rb's measurements (before rb's fork, after op rb.At): forked
// (successfully, as far as the observation says) before it and not yet
// reaped. PageTables in /proc/meminfo counts their page tables as well.
func othersAlive(p *prog.Program, o *obs.Observation, rb *obs.Rollback) []int {
	var out []int
	for fi, op := range p.Ops {
		if op.Kind != prog.OpFork || op.Fork == rb.Fork {
			continue
		}
		if o != nil && fi < len(o.Ops) && (!o.Ops[fi].Ran || o.Ops[fi].Errno != 0) {
			continue // no process
		}
		wi := len(p.Ops)
		for j := fi + 1; j < len(p.Ops); j++ {
			if w := &p.Ops[j]; w.Kind == prog.OpWait && w.Fork == op.Fork {
				wi = j
				break
			}
		}
		atBefore := fi < rb.Op && wi > rb.Op
		atAfter := fi <= rb.At && wi > rb.At
		if atBefore || atAfter {
			out = append(out, op.Fork)
		}
	}
	return out
}

func forkList(fs []int) string {
	var s []string
	for _, f := range fs {
		s = append(s, fmt.Sprintf("f%d", f))
	}
	if len(s) == 1 {
		return "the program's process " + s[0] + " was"
	}
	return "the program's processes " + strings.Join(s, ", ") + " were"
}

// rollbackJudge judges one rollback measurement rb of p's run o.
type rollbackJudge struct {
	p      *prog.Program
	o      *obs.Observation
	rb     *obs.Rollback
	where  string // the fork and what was injected, for explanations
	failed bool   // the fork failed
	out    []Finding
}

func (j *rollbackJudge) add(oracle Oracle, sig, format string, args ...any) {
	j.out = append(j.out, Finding{Oracle: oracle, Signature: sig, Proc: 0, View: -1, Op: j.rb.Op, Region: -1,
		Explanation: j.where + ": " + fmt.Sprintf(format, args...)})
}

// judgeRollback returns the findings of one measurement.
func judgeRollback(p *prog.Program, o *obs.Observation, rb *obs.Rollback) []Finding {
	j := &rollbackJudge{p: p, o: o, rb: rb, where: injectedWhere(p, rb), failed: rb.Errno != 0}
	j.child()
	j.errnoAndChildren()
	j.comparable()
	j.pageTables()
	if !strings.HasPrefix(rb.PMDSource, "absent") && rb.PMDSource != "" {
		j.pmds()
	}
	return j.out
}

// child judges how the child died, if it did before user space.
func (j *rollbackJudge) child() {
	rb, add := j.rb, j.add
	if c := rb.Child; c != nil && c.Outcome == obs.ChildDied {
		switch {
		case c.Injection != obs.InjInjected:
			add("rollback", "rollback:child-died", "the child died before it reached user space (signal %d, exit code %d) although no fault was injected into it", c.Signal, c.Status)
		case c.Signal != sigKILL:
			how := fmt.Sprintf("it exited with code %d", c.Status)
			if c.Signal != 0 {
				how = fmt.Sprintf("it was killed by signal %d", c.Signal)
			}
			add("rollback", "rollback:child-copy-signal", "the child died before user space after the injected fault, but %s: a child whose copy of the page tables failed is killed with SIGKILL", how)
		}
	}
}

// errnoAndChildren judges the errno of a failed fork and the children
// the forking thread has after it.
func (j *rollbackJudge) errnoAndChildren() {
	rb, add, failed := j.rb, j.add, j.failed
	killed := rb.Cause == obs.CauseKill || rb.CopyKilled()
	if failed && (rb.Injection == obs.InjInjected || rb.MemcgHit) && rb.Errno != eNOMEM && rb.Errno != eAGAIN {
		add("rollback", "rollback:errno", "fork(2) fails with ENOMEM (a kernel structure could not be allocated) or EAGAIN, not %s", errnoName(rb.Errno))
	}
	if rb.ChildrenBefore != nil && rb.ChildrenAfter != nil && (failed || (killed && rb.Comparable)) {
		var extra []int
		for _, c := range rb.ChildrenAfter {
			if !slices.Contains(rb.ChildrenBefore, c) {
				extra = append(extra, c)
			}
		}
		if len(extra) > 0 {
			what := "the fork failed, yet the forking thread has new children"
			if !failed {
				what = "the killed child was reaped, yet the forking thread has children it did not have before the fork"
			}
			add("rollback", "rollback:child-exists", "%s: pids %v (/proc/thread-self/children before %v, after %v)", what, extra, rb.ChildrenBefore, rb.ChildrenAfter)
		}
	}
}

// comparable judges the parent's mappings and memory when nothing but
// the fork ran between the measurements, and the write pass's faults.
func (j *rollbackJudge) comparable() {
	rb, add := j.rb, j.add
	if rb.Comparable {
		if rb.MapsBefore != rb.MapsAfter {
			add("rollback", "rollback:maps-changed", "the parent's mappings changed; /proc/self/maps lines of the arena:\n%s", mapsDiff(rb.MapsBefore, rb.MapsAfter))
		}
		if rb.MemoryNote == "" && (rb.DigestBefore != rb.DigestAfter || rb.PagesBefore != rb.PagesAfter) {
			add("rollback", "rollback:content-changed", "the parent's memory changed: content digest %#x over %d readable pages before, %#x over %d pages after (nothing but the fork ran in between)",
				rb.DigestBefore, rb.PagesBefore, rb.DigestAfter, rb.PagesAfter)
		}
	}
	if rb.Faults > int64(rb.WritePages)+FaultSlack {
		add("rollback", "rollback:fault-storm", "writing each of %d pages once took %d minor faults (the same pass before the fork took %d; copy-on-write allows at most one per page, +%d slack): writes fault again and again, as under a PMD whose RW bit was not restored",
			rb.WritePages, rb.Faults, rb.BaselineFaults, FaultSlack)
	}
}

// pageTables judges the page tables the system holds after the fork
// against the parent's (and the other processes').
func (j *rollbackJudge) pageTables() {
	p, o, rb, add, failed := j.p, j.o, j.rb, j.add, j.failed
	others := othersAlive(p, o, rb)
	if rb.PageTablesBefore >= 0 && rb.PageTablesAfter >= 0 && rb.VmPTEBefore >= 0 && rb.VmPTEAfter >= 0 && (len(others) == 0 || rb.OthersMeasured) {
		// PageTables is machine-wide: what the program's other live
		// processes hold (a sibling forked in between, say) is theirs,
		// not a leak of this fork.
		leak := (rb.PageTablesAfter - rb.PageTablesBefore) - (rb.VmPTEAfter - rb.VmPTEBefore)
		slack := int64(LeakSlackKB)
		othersText := ""
		if rb.OthersMeasured {
			leak -= rb.OthersVmPTEAfter - rb.OthersVmPTEBefore
			slack += int64(OtherProcSlackKB * max(len(others), len(rb.OthersAfter)))
			othersText = fmt.Sprintf(" and the program's other processes' VmPTE from %d kB to %d kB", rb.OthersVmPTEBefore, rb.OthersVmPTEAfter)
		}
		if leak > slack {
			add("rollback", "rollback:pagetables-leak", "PageTables in /proc/meminfo went from %d kB to %d kB while the parent's VmPTE went from %d kB to %d kB%s: %d kB of page tables outlived the %s (tolerance %d kB)",
				rb.PageTablesBefore, rb.PageTablesAfter, rb.VmPTEBefore, rb.VmPTEAfter, othersText, leak, map[bool]string{true: "failed fork", false: "child"}[failed], slack)
		}
	}
}

// pmds judges the parent's PMD entries: write-protected ones that no
// copy can still need, and ones that are gone.
func (j *rollbackJudge) pmds() {
	p, rb, add, failed := j.p, j.rb, j.add, j.failed
	before := map[uint64]obs.PMDEntry{}
	for _, e := range rb.PMDBefore {
		before[e.Addr] = e
	}
	noOthers := rb.ChildrenAfter != nil && len(rb.ChildrenAfter) == 0
	// Another fork of the main process made between this fork and
	// the measurement, whose child is still unreaped, may be copying
	// (Async-fork keeps those PMDs write-protected meanwhile).
	laterCopy := laterForkAlive(p, rb)
	var ro, lost []string
	after := map[uint64]bool{}
	for _, e := range rb.PMDAfter {
		after[e.Addr] = true
		if !e.Present || e.Huge || e.RW {
			continue
		}
		b, ok := before[e.Addr]
		wasRW := ok && b.Present && !b.Huge && b.RW
		if (wasRW || noOthers) && !laterCopy {
			ro = append(ro, fmt.Sprintf("%#x", e.Addr))
		}
	}
	if rb.Comparable {
		for _, e := range rb.PMDBefore {
			if e.Present && !after[e.Addr] {
				lost = append(lost, fmt.Sprintf("%#x", e.Addr))
			}
		}
	}
	if len(ro) > 0 {
		add("pagetable", "pagetable:pmd-rw-not-restored", "%d PMD entries of the parent that map PTE tables are write-protected after the %s (%s): %s; no copy of the parent's page tables can still be in flight for them",
			len(ro), map[bool]string{true: "failed fork", false: "child was reaped"}[failed], rb.PMDSource, strings.Join(ro, " "))
	}
	if len(lost) > 0 {
		add("rollback", "rollback:pmd-lost", "%d PMD entries of the parent present before the fork are gone after it (%s): %s", len(lost), rb.PMDSource, strings.Join(lost, " "))
	}
}

// phaseName says where a child's fault struck (obs.ChildFault.Phase).
func phaseName(ph string) string {
	switch ph {
	case obs.PhaseCopy:
		return "the child's copy of the page tables"
	case obs.PhaseChild:
		return "the child's context, outside the page-table copy"
	case obs.PhaseOther:
		return "another task's context (the kernel log names another pid)"
	}
	return "a place the kernel log did not report"
}

// laterForkAlive reports whether a fork of the main process after rb's
// fork and before its measurement has a child not yet reaped when it was
// taken.
func laterForkAlive(p *prog.Program, rb *obs.Rollback) bool {
	for j := rb.Op + 1; j < rb.At && j < len(p.Ops); j++ {
		op := &p.Ops[j]
		if op.Kind != prog.OpFork || op.Proc != 0 {
			continue
		}
		reaped := false
		for k := j + 1; k < rb.At && k < len(p.Ops); k++ {
			if w := &p.Ops[k]; w.Kind == prog.OpWait && w.Fork == op.Fork && w.Proc == 0 {
				reaped = true
			}
		}
		if !reaped {
			return true
		}
	}
	return false
}

// mapsDiff lists the lines only in a ("-") or only in b ("+").
func mapsDiff(a, b string) string {
	la, lb := strings.Split(strings.TrimSpace(a), "\n"), strings.Split(strings.TrimSpace(b), "\n")
	var out []string
	for _, l := range la {
		if !slices.Contains(lb, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range lb {
		if !slices.Contains(la, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

package sim

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Fault injection by program (prog.Op.FailNth) and the rollback
// measurements the real executor takes (obs.Rollback), from the simulated
// page tables: the PMD flags of the main process before the fork and after
// it failed or after its child was reaped, and the children that exist.
// The simulated kernel counts its page-table and VMA allocations as
// failure points (kernel.go: alloc), so fail_nth=K fails the K-th of them.
// Content, maps, faults and page-table counters are not simulated here
// (the view oracles judge content); WritePages is 0 and counters are -1.

// rollbackSetup is what an observation names as the injection mechanism.
const rollbackSetup = "sim: fail-nth counts page-table and VMA allocations of the fork"

// noMemcg says why oom_memcg is not applied here.
const noMemcg = "the simulated kernel has no memory cgroups"

// startInjection arms fork f's allocation context with its program
// fail_nth (it overrides Config.FailNth) and takes the "before" part.
func (x *machine) startInjection(parent, f int, ctx *allocCtx) {
	i := x.p.ForkOp(f)
	if parent != 0 || i < 0 {
		return
	}
	op := &x.p.Ops[i]
	kill := false
	for _, o := range x.p.Ops {
		if o.Kind == prog.OpKill && o.Fork == f && o.Proc == 0 {
			kill = true
		}
	}
	if op.FailNth == 0 && op.OOMMemcg == 0 && op.ChildFail == 0 && op.ChildOOM == 0 && !kill {
		return
	}
	rb := &obs.Rollback{Fork: f, Op: i, At: i, Cause: obs.CauseKill, FailNth: op.FailNth,
		PageTablesBefore: -1, PageTablesAfter: -1, VmPTEBefore: -1, VmPTEAfter: -1}
	if op.FailNth > 0 {
		rb.Cause = obs.CauseFailNth
		rb.Setup = []string{rollbackSetup}
		ctx.failAt = op.FailNth
	}
	if op.OOMMemcg > 0 {
		// Measured as the executor measures a fork whose limit it could
		// not set up: said, and the fork runs without it.
		if rb.Cause == obs.CauseKill {
			rb.Cause = obs.CauseOOMMemcg
		}
		rb.Memcg = "unsupported: " + noMemcg
		x.o.Events = append(x.o.Events, obs.ForkEvent(obs.EvInjectNotApplied, f, "fork f%d: oom_memcg=%d not applied, the fork ran without a memory limit: %s", f, op.OOMMemcg, noMemcg))
	}
	childFailRollback(op, rb)
	rb.ChildrenBefore = x.liveChildren()
	rb.PMDSource, rb.PMDBefore = x.pmds()
	if x.rb == nil {
		x.rb = map[int]*obs.Rollback{}
	}
	x.rb[f] = rb
}

// forked finishes the injection part once fork f returned errno.
func (x *machine) forked(f int, ctx *allocCtx, errno int) {
	rb := x.rb[f]
	if rb == nil {
		return
	}
	rb.Errno = errno
	if rb.Cause == obs.CauseFailNth {
		switch {
		case ctx.failed:
			rb.Injection = obs.InjInjected
		case ctx.n < ctx.failAt:
			// Async-fork's background copy may still reach it; the
			// count is final only when the copy is done (reaped).
			rb.Injection, rb.Remaining = obs.InjNotReached, ctx.failAt-ctx.n
		}
	}
	if errno != 0 {
		x.rollbackAfter(f, rb.Op)
	}
}

// reaped takes the "after" part once the child of fork f was reaped.
func (x *machine) reaped(f int) {
	rb := x.rb[f]
	if rb == nil || rb.Errno != 0 {
		return
	}
	if c := x.procs[f+1]; c != nil && c.copy != nil && rb.Cause == obs.CauseFailNth {
		ctx := c.copy.ctx
		if ctx.failed {
			rb.Injection, rb.Remaining = obs.InjInjected, 0
		} else {
			rb.Injection, rb.Remaining = obs.InjNotReached, ctx.failAt-ctx.n
		}
	}
	at := rb.Op
	for j, op := range x.p.Ops {
		if op.Kind == prog.OpWait && op.Fork == f && op.Proc == 0 {
			at = j
		}
	}
	x.rollbackAfter(f, at)
}

func (x *machine) rollbackAfter(f, at int) {
	rb := x.rb[f]
	delete(x.rb, f)
	rb.At = at
	rb.ChildrenAfter = x.liveChildren()
	_, rb.PMDAfter = x.pmds()
	x.o.Rollbacks = append(x.o.Rollbacks, *rb)
}

// liveChildren lists the fake pids of the main process's children that
// exist (forked, not failed, not reaped).
func (x *machine) liveChildren() []int {
	out := []int{}
	for f := 0; f < len(x.procs)-1; f++ {
		c := x.procs[f+1]
		if c == nil || c.failed || c.mm == nil || c.mm.dead {
			continue
		}
		if op := x.p.ForkOp(f); op >= 0 && x.p.Ops[op].Proc == 0 {
			out = append(out, int(Pid(f)))
		}
	}
	return out
}

// pmds returns the main process's PMD entries inside the arena. Under
// On-demand-fork a PMD over a shared PTE table is read-only by design
// (also after the child is gone, until the next write takes the table
// back), so the RW check does not apply and no flags are reported.
func (x *machine) pmds() (string, []obs.PMDEntry) {
	if x.k.cfg.Mode == OnDemand {
		return "absent: on-demand-fork keeps PMDs of shared PTE tables read-only by design; the PMD RW check applies to eager and async fork", nil
	}
	var out []obs.PMDEntry
	for _, e := range x.procs[0].mm.PMDEntries() {
		if prog.InArena(e.Addr) {
			out = append(out, obs.PMDEntry{Addr: e.Addr, Present: true, RW: e.RW, Huge: e.Huge})
		}
	}
	return fmt.Sprintf("simulated page tables (%v)", x.k.cfg.Mode), out
}

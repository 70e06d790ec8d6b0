package sim

import (
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Fault injection into the child's side of a fork (prog.Op.ChildFail),
// as the executor does it (agents/executor childfail.go): the child's own
// fail-nth counts the allocations of its Async-fork copy of the parent's
// page tables, and the parent waits right after the fork until the child
// reached user space or died; a failed copy gives the parent's PMDs their
// RW bit back and kills the child with SIGKILL. Under eager fork and
// On-demand-fork the child has no failure point before user space.

// childFailSetup is what an observation names as the injection mechanism.
const childFailSetup = "sim: childfail counts the allocations of the child's Async-fork copy"

// childFail runs the child's side of fork f (operation i) with its
// childfail, right after the fork succeeded, and records it in the
// fork's rollback measurement.
func (x *machine) childFail(i, f int) {
	op := &x.p.Ops[i]
	rb := x.rb[f]
	c := x.procs[f+1]
	if rb == nil || c == nil {
		return
	}
	if op.ChildOOM > 0 {
		rb.Child = &obs.ChildFault{ChildOOM: op.ChildOOM, Injection: obs.InjUnsupported, Outcome: obs.ChildStopped,
			Reason: "the simulated kernel does not model memory cgroups: child_oom was not applied"}
		return
	}
	if op.ChildFail == 0 {
		return
	}
	cf := &obs.ChildFault{FailNth: op.ChildFail}
	rb.Child = cf
	ctx := &allocCtx{failAt: op.ChildFail}
	if cp := c.copy; cp != nil && !cp.done {
		cp.childCtx = ctx
		x.k.runCopy(cp)
	}
	switch {
	case ctx.failed:
		cf.Injection, cf.Phase = obs.InjInjected, obs.PhaseCopy
		if c.copy != nil && c.copy.err != nil {
			cf.Site = "sim: " + c.copy.err.Error()
		}
	default:
		cf.Injection, cf.Remaining = obs.InjNotReached, ctx.failAt-ctx.n
	}
	if c.copy != nil && c.copy.killed {
		c.killed = true
		cf.Outcome, cf.Signal = obs.ChildDied, 9
	} else {
		cf.Outcome = obs.ChildStopped
	}
}

// childFailRollback starts the rollback measurement of a fork with
// childfail (startInjection's part for it).
func childFailRollback(op *prog.Op, rb *obs.Rollback) {
	if op.ChildOOM > 0 {
		rb.Cause = obs.CauseChildFail
		return
	}
	if op.ChildFail == 0 {
		return
	}
	rb.Cause = obs.CauseChildFail
	rb.Setup = append(rb.Setup, childFailSetup)
}

package prog

// A fork's hold (Op.Hold): the child stays off the CPU while the parent
// runs its next operations. The executor and the C reproducer pin the
// parent's forking thread to its CPU and run it SCHED_FIFO (with
// SCHED_RESET_ON_FORK), and the child inherits the one-CPU mask: it cannot
// run while the parent is runnable. Under Async-fork the child copies the
// PMD and PTE levels in its own context before it first reaches user
// space (schedule_tail), so with a hold that copy comes after the parent's
// next operations every time: a write through a pin, a fault that fixes a
// PMD up, an munmap that fixes a VMA up. Without it the scheduler decides
// (on an idle machine the child usually copies at once, on another CPU).
//
// The hold ends after Hold operations of the main process's main thread,
// before its next fork, wait or kill (whose outcomes depend on the child
// having run), or at the end of the program. It is a schedule, not a
// semantic: the reference model ignores it. A parent that blocks (a
// wait, a lock, an operation of another thread it joins) leaves the CPU
// to the child, and the hold is then only as good as the kernel's
// scheduler: the executor's evidence says whether the child ran early.

// MaxHold bounds a fork's hold (operations).
const MaxHold = 8

// validateHold checks the hold of operation i.
func (p *Program) validateHold(i int) error {
	op := &p.Ops[i]
	if op.Hold == 0 {
		return nil
	}
	switch {
	case op.Kind != OpFork:
		return &ValidationError{Op: i, Region: -1, Msg: "hold is an attribute of fork only"}
	case op.Hold < 0 || op.Hold > MaxHold:
		return &ValidationError{Op: i, Region: -1, Msg: "hold out of range 1..8"}
	case op.Proc != 0 || op.Thread != 0:
		return &ValidationError{Op: i, Region: -1, Msg: "hold is supported on forks of the main process's main thread only"}
	case op.ChildFail > 0 || op.ChildOOM > 0 || op.FailNth > 0 || op.OOMMemcg > 0:
		return &ValidationError{Op: i, Region: -1, Msg: "hold does not combine with fault injection (fail_nth, oom_memcg, childfail, child_oom: their forks hold and release the child themselves)"}
	}
	return nil
}

// HoldEnds says whether operation j of the main process ends a hold that
// is in force: a fork, a wait or a kill.
func HoldEnds(op *Op) bool {
	return op.Proc == 0 && op.Thread == 0 && (op.Kind == OpFork || op.Kind == OpWait || op.Kind == OpKill)
}

package prog

// Fault injection into the child's side of fork (Op.ChildFail): the
// failure points a child reaches in its own context before it first
// returns to user space. Under Async-fork that is where the child copies
// the PMD and PTE levels of the parent's page tables (schedule_tail);
// the parent's fail-nth cannot reach them (fork resets the child's
// fail-nth), so the executor writes the child's fail-nth from the parent
// while the child is held off the CPU. The rollback oracle then judges
// the parent after the child is reaped (a failed copy kills the child
// with SIGKILL).

// validateChildFail checks the childfail attribute of fork operation i.
func (p *Program) validateChildFail(i int) error {
	op := &p.Ops[i]
	if op.ChildFail == 0 && op.ChildOOM == 0 {
		return nil
	}
	if op.ChildFail < 0 || op.ChildFail > MaxFailNth {
		return &ValidationError{Op: i, Region: -1, Msg: "childfail out of range 1..1048576"}
	}
	if op.ChildOOM > MaxOOMMemcg {
		return &ValidationError{Op: i, Region: -1, Msg: "child_oom out of range"}
	}
	n := 0
	for _, on := range []bool{op.FailNth > 0, op.OOMMemcg > 0, op.ChildFail > 0, op.ChildOOM > 0} {
		if on {
			n++
		}
	}
	if n > 1 {
		// One fault per run: the kernel log's report must say
		// unambiguously whose failure it was.
		return &ValidationError{Op: i, Region: -1, Msg: "childfail and child_oom cannot be combined with each other or with fail_nth or oom_memcg on one fork"}
	}
	return nil
}

// ChildInjected returns the fork operations of p that carry childfail or
// child_oom.
func (p *Program) ChildInjected() []int {
	var out []int
	for i, op := range p.Ops {
		if op.Kind == OpFork && (op.ChildFail > 0 || op.ChildOOM > 0) {
			out = append(out, i)
		}
	}
	return out
}

package gen

import (
	"slices"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// forkParents returns, for each fork in textual order, the process that
// created it. It assumes forks are numbered in order (as in a valid program).
func forkParents(p *prog.Program) []int {
	var parents []int
	for _, op := range p.Ops {
		if op.Kind == prog.OpFork {
			parents = append(parents, op.Proc)
		}
	}
	return parents
}

// subtree reports, for each fork, whether it is f or a descendant of f.
func subtree(parents []int, f int) []bool {
	in := make([]bool, len(parents))
	for g := range parents {
		if g == f {
			in[g] = true
			continue
		}
		if pp := parents[g]; pp > 0 && pp-1 < g && in[pp-1] {
			in[g] = true
		}
	}
	return in
}

// Unit returns the indices, in increasing order, of the operations that go
// with the operation at index i of the valid program p: for a fork fI, the
// fork, every operation of fI's child and its descendants, all their
// waits and kills, the storeloops that run until one of them is waited
// for and the writes into its child; for a uringreg, it and the uringreads
// that use it; for any other operation, just i.
func Unit(p *prog.Program, i int) []int {
	op := p.Ops[i]
	if op.Kind == prog.OpUringReg {
		return regUnit(p, i)
	}
	if op.Kind == prog.OpJoin {
		return joinUnit(p, i)
	}
	if op.Kind != prog.OpFork {
		return []int{i}
	}
	in := subtree(forkParents(p), op.Fork)
	inSub := func(f int) bool { return f >= 0 && f < len(in) && in[f] }
	var idx []int
	for j, o := range p.Ops {
		switch {
		case o.Proc > 0 && inSub(o.Proc-1):
			idx = append(idx, j)
		default:
			if f, ok := forkRef(o); ok && inSub(f) {
				idx = append(idx, j)
			}
		}
	}
	return idx
}

// Units returns the op-units of the valid program p, in the order of their
// operation (a fork, a join): one for every operation except waits (a wait
// cannot go without its fork). A join's unit holds the thread operations
// it joins. A fork's unit holds everything that belongs to it
// (see Unit), so units nest. Removing any one unit with RemoveOps leaves a
// valid program.
func Units(p *prog.Program) [][]int {
	// One pass: every operation joins the unit of each fork whose
	// subtree runs it, and fork, wait and kill join their fork's unit.
	parents := forkParents(p)
	forkUnit := make([][]int, len(parents))
	for j, op := range p.Ops {
		if f, ok := forkRef(op); ok && f >= 0 && f < len(parents) {
			forkUnit[f] = append(forkUnit[f], j)
		}
		for proc := op.Proc; proc > 0 && proc-1 < len(parents); proc = parents[proc-1] {
			forkUnit[proc-1] = append(forkUnit[proc-1], j)
		}
	}
	var units [][]int
	for i, op := range p.Ops {
		switch op.Kind {
		case prog.OpWait:
		case prog.OpFork:
			units = append(units, forkUnit[op.Fork])
		case prog.OpUringReg:
			units = append(units, regUnit(p, i))
		case prog.OpJoin:
			units = append(units, joinUnit(p, i))
		default:
			units = append(units, []int{i})
		}
	}
	return units
}

func isForkRef(k prog.OpKind) bool {
	return k == prog.OpFork || k == prog.OpWait || k == prog.OpKill || k.RunsUntil()
}

// joinUnit returns the unit of the join at index i: it and the operations
// of its thread since the thread's previous join (removing a join alone
// would leave them unjoined).
func joinUnit(p *prog.Program, i int) []int {
	t := p.Ops[i].Peer
	var idx []int
	for j := i - 1; j >= 0; j-- {
		op := p.Ops[j]
		if op.Kind == prog.OpJoin && op.Peer == t {
			break
		}
		if op.Kind != prog.OpJoin && op.Thread == t {
			idx = append(idx, j)
		}
	}
	slices.Reverse(idx)
	return append(idx, i)
}

// regUnit returns the unit of the uringreg at index i: it and the
// uringreads that use its registration (up to the next uringreg).
func regUnit(p *prog.Program, i int) []int {
	idx := []int{i}
	for j := i + 1; j < len(p.Ops) && p.Ops[j].Kind != prog.OpUringReg; j++ {
		if p.Ops[j].Kind == prog.OpUringRead {
			idx = append(idx, j)
		}
	}
	return idx
}

// forkRef returns the fork an operation names other than through its
// process: fork, wait, kill and storeloop's Fork, a write's into= child.
func forkRef(op prog.Op) (int, bool) {
	if isForkRef(op.Kind) {
		return op.Fork, true
	}
	if op.Into > 0 {
		return op.Into - 1, true
	}
	return 0, false
}

// RemoveOps returns a copy of p without the operations whose index i has
// drop[i] set, with the remaining forks renumbered in order (and processes
// with them). It does not validate: the result is valid when p is and the
// dropped set is a union of units.
func RemoveOps(p *prog.Program, drop []bool) *prog.Program {
	q := &prog.Program{Arena: p.Arena, Regions: append([]prog.Region(nil), p.Regions...)}
	for i, op := range p.Ops {
		if i < len(drop) && drop[i] {
			continue
		}
		q.Ops = append(q.Ops, op)
	}
	Renumber(q)
	FixJoins(q)
	return q
}

// Renumber renumbers the forks of p in the order of their fork operations,
// rewriting Fork and Proc fields. Fork identifiers may be any distinct
// integers; references to identifiers that no fork operation carries are
// left unchanged (Validate or Repair deal with them).
func Renumber(p *prog.Program) {
	ids := make(map[int]int)
	for _, op := range p.Ops {
		if op.Kind == prog.OpFork {
			if _, dup := ids[op.Fork]; !dup {
				ids[op.Fork] = len(ids)
			}
		}
	}
	for i := range p.Ops {
		op := &p.Ops[i]
		if op.Proc > 0 {
			if n, ok := ids[op.Proc-1]; ok {
				op.Proc = n + 1
			}
		}
		if isForkRef(op.Kind) {
			if n, ok := ids[op.Fork]; ok {
				op.Fork = n
			}
		}
		if op.Into > 0 {
			if n, ok := ids[op.Into-1]; ok {
				op.Into = n + 1
			}
		}
	}
}

// aliveAt returns the processes alive just before operation i of the valid
// program p, and the live forks (not yet waited) at that point with the
// process that created each.
func aliveAt(p *prog.Program, i int) (procs []int, live map[int]int) {
	live = make(map[int]int)
	for _, op := range p.Ops[:i] {
		switch op.Kind {
		case prog.OpFork:
			live[op.Fork] = op.Proc
		case prog.OpWait:
			delete(live, op.Fork)
		}
	}
	procs = []int{0}
	for f := range live {
		procs = append(procs, f+1)
	}
	slices.Sort(procs)
	return procs, live
}

package gen

import (
	"slices"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// transplant rewrites ops taken from another place: operations of process
// root go to process target, every fork identifier f becomes f+base (so it
// collides with nothing; Repair renumbers), and region references go
// through rmap (nil keeps them).
func transplant(ops []prog.Op, root, target, base int, rmap []int) []prog.Op {
	out := make([]prog.Op, 0, len(ops))
	for _, op := range ops {
		switch {
		case op.Proc == root:
			op.Proc = target
		case op.Proc > 0:
			op.Proc += base
		}
		switch op.Kind {
		case prog.OpFork, prog.OpWait, prog.OpKill:
			op.Fork += base
		case prog.OpCheck, prog.OpJoin:
		default:
			if rmap != nil {
				op.Region = rmap[op.Region]
				if op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 {
					op.To = rmap[op.To]
				}
			}
		}
		if op.Kind.RunsUntil() {
			op.Fork += base
		}
		if op.Proc != 0 {
			op.Thread = 0 // threads exist only in the main process
		}
		out = append(out, op)
	}
	return out
}

// other returns a valid program from the corpus.
func (m *mutator) other() *prog.Program {
	o := m.corpus[m.r.IntN(len(m.corpus))]
	if o == nil {
		return &prog.Program{Regions: []prog.Region{{Kind: prog.AnonPrivate, Pages: 1}}}
	}
	if o.Validate() != nil {
		o = Repair(o)
	}
	return o
}

// mergeRegions returns a copy of q that can hold o's operations, and the
// map from o's regions to the copy's: o's regions are either appended or
// mapped onto q's (a region of the same kind where there is one).
func (m *mutator) mergeRegions(q, o *prog.Program) (*prog.Program, []int) {
	q = q.Clone()
	rmap := make([]int, len(o.Regions))
	if len(q.Regions)+len(o.Regions) <= m.w.MaxRegions && chance(m.r, 0.5) {
		for i, r := range o.Regions {
			rmap[i] = len(q.Regions)
			q.Regions = append(q.Regions, r)
		}
		capPages(q, m.w.MaxTotalPages)
		return q, rmap
	}
	for i, r := range o.Regions {
		var same []int
		for j, qr := range q.Regions {
			if qr.Kind == r.Kind {
				same = append(same, j)
			}
		}
		if len(same) > 0 {
			rmap[i] = oneOf(m.r, same...)
		} else {
			rmap[i] = m.r.IntN(len(q.Regions))
		}
	}
	return q, rmap
}

// splice inserts a corpus program, or one op-unit of it, at a random place
// in a process alive there.
func (m *mutator) splice(q *prog.Program) *prog.Program {
	o := m.other()
	q, rmap := m.mergeRegions(q, o)
	ops, root := o.Ops, 0
	if units := Units(o); len(units) > 0 && chance(m.r, 0.5) {
		u := units[m.r.IntN(len(units))]
		ops = nil
		for _, i := range u {
			ops = append(ops, o.Ops[i])
		}
		root = o.Ops[u[0]].Proc
	}
	i := m.r.IntN(len(q.Ops) + 1)
	procs, _ := aliveAt(q, i)
	m.fresh += freshForks
	q.Ops = slices.Insert(q.Ops, i, transplant(ops, root, oneOf(m.r, procs...), m.fresh, rmap)...)
	return q
}

// crossover joins a prefix of q and a suffix of a corpus program; Repair
// then drops what lost its fork and waits for what lost its wait.
func (m *mutator) crossover(q *prog.Program) *prog.Program {
	o := m.other()
	q, rmap := m.mergeRegions(q, o)
	i := m.r.IntN(len(q.Ops) + 1)
	j := m.r.IntN(len(o.Ops) + 1)
	m.fresh += freshForks
	q.Ops = append(q.Ops[:i:i], transplant(o.Ops[j:], 0, 0, m.fresh, rmap)...)
	return q
}

// forkOps returns the indices of q's fork operations.
func forkOps(q *prog.Program) []int {
	var idx []int
	for i, op := range q.Ops {
		if op.Kind == prog.OpFork {
			idx = append(idx, i)
		}
	}
	return idx
}

// dupFork copies a whole fork block, either right after the original's
// wait or right after the original fork (a second fork while the first
// copy may still be running).
func (m *mutator) dupFork(q *prog.Program) *prog.Program {
	fs := forkOps(q)
	if len(fs) == 0 {
		return m.insert(q)
	}
	fi := oneOf(m.r, fs...)
	unit := Unit(q, fi)
	var ops []prog.Op
	for _, i := range unit {
		ops = append(ops, q.Ops[i])
	}
	root := q.Ops[fi].Proc
	m.fresh += freshForks
	block := transplant(ops, root, root, m.fresh, nil)
	at := unit[len(unit)-1] + 1
	if chance(m.r, 0.5) {
		at = fi + 1
	}
	return insertAt(q, at, block)
}

// swap exchanges two neighbouring operations if the result is valid.
func (m *mutator) swap(q *prog.Program) *prog.Program {
	if len(q.Ops) < 2 {
		return q
	}
	i := m.r.IntN(len(q.Ops) - 1)
	s := q.Clone()
	s.Ops[i], s.Ops[i+1] = s.Ops[i+1], s.Ops[i]
	if s.Validate() != nil {
		return q
	}
	return s
}

// race inserts parent operations right after a fork (after its kill, if
// it is killed at once).
func (m *mutator) race(q *prog.Program) *prog.Program {
	fs := forkOps(q)
	if len(fs) == 0 {
		return m.insert(q)
	}
	fi := oneOf(m.r, fs...)
	fork := q.Ops[fi]
	at := fi + 1
	if at < len(q.Ops) && q.Ops[at].Kind == prog.OpKill && q.Ops[at].Fork == fork.Fork {
		at++
	}
	g := m.gen(q)
	var ops []prog.Op
	for n := between(m.r, 1, m.w.RaceOps); n > 0; n-- {
		ops = append(ops, g.raceOp(fork.Proc)...)
	}
	return insertAt(q, at, ops)
}

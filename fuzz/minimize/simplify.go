package minimize

import (
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// simplify runs the simplification passes once; it reports whether any
// of them changed the program.
func (m *minimizer) simplify() bool {
	changed := false
	for _, pass := range []func() bool{m.unwrapForks, m.unthread, m.dropRegions, m.shrinkPages, m.shrinkCounts, m.clearTHP, m.simplifyMremap} {
		if m.stats.Exhausted {
			break
		}
		if pass() {
			changed = true
		}
	}
	return changed
}

// usedRegions reports which regions some operation refers to.
func usedRegions(p *prog.Program) []bool {
	used := make([]bool, len(p.Regions))
	for _, op := range p.Ops {
		switch op.Kind {
		case prog.OpFork, prog.OpWait, prog.OpKill, prog.OpCheck:
			continue
		}
		used[op.Region] = true
		if op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 {
			used[op.To] = true
		}
	}
	return used
}

// withoutRegions returns p without the regions set in drop (which no
// operation uses), renumbering the rest.
func withoutRegions(p *prog.Program, drop []bool) *prog.Program {
	q := &prog.Program{Arena: p.Arena, Ops: append([]prog.Op(nil), p.Ops...)}
	newIdx := make([]int, len(p.Regions))
	for i, r := range p.Regions {
		newIdx[i] = len(q.Regions)
		if !drop[i] {
			q.Regions = append(q.Regions, r)
		}
	}
	for i := range q.Ops {
		op := &q.Ops[i]
		switch op.Kind {
		case prog.OpFork, prog.OpWait, prog.OpKill, prog.OpCheck:
			continue
		}
		op.Region = newIdx[op.Region]
		if op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 {
			op.To = newIdx[op.To]
		}
	}
	return q
}

// dropRegions removes regions no operation uses: all at once, else one at
// a time from the last. One region always stays.
func (m *minimizer) dropRegions() bool {
	used := usedRegions(m.cur)
	var unused []int
	for i, u := range used {
		if !u {
			unused = append(unused, i)
		}
	}
	if len(unused) == len(used) {
		unused = unused[1:]
	}
	if len(unused) == 0 {
		return false
	}
	drop := make([]bool, len(used))
	for _, i := range unused {
		drop[i] = true
	}
	if m.try(withoutRegions(m.cur, drop)) {
		return true
	}
	changed := false
	for k := len(unused) - 1; k >= 0; k-- {
		drop := make([]bool, len(m.cur.Regions))
		drop[unused[k]] = true
		if m.try(withoutRegions(m.cur, drop)) {
			changed = true
		}
	}
	return changed
}

// shrink lowers a positive integer field of the current program: it tries
// 1, then halves while that reproduces. get reads the field, set returns a
// copy of the program with the field changed.
func (m *minimizer) shrink(get func(*prog.Program) int, set func(*prog.Program, int) *prog.Program) bool {
	changed := false
	for !m.stats.Exhausted {
		v := get(m.cur)
		if v <= 1 {
			break
		}
		if m.try(set(m.cur, 1)) {
			return true
		}
		if v/2 <= 1 || !m.try(set(m.cur, v/2)) {
			break
		}
		changed = true
	}
	return changed
}

// shrinkPages shrinks each region.
func (m *minimizer) shrinkPages() bool {
	changed := false
	for i := range m.cur.Regions {
		if m.shrink(func(p *prog.Program) int { return p.Regions[i].Pages },
			func(p *prog.Program, v int) *prog.Program {
				q := p.Clone()
				q.Regions[i].Pages = v
				return q
			}) {
			changed = true
		}
	}
	return changed
}

// shrinkCounts shrinks the slot count of each store and pwrite.
func (m *minimizer) shrinkCounts() bool {
	changed := false
	for i := range m.cur.Ops {
		if k := m.cur.Ops[i].Kind; k != prog.OpStore && k != prog.OpPwrite {
			continue
		}
		if m.shrink(func(p *prog.Program) int { return p.Ops[i].Count },
			func(p *prog.Program, v int) *prog.Program {
				q := p.Clone()
				q.Ops[i].Count = v
				return q
			}) {
			changed = true
		}
	}
	return changed
}

// clearTHP sets each region's THP advice back to the default.
func (m *minimizer) clearTHP() bool {
	changed := false
	for i := range m.cur.Regions {
		if m.cur.Regions[i].THP == prog.THPDefault {
			continue
		}
		q := m.cur.Clone()
		q.Regions[i].THP = prog.THPDefault
		if m.try(q) {
			changed = true
		}
	}
	return changed
}

// simplifyMremap drops mremap flags one at a time: dontunmap, then fixed
// (with its destination), then maymove.
func (m *minimizer) simplifyMremap() bool {
	changed := false
	for i := range m.cur.Ops {
		for _, f := range []prog.MremapFlags{prog.MremapDontunmap, prog.MremapFixed, prog.MremapMaymove} {
			op := m.cur.Ops[i]
			if op.Kind != prog.OpMremap || op.Flags&f == 0 {
				continue
			}
			q := m.cur.Clone()
			o := &q.Ops[i]
			o.Flags &^= f
			if f == prog.MremapFixed {
				o.To, o.ToOff = 0, 0
			}
			if m.try(q) {
				changed = true
			}
		}
	}
	return changed
}

// unwrapForks flattens nesting: it tries replacing each fork by its
// child's operations, run by the forking process itself (the fork, its
// wait and kills go; the child's forks become the parent's).
func (m *minimizer) unwrapForks() bool {
	changed := false
	for f := 0; f < m.cur.NumForks() && !m.stats.Exhausted; f++ {
		if m.try(unwrap(m.cur, f)) {
			changed = true
			f-- // forks were renumbered: f is now the next one
		}
	}
	return changed
}

// unthread tries each operation of an extra thread on the main thread
// instead (a join left with nothing to join goes too): threads are only
// needed where the finding depends on the race.
func (m *minimizer) unthread() bool {
	changed := false
	for i := 0; i < len(m.cur.Ops) && !m.stats.Exhausted; i++ {
		op := m.cur.Ops[i]
		if op.Thread == 0 || op.Kind.RunsUntil() {
			continue
		}
		q := m.cur.Clone()
		q.Ops[i].Thread = 0
		gen.FixJoins(q)
		if m.try(q) {
			changed = true
			i = -1 // joins may have gone: start over
		}
	}
	return changed
}

// unwrap returns p with fork f replaced by its child's operations.
func unwrap(p *prog.Program, f int) *prog.Program {
	parent := p.Ops[p.ForkOp(f)].Proc
	q := &prog.Program{Arena: p.Arena, Regions: append([]prog.Region(nil), p.Regions...)}
	for _, op := range p.Ops {
		switch {
		case (op.Kind == prog.OpFork || op.Kind == prog.OpWait || op.Kind == prog.OpKill) && op.Fork == f:
			continue
		case op.Proc == f+1:
			op.Proc = parent
		}
		q.Ops = append(q.Ops, op)
	}
	gen.Renumber(q)
	return q
}

package gen

import (
	"math/rand/v2"
	"slices"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// freshForks is the first fork identifier a mutation uses for new forks;
// Repair renumbers them into place.
const freshForks = 1 << 20

// Mutate returns a new valid program derived from p by one or a few
// random changes: inserting an operation, fork block or kill; removing an
// op-unit; changing arguments, a region or the process of an operation;
// splicing in (part of) a program from corpus or crossing over with one;
// duplicating a fork block; swapping neighbours; adding racing operations
// right after a fork. p and corpus are not modified; invalid inputs are
// repaired first. The result differs from p unless no change could be
// found.
func Mutate(r *rand.Rand, p *prog.Program, corpus []*prog.Program, w Weights) *prog.Program {
	m := &mutator{r: r, w: w.normalized(), corpus: corpus}
	base := p
	if base.Validate() != nil {
		base = Repair(base)
	}
	for try := 0; try < 32; try++ {
		q := base.Clone()
		for n := 1; ; n++ {
			q = m.once(q)
			if n >= 5 || !chance(r, 0.3) {
				break
			}
		}
		if fitHugetlb(q, m.w.HugetlbFree) { // hugetlb.go
			q = Repair(q)
		}
		fitFiles(q, m.w.FileSystems) // files.go
		if !equal(q, base) {
			return q
		}
	}
	return base.Clone()
}

type mutator struct {
	r      *rand.Rand
	w      Weights
	corpus []*prog.Program
	fresh  int
}

// gen returns a generator that creates operations for q, with fresh fork
// identifiers.
func (m *mutator) gen(q *prog.Program) *generator {
	m.fresh += freshForks
	g := &generator{r: m.r, w: m.w, p: q, forkBase: m.fresh, forkLimit: m.w.MaxForks - q.NumForks()}
	g.learn(q)
	return g
}

// once applies one mutation to the valid program q and returns a valid
// program (possibly q itself, unchanged).
func (m *mutator) once(q *prog.Program) *prog.Program {
	mw := m.w.Mutations
	ws := []int{mw.Insert, mw.Remove, mw.Change, mw.Region, mw.Splice, mw.DupFork, mw.Swap, mw.Race, mw.Crossover}
	if len(m.corpus) == 0 {
		ws[4], ws[8] = 0, 0
	}
	if len(q.Ops) == 0 {
		ws[1], ws[2], ws[6] = 0, 0, 0
	}
	if len(q.Ops) > m.w.MaxOps {
		ws[0], ws[4], ws[5], ws[7] = 0, 0, 0, 0
	}
	if sum(ws) == 0 {
		// Every mutation the weights allow is ruled out here (e.g. only
		// growing ones on a program at MaxOps): leave q alone rather than
		// fall back to a kind the weights switched off.
		return q
	}
	var res *prog.Program
	switch pick(m.r, ws) {
	case 0:
		res = m.insert(q)
	case 1:
		res = m.remove(q)
	case 2:
		res = m.change(q)
	case 3:
		res = m.region(q)
	case 4:
		res = m.splice(q)
	case 5:
		res = m.dupFork(q)
	case 6:
		res = m.swap(q)
	case 7:
		res = m.race(q)
	default:
		res = m.crossover(q)
	}
	res = Repair(res)
	for i, op := range res.Ops {
		if op.Kind == prog.OpStore || op.Kind == prog.OpPwrite {
			res.Ops[i] = capCount(op, m.w.MaxStorePages)
		}
	}
	if res.Validate() != nil {
		return q
	}
	return res
}

// insertAt returns q with ops inserted before index i.
func insertAt(q *prog.Program, i int, ops []prog.Op) *prog.Program {
	q = q.Clone()
	q.Ops = slices.Insert(q.Ops, i, ops...)
	return q
}

// depth returns the nesting depth of proc (0 for the main process).
func depth(parents []int, proc int) int {
	d := 0
	for proc > 0 && proc-1 < len(parents) {
		proc = parents[proc-1]
		d++
	}
	return d
}

// insert adds a simple operation, a whole fork block or a kill at a random
// place, in a process alive there.
func (m *mutator) insert(q *prog.Program) *prog.Program {
	i := m.r.IntN(len(q.Ops) + 1)
	procs, live := aliveAt(q, i)
	proc := procs[m.r.IntN(len(procs))]
	g := m.gen(q)
	d := depth(forkParents(q), proc)
	switch n := m.r.IntN(10); {
	case n < 2 && d < m.w.MaxDepth && g.forkLimit > 0:
		ops, deferred := g.forkBlock(proc, d)
		if deferred >= 0 {
			ops = append(ops, prog.Op{Proc: proc, Kind: prog.OpWait, Fork: deferred})
		}
		return insertAt(q, i, ops)
	case n < 3:
		var fs []int
		for f, parent := range live {
			if parent == proc {
				fs = append(fs, f)
			}
		}
		if len(fs) > 0 {
			slices.Sort(fs)
			return insertAt(q, i, []prog.Op{{Proc: proc, Kind: prog.OpKill, Fork: oneOf(m.r, fs...)}})
		}
	}
	k := g.pickKind(proc, d, false, false)
	return insertAt(q, i, g.simple(proc, k))
}

// remove drops one op-unit.
func (m *mutator) remove(q *prog.Program) *prog.Program {
	units := Units(q)
	if len(units) == 0 {
		return q
	}
	drop := make([]bool, len(q.Ops))
	for _, i := range units[m.r.IntN(len(units))] {
		drop[i] = true
	}
	return RemoveOps(q, drop)
}

// change rewrites one operation: its arguments, its kind or its process.
func (m *mutator) change(q *prog.Program) *prog.Program {
	var cand []int
	for i, op := range q.Ops {
		if op.Kind != prog.OpFork && op.Kind != prog.OpWait && op.Kind != prog.OpKill {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return m.insert(q)
	}
	i := oneOf(m.r, cand...)
	q = q.Clone()
	op := &q.Ops[i]
	g := m.gen(q)
	pg := func(k int) uint64 { return uint64(k) * page }
	switch m.r.IntN(6) {
	case 0: // another operation in the same place
		ops := g.simple(op.Proc, g.pickKind(op.Proc, 1, false, false))
		q.Ops = slices.Replace(q.Ops, i, i+1, ops...)
		return q
	case 1: // another process alive there
		procs, _ := aliveAt(q, i)
		op.Proc = oneOf(m.r, procs...)
		return q
	case 2: // another region
		op.Region = g.region()
		if op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 && chance(m.r, 0.5) {
			op.To = g.region()
		}
		return q
	}
	switch op.Kind {
	case prog.OpStore, prog.OpPwrite:
		switch m.r.IntN(4) {
		case 0:
			fresh := g.slotOp(op.Proc, op.Kind, op.Region)
			op.Off = fresh.Off
		case 1:
			op.Count = oneOf(m.r, 1, op.Count*2, max(op.Count/2, 1), op.Count+1, op.Count-1)
		case 2:
			op.Stride = oneOf[uint64](m.r, 8, 0x40, page, pmd)
		default:
			op.Off = oneOf(m.r, op.Off+8, op.Off-min(op.Off, 8), op.Off+page, op.Off-min(op.Off, page), op.Off&^(pmd-1)+pmd-8)
		}
	case prog.OpCheck:
		q.Ops[i] = g.slotOp(op.Proc, prog.OpStore, g.region())
	default:
		switch m.r.IntN(5) {
		case 0:
			op.Off, op.Len = g.span(op.Region)
		case 1:
			op.Off = oneOf(m.r, op.Off+page, op.Off-min(op.Off, page), op.Off&^(pmd-1)+pmd-page, op.Off+1)
		case 2:
			op.Len = oneOf(m.r, op.Len+page, op.Len-min(op.Len, page), op.Len*2, pg(1), pmd, op.Len+1)
		default:
			switch op.Kind {
			case prog.OpMprotect:
				op.Prot = prog.Prot(pick(m.r, m.w.Prots[:]))
			case prog.OpMadvise:
				op.Advice = prog.Advice(pick(m.r, m.w.Advices))
			case prog.OpMbind, prog.OpAnonName, prog.OpPMadvise:
				g.vmaArgs(op)
			case prog.OpRemapFile:
				if chance(m.r, 0.5) {
					g.vmaArgs(op)
				} else {
					op.PgOff = oneOf(m.r, op.PgOff+1, op.PgOff-min(op.PgOff, 1), op.Off/page, op.PgOff+uint64(op.Len/page))
				}
			case prog.OpMremap:
				if chance(m.r, 0.5) {
					*op = g.mremap(*op)
				} else {
					op.Flags ^= oneOf(m.r, prog.MremapMaymove, prog.MremapFixed, prog.MremapDontunmap)
					op.NewLen = oneOf(m.r, op.NewLen, op.Len, op.NewLen+page, op.NewLen/2)
				}
			default:
				op.Off, op.Len = g.span(op.Region)
			}
		}
	}
	return q
}

// region changes one region's kind, size or THP, adds a region, moves the
// arena to its other placement or drops a region (references to it move to
// another region).
func (m *mutator) region(q *prog.Program) *prog.Program {
	q = q.Clone()
	g := m.gen(q)
	ri := g.region()
	reg := &q.Regions[ri]
	switch m.r.IntN(7) {
	case 0:
		reg.Kind = prog.RegionKind(pick(m.r, m.w.RegionKinds[:]))
	case 1:
		reg.THP = prog.THP(pick(m.r, m.w.THP[:]))
	case 2:
		reg.Pages = g.size()
	case 3:
		reg.Pages = oneOf(m.r, reg.Pages*2, max(reg.Pages/2, 1), reg.Pages+1, max(reg.Pages-1, 1), 512, 513)
	case 4:
		if len(q.Regions) < m.w.MaxRegions {
			q.Regions = append(q.Regions, prog.Region{
				Kind:  prog.RegionKind(pick(m.r, m.w.RegionKinds[:])),
				Pages: g.size(),
				THP:   prog.THP(pick(m.r, m.w.THP[:])),
			})
		}
	case 5:
		if m.w.ArenaLowProb > 0 || m.w.ArenaLowAimedProb > 0 {
			q.Arena = prog.ArenaLow - q.Arena // the other placement
		}
	default:
		if len(q.Regions) > 1 {
			q = dropRegion(q, ri, m.r.IntN(len(q.Regions)-1))
		}
	}
	capPages(q, m.w.MaxTotalPages)
	return q
}

// dropRegion removes region ri; references to it go to region to (an
// index among the remaining regions).
func dropRegion(q *prog.Program, ri, to int) *prog.Program {
	q.Regions = slices.Delete(q.Regions, ri, ri+1)
	re := func(r int) int {
		switch {
		case r == ri:
			return to
		case r > ri:
			return r - 1
		}
		return r
	}
	for i := range q.Ops {
		op := &q.Ops[i]
		op.Region = re(op.Region)
		if op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 {
			op.To = re(op.To)
		}
	}
	return q
}

// capPages shrinks the largest regions until the total fits max.
func capPages(q *prog.Program, max int) {
	for {
		total, big := 0, 0
		for i, r := range q.Regions {
			total += r.Pages
			if r.Pages > q.Regions[big].Pages {
				big = i
			}
		}
		if total <= max || q.Regions[big].Pages == 1 {
			return
		}
		q.Regions[big].Pages = (q.Regions[big].Pages + 1) / 2
	}
}

// equal reports whether p and q are the same program.
func equal(p, q *prog.Program) bool {
	return p.Arena == q.Arena && slices.Equal(p.Regions, q.Regions) && slices.Equal(p.Ops, q.Ops)
}

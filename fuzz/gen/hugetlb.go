package gen

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// Hugetlb regions (issue 31): where the target has free 2 MiB hugetlb
// pages (Weights.HugetlbFree, set by the campaign from the target), a
// generated program gets one hugetlb region with probability
// Weights.HugetlbProb: one of its regions, drawn at random, becomes the
// hugetlb kind with its sharing and backing, one or two huge pages big.
// Its operations are those the checker models on hugetlb pages (stores,
// munmap, mprotect, madvise, mlock, io_uring fixed buffers): the others
// on that region are dropped. vmsplice is modelled too but left out:
// Linux leaks writes through a vmsplice of hugetlb pages (cow.c expects
// it, docs/cow.md), which every campaign would report again. The huge pages a program can need stay within half of what
// the target has: a private region's pages times its processes (each
// may write its own copies), a shared region's once.

// hugetlbOK says whether operation kind k may address a hugetlb region
// of a generated program.
func hugetlbOK(k prog.OpKind) bool {
	switch k {
	case prog.OpStore, prog.OpStoreLoop, prog.OpMunmap, prog.OpMprotect, prog.OpMadvise,
		prog.OpMlock, prog.OpMunlock, prog.OpMlockOnfault, prog.OpUringReg, prog.OpUringRead,
		prog.OpUffdReg, prog.OpUffdUnreg:
		return true
	}
	return false
}

// usesRegion says whether an operation of kind k addresses op.Region.
func usesRegion(k prog.OpKind) bool {
	d := k.Info()
	return d.Range || d.Slots || d.IORange || d.Pinned
}

// hugetlbKind is the hugetlb kind with k's sharing and backing.
func hugetlbKind(k prog.RegionKind) prog.RegionKind {
	switch k.Base() {
	case prog.AnonShared:
		return prog.HugetlbShared
	case prog.MemfdPrivate:
		return prog.MemfdHugetlbPrivate
	case prog.MemfdShared:
		return prog.MemfdHugetlbShared
	}
	return prog.HugetlbPrivate
}

// hugetlb turns one region of the finished program into a hugetlb region
// and says whether it did (the caller repairs the program). It draws
// nothing when the target has no hugetlb pages, so such campaigns
// generate the programs they always did.
func (g *generator) hugetlb() bool {
	free := g.w.HugetlbFree
	if free < 4 || g.w.HugetlbProb <= 0 || !chance(g.r, g.w.HugetlbProb) || len(g.p.Regions) == 0 {
		return false
	}
	r := &g.p.Regions[g.r.IntN(len(g.p.Regions))]
	huge := 1
	if chance(g.r, 0.25) {
		huge = 2
	}
	r.Kind, r.THP = hugetlbKind(r.Kind), prog.THPDefault
	r.Pages = min(huge*prog.HugetlbPages, prog.MaxRegionPages)
	fitHugetlb(g.p, free)
	return true
}

// fitHugetlb makes p's hugetlb regions fit a target with free huge pages
// (0: unknown, nothing changes) and says whether it changed p: a private
// region whose copies (its pages once per process) would need more than
// half of them shrinks to one huge page, then becomes shared; operations
// the checker does not model on hugetlb pages are dropped (the caller
// repairs p). Mutate applies it too: a mutation can add forks and
// operations to a program with a hugetlb region.
func fitHugetlb(p *prog.Program, free int) bool {
	if free <= 0 {
		return false
	}
	changed := false
	procs := 1 + p.NumForks()
	for i := range p.Regions {
		r := &p.Regions[i]
		if !r.Kind.Hugetlb() {
			continue
		}
		need := func() int {
			if r.Kind.Shared() {
				return r.Pages / prog.HugetlbPages
			}
			return r.Pages / prog.HugetlbPages * procs
		}
		if need() > free/2 && r.Pages > prog.HugetlbPages {
			r.Pages, changed = prog.HugetlbPages, true
		}
		if need() > free/2 {
			// Private copies would not fit.
			memfd := r.Kind.Memfd()
			r.Kind, changed = prog.HugetlbShared, true
			if memfd {
				r.Kind = prog.MemfdHugetlbShared
			}
		}
	}
	ops := p.Ops[:0]
	for _, op := range p.Ops {
		onHuge := usesRegion(op.Kind) && op.Region < len(p.Regions) && p.Regions[op.Region].Kind.Hugetlb() && !hugetlbOK(op.Kind)
		intoHuge := op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 && op.To < len(p.Regions) && p.Regions[op.To].Kind.Hugetlb()
		if !onHuge && !intoHuge {
			ops = append(ops, op)
		}
	}
	changed = changed || len(ops) != len(p.Ops)
	p.Ops = ops
	return changed
}

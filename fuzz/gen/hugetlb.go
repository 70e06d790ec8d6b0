package gen

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// Hugetlb regions (issue 31): where the target has free 2 MiB hugetlb
// pages (Weights.HugetlbFree, set by the campaign from the target), a
// generated program gets one hugetlb region with probability
// Weights.HugetlbProb: one of its regions, drawn at random, becomes the
// hugetlb kind with its sharing and backing, one or two huge pages big.
// Its operations are those the checker models on hugetlb pages (stores,
// munmap, mprotect, madvise, mlock): the others on that region are
// dropped. The huge pages a program can need stay within half of what
// the target has: a private region's pages times its processes (each
// may write its own copies), a shared region's once.

// hugetlbOK says whether operation kind k may address a hugetlb region
// of a generated program.
func hugetlbOK(k prog.OpKind) bool {
	switch k {
	case prog.OpStore, prog.OpStoreLoop, prog.OpMunmap, prog.OpMprotect, prog.OpMadvise,
		prog.OpMlock, prog.OpMunlock, prog.OpMlockOnfault:
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
	i := g.r.IntN(len(g.p.Regions))
	r := &g.p.Regions[i]
	kind := hugetlbKind(r.Kind)
	procs := 1 + g.p.NumForks()
	huge := 1
	if chance(g.r, 0.25) {
		huge = 2
	}
	need := func(k prog.RegionKind) int {
		if k.Shared() {
			return huge
		}
		return huge * procs
	}
	for huge > 1 && need(kind) > free/2 {
		huge--
	}
	if need(kind) > free/2 {
		kind = prog.HugetlbShared // private copies would not fit
		if r.Kind.Memfd() {
			kind = prog.MemfdHugetlbShared
		}
	}
	r.Kind, r.THP = kind, prog.THPDefault
	r.Pages = min(huge*prog.HugetlbPages, prog.MaxRegionPages)
	ops := g.p.Ops[:0]
	for _, op := range g.p.Ops {
		onHuge := usesRegion(op.Kind) && op.Region == i && !hugetlbOK(op.Kind)
		intoHuge := op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 && op.To == i
		if !onHuge && !intoHuge {
			ops = append(ops, op)
		}
	}
	g.p.Ops = ops
	return true
}

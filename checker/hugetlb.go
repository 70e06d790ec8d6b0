package checker

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The model of hugetlb regions (prog's hugetlb-* and memfd-hugetlb-*
// kinds), Linux 6.1. A hugetlb segment has its ordinary kind's content
// semantics (seg.kind is the kind's Base(): private pages are copied on
// write after fork, shared ones are shared) and seg.huge set; what
// differs is how operations treat its VMA:
//
//   - a VMA is split only at a 2 MiB-aligned address (hugetlb_vm_op_split):
//     munmap, mprotect and the attribute advices (dontfork, dofork,
//     hugepage, nohugepage) that would split one elsewhere fail with
//     EINVAL, after the VMAs before it in the range were changed;
//   - MADV_DONTNEED(_LOCKED) needs a 2 MiB-aligned start in the VMA and
//     rounds the end down to 2 MiB (madvise_dontneed_free_valid_vma);
//     MADV_FREE, COLD, PAGEOUT and WIPEONFORK are EINVAL (the anonymous
//     kinds have a hugetlbfs file behind them); MERGEABLE changes nothing;
//   - mlock and mlock2(MLOCK_ONFAULT) never set VM_LOCKED or
//     VM_LOCKONFAULT (mlock_fixup) but still populate the range;
//   - pwrite to a hugetlbfs memfd fails with EINVAL (no write method);
//   - mremap rounds lengths up to 2 MiB and fails with EINVAL for an
//     unaligned old or new address and for growth; what else it does on
//     hugetlb is not modelled (unpredictable, its ranges forgotten);
//   - vmsplice and io_uring fixed buffers pin hugetlb pages as they pin
//     others (no VMA is split): the ordinary rules of pinned.go;
//   - mmap on a hugetlb region and the other operations of pinned.go and
//     vmaops.go (O_DIRECT, /proc/pid/mem, process_vm_writev, uffd-wp,
//     migrate, mbind, anonymous names, process_madvise) are not modelled
//     on hugetlb pages: unpredictable, their ranges forgotten, a note.
//
// Fork copies hugetlb page tables (copy_hugetlb_page_range) with the same
// content semantics as ordinary pages, as long as free huge pages remain
// for the copies writes need: a child that finds none is killed with
// SIGBUS, which the model does not predict (the generator keeps a
// program's huge pages well inside the guest's reserve).

// hugePages is one 2 MiB hugetlb page in model pages.
const hugePages = prog.HugetlbPages

// fullKind is the segment's region kind as programs name it (the
// hugetlb kind for a hugetlb segment, the file kind for a file's).
func (s *seg) fullKind() prog.RegionKind {
	if s.fs != prog.NoFS {
		return prog.FileKind(s.fs, s.kind.Shared())
	}
	if !s.huge {
		return s.kind
	}
	switch s.kind {
	case prog.AnonPrivate:
		return prog.HugetlbPrivate
	case prog.AnonShared:
		return prog.HugetlbShared
	case prog.MemfdPrivate:
		return prog.MemfdHugetlbPrivate
	}
	return prog.MemfdHugetlbShared
}

// hugeCut says whether the point g (between pages g-1 and g) of pr is an
// address where the kernel would have to split a hugetlb VMA that it
// cannot split there: yes, no, or maybe (unknown pages in a program with
// hugetlb regions).
func (m *machine) hugeCut(pr *proc, g int) tri {
	if g%hugePages == 0 || !m.hasHuge {
		return no
	}
	a, b := pr.segAt(g-1), pr.segAt(g)
	switch {
	case a == nil || b == nil:
		return no // no VMA holds both sides
	case a.huge && b.huge:
		// Hugetlb VMAs start and end 2 MiB-aligned: both sides are in
		// one (the model may have split it where the kernel did not).
		return yes
	case (a.unknown || a.huge) && (b.unknown || b.huge):
		return maybe
	}
	return no
}

// hugeProtCut says whether mprotect to prot certainly has to split a
// hugetlb VMA at g where it cannot (mprotect_fixup splits a VMA only
// when its protection changes).
func (m *machine) hugeProtCut(pr *proc, g int, prot prog.Prot) bool {
	return m.hugeCut(pr, g) == yes && pr.segAt(g).prot != prot
}

// mergeHuge joins pieces of one hugetlb VMA that an operation split at
// an address that is not 2 MiB-aligned without changing them (span
// splits before it knows whether anything changes): a hugetlb VMA
// boundary is always aligned, so hugetlb.go may read one off a segment.
func (p *proc) mergeHuge() {
	out := p.segs[:0]
	for _, s := range p.segs {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			if prev.huge && s.huge && !prev.unknown && !s.unknown && prev.end == s.start && s.start%hugePages != 0 && sameAttrs(prev, &s) {
				prev.end = s.end
				continue
			}
		}
		out = append(out, s)
	}
	p.segs = out
}

// hugeBadSplit is the errno explanation of a refused hugetlb split.
func hugeBadSplit(name string, g int) string {
	return fmt.Sprintf("%s would split a hugetlb mapping at %#x, which is not 2 MiB-aligned (EINVAL, hugetlb_vm_op_split)", name, gaddr(g))
}

// hugeAdvice says what advice a does to the part [g, e) of hugetlb
// segment s: ok (yes, no), the end it really covers, and why it fails.
func hugeAdvice(a prog.Advice, s *seg, g, e int) (tri, int, string) {
	name := a.Info().Linux
	switch a {
	case prog.AdvDontneed, prog.AdvDontneedLocked:
		if g%hugePages != 0 {
			return no, e, name + " on a hugetlb mapping needs a 2 MiB-aligned start (EINVAL)"
		}
		return yes, e - e%hugePages, ""
	case prog.AdvFree, prog.AdvCold, prog.AdvPageout:
		return no, e, name + " fails with EINVAL on hugetlb mappings"
	case prog.AdvWipeonfork:
		return no, e, name + " fails with EINVAL on hugetlb mappings (they have a hugetlbfs file behind them)"
	case prog.AdvDontfork, prog.AdvDofork, prog.AdvHugepage, prog.AdvNohugepage:
		t := *s
		if !adviceChanges(a, &t) {
			return yes, e, ""
		}
		// A hugetlb VMA starts and ends 2 MiB-aligned: an unaligned
		// end of the part is a split.
		if g%hugePages != 0 {
			return no, e, hugeBadSplit(name, g)
		}
		if e%hugePages != 0 {
			return no, e, hugeBadSplit(name, e)
		}
	}
	return adviceOK(a, s), e, adviceWhy(a)
}

// hugeOp handles operation i where it touches hugetlb pages in a way the
// model follows only partly, and says whether it did.
func (m *machine) hugeOp(pr *proc, i int) bool {
	if !m.hasHuge {
		return false
	}
	op := &m.p.Ops[i]
	huge := op.Region >= 0 && op.Region < len(m.p.Regions) && m.p.Regions[op.Region].Kind.Hugetlb()
	switch op.Kind {
	case prog.OpStore, prog.OpStoreLoop, prog.OpCheck, prog.OpFork, prog.OpKill, prog.OpWait, prog.OpJoin,
		prog.OpMremap, prog.OpMunmap, prog.OpMprotect, prog.OpMadvise, prog.OpMlock, prog.OpMunlock, prog.OpMlockOnfault,
		prog.OpVmsplice, prog.OpReadPipe, prog.OpUringReg, prog.OpUringRead, prog.OpUffdReg, prog.OpUffdUnreg:
		// Pins by vmsplice and io_uring split no VMA, and userfaultfd
		// refuses a hugetlb range that is not 2 MiB-aligned (EINVAL):
		// the ordinary rules (pinned.go, uffd.go) hold.
		return false
	case prog.OpPwrite:
		if !huge {
			return false
		}
		m.result(pr, i, certain(eINVAL, "pwrite to a hugetlbfs memfd fails with EINVAL (hugetlbfs has no write method)"))
		return true
	}
	if !huge {
		return false
	}
	m.result(pr, i, unpredictable(op.Kind.String()+" on hugetlb pages is not modelled"))
	m.col.note("%s: the model does not follow %s on hugetlb pages; what it touched is not judged", opRef(m.p, i), op.Kind)
	m.taintOp(pr, i)
	return true
}

// hugeMremap handles an mremap (its arguments checked) whose source is
// a hugetlb mapping, or whose destination would cut one, and says
// whether it did.
func (m *machine) hugeMremap(c *mremapCall) bool {
	if !m.hasHuge {
		return false
	}
	pr, i := c.pr, c.i
	s := pr.segAt(c.src)
	cut := c.dst >= 0 && (m.hugeCut(pr, c.dst) != no || m.hugeCut(pr, c.dst+c.newN) != no)
	if (s == nil || !s.huge) && !cut {
		return false
	}
	if s != nil && s.huge {
		up := func(n int) int { return (n + hugePages - 1) / hugePages * hugePages }
		why := ""
		switch {
		case c.src%hugePages != 0:
			why = "mremap of a hugetlb mapping needs a 2 MiB-aligned old address (EINVAL)"
		case c.dst >= 0 && c.dst%hugePages != 0:
			why = "mremap of a hugetlb mapping needs a 2 MiB-aligned new address (EINVAL)"
		case up(c.newN) > up(c.oldN):
			why = "mremap cannot grow a hugetlb mapping (EINVAL: its reservation cannot be split)"
		}
		if why != "" {
			m.remapFail(c, eINVAL, why)
			return true
		}
	}
	srcHuge := s != nil && s.huge // s points into pr.segs, which taintOp changes
	m.result(pr, i, unpredictable("mremap of or onto hugetlb pages is not modelled"))
	m.col.note("%s: the model does not follow mremap of or onto hugetlb pages; its ranges are not judged", opRef(m.p, i))
	m.taintOp(pr, i)
	if srcHuge {
		// The kernel rounds both lengths up to 2 MiB.
		up := func(n int) int { return (n + hugePages - 1) / hugePages * hugePages }
		m.forget(pr, c.src, c.src+up(max(c.oldN, c.newN)), i)
		if c.dst >= 0 {
			m.forget(pr, c.dst, c.dst+up(c.newN), i)
		}
	}
	return true
}

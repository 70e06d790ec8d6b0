package checker

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// mremap follows Linux 6.18 mm/mremap.c. Where the outcome depends on
// kernel VMA boundaries the model cannot know (vma merging), it accepts
// either outcome and follows the observed errno and address.
func (m *machine) mremap(pr *proc, i int) {
	op := &m.p.Ops[i]
	fail := func(e int, why string) {
		m.result(pr, i, certain(e, why))
		m.setRet(i, ^uint64(0))
	}
	fixed := op.Flags&prog.MremapFixed != 0
	dontunmap := op.Flags&prog.MremapDontunmap != 0
	maymove := op.Flags&prog.MremapMaymove != 0
	if fixed && m.kernelBefore(6, 17) {
		defer m.oldFixedFailure(pr, i)
	}
	oldN, newN := pagesUp(op.Len), pagesUp(op.NewLen)
	// check_mremap_params
	if !aligned(op.Off) {
		fail(eINVAL, "mremap of an unaligned address fails with EINVAL")
		return
	}
	if newN == 0 {
		fail(eINVAL, "mremap to zero length fails with EINVAL")
		return
	}
	src := gpage(op.Region, op.Off)
	dst := -1
	if fixed || dontunmap {
		if fixed && !aligned(op.ToOff) {
			fail(eINVAL, "MREMAP_FIXED to an unaligned address fails with EINVAL")
			return
		}
		if !maymove {
			fail(eINVAL, "MREMAP_FIXED and MREMAP_DONTUNMAP need MREMAP_MAYMOVE (EINVAL)")
			return
		}
		if dontunmap && oldN != newN {
			fail(eINVAL, "MREMAP_DONTUNMAP cannot resize (EINVAL)")
			return
		}
		if fixed {
			dst = gpage(op.To, op.ToOff)
			if src < dst+newN && dst < src+oldN {
				if m.kernelBefore(6, 17) {
					// Older kernels look the source VMA up first.
					switch s := pr.segAt(src); {
					case s == nil:
						fail(eFAULT, "before Linux 6.17 mremap looks up the source VMA before checking for overlap: nothing mapped (EFAULT)")
						return
					case s.unknown:
						m.result(pr, i, either("before Linux 6.17 mremap looks up the source VMA first; the model lost track of it", eFAULT, eINVAL))
						m.setRet(i, ^uint64(0))
						return
					}
				}
				fail(eINVAL, "source and destination overlap (EINVAL)")
				return
			}
		}
	}
	s0 := pr.segAt(src)
	if s0 == nil {
		fail(eFAULT, "nothing is mapped at the source address (EFAULT)")
		return
	}
	if fixed && oldN == newN {
		m.remapMove(pr, i, src, dst, oldN, dontunmap)
		return
	}
	if s0.unknown {
		m.remapUnknown(pr, i, src, oldN, newN, dst)
		return
	}
	private := !s0.kind.Shared()
	switch {
	case !fixed && !dontunmap && oldN == newN:
		m.result(pr, i, certain(eOK, "mremap to the same size does nothing"))
		m.setRet(i, prog.Base(op.Region)+op.Off)
		return
	case !fixed && !dontunmap && newN < oldN:
		r := m.result(pr, i, certain(eOK, "shrinking unmaps the tail"))
		m.setRet(i, prog.Base(op.Region)+op.Off)
		if r.Errno != 0 {
			m.forget(pr, src, src+oldN, i)
			return
		}
		pr.unmap(src+newN, src+oldN)
		return
	}
	// The operation maps new address space: growth, a fixed
	// destination, or MREMAP_DONTUNMAP.
	if oldN == 0 && private {
		fail(eINVAL, "mremap with old_len 0 (duplicate) of a private mapping fails with EINVAL")
		return
	}
	if fixed && oldN == 0 && dst == src {
		// Not an overlap by the kernel's test, so the destination is
		// unmapped first, taking the source with it: EFAULT.
		r := m.result(pr, i, certain(eFAULT, "MREMAP_FIXED with old_len 0 onto the source itself unmaps the source, then finds nothing to move (EFAULT)"))
		m.setRet(i, ^uint64(0))
		if r.Errno == eFAULT {
			pr.unmap(dst, dst+newN)
		} else {
			m.forget(pr, dst, dst+newN, i)
		}
		return
	}
	checkN := oldN
	if newN < oldN {
		checkN = newN
	}
	one := 2
	if checkN > 0 {
		one = pr.withinOneVMA(src, src+checkN)
	}
	for _, s := range pr.segsIn(src, src+max(checkN, 1)) {
		if s.unknown {
			m.remapUnknown(pr, i, src, oldN, newN, dst)
			return
		}
	}
	if one == 0 {
		fail(eFAULT, "the source range spans more than one VMA (EFAULT)")
		return
	}
	type outcome struct {
		ok  bool
		ret int // destination page, -1: chosen by the kernel
	}
	var outs []outcome
	var why string
	switch {
	case fixed:
		outs = append(outs, outcome{ok: true, ret: dst})
		why = "MREMAP_FIXED move of one VMA"
	case dontunmap:
		outs = append(outs, outcome{ok: true, ret: -1})
		why = "MREMAP_DONTUNMAP move to an address the kernel picks"
	default: // expand without a fixed destination
		endB := 0 // with old_len 0 the range never reaches the VMA's end
		if oldN > 0 {
			endB = pr.boundary(src + oldN)
		}
		// Is the space after the range free? 2 yes, 1 maybe, 0 no.
		free := 2
		if src+newN > arenaPages {
			free = 0
		}
		for _, t := range pr.segsIn(src+oldN, src+newN) {
			if t.unknown {
				free = min(free, 1)
			} else {
				free = 0
			}
		}
		switch {
		case endB == 2 && free == 2:
			outs = append(outs, outcome{ok: true, ret: src})
			why = "the VMA ends at the range and the space after it is free: it grows in place"
		case endB == 0 || free == 0:
			why = "the VMA cannot grow in place"
		default:
			outs = append(outs, outcome{ok: true, ret: src})
			why = "the VMA may or may not be able to grow in place (vma merging, or pages the model lost track of)"
		}
		if endB != 2 || free != 2 {
			if maymove {
				outs = append(outs, outcome{ok: true, ret: -1})
				why += "; MREMAP_MAYMOVE lets it move"
			} else {
				outs = append(outs, outcome{})
				why += "; without MREMAP_MAYMOVE that is ENOMEM"
			}
		}
	}
	var errnos []int
	for _, o := range outs {
		if o.ok {
			errnos = appendUniq(errnos, eOK)
		} else {
			errnos = appendUniq(errnos, eNOMEM)
		}
	}
	if one == 1 {
		errnos = appendUniq(errnos, eFAULT)
		why += " (if the range is one VMA: the model cannot tell, and two VMAs give EFAULT)"
	}
	pd := either(why, errnos...)
	r := m.result(pr, i, pd)
	if r.Errno != 0 {
		if !pd.allows(r.Errno) {
			m.forget(pr, src, src+max(oldN, newN), i)
			if dst >= 0 {
				m.forget(pr, dst, dst+newN, i)
			}
		}
		m.setRet(i, ^uint64(0))
		return
	}
	// Success: where did it go?
	var to int
	var inArena bool
	if m.checking() {
		to, inArena = addrPage(r.Ret)
		if r.Ret%prog.PageSize != 0 {
			m.col.add(Finding{Oracle: OracleErrno, Signature: "errno:mremap-address", Proc: pr.id, View: -1, Op: i, Region: op.Region,
				Explanation: fmt.Sprintf("%s: %s returned the unaligned address %#x", procName(pr.id), opRef(m.p, i), r.Ret)})
			m.forget(pr, src, src+max(oldN, newN), i)
			return
		}
		okRet := false
		for _, o := range outs {
			if o.ok && (o.ret == -1 && to != src || o.ret >= 0 && inArena && o.ret == to) {
				okRet = true
			}
		}
		if !okRet {
			m.col.add(Finding{Oracle: OracleErrno, Signature: "errno:mremap-address", Proc: pr.id, View: -1, Op: i, Region: op.Region,
				Explanation: fmt.Sprintf("%s: %s returned %#x, which the model does not allow (%s)", procName(pr.id), opRef(m.p, i), r.Ret, why)})
			m.forget(pr, src, src+max(oldN, newN), i)
			if dst >= 0 {
				m.forget(pr, dst, dst+newN, i)
			}
			if inArena {
				m.forget(pr, to, to+newN, i)
			}
			return
		}
	} else {
		o := outs[0]
		if o.ret >= 0 {
			to, inArena = o.ret, true
		} else {
			to, inArena = m.farPage(newN), false
		}
		m.setRet(i, pageAddr(to))
	}
	if inArena && to == src && !fixed && !dontunmap {
		// Grown in place.
		m.growInPlace(pr, i, src, oldN, newN)
		return
	}
	m.moveVMA(pr, i, src, oldN, newN, to, inArena, fixed, dontunmap)
}

func appendUniq(s []int, v int) []int {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// addrPage converts an address to a global page; ok is false outside the arena.
func addrPage(a uint64) (int, bool) {
	if a < prog.ArenaBase || a >= prog.ArenaBase+uint64(arenaPages)*prog.PageSize {
		return -1 - int((a>>12)&0x3fffffff), false
	}
	return int((a - prog.ArenaBase) / prog.PageSize), true
}

func pageAddr(g int) uint64 {
	if g >= 0 {
		return gaddr(g)
	}
	return uint64(-1-g) << 12
}

// farPage invents a kernel-chosen address outside the arena (expected mode).
func (m *machine) farPage(n int) int {
	a := m.nextFar
	m.nextFar += uint64(n+16) * prog.PageSize
	return -1 - int(a>>12)
}

// remapUnknown handles an mremap whose source the model lost track of.
func (m *machine) remapUnknown(pr *proc, i, src, oldN, newN, dst int) {
	r := m.result(pr, i, unpredictable("the source range covers pages the model lost track of"))
	m.forget(pr, src, src+max(oldN, newN), i)
	if dst >= 0 {
		m.forget(pr, dst, dst+newN, i)
	}
	if r.Errno == 0 {
		if to, ok := addrPage(r.Ret); ok {
			m.forget(pr, to, to+newN, i)
		}
	}
}

// oldFixedFailure: before Linux 6.17, mremap_to unmapped the destination
// (and, when shrinking, the source's tail) before it checked the source
// range, so a fixed mremap that failed there may have left them unmapped. The model does not follow which
// check failed: it forgets the destination.
func (m *machine) oldFixedFailure(pr *proc, i int) {
	op := &m.p.Ops[i]
	if !m.checking() || m.o.Ops[i].Errno == 0 || !aligned(op.Off) || !aligned(op.ToOff) || op.NewLen == 0 {
		return
	}
	src, dst := gpage(op.Region, op.Off), gpage(op.To, op.ToOff)
	oldN, newN := pagesUp(op.Len), pagesUp(op.NewLen)
	if src < dst+newN && dst < src+oldN {
		return // the overlap check comes first
	}
	m.forget(pr, dst, dst+newN, i)
	if oldN > newN {
		// A shrinking move unmapped the source's tail first, too.
		m.forget(pr, src+newN, src+oldN, i)
	}
}

func uffdArmed(pieces []seg) bool {
	for _, s := range pieces {
		if s.uffd {
			return true
		}
	}
	return false
}

// maybeOneVMA reports whether pieces could be a single kernel VMA
// covering [lo, hi): no holes and equal attributes throughout.
func maybeOneVMA(pieces []seg, lo, hi int) bool {
	at := lo
	for k := range pieces {
		if pieces[k].start > at || (k > 0 && !sameAttrs(&pieces[k-1], &pieces[k])) {
			return false
		}
		at = pieces[k].end
	}
	return at >= hi
}

// remapMove is MREMAP_FIXED without resize: since 6.17 it may span
// several VMAs; each mapped piece moves to the same offset from the
// destination, holes in the source leave the destination alone, and a hole
// at the start is EFAULT.
func (m *machine) remapMove(pr *proc, i, src, dst, n int, dontunmap bool) {
	pieces := pr.segsIn(src, src+n)
	for _, s := range pieces {
		if s.unknown {
			m.remapUnknown(pr, i, src, n, n, dst)
			return
		}
	}
	pd := certain(eOK, "MREMAP_FIXED move of a range that starts mapped")
	if m.kernelBefore(6, 17) && !(len(pieces) == 1 && pieces[0].start <= src && pieces[0].end >= src+n) {
		// Before 6.17 the range must lie inside one VMA (vma_to_resize),
		// checked before anything moves.
		if maybeOneVMA(pieces, src, src+n) {
			pd = either("before Linux 6.17 a fixed move must stay inside one VMA; these segments may be one", eOK, eFAULT)
		} else {
			pd = certain(eFAULT, "before Linux 6.17 a fixed move must stay inside one VMA (EFAULT)")
		}
		if pd.first() == eFAULT || m.checking() && m.o.Ops[i].Errno == eFAULT {
			m.result(pr, i, pd)
			if !m.checking() {
				m.setRet(i, ^uint64(0))
			}
			// mremap_to unmapped the destination before it checked the
			// source range.
			pr.unmap(dst, dst+n)
			return
		}
	}
	if uffdArmed(pieces) {
		// Linux moves several VMAs at once only if none is
		// userfaultfd-armed (vma_multi_allowed).
		switch {
		case !maybeOneVMA(pieces, src, src+n):
			pd = certain(eFAULT, "a move of several VMAs, one of them userfaultfd-armed, stops there with EFAULT")
		case len(pieces) > 1:
			pd = either("a userfaultfd-armed range that may be one VMA or several", eOK, eFAULT)
		}
	}
	r := m.result(pr, i, pd)
	m.setRet(i, gaddr(dst))
	if pd.first() == eFAULT && len(pd.errnos) == 1 || uffdArmed(pieces) && r.Errno == eFAULT {
		// The pieces before the armed VMA may already have moved.
		if !m.checking() {
			m.setRet(i, ^uint64(0))
		}
		m.forget(pr, src, src+n, i)
		m.forget(pr, dst, dst+n, i)
		return
	}
	if r.Errno != 0 {
		m.forget(pr, src, src+n, i)
		m.forget(pr, dst, dst+n, i)
		return
	}
	if m.checking() && r.Ret != gaddr(dst) {
		m.col.add(Finding{Oracle: OracleErrno, Signature: "errno:mremap-address", Proc: pr.id, View: -1, Op: i, Region: m.p.Ops[i].Region,
			Explanation: fmt.Sprintf("%s: %s returned %#x, MREMAP_FIXED asked for %#x", procName(pr.id), opRef(m.p, i), r.Ret, gaddr(dst))})
		m.forget(pr, src, src+n, i)
		m.forget(pr, dst, dst+n, i)
		return
	}
	for _, s := range pieces {
		to := dst + (s.start - src)
		m.moveVMA(pr, i, s.start, s.end-s.start, s.end-s.start, to, true, true, dontunmap)
	}
}

// growInPlace extends the VMA ending at src+oldN by newN-oldN pages.
func (m *machine) growInPlace(pr *proc, i, src, oldN, newN int) {
	last := *pr.segAt(src + oldN - 1)
	tail := last
	tail.start = src + oldN
	tail.end = src + newN
	if tail.obj >= 0 {
		tail.pgoff = last.pgoff + (src + oldN - last.start)
	}
	tail.origin, tail.originWhy = i, "mremap growth"
	pr.unmap(tail.start, tail.end)
	pr.insert(tail)
	m.populate(pr, &tail, tail.start, tail.end, tail.lock, true)
}

// moveVMA moves [src, src+oldN) (one VMA, or one piece of a multi-VMA
// move) to a new mapping of newN pages at page to (outside the arena if
// !inArena), growing it if newN > oldN.
func (m *machine) moveVMA(pr *proc, i, src, oldN, newN, to int, inArena, fixed, dontunmap bool) {
	if fixed && inArena {
		pr.unmap(to, min(to+newN, arenaPages))
	}
	if newN < oldN {
		pr.unmap(src+newN, src+oldN)
		oldN = newN
	}
	pieces := pr.segsIn(src, src+oldN)
	var tailProto seg
	if oldN > 0 {
		tailProto = pieces[len(pieces)-1]
	} else {
		tailProto = *pr.segAt(src)
		tailProto.start, tailProto.end = src, src
		if tailProto.obj >= 0 {
			tailProto.pgoff = pr.segAt(src).pgoff + (src - pr.segAt(src).start)
		}
	}
	// Take the private content along.
	moved := map[int]*page{}
	for _, k := range pr.anon.keysIn(src, src+oldN) {
		moved[k] = pr.anon[k]
		delete(pr.anon, k)
	}
	if dontunmap {
		// The source stays mapped, emptied: anonymous pages read as zero,
		// file and shared pages fault in from their object again. The
		// kernel clears VM_LOCKED on the whole source VMA. Before 6.17
		// (seen on 6.1.192) the source VMA stays locked around the moved
		// range; whether the emptied range itself stays locked was not
		// observed, so it may be either.
		if m.kernelBefore(6, 17) {
			m.maybeUnlocked(pr, src, src+oldN)
		} else {
			m.unlockVMA(pr, src, src+oldN)
		}
		for k := range moved {
			pr.reset[k] = i
		}
	} else {
		pr.unmap(src, src+oldN)
	}
	if !inArena {
		for _, pg := range moved {
			pg.refs--
		}
		return
	}
	for _, s := range pieces {
		d := s
		d.start = to + (s.start - src)
		d.end = to + (s.end - src)
		d.origin, d.originWhy = i, "mremap move"
		m.insertClipped(pr, d)
	}
	for k, pg := range moved {
		d := to + (k - src)
		if d < arenaPages {
			pr.anon[d] = pg
		} else {
			pg.refs--
		}
	}
	if newN > oldN {
		tail := tailProto
		tail.start = to + oldN
		tail.end = to + newN
		if tail.obj >= 0 {
			tail.pgoff = tailProto.pgoff + (tailProto.end - tailProto.start)
		}
		tail.origin, tail.originWhy = i, "mremap growth"
		if oldN == 0 {
			tail.lock = pr.segAt(src).lock
		}
		m.insertClipped(pr, tail)
		if tail.end > arenaPages {
			tail.end = arenaPages
		}
		if tail.start < tail.end {
			m.populate(pr, &tail, tail.start, tail.end, tail.lock, true)
		}
	}
}

// insertClipped inserts s, dropping what lies outside the arena and
// replacing what is there.
func (m *machine) insertClipped(pr *proc, s seg) {
	if s.end > arenaPages {
		s.end = arenaPages
	}
	if s.start >= s.end {
		return
	}
	pr.unmap(s.start, s.end)
	pr.insert(s)
}

// maybeUnlocked makes VM_LOCKED unknown on the segments of [lo, hi).
func (m *machine) maybeUnlocked(pr *proc, lo, hi int) {
	a, b := pr.find(lo), pr.find(hi-1)
	if a < 0 || b < 0 {
		return
	}
	for j := a; j <= b; j++ {
		if pr.segs[j].lock == yes {
			pr.segs[j].lock = maybe
		}
	}
}

// unlockVMA clears VM_LOCKED on the kernel VMA containing [lo, hi): the
// segments overlapping it certainly, segments that may belong to the same
// VMA possibly.
func (m *machine) unlockVMA(pr *proc, lo, hi int) {
	a := pr.find(lo)
	b := pr.find(hi - 1)
	if a < 0 || b < 0 {
		return
	}
	for j := a; j <= b; j++ {
		pr.segs[j].lock = no
	}
	for j := a - 1; j >= 0; j-- {
		if pr.segs[j].end != pr.segs[j+1].start || !sameAttrsIgnoringLock(&pr.segs[j], &pr.segs[j+1]) {
			break
		}
		if pr.segs[j].lock == yes {
			pr.segs[j].lock = maybe
		}
	}
	for j := b + 1; j < len(pr.segs); j++ {
		if pr.segs[j-1].end != pr.segs[j].start || !sameAttrsIgnoringLock(&pr.segs[j-1], &pr.segs[j]) {
			break
		}
		if pr.segs[j].lock == yes {
			pr.segs[j].lock = maybe
		}
	}
}

func sameAttrsIgnoringLock(a, b *seg) bool {
	x, y := *a, *b
	x.lock, y.lock = no, no
	return sameAttrs(&x, &y)
}

package checker

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// mremapCall is one mremap being modelled: its process and op, the
// flags, and the source and destination in pages (dst -1: none given).
type mremapCall struct {
	pr                        *proc
	i                         int
	op                        *prog.Op
	fixed, dontunmap, maymove bool
	oldN, newN, src, dst      int
}

// remapOutcome is a result the model allows: success with the
// destination page (-1: one the kernel picks), or ENOMEM (!ok).
type remapOutcome struct {
	ok  bool
	ret int
}

// fail records that c certainly fails with e.
func (m *machine) remapFail(c *mremapCall, e int, why string) {
	m.result(c.pr, c.i, certain(e, why))
	m.setRet(c.i, ^uint64(0))
}

// mremap follows Linux 6.18 mm/mremap.c. Where the outcome depends on
// kernel VMA boundaries the model cannot know (vma merging), it accepts
// either outcome and follows the observed errno and address.
func (m *machine) mremap(pr *proc, i int) {
	op := &m.p.Ops[i]
	c := &mremapCall{pr: pr, i: i, op: op, dst: -1,
		fixed:     op.Flags&prog.MremapFixed != 0,
		dontunmap: op.Flags&prog.MremapDontunmap != 0,
		maymove:   op.Flags&prog.MremapMaymove != 0,
		oldN:      pagesUp(op.Len), newN: pagesUp(op.NewLen), src: gpage(op.Region, op.Off)}
	if c.fixed && m.kernelBefore(6, 17) {
		defer m.oldFixedFailure(pr, i)
	}
	if !m.remapParams(c) {
		return
	}
	if m.hugeMremap(c) { // hugetlb.go
		return
	}
	s0 := pr.segAt(c.src)
	if s0 == nil {
		m.remapFail(c, eFAULT, "nothing is mapped at the source address (EFAULT)")
		return
	}
	if c.fixed && c.oldN == c.newN {
		m.remapMove(pr, i, c.src, c.dst, c.oldN, c.dontunmap)
		return
	}
	if s0.unknown {
		m.remapUnknown(pr, i, c.src, c.oldN, c.newN, c.dst)
		return
	}
	if m.remapInPlace(c, !s0.kind.Shared()) {
		return
	}
	one := 2
	if checkN := min(c.oldN, c.newN); checkN > 0 {
		one = pr.withinOneVMA(c.src, c.src+checkN)
	}
	for _, s := range pr.segsIn(c.src, c.src+max(min(c.oldN, c.newN), 1)) {
		if s.unknown {
			m.remapUnknown(pr, i, c.src, c.oldN, c.newN, c.dst)
			return
		}
	}
	if one == 0 {
		m.remapFail(c, eFAULT, "the source range spans more than one VMA (EFAULT)")
		return
	}
	outs, why := m.remapOutcomes(c)
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
			m.forget(pr, c.src, c.src+max(c.oldN, c.newN), i)
			if c.dst >= 0 {
				m.forget(pr, c.dst, c.dst+c.newN, i)
			}
		}
		m.setRet(i, ^uint64(0))
		return
	}
	to, inArena, ok := m.remapDestination(c, r, outs, why)
	if !ok {
		return
	}
	if inArena && to == c.src && !c.fixed && !c.dontunmap {
		// Grown in place.
		m.growInPlace(pr, i, c.src, c.oldN, c.newN)
		return
	}
	m.moveVMA(pr, i, c.src, c.oldN, c.newN, to, inArena, c.fixed, c.dontunmap)
}

// remapParams follows check_mremap_params and the flag checks; it sets
// c.dst for MREMAP_FIXED and reports false when c failed (recorded).
func (m *machine) remapParams(c *mremapCall) bool {
	op := c.op
	if !aligned(op.Off) {
		m.remapFail(c, eINVAL, "mremap of an unaligned address fails with EINVAL")
		return false
	}
	if c.newN == 0 {
		m.remapFail(c, eINVAL, "mremap to zero length fails with EINVAL")
		return false
	}
	if !c.fixed && !c.dontunmap {
		return true
	}
	if c.fixed && !aligned(op.ToOff) {
		m.remapFail(c, eINVAL, "MREMAP_FIXED to an unaligned address fails with EINVAL")
		return false
	}
	if !c.maymove {
		m.remapFail(c, eINVAL, "MREMAP_FIXED and MREMAP_DONTUNMAP need MREMAP_MAYMOVE (EINVAL)")
		return false
	}
	if c.dontunmap && c.oldN != c.newN {
		m.remapFail(c, eINVAL, "MREMAP_DONTUNMAP cannot resize (EINVAL)")
		return false
	}
	if !c.fixed {
		return true
	}
	c.dst = gpage(op.To, op.ToOff)
	if !(c.src < c.dst+c.newN && c.dst < c.src+c.oldN) {
		return true
	}
	if m.kernelBefore(6, 17) {
		// Older kernels look the source VMA up first.
		switch s := c.pr.segAt(c.src); {
		case s == nil:
			m.remapFail(c, eFAULT, "before Linux 6.17 mremap looks up the source VMA before checking for overlap: nothing mapped (EFAULT)")
			return false
		case s.unknown:
			m.result(c.pr, c.i, either("before Linux 6.17 mremap looks up the source VMA first; the model lost track of it", eFAULT, eINVAL))
			m.setRet(c.i, ^uint64(0))
			return false
		}
	}
	m.remapFail(c, eINVAL, "source and destination overlap (EINVAL)")
	return false
}

// remapInPlace handles the mremaps that map no new address space (the
// same size, shrinking) and those that fail before looking for it; it
// reports whether c is done.
func (m *machine) remapInPlace(c *mremapCall, private bool) bool {
	pr, i, op, src, dst := c.pr, c.i, c.op, c.src, c.dst
	switch {
	case !c.fixed && !c.dontunmap && c.oldN == c.newN:
		m.result(pr, i, certain(eOK, "mremap to the same size does nothing"))
		m.setRet(i, prog.Base(op.Region)+op.Off)
		return true
	case !c.fixed && !c.dontunmap && c.newN < c.oldN:
		r := m.result(pr, i, certain(eOK, "shrinking unmaps the tail"))
		m.setRet(i, prog.Base(op.Region)+op.Off)
		if r.Errno != 0 {
			m.forget(pr, src, src+c.oldN, i)
			return true
		}
		pr.unmap(src+c.newN, src+c.oldN)
		return true
	}
	// The operation maps new address space: growth, a fixed
	// destination, or MREMAP_DONTUNMAP.
	if c.oldN == 0 && private {
		m.remapFail(c, eINVAL, "mremap with old_len 0 (duplicate) of a private mapping fails with EINVAL")
		return true
	}
	if c.fixed && c.oldN == 0 && dst == src {
		// Not an overlap by the kernel's test, so the destination is
		// unmapped first, taking the source with it: EFAULT.
		r := m.result(pr, i, certain(eFAULT, "MREMAP_FIXED with old_len 0 onto the source itself unmaps the source, then finds nothing to move (EFAULT)"))
		m.setRet(i, ^uint64(0))
		if r.Errno == eFAULT {
			pr.unmap(dst, dst+c.newN)
		} else {
			m.forget(pr, dst, dst+c.newN, i)
		}
		return true
	}
	return false
}

// remapOutcomes are the results the model allows for a move or growth
// of one VMA, and why.
func (m *machine) remapOutcomes(c *mremapCall) ([]remapOutcome, string) {
	switch {
	case c.fixed:
		return []remapOutcome{{ok: true, ret: c.dst}}, "MREMAP_FIXED move of one VMA"
	case c.dontunmap:
		return []remapOutcome{{ok: true, ret: -1}}, "MREMAP_DONTUNMAP move to an address the kernel picks"
	}
	// Expand without a fixed destination.
	pr, src, oldN, newN := c.pr, c.src, c.oldN, c.newN
	var outs []remapOutcome
	var why string
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
		outs = append(outs, remapOutcome{ok: true, ret: src})
		why = "the VMA ends at the range and the space after it is free: it grows in place"
	case endB == 0 || free == 0:
		why = "the VMA cannot grow in place"
	default:
		outs = append(outs, remapOutcome{ok: true, ret: src})
		why = "the VMA may or may not be able to grow in place (vma merging, or pages the model lost track of)"
	}
	if endB != 2 || free != 2 {
		if c.maymove {
			outs = append(outs, remapOutcome{ok: true, ret: -1})
			why += "; MREMAP_MAYMOVE lets it move"
		} else {
			outs = append(outs, remapOutcome{})
			why += "; without MREMAP_MAYMOVE that is ENOMEM"
		}
	}
	return outs, why
}

// remapDestination is where a successful mremap went: the observed
// address, checked against outs, or when generating the first outcome.
// ok false: the address is a finding (recorded) and the model forgot
// the pages involved.
func (m *machine) remapDestination(c *mremapCall, r obs.OpResult, outs []remapOutcome, why string) (to int, inArena, ok bool) {
	pr, i, op, src, dst, oldN, newN := c.pr, c.i, c.op, c.src, c.dst, c.oldN, c.newN
	if !m.checking() {
		o := outs[0]
		if o.ret >= 0 {
			to, inArena = o.ret, true
		} else {
			to, inArena = m.farPage(newN), false
		}
		m.setRet(i, pageAddr(to))
		return to, inArena, true
	}
	to, inArena = addrPage(r.Ret)
	if r.Ret%prog.PageSize != 0 {
		m.cmp.address(pr, i, op.Region, "mremap", fmt.Sprintf("returned the unaligned address %#x", r.Ret))
		m.forget(pr, src, src+max(oldN, newN), i)
		return 0, false, false
	}
	for _, o := range outs {
		if o.ok && (o.ret == -1 && to != src || o.ret >= 0 && inArena && o.ret == to) {
			return to, inArena, true
		}
	}
	m.cmp.address(pr, i, op.Region, "mremap", fmt.Sprintf("returned %#x, which the model does not allow (%s)", r.Ret, why))
	m.forget(pr, src, src+max(oldN, newN), i)
	if dst >= 0 {
		m.forget(pr, dst, dst+newN, i)
	}
	if inArena {
		m.forget(pr, to, to+newN, i)
	}
	return 0, false, false
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
		if s.uffd != 0 {
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
		m.cmp.address(pr, i, m.p.Ops[i].Region, "mremap", fmt.Sprintf("returned %#x, MREMAP_FIXED asked for %#x", r.Ret, gaddr(dst)))
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
		d.uffd = 0 // mremap_userfaultfd_prep: no UFFD_FEATURE_EVENT_REMAP
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
		tail.uffd = 0
		if oldN == 0 {
			tail.lock, tail.onfault = pr.segAt(src).lock, pr.segAt(src).onfault
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
	x.onfault, y.onfault = false, false
	return sameAttrs(&x, &y)
}

package sim

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// Linux errno values (x86-64), independent of the host the model runs on.
const (
	ESRCH  = 3
	ECHILD = 10
	EAGAIN = 11
	ENOMEM = 12
	EFAULT = 14
	EINVAL = 22
)

func roundUp(x uint64) uint64 { return (x + pageMask) &^ pageMask }

// beyondEOF reports whether page a of v lies past the end of its file.
func beyondEOF(v *VMA, a uint64) bool {
	return v.File != nil && v.fileOff(a&^pageMask) >= v.File.Size
}

// unmapRange removes every mapping in [s, e) (page aligned).
func (m *MM) unmapRange(s, e uint64) {
	vs, _ := m.vmasIn(s, e)
	for _, v := range vs {
		m.zap(v.Start, v.End)
	}
	m.removeVMAs(s, e)
	m.freeTables(s, e)
}

// freeTables frees the PTE tables of [s, e) whose 2 MiB no VMA touches.
func (m *MM) freeTables(s, e uint64) {
	for a := s &^ pmdMask; a < e; a += pmdSize {
		pe, _ := m.pmdOf(a, false)
		if pe == nil || !pe.present() || len(m.overlapping(a, a+pmdSize)) > 0 {
			continue
		}
		if pe.huge() {
			releaseHuge(pe.Huge)
		} else {
			releaseTable(pe.Table)
			m.tables--
		}
		*pe = PMDEntry{}
	}
}

// Mmap maps [a, a+length) MAP_FIXED with the given backing.
func (m *MM) Mmap(a, length uint64, shared bool, file *File, off uint64) int {
	if a&pageMask != 0 || off&pageMask != 0 || length == 0 {
		return EINVAL
	}
	length = roundUp(length)
	m.k.syncVMAs(m, a, a+length, MutAsyncMmapNoSync)
	m.unmapRange(a, a+length)
	v := &VMA{Start: a, End: a + length, Flags: VMRead | VMWrite, File: file, PgOff: off}
	if shared {
		v.Flags |= VMShared
		if file == nil {
			v.File, v.PgOff = m.k.newFile(length), 0
			v.File.AnonShmem = true
		}
	} else if file == nil {
		v.PgOff = a
	}
	m.insertVMA(v)
	m.mergeAround(a, a+length)
	return 0
}

// Munmap is munmap(2).
func (m *MM) Munmap(a, length uint64) int {
	if a&pageMask != 0 || length == 0 {
		return EINVAL
	}
	e := a + roundUp(length)
	m.k.syncVMAs(m, a, e, MutAsyncMunmapNoSync)
	m.unmapRange(a, e)
	return 0
}

// walk applies fn to the VMAs of [s, e) in order, Linux style: it stops
// with ENOMEM at the first hole (what was done before stays done) and at
// the first error of fn.
func (m *MM) walk(s, e uint64, fn func(v *VMA) int) int {
	if m.findVMA(s) < 0 {
		return ENOMEM
	}
	vs, _ := m.vmasIn(s, e)
	at := s
	for _, v := range vs {
		if v.Start != at {
			return ENOMEM
		}
		if r := fn(v); r != 0 {
			return r
		}
		at = v.End
	}
	if at < e {
		return ENOMEM
	}
	return 0
}

// Mprotect is mprotect(2) with prot none, r or rw.
func (m *MM) Mprotect(a, length uint64, p prog.Prot) int {
	if a&pageMask != 0 {
		return EINVAL
	}
	length = roundUp(length)
	if length == 0 {
		return 0
	}
	e := a + length
	if m.findVMA(a) < 0 {
		return ENOMEM
	}
	m.k.syncVMAs(m, a, e, MutAsyncMprotectNoSync)
	var nf uint16
	switch p {
	case prog.ProtRead:
		nf = VMRead
	case prog.ProtRW:
		nf = VMRead | VMWrite
	}
	r := m.walk(a, e, func(v *VMA) int {
		old := v.Flags
		v.setFlags(v.Flags&^(VMRead|VMWrite) | nf)
		if old&VMWrite != 0 && nf&VMWrite == 0 {
			m.wrprotect(v.Start, v.End)
		}
		if nf&VMWrite != 0 && m.k.mut.has(MutAsyncMprotectNoSync) {
			// The buggy path rewrites the PMD entries with the new
			// protection, dropping Async-fork's not-yet-copied marker.
			m.forEachPMD(v.Start, v.End, func(_ uint64, pe *PMDEntry) { pe.Flags |= PMDRW })
		}
		if old&(VMWrite|VMShared|VMLocked|VMLockOnfault) == VMLocked && nf&VMWrite != 0 {
			m.populate(v, v.Start, v.End)
		}
		return 0
	})
	m.mergeDirty()
	return r
}

// populate faults in [s, e) of v as mlock does: write faults for private
// writable areas (which breaks copy-on-write), nothing visible otherwise.
func (m *MM) populate(v *VMA, s, e uint64) {
	if v.Flags&(VMWrite|VMShared) != VMWrite {
		return
	}
	for x := s; x < e; x += pageSize {
		if beyondEOF(v, x) {
			return
		}
		m.faultWrite(x, v)
	}
}

// Madvise is madvise(2).
func (m *MM) Madvise(a, length uint64, adv prog.Advice) int {
	if a&pageMask != 0 {
		return EINVAL
	}
	length = roundUp(length)
	if length == 0 {
		return 0
	}
	e := a + length
	if len(m.overlapping(a, e)) == 0 {
		return ENOMEM
	}
	m.k.syncVMAs(m, a, e, MutAsyncMadviseNoSync)
	if v := adv.Info().Since; m.k.kernelBefore(v[0], v[1]) {
		return EINVAL // an advice this release does not know
	}
	if adv.Info().Populate {
		return m.madvisePopulate(a, e, adv.Info().PopulateWrite)
	}
	unmapped := 0
	at := a
	var err int
	setFlags := func(v *VMA, set, clear uint16) {
		v.setFlags(v.Flags&^clear | set)
	}
	var vs []*VMA
	switch adv {
	case prog.AdvDontneed, prog.AdvDontneedLocked, prog.AdvFree, prog.AdvCollapse, prog.AdvPageout, prog.AdvCold:
		vs = m.overlapping(a, e) // these do not split VMAs
	default:
		vs, _ = m.vmasIn(a, e)
	}
	for _, v := range vs {
		if v.Start > at {
			unmapped = ENOMEM
		}
		at = v.End
		switch adv {
		case prog.AdvDontneed:
			if v.Flags&VMLocked != 0 {
				err = EINVAL
			} else {
				m.zap(max(a, v.Start), min(e, v.End))
			}
		case prog.AdvDontneedLocked:
			m.zap(max(a, v.Start), min(e, v.End))
		case prog.AdvFree:
			if v.Flags&VMLocked != 0 || !v.anon() || !v.private() {
				err = EINVAL
			}
		case prog.AdvDontfork:
			setFlags(v, VMDontCopy, 0)
		case prog.AdvDofork:
			setFlags(v, 0, VMDontCopy)
		case prog.AdvWipeonfork:
			if !v.anon() || !v.private() {
				err = EINVAL
			} else {
				setFlags(v, VMWipeOnFork, 0)
			}
		case prog.AdvKeeponfork:
			setFlags(v, 0, VMWipeOnFork)
		case prog.AdvHugepage:
			setFlags(v, VMHugePage, VMNoHugePage)
		case prog.AdvNohugepage:
			setFlags(v, VMNoHugePage, VMHugePage)
		case prog.AdvCollapse:
			err = m.collapse(v, a, e)
		case prog.AdvMergeable:
			if v.private() {
				setFlags(v, VMMergeable, 0)
			}
		case prog.AdvUnmergeable:
			if v.private() {
				setFlags(v, 0, VMMergeable)
			}
		case prog.AdvPageout, prog.AdvCold:
			if v.Flags&VMLocked != 0 {
				err = EINVAL
			}
		default:
			err = EINVAL // as a kernel that does not know the advice
		}
		if err != 0 {
			break
		}
	}
	if err == 0 && at < e {
		unmapped = ENOMEM
	}
	m.mergeDirty()
	if err != 0 {
		return err
	}
	return unmapped
}

// madvisePopulate is MADV_POPULATE_READ (write false) and _WRITE on
// [a, e): it faults the range in VMA by VMA. A VMA without the access is
// EINVAL, a page past the end of the file EFAULT (the fault's SIGBUS),
// both after the pages before it; a hole stops it with ENOMEM (Linux 6.9+)
// or is skipped, ENOMEM at the end (before 6.9, when it walked the VMAs
// as every other advice does).
func (m *MM) madvisePopulate(a, e uint64, write bool) int {
	walks := m.k.kernelBefore(6, 9)
	at, unmapped := a, 0
	for _, v := range m.overlapping(a, e) {
		if v.Start > at {
			if !walks {
				return ENOMEM
			}
			unmapped = ENOMEM
		}
		at = v.End
		if v.Flags&(VMRead|VMWrite) == 0 || write && v.Flags&VMWrite == 0 {
			return EINVAL
		}
		lo, hi := max(a, v.Start), min(e, v.End)
		if write {
			m.populate(v, lo, hi)
		}
		if beyondEOF(v, hi-pageSize) {
			return EFAULT
		}
	}
	if at < e {
		unmapped = ENOMEM
	}
	return unmapped
}

// collapse models MADV_COLLAPSE's answer on the part [s, e) of v, as the
// host (THP "madvise", shmem THP "never") gives it; contents never change
// and the model leaves the page tables as they are. The VMA must be
// anonymous private, not NOHUGEPAGE, have anonymous pages (an anon_vma)
// and be big enough to hold an aligned huge page; then every 2 MiB-aligned
// range inside the part must map at least one page (a part without such a
// range trivially succeeds, unless it lies strictly inside one 2 MiB
// range).
func (m *MM) collapse(v *VMA, s, e uint64) int {
	if v.Flags&VMNoHugePage != 0 {
		return EINVAL
	}
	if v.anon() && v.anonVMA == 0 || !v.anon() && len(v.File.pages) == 0 {
		return EINVAL
	}
	if (v.Start-v.PgOff)&pmdMask != 0 || (v.Start+pmdMask)&^pmdMask+pmdSize > v.End {
		return EINVAL
	}
	hs, he := (max(s, v.Start)+pmdMask)&^pmdMask, min(e, v.End)&^pmdMask
	if hs > he {
		// A part inside one 2 MiB range: the kernel's count of ranges
		// underflows and it reports failure.
		return EINVAL
	}
	for h := hs; h < he; h += pmdSize {
		pe, _ := m.pmdOf(h, false)
		if !v.anon() {
			if !v.File.anyPage(v.fileOff(h), pmdSize) {
				return EINVAL
			}
			continue
		}
		if pe == nil || !pe.present() {
			return EINVAL
		}
		if pe.huge() {
			continue
		}
		any := false
		for i := range pe.Table.E {
			if pe.Table.E[i].present() {
				any = true
				break
			}
		}
		if !any {
			return EINVAL
		}
	}
	return 0
}

// Mlock is mlock(2) (start rounded down, length rounded up) or munlock(2).
func (m *MM) Mlock(a, length uint64, lock bool) int { return m.mlock(a, length, lock, false) }

// MlockOnfault is mlock2(MLOCK_ONFAULT): VM_LOCKED and VM_LOCKONFAULT on
// the range, nothing populated.
func (m *MM) MlockOnfault(a, length uint64) int { return m.mlock(a, length, true, true) }

func (m *MM) mlock(a, length uint64, lock, onfault bool) int {
	s := a &^ pageMask
	e := s + roundUp(length+(a&pageMask))
	if e == s {
		return 0
	}
	if m.findVMA(s) < 0 {
		return ENOMEM
	}
	m.k.syncVMAs(m, s, e, 0)
	r := m.walk(s, e, func(v *VMA) int {
		f := v.Flags &^ (VMLocked | VMLockOnfault)
		if lock {
			f |= VMLocked
		}
		if onfault {
			f |= VMLockOnfault
		}
		v.setFlags(f)
		return 0
	})
	m.mergeDirty()
	if r == 0 && lock && !onfault {
		// Populate VMA by VMA; a PROT_NONE area or a page past the end of
		// the backing object stops it with ENOMEM (the lock stays).
		for _, v := range m.overlapping(s, e) {
			if v.Flags&(VMRead|VMWrite) == 0 {
				return ENOMEM
			}
			lo, hi := max(s, v.Start), min(e, v.End)
			m.populate(v, lo, hi)
			if beyondEOF(v, hi-pageSize) {
				return ENOMEM
			}
		}
	}
	return r
}

// Mremap is mremap(2). It returns the new address or an errno.
func (m *MM) Mremap(a, oldLen, newLen uint64, flags prog.MremapFlags, to uint64) (uint64, int) {
	if m.k.kernelBefore(6, 17) {
		return m.mremapBefore617(a, oldLen, newLen, flags, to)
	}
	maymove := flags&prog.MremapMaymove != 0
	fixed := flags&prog.MremapFixed != 0
	dontunmap := flags&prog.MremapDontunmap != 0
	if a&pageMask != 0 {
		return 0, EINVAL
	}
	oldLen, newLen = roundUp(oldLen), roundUp(newLen)
	if newLen == 0 {
		return 0, EINVAL
	}
	if fixed && !maymove || dontunmap && (!maymove || oldLen != newLen) {
		return 0, EINVAL
	}
	if fixed {
		if to&pageMask != 0 {
			return 0, EINVAL
		}
		if to < a+oldLen && a < to+newLen {
			return 0, EINVAL
		}
	}
	if m.vmaAt(a) == nil {
		return 0, EFAULT
	}
	if fixed && oldLen == newLen {
		// Since 6.17 a move without resize may span several VMAs: each
		// mapped piece moves to the same offset from the destination.
		m.k.syncVMAs(m, a, a+oldLen, MutAsyncMremapNoSync)
		m.k.syncVMAs(m, to, to+newLen, MutAsyncMremapNoSync)
		type piece struct {
			s, e  uint64
			armed bool
		}
		var ps []piece
		for _, v := range m.overlapping(a, a+oldLen) {
			ps = append(ps, piece{max(v.Start, a), min(v.End, a+oldLen), v.Flags&VMUffdMissing != 0})
		}
		multi := len(ps) != 1 || ps[0].s != a || ps[0].e != a+oldLen
		for _, pc := range ps {
			if multi && pc.armed {
				// vma_multi_allowed: a userfaultfd-armed VMA is not moved
				// with others; the move stops there.
				return 0, EFAULT
			}
			// Holes in the source leave the destination alone.
			m.unmapRange(to+(pc.s-a), to+(pc.e-a))
			m.moveVMA(pc.s, pc.e-pc.s, pc.e-pc.s, to+(pc.s-a), dontunmap)
		}
		return to, 0
	}
	if !fixed && !dontunmap && oldLen == newLen {
		return a, 0
	}
	if !fixed && !dontunmap && newLen < oldLen {
		m.k.syncVMAs(m, a, a+oldLen, MutAsyncMremapNoSync)
		m.unmapRange(a+newLen, a+oldLen)
		return a, 0
	}
	if oldLen == 0 && m.vmaAt(a).private() {
		return 0, EINVAL
	}
	if fixed && oldLen == 0 && to == a {
		m.unmapRange(to, to+newLen)
		return 0, EFAULT
	}
	if v := m.vmaAt(a); min(oldLen, newLen) > v.End-a {
		return 0, EFAULT
	}
	if fixed {
		m.k.syncVMAs(m, a, a+max(oldLen, 1), MutAsyncMremapNoSync)
		m.k.syncVMAs(m, to, to+newLen, MutAsyncMremapNoSync)
		m.unmapRange(to, to+newLen)
		if oldLen > newLen {
			m.unmapRange(a+newLen, a+oldLen)
			oldLen = newLen
		}
		return m.moveVMA(a, oldLen, newLen, to, dontunmap), 0
	}
	v := m.vmaAt(a)
	m.k.syncVMAs(m, a, a+max(oldLen, 1), MutAsyncMremapNoSync)
	if oldLen != 0 && !dontunmap && m.growInPlace(v, a, oldLen, newLen) {
		return a, 0
	}
	if !maymove {
		return 0, ENOMEM
	}
	return m.moveVMA(a, oldLen, newLen, m.k.unmappedArea(newLen), dontunmap), 0
}

// mremapBefore617 is mremap(2) as Linux 6.1 to 6.16 do it (mm/mremap.c
// before the 6.17 rewrite): the flag checks run on the unrounded lengths,
// the source VMA is looked up (EFAULT) before the destination is checked,
// and mremap_to unmaps the destination (and a shrinking source's tail)
// before vma_to_resize checks that the source lies inside one VMA
// (EFAULT): a failed fixed move may leave the destination unmapped.
func (m *MM) mremapBefore617(a, oldLen, newLen uint64, flags prog.MremapFlags, to uint64) (uint64, int) {
	maymove := flags&prog.MremapMaymove != 0
	fixed := flags&prog.MremapFixed != 0
	dontunmap := flags&prog.MremapDontunmap != 0
	if fixed && !maymove || dontunmap && (!maymove || oldLen != newLen) {
		return 0, EINVAL
	}
	if a&pageMask != 0 {
		return 0, EINVAL
	}
	oldLen, newLen = roundUp(oldLen), roundUp(newLen)
	if newLen == 0 {
		return 0, EINVAL
	}
	if m.vmaAt(a) == nil {
		return 0, EFAULT
	}
	// vma_to_resize, on the (possibly shortened) source.
	resize := func() int {
		v := m.vmaAt(a)
		switch {
		case v == nil:
			return EFAULT
		case oldLen == 0 && v.private():
			return EINVAL
		case oldLen > v.End-a:
			return EFAULT
		}
		return 0
	}
	if fixed || dontunmap {
		if fixed {
			if to&pageMask != 0 {
				return 0, EINVAL
			}
			if to < a+oldLen && a < to+newLen {
				return 0, EINVAL
			}
			m.k.syncVMAs(m, to, to+newLen, MutAsyncMremapNoSync)
			m.unmapRange(to, to+newLen)
		}
		if oldLen > newLen {
			m.k.syncVMAs(m, a, a+oldLen, MutAsyncMremapNoSync)
			m.unmapRange(a+newLen, a+oldLen)
			oldLen = newLen
		}
		if e := resize(); e != 0 {
			return 0, e
		}
		m.k.syncVMAs(m, a, a+max(oldLen, 1), MutAsyncMremapNoSync)
		dst := to
		if !fixed {
			dst = m.k.unmappedArea(newLen)
		}
		return m.moveVMA(a, oldLen, newLen, dst, dontunmap), 0
	}
	if oldLen >= newLen {
		if oldLen > newLen {
			m.k.syncVMAs(m, a, a+oldLen, MutAsyncMremapNoSync)
			m.unmapRange(a+newLen, a+oldLen)
		}
		return a, 0
	}
	if e := resize(); e != 0 {
		return 0, e
	}
	v := m.vmaAt(a)
	m.k.syncVMAs(m, a, a+max(oldLen, 1), MutAsyncMremapNoSync)
	if oldLen != 0 && m.growInPlace(v, a, oldLen, newLen) {
		return a, 0
	}
	if !maymove {
		return 0, ENOMEM
	}
	return m.moveVMA(a, oldLen, newLen, m.k.unmappedArea(newLen), false), 0
}

// growInPlace grows v, which [a, a+oldLen) ends, to end at a+newLen when
// the space after it is free (populating it when v is locked), and
// reports whether it did.
func (m *MM) growInPlace(v *VMA, a, oldLen, newLen uint64) bool {
	if a+oldLen != v.End || a+newLen > arenaEnd || len(m.overlapping(v.End, a+newLen)) != 0 {
		return false
	}
	old := v.End
	v.End = a + newLen
	m.mergeAround(old, v.End)
	if v.Flags&(VMLocked|VMLockOnfault) == VMLocked { // lock-on-fault populates nothing
		m.populate(v, old, a+newLen)
	}
	return true
}

// resizable checks the source of a move or resize (vma_to_resize).
func (m *MM) resizable(a, oldLen uint64, maymove bool) int {
	v := m.vmaAt(a)
	if v == nil {
		return EFAULT
	}
	if oldLen == 0 {
		if v.private() {
			return EINVAL
		}
		if !maymove {
			return ENOMEM
		}
	}
	if oldLen > v.End-a {
		return EFAULT
	}
	return 0
}

// unmappedArea picks an address for a mapping the kernel places itself:
// top-down, far above the arena (like mmap_base), so it is in no view.
func (k *Kernel) unmappedArea(length uint64) uint64 {
	if k.mmapBase == 0 {
		k.mmapBase = 0x7f0000000000
	}
	k.mmapBase -= (length + pmdMask) &^ pmdMask
	return k.mmapBase
}

// moveVMA moves [a, a+oldLen) to [to, to+newLen) (the destination is free).
func (m *MM) moveVMA(a, oldLen, newLen, to uint64, dontunmap bool) uint64 {
	var src *VMA
	switch {
	case dontunmap:
		// The source stays mapped and is not split; the kernel clears
		// VM_LOCKED on the whole source VMA (the new one keeps it).
		src = m.vmaAt(a)
	case oldLen > 0:
		vs, _ := m.vmasIn(a, a+oldLen)
		src = vs[0]
	default:
		src = m.vmaAt(a)
	}
	nv := *src
	nv.Start, nv.End = to, to+newLen
	nv.Flags &^= VMUffdMissing // mremap_userfaultfd_prep: no UFFD_FEATURE_EVENT_REMAP
	nv.PgOff = src.PgOff + (a - src.Start)
	nv.dirty, nv.splitGen = false, 0
	m.insertVMA(&nv)
	if oldLen > 0 {
		m.movePTEs(a, to, oldLen)
	}
	if dontunmap {
		if !m.k.kernelBefore(6, 17) {
			src.Flags &^= VMLocked | VMLockOnfault
		}
		// Before 6.17 (seen on 6.1.192, checker/testdata/linux61) the
		// source VMA stays locked around the moved range; whether the
		// emptied range itself does was not observed: the model keeps it
		// locked too.
	} else if oldLen > 0 {
		m.removeVMAs(a, a+oldLen)
		m.freeTables(a, a+oldLen)
	}
	m.mergeAround(to, to+newLen)
	if nv.Flags&(VMLocked|VMLockOnfault) == VMLocked && newLen > oldLen {
		if v := m.vmaAt(to + oldLen); v != nil {
			m.populate(v, to+oldLen, to+newLen)
		}
	}
	return to
}

// movePTEs moves the page-table entries of [from, from+n) to [to, to+n).
func (m *MM) movePTEs(from, to, n uint64) {
	for off := uint64(0); off < n; {
		s := from + off
		spe, _ := m.pmdOf(s, false)
		if spe == nil || !spe.present() {
			off = min(n, off+(pmdSize-(s&pmdMask)))
			continue
		}
		if spe.huge() {
			d := to + off
			if s&pmdMask == 0 && d&pmdMask == 0 && n-off >= pmdSize {
				dpe, _ := m.pmdOf(d, true)
				*dpe = *spe
				*spe = PMDEntry{}
				off += pmdSize
				continue
			}
			m.splitHuge(spe)
		}
		if spe.Table.Ref > 1 && !m.k.mut.has(MutODFMremapNoBreak) {
			if !m.breakTable(s&^pmdMask, spe) {
				return
			}
		}
		end := min(n, off+(pmdSize-(s&pmdMask)))
		for ; off < end; off += pageSize {
			se := &spe.Table.E[pteIndex(from+off)]
			if !se.present() {
				continue
			}
			dpe := m.tableForWrite(to + off)
			if dpe == nil {
				continue
			}
			dpe.Table.E[pteIndex(to+off)] = *se
			*se = PTE{}
		}
	}
}

// tableForWrite returns the PMD entry of a with a present, exclusive PTE
// table (allocating, splitting or breaking as needed).
func (m *MM) tableForWrite(a uint64) *PMDEntry {
	pe, err := m.pmdOf(a, true)
	if err != nil {
		return nil
	}
	if !pe.present() {
		*pe = PMDEntry{Table: &PTETable{Ref: 1}, Flags: PMDPresent | PMDRW}
		m.tables++
	}
	if pe.huge() {
		m.splitHuge(pe)
	}
	if pe.Table.Ref > 1 && !m.breakTable(a&^pmdMask, pe) {
		return nil
	}
	return pe
}

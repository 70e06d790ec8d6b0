package sim

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// The VMA operations of fuzz/prog/vmaops.go that are not a flag of mlock
// (MlockOnfault) or madvise: the simulated kernel keeps each VMA's memory
// policy and anonymous name, so VMAs split and merge where Linux's do. It
// keeps no page placement, so a policy moves nothing. remap_file_pages
// (RemapFile) maps a shared range afresh at another file offset.

// EBADF is PR_SET_VMA_ANON_NAME's answer for a file mapping.
const EBADF = 9

// Mbind is mbind(2) with policy pol on node 0 and no flags: a hole
// anywhere in the range is EFAULT before anything changes
// (queue_pages_range), then the policy goes on every VMA.
func (m *MM) Mbind(a, length uint64, pol prog.Policy) int {
	if a&pageMask != 0 {
		return EINVAL
	}
	length = roundUp(length)
	if length == 0 {
		return 0
	}
	e := a + length
	at := a
	vs := m.overlapping(a, e)
	for _, v := range vs {
		if v.Start > at && pol != prog.PolicyDefault {
			return EFAULT
		}
		at = v.End
	}
	// MPOL_DEFAULT (no policy object) accepts holes
	// (MPOL_MF_DISCONTIG_OK), not a range with nothing mapped.
	if len(vs) == 0 || at < e && pol != prog.PolicyDefault {
		return EFAULT
	}
	m.k.syncVMAs(m, a, e, 0)
	// mbind_range leaves a VMA that has the policy alone (no split).
	for _, v := range m.overlapping(a, e) {
		if v.Policy != pol {
			m.modify(v, a, e, func(w *VMA) { w.Policy = pol })
		}
	}
	m.mergeDirty()
	return 0
}

// modify applies change to the part of v inside [s, e), splitting v
// there first, and marks the part for mergeDirty.
func (m *MM) modify(v *VMA, s, e uint64, change func(*VMA)) {
	lo, hi := max(s, v.Start), min(e, v.End)
	m.splitAt(lo)
	m.splitAt(hi)
	w := m.vmaAt(lo)
	change(w)
	w.dirty = true
}

// AnonName is prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME) on a kernel with
// CONFIG_ANON_VMA_NAME: it walks the VMAs as madvise does (holes ENOMEM
// at the end), naming anonymous ones and stopping with EBADF at a file
// mapping (and at shmem before Linux 6.2).
func (m *MM) AnonName(a, length uint64, name prog.AnonName) int {
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
	m.k.syncVMAs(m, a, e, 0)
	at, unmapped, err := a, 0, 0
	for _, v := range m.overlapping(a, e) {
		if v.Start > at {
			unmapped = ENOMEM
		}
		at = v.End
		if v.File != nil && !(v.File.AnonShmem && !m.k.kernelBefore(6, 2)) {
			err = EBADF
			break
		}
		// madvise_update_vma leaves a VMA that has the name alone.
		if v.Name != name {
			m.modify(v, a, e, func(w *VMA) { w.Name = name })
		}
	}
	if at < e {
		unmapped = ENOMEM
	}
	m.mergeDirty()
	if err != 0 {
		return err
	}
	return unmapped
}

// PMadvise is process_madvise(2) of one iovec of the process itself:
// madvise of it (MADV_COLD, MADV_PAGEOUT), or nothing for an empty one.
// It returns the bytes advised.
func (m *MM) PMadvise(a, length uint64, adv prog.Advice) (uint64, int) {
	if length == 0 {
		return 0, 0
	}
	if e := m.Madvise(a, length, adv); e != 0 {
		return 0, e
	}
	return length, 0
}

// RemapFile is remap_file_pages(2) with prot 0, no flags and file page
// pgoff (Linux 6.1 mm/mmap.c): start and length rounded down to pages;
// the VMA at a must be shared, and the VMAs the range runs into must
// follow it without a hole, with the same file and the same flags; then
// the range is mapped afresh (MAP_SHARED|MAP_FIXED, MAP_LOCKED if the
// first VMA is locked) from that file at pgoff with the first VMA's
// protection: no advice, policy or name survives. Populating a shared
// mapping faults nothing private in.
func (m *MM) RemapFile(a, length, pgoff uint64) int {
	a &^= pageMask
	length &^= pageMask
	if length == 0 {
		return EINVAL
	}
	e := a + length
	v := m.vmaAt(a)
	if v == nil || v.Flags&VMShared == 0 {
		return EINVAL
	}
	prev := v
	for _, w := range m.overlapping(v.End, e) {
		if w.Start != prev.End || w.File != v.File || w.Flags != v.Flags {
			return EINVAL
		}
		prev = w
	}
	if prev.End < e {
		return EINVAL
	}
	nv := &VMA{Start: a, End: e, Flags: v.Flags&(VMRead|VMWrite|VMLocked) | VMShared, File: v.File, PgOff: pgoff * pageSize}
	m.k.syncVMAs(m, a, e, 0)
	m.unmapRange(a, e)
	m.insertVMA(nv)
	m.mergeAround(a, e)
	return 0
}

// Uffd is UFFDIO_REGISTER (MISSING mode; reg) or UFFDIO_UNREGISTER of
// [a, a+length) on Linux 6.1 (fs/userfaultfd.c): start and length
// page-aligned and non-zero, and the first VMA at or after a must start
// before the end (EINVAL); holes are skipped. Every simulated
// mapping is anonymous or shmem, which may register. Content does not
// change: the handler fills missing pages with zeros (readPage).
func (m *MM) Uffd(a, length uint64, reg bool) int {
	if a&pageMask != 0 || length&pageMask != 0 || length == 0 {
		return EINVAL
	}
	e := a + length
	var next *VMA
	for _, v := range m.vmas {
		if v.End > a && (next == nil || v.Start < next.Start) {
			next = v
		}
	}
	if next == nil || next.Start >= e {
		// A real process always has a VMA above the arena (its stack),
		// so none at all is EINVAL too, not the kernel's ENOMEM.
		return EINVAL
	}
	m.k.syncVMAs(m, a, e, 0)
	for _, v := range m.overlapping(a, e) {
		if (v.Flags&VMUffdMissing != 0) != reg {
			m.modify(v, a, e, func(w *VMA) { w.Flags ^= VMUffdMissing })
		}
	}
	m.mergeDirty()
	return 0
}

// vmaOp runs an mbind, anonname, pmadvise or remapfile of op at addr in m.
func (x *machine) vmaOp(m *MM, op *prog.Op, addr uint64) (ret uint64, errno int) {
	switch op.Kind {
	case prog.OpMbind:
		return 0, m.Mbind(addr, op.Len, op.Policy)
	case prog.OpAnonName:
		return 0, m.AnonName(addr, op.Len, op.Name)
	case prog.OpRemapFile:
		return 0, m.RemapFile(addr, op.Len, op.PgOff)
	case prog.OpUffdReg, prog.OpUffdUnreg:
		return 0, m.Uffd(addr, op.Len, op.Kind == prog.OpUffdReg)
	default:
		return m.PMadvise(addr, op.Len, op.Advice)
	}
}

package sim

import "github.com/forkfuzz/forkfuzz/fuzz/obs"

// dupVMAs gives child a copy of every parent VMA that fork keeps, as
// dup_mmap does: MADV_DONTFORK areas are left out, mlock is not inherited,
// a wipe-on-fork area starts empty. It returns pairs of (parent, child)
// VMAs whose page tables must be copied (those with anonymous pages).
// Each VMA is one allocation; on failure the pairs made so far come back
// with the error.
func (k *Kernel) dupVMA(v *VMA, child *MM) (*VMA, error) {
	if err := k.alloc("vma"); err != nil {
		return nil, err
	}
	cv := *v
	cv.Flags &^= VMLocked | VMLockOnfault | VMUffdMissing // no UFFD_FEATURE_EVENT_FORK
	if k.mut.has(MutEagerDontforkIgnored) {
		cv.Flags &^= VMDontCopy
	}
	if cv.anonVMA != 0 {
		k.anonSeq++
		cv.anonVMA, cv.forked = k.anonSeq, true
	}
	if cv.Flags&VMWipeOnFork != 0 {
		cv.anonVMA, cv.forked = 0, false
	}
	child.vmas = append(child.vmas, &cv)
	return &cv, nil
}

func (k *Kernel) skipsFork(v *VMA) bool {
	return v.Flags&VMDontCopy != 0 && !k.mut.has(MutEagerDontforkIgnored)
}

// needsCopy reports whether fork copies the page tables of parent VMA v
// into child VMA cv (Linux's vma_needs_copy plus wipe-on-fork).
func (k *Kernel) needsCopy(v, cv *VMA) bool {
	if v.anonVMA == 0 {
		return false
	}
	if cv.Flags&VMWipeOnFork != 0 && !k.mut.has(MutEagerWipeIgnored) && !k.mut.has(MutAsyncWipeCopied) {
		return false
	}
	return true
}

// copyPTEs copies the entries of [lo, hi) (inside one PMD) from src to dst
// as an eager fork does: take page references, share huge pages, and
// write-protect private entries on both sides.
func (k *Kernel) copyPTEs(src, dst *MM, lo, hi uint64) error {
	spe, _ := src.pmdOf(lo, false)
	if spe == nil || !spe.present() {
		return nil
	}
	dpe, err := dst.pmdOf(lo, true)
	if err != nil {
		return err
	}
	nowp := k.mut.has(MutEagerNoWrprotect)
	if spe.huge() {
		if dpe.present() {
			return nil
		}
		for _, p := range spe.Huge {
			p.ref++
		}
		if !nowp && !k.mut.has(MutAsyncHugeNoWrprotect) {
			spe.Flags &^= PMDHugeWrite
		}
		*dpe = PMDEntry{Huge: spe.Huge, Flags: PMDPresent | PMDRW | PMDHuge | spe.Flags&PMDHugeWrite}
		return nil
	}
	if !dpe.present() {
		if err := k.alloc("pte table"); err != nil {
			return err
		}
		*dpe = PMDEntry{Table: &PTETable{Ref: 1}, Flags: PMDPresent | PMDRW}
		dst.tables++
	}
	if dpe.huge() {
		return nil
	}
	st, dt := spe.Table, dpe.Table
	for x := lo; x < hi; x += pageSize {
		i := pteIndex(x)
		e := st.E[i]
		if !e.present() {
			continue
		}
		if e.Flags&PTEAnon != 0 {
			e.Page.ref++
			if !nowp {
				st.E[i].Flags &^= PTEWrite
				e.Flags &^= PTEWrite
			}
		}
		dt.E[i] = e
	}
	return nil
}

// copyRange copies [s, e) of one VMA PMD by PMD.
func (k *Kernel) copyRange(src, dst *MM, s, e uint64) error {
	for a := s &^ pmdMask; a < e; a += pmdSize {
		if err := k.copyPTEs(src, dst, max(a, s), min(a+pmdSize, e)); err != nil {
			return err
		}
	}
	return nil
}

// forkEager is Linux's fork: duplicate VMAs and copy every level now.
func (k *Kernel) forkEager(parent *MM) (*MM, error) {
	child := k.newMM()
	for _, v := range parent.vmas {
		if k.skipsFork(v) {
			continue
		}
		cv, err := k.dupVMA(v, child)
		if err != nil {
			child.teardown()
			return nil, err
		}
		if !k.needsCopy(v, cv) {
			continue
		}
		if err := k.copyRange(parent, child, v.Start, v.End); err != nil {
			child.teardown()
			return nil, err
		}
	}
	return child, nil
}

// forkOnDemand is On-demand-fork: upper levels are copied, PTE tables are
// shared copy-on-write (both PMD entries write-protected, the table's
// reference count raised). Tables next to areas that fork treats specially
// (don't-fork, wipe-on-fork) are copied instead.
func (k *Kernel) forkOnDemand(parent *MM) (*MM, error) {
	child := k.newMM()
	var pairs [][2]*VMA
	for _, v := range parent.vmas {
		if k.skipsFork(v) {
			continue
		}
		cv, err := k.dupVMA(v, child)
		if err != nil {
			child.teardown()
			return nil, err
		}
		if k.needsCopy(v, cv) {
			pairs = append(pairs, [2]*VMA{v, cv})
		}
	}
	for _, pr := range pairs {
		v := pr[0]
		for a := v.Start &^ pmdMask; a < v.End; a += pmdSize {
			lo, hi := max(a, v.Start), min(a+pmdSize, v.End)
			spe, _ := parent.pmdOf(a, false)
			if spe == nil || !spe.present() {
				continue
			}
			if spe.Table != nil && k.shareable(parent, a) {
				dpe, err := child.pmdOf(a, true)
				if err != nil {
					child.teardown()
					return nil, err
				}
				if dpe.present() {
					continue // shared while visiting an earlier VMA
				}
				spe.Table.Ref++
				spe.Flags &^= PMDRW
				*dpe = PMDEntry{Table: spe.Table, Flags: PMDPresent}
				continue
			}
			if err := k.copyPTEs(parent, child, lo, hi); err != nil {
				child.teardown()
				return nil, err
			}
		}
	}
	return child, nil
}

// shareable reports whether the PTE table of the PMD at a may be shared:
// every VMA it covers is forked plainly.
func (k *Kernel) shareable(parent *MM, a uint64) bool {
	for _, v := range parent.overlapping(a, a+pmdSize) {
		if v.Flags&(VMDontCopy|VMWipeOnFork) != 0 || v.anonVMA == 0 {
			return false
		}
	}
	return true
}

// breakTable gives m a private copy of the shared PTE table behind pe (the
// PMD at a), or takes it back if m is its last user. On-demand-fork.
func (m *MM) breakTable(a uint64, pe *PMDEntry) bool {
	t := pe.Table
	limit := int32(1)
	if m.k.mut.has(MutODFBreakRefcount) {
		limit = 2
	}
	if t.Ref <= limit {
		pe.Flags |= PMDRW
		return true
	}
	if err := m.k.alloc("pte table"); err != nil {
		m.k.event(obs.EvPageTableError, -1, "breaking the shared PTE table at %#x failed: %v", a, err)
		return false
	}
	nt := &PTETable{Ref: 1}
	nowp := m.k.mut.has(MutODFBreakNoWrprotect)
	for i := range t.E {
		e := t.E[i]
		if !e.present() {
			continue
		}
		if e.Flags&PTEAnon != 0 {
			e.Page.ref++
			if !nowp {
				t.E[i].Flags &^= PTEWrite
				e.Flags &^= PTEWrite
			}
		}
		nt.E[i] = e
	}
	t.Ref--
	*pe = PMDEntry{Table: nt, Flags: PMDPresent | PMDRW}
	m.tables++
	return true
}

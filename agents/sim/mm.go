package sim

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// MM is an address space: page tables and VMAs.
type MM struct {
	k    *Kernel
	id   int
	pgd  PGDTable
	vmas []*VMA
	// tables counts page-table pages (PUD/PMD/PTE tables) this mm allocated
	// and still holds, for the leak check.
	tables int
	// copies are the Async-fork copies in flight for which this mm is the
	// parent (at most one unless a mutant lets a nested fork skip
	// completing the earlier one). Protected by the mm's mmap lock.
	copies []*asyncCopy
	// dead is set once the mm is torn down.
	dead bool
}

func (k *Kernel) newMM() *MM {
	k.mmSeq++
	return &MM{k: k, id: k.mmSeq}
}

// VMAs returns a copy of the mm's VMA list.
func (m *MM) VMAs() []VMA {
	out := make([]VMA, len(m.vmas))
	for i, v := range m.vmas {
		out[i] = *v
	}
	return out
}

func (m *MM) noteAnon(v *VMA) {
	if v.anonVMA == 0 {
		m.k.anonSeq++
		v.anonVMA = m.k.anonSeq
	}
}

// thpEligible reports whether a write fault at a in v may allocate a huge
// page (the host's THP mode "madvise": only MADV_HUGEPAGE areas).
func thpEligible(v *VMA, a uint64) bool {
	if !v.anon() || !v.private() || v.Flags&VMHugePage == 0 || v.Flags&VMNoHugePage != 0 {
		return false
	}
	if (v.Start-v.PgOff)&pmdMask != 0 {
		return false
	}
	h := a &^ pmdMask
	return h >= v.Start && h+pmdSize <= v.End
}

// faultWrite resolves a write access at a (inside writable VMA v) and
// returns the page to write, or nil if the access cannot complete (the
// model records an event: on a real kernel the process would hang or die).
func (m *MM) faultWrite(a uint64, v *VMA) *Page {
	pe, err := m.pmdOf(a, true)
	if err != nil {
		m.k.event(obs.EvPageTableError, -1, "write fault at %#x: page-table allocation failed", a)
		return nil
	}
	if pe.present() && !pe.rw() {
		if !m.k.pmdWriteProtectFault(m, a, pe) {
			return nil
		}
	}
	if !pe.present() {
		if thpEligible(v, a) {
			h := new([entries]*Page)
			for i := range h {
				h[i] = &Page{ref: 1}
			}
			*pe = PMDEntry{Huge: h, Flags: PMDPresent | PMDRW | PMDHuge | PMDHugeWrite}
			m.noteAnon(v)
		} else {
			*pe = PMDEntry{Table: &PTETable{Ref: 1}, Flags: PMDPresent | PMDRW}
			m.tables++
		}
	}
	if pe.huge() {
		if pe.Flags&PMDHugeWrite != 0 {
			return pe.Huge[pteIndex(a)]
		}
		excl := true
		for _, p := range pe.Huge {
			if p.ref != 1 {
				excl = false
				break
			}
		}
		if excl {
			pe.Flags |= PMDHugeWrite
			return pe.Huge[pteIndex(a)]
		}
		m.splitHuge(pe)
	}
	pte := &pe.Table.E[pteIndex(a)]
	if !pte.present() {
		if v.private() {
			var src *Page
			if v.File != nil {
				src = v.File.page(v.fileOff(a)/pageSize, false)
			}
			*pte = PTE{Page: m.k.clonePage(src), Flags: PTEPresent | PTEWrite | PTEAnon}
			m.noteAnon(v)
		} else {
			*pte = PTE{Page: v.File.page(v.fileOff(a)/pageSize, true), Flags: PTEPresent | PTEWrite}
		}
		return pte.Page
	}
	if pte.Flags&PTEWrite != 0 {
		return pte.Page
	}
	if !v.private() {
		pte.Flags |= PTEWrite
		return pte.Page
	}
	limit := int32(1)
	if m.k.mut.has(MutCOWReuse) {
		limit = 2
	}
	if pte.Flags&PTEAnon != 0 && pte.Page.ref <= limit {
		pte.Flags |= PTEWrite
		return pte.Page
	}
	np := m.k.clonePage(pte.Page)
	if pte.Flags&PTEAnon != 0 {
		pte.Page.ref--
	}
	*pte = PTE{Page: np, Flags: PTEPresent | PTEWrite | PTEAnon}
	m.noteAnon(v)
	return np
}

// splitHuge turns a huge PMD into a PTE table mapping the same subpages
// (the table is preallocated with the huge page, as Linux deposits one).
func (m *MM) splitHuge(pe *PMDEntry) {
	t := &PTETable{Ref: 1}
	w := uint8(0)
	if pe.Flags&PMDHugeWrite != 0 {
		w = PTEWrite
	}
	for i, p := range pe.Huge {
		t.E[i] = PTE{Page: p, Flags: PTEPresent | PTEAnon | w}
	}
	pe.Table, pe.Huge = t, nil
	pe.Flags &^= PMDHuge | PMDHugeWrite
	m.tables++
}

func (m *MM) splitHugeAt(a uint64) {
	if pe, _ := m.pmdOf(a, false); pe != nil && pe.present() && pe.huge() {
		m.splitHuge(pe)
	}
}

// readPage returns the page a process sees at a (inside VMA v): through
// its page tables, else the backing file's page, else nil (zero).
func (m *MM) readPage(a uint64, v *VMA) *Page {
	if pe, _ := m.pmdOf(a, false); pe != nil && pe.present() {
		if pe.huge() {
			return pe.Huge[pteIndex(a)]
		}
		if pte := &pe.Table.E[pteIndex(a)]; pte.present() {
			return pte.Page
		}
	}
	if v.File != nil {
		p := v.File.page(v.fileOff(a)/pageSize, false)
		if p == nil && v.private() && v.Flags&VMUffdMissing != 0 {
			// The read faulted on a hole: the userfaultfd handler's
			// UFFDIO_ZEROPAGE maps a private zero page, and the file's
			// later pages do not show here.
			m.uffdZero(a, v)
		}
		return p
	}
	return nil
}

// uffdZero maps a private, read-only zero page at a.
func (m *MM) uffdZero(a uint64, v *VMA) {
	pe, err := m.pmdOf(a, true)
	if err != nil {
		return
	}
	if !pe.present() {
		*pe = PMDEntry{Table: &PTETable{Ref: 1}, Flags: PMDPresent | PMDRW}
		m.tables++
	}
	if pe.huge() {
		return
	}
	pe.Table.E[pteIndex(a)] = PTE{Page: &Page{ref: 1}, Flags: PTEPresent | PTEAnon}
	m.noteAnon(v)
}

// dropPTE releases what a PTE holds.
func dropPTE(e *PTE) {
	if e.present() && e.Flags&PTEAnon != 0 {
		e.Page.ref--
	}
	*e = PTE{}
}

// releaseTable drops one reference to t and frees its pages' references
// when it was the last.
func releaseTable(t *PTETable) {
	t.Ref--
	if t.Ref > 0 {
		return
	}
	for i := range t.E {
		dropPTE(&t.E[i])
	}
}

func releaseHuge(h *[entries]*Page) {
	for _, p := range h {
		p.ref--
	}
}

// zap unmaps the pages of [s, e) (page aligned) from the page tables.
func (m *MM) zap(s, e uint64) {
	for a := s &^ pmdMask; a < e; a += pmdSize {
		pe, _ := m.pmdOf(a, false)
		if pe == nil || !pe.present() {
			continue
		}
		lo, hi := max(a, s), min(a+pmdSize, e)
		full := lo == a && hi == a+pmdSize
		if pe.huge() {
			if full {
				releaseHuge(pe.Huge)
				*pe = PMDEntry{}
				continue
			}
			m.splitHuge(pe)
		}
		if pe.Table.Ref > 1 {
			if full {
				// A shared table (On-demand-fork) that this mm stops
				// using entirely: just drop this mm's reference.
				releaseTable(pe.Table)
				*pe = PMDEntry{}
				m.tables--
				continue
			}
			if !m.k.mut.has(MutODFZapNoBreak) {
				if !m.breakTable(a, pe) {
					continue
				}
			}
		}
		t := pe.Table
		for x := lo; x < hi; x += pageSize {
			dropPTE(&t.E[pteIndex(x)])
		}
	}
}

// wrprotect clears the write permission of every PTE in [s, e).
func (m *MM) wrprotect(s, e uint64) {
	for a := s &^ pmdMask; a < e; a += pmdSize {
		pe, _ := m.pmdOf(a, false)
		if pe == nil || !pe.present() {
			continue
		}
		lo, hi := max(a, s), min(a+pmdSize, e)
		if pe.huge() {
			if lo == a && hi == a+pmdSize {
				pe.Flags &^= PMDHugeWrite
				continue
			}
			m.splitHuge(pe)
		}
		if pe.Table.Ref > 1 {
			if m.k.mut.has(MutODFMprotectExclusive) {
				pe.Flags |= PMDRW // takes the shared table as its own
			} else if !m.breakTable(a, pe) {
				continue
			}
		}
		for x := lo; x < hi; x += pageSize {
			pe.Table.E[pteIndex(x)].Flags &^= PTEWrite
		}
	}
}

// teardown releases everything the mm holds (exit).
func (m *MM) teardown() {
	// Shared PTE tables (On-demand-fork) are not zapped at exit: this mm
	// just drops its reference.
	for _, e := range m.PMDEntries() {
		if e.Shared {
			pe, _ := m.pmdOf(e.Addr, false)
			releaseTable(pe.Table)
			*pe = PMDEntry{}
			m.tables--
		}
	}
	for _, v := range m.vmas {
		m.zap(v.Start, v.End)
	}
	m.vmas = nil
	m.dead = true
}

func (m *MM) String() string { return fmt.Sprintf("mm%d", m.id) }

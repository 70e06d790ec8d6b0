package sim

import "github.com/forkfuzz/forkfuzz/fuzz/obs"

// Page tables: x86-64-like, four levels of 512 entries (PGD -> PUD -> PMD ->
// PTE), 4 KiB pages and 2 MiB huge PMDs. Upper levels (PGD, PUD) are plain
// pointer arrays; PMD entries and PTEs carry the bits the fork
// implementations play with.

const (
	pageShift    = 12
	pmdShift     = 21
	pudShift     = 30
	pgdShift     = 39
	entries      = 512
	pageSize     = 1 << pageShift
	pmdSize      = 1 << pmdShift
	pageMask     = pageSize - 1
	pmdMask      = pmdSize - 1
	wordsPerPage = pageSize / 8
)

// Page is a physical 4 KiB page.
type Page struct {
	// data is the content; nil means all zero (allocated on first write).
	data *[wordsPerPage]uint64
	// ref counts mappings of an anonymous page (PTEs and huge PMDs that
	// point at it). Page-cache pages are owned by their file and never
	// reused for copy-on-write, so their ref is not consulted.
	ref int32
	// View cache: the indices of the non-zero words and the digest, valid
	// until the next write (views of unchanged pages skip the scan).
	nz      []uint16
	digest  uint64
	nzValid bool
}

// scan returns the non-zero word indices and the page digest.
func (p *Page) scan() ([]uint16, uint64) {
	if !p.nzValid {
		p.nz = p.nz[:0]
		p.digest = 0
		for w, val := range p.data {
			if val != 0 {
				p.nz = append(p.nz, uint16(w))
				p.digest += obs.WordDigest(uint64(w*8), val)
			}
		}
		p.nzValid = true
	}
	return p.nz, p.digest
}

func (p *Page) word(i int) uint64 {
	if p == nil || p.data == nil {
		return 0
	}
	return p.data[i]
}

// setWord writes word i of p, allocating its data from the kernel's pool.
func (k *Kernel) setWord(p *Page, i int, v uint64) {
	if p.data == nil {
		p.data = k.newData()
	}
	p.data[i] = v
	p.nzValid = false
}

// clonePage returns a new anonymous page (ref 1) with p's content (p may
// be nil: a zero page).
func (k *Kernel) clonePage(p *Page) *Page {
	q := &Page{ref: 1}
	if p != nil && p.data != nil {
		q.data = k.newData()
		*q.data = *p.data
	}
	return q
}

// PTE flag bits.
const (
	PTEPresent = 1 << iota
	PTEWrite
	// PTEAnon: the PTE maps an anonymous page (private copy), not a page of
	// the mapping's file.
	PTEAnon
)

// PTE is a last-level entry.
type PTE struct {
	Page  *Page
	Flags uint8
}

func (e *PTE) present() bool { return e.Flags&PTEPresent != 0 }

// PTETable is a last-level table (one per 2 MiB).
type PTETable struct {
	E [entries]PTE
	// Ref is the number of PMD entries pointing at this table: always 1
	// except under On-demand-fork, where fork shares tables copy-on-write.
	Ref int32
	// lockedBy is the holder of the table's lock (the PTE-table lock, "ptl"),
	// nil when free. See the package doc for the lock order.
	lockedBy any
}

// PMD entry flag bits.
const (
	PMDPresent = 1 << iota
	// PMDRW is the hardware write-permission bit of the PMD entry. Async-fork
	// clears it in the parent to mean "not copied to the child yet";
	// On-demand-fork clears it in every process sharing a PTE table.
	PMDRW
	// PMDHuge: the entry maps a 2 MiB huge page instead of a PTE table.
	PMDHuge
	// PMDHugeWrite is the huge leaf's own write permission (copy-on-write
	// state of the huge page). On x86 it is the RW bit itself; the model
	// keeps it apart so the Async-fork marker and the leaf's COW state never
	// mix (real implementations keep the marker in a software bit for huge
	// entries).
	PMDHugeWrite
)

// PMDEntry is a middle-level entry.
type PMDEntry struct {
	Table *PTETable
	Huge  *[entries]*Page // subpages of a huge page
	Flags uint8
}

func (e *PMDEntry) present() bool { return e.Flags&PMDPresent != 0 }
func (e *PMDEntry) huge() bool    { return e.Flags&PMDHuge != 0 }
func (e *PMDEntry) rw() bool      { return e.Flags&PMDRW != 0 }

// PMDTable is a table of PMD entries (one per GiB).
type PMDTable struct{ E [entries]PMDEntry }

// PUDTable is a table of PUD entries (one per 512 GiB).
type PUDTable struct{ E [entries]*PMDTable }

// PGDTable is the top level.
type PGDTable struct{ E [entries]*PUDTable }

func pgdIndex(a uint64) int { return int(a>>pgdShift) & (entries - 1) }
func pudIndex(a uint64) int { return int(a>>pudShift) & (entries - 1) }
func pmdIndex(a uint64) int { return int(a>>pmdShift) & (entries - 1) }
func pteIndex(a uint64) int { return int(a>>pageShift) & (entries - 1) }

// pmdOf returns the PMD entry of address a, or nil when an upper level is
// missing and alloc is false. With alloc it allocates missing upper levels
// (counted by the allocator, which may fail: then nil, errNoMem).
func (m *MM) pmdOf(a uint64, alloc bool) (*PMDEntry, error) {
	pud := m.pgd.E[pgdIndex(a)]
	if pud == nil {
		if !alloc {
			return nil, nil
		}
		if err := m.k.alloc("pud"); err != nil {
			return nil, err
		}
		pud = new(PUDTable)
		m.pgd.E[pgdIndex(a)] = pud
		m.tables++
	}
	pmd := pud.E[pudIndex(a)]
	if pmd == nil {
		if !alloc {
			return nil, nil
		}
		if err := m.k.alloc("pmd"); err != nil {
			return nil, err
		}
		pmd = new(PMDTable)
		pud.E[pudIndex(a)] = pmd
		m.tables++
	}
	return &pmd.E[pmdIndex(a)], nil
}

// PMDInfo describes one present PMD entry, for oracles that read page
// tables directly (the rollback oracle reads RW bits here).
type PMDInfo struct {
	Addr   uint64 // first address the entry maps (2 MiB aligned)
	RW     bool
	Huge   bool
	Shared bool // the PTE table is shared with another mm (On-demand-fork)
}

// PMDEntries returns every present PMD entry of the mm in address order.
func (m *MM) PMDEntries() []PMDInfo {
	var out []PMDInfo
	for gi, pud := range m.pgd.E {
		if pud == nil {
			continue
		}
		for ui, pmd := range pud.E {
			if pmd == nil {
				continue
			}
			for mi := range pmd.E {
				e := &pmd.E[mi]
				if !e.present() {
					continue
				}
				a := uint64(gi)<<pgdShift | uint64(ui)<<pudShift | uint64(mi)<<pmdShift
				out = append(out, PMDInfo{Addr: a, RW: e.rw(), Huge: e.huge(), Shared: e.Table != nil && e.Table.Ref > 1})
			}
		}
	}
	return out
}

// forEachPMD calls fn for every present PMD entry overlapping [s, e).
func (m *MM) forEachPMD(s, e uint64, fn func(a uint64, pe *PMDEntry)) {
	for a := s &^ pmdMask; a < e; a += pmdSize {
		pe, _ := m.pmdOf(a, false)
		if pe != nil && pe.present() {
			fn(a, pe)
		}
	}
}

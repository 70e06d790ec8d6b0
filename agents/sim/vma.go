package sim

import (
	"fmt"
	"sort"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// File is a shared backing object: a memfd or the shmem object behind an
// anonymous shared mapping. Its page cache holds the file's pages.
type File struct {
	Ino   uint64
	Size  uint64 // bytes; pages at or past Size are beyond EOF
	pages map[uint64]*Page
	// AnonShmem: the object behind an anonymous shared mapping (not a
	// memfd): Linux 6.2+ lets such a VMA be named.
	AnonShmem bool
}

func (f *File) page(idx uint64, create bool) *Page {
	p := f.pages[idx]
	if p == nil && create {
		p = &Page{ref: 1}
		f.pages[idx] = p
	}
	return p
}

// anyPage reports whether the page cache holds a page in [off, off+n).
func (f *File) anyPage(off, n uint64) bool {
	for i := off / pageSize; i < (off+n)/pageSize; i++ {
		if f.pages[i] != nil {
			return true
		}
	}
	return false
}

// VMA flag bits.
const (
	VMRead = 1 << iota
	VMWrite
	VMShared
	VMDontCopy    // MADV_DONTFORK
	VMWipeOnFork  // MADV_WIPEONFORK
	VMLocked      // mlock
	VMHugePage    // MADV_HUGEPAGE
	VMNoHugePage  // MADV_NOHUGEPAGE
	VMMergeable   // MADV_MERGEABLE (KSM; the simulated kernel never merges pages)
	VMLockOnfault // mlock2(MLOCK_ONFAULT), beside VMLocked: nothing is populated
	// VMUffdMissing: registered with userfaultfd in MISSING mode
	// (uffdreg); neither fork nor a moving mremap keeps it.
	VMUffdMissing
)

// VMA is a virtual memory area.
type VMA struct {
	Start, End uint64
	Flags      uint16
	File       *File  // nil for anonymous private memory
	PgOff      uint64 // byte offset of Start in File (anonymous: Start at creation, as Linux's vm_pgoff)
	// anonVMA identifies the anon_vma (0: none yet); two anonymous VMAs
	// merge only if at most one has one or both share it.
	anonVMA int
	// dirty marks a VMA whose flags an operation changed (mergeDirty).
	dirty bool
	// splitGen is the kernel's operation generation in which a split made
	// this VMA (mergeDirty undoes splits that changed nothing).
	splitGen int
	// forked: the anon_vma came from fork (its chain is not singular), so
	// it merges only with VMAs that share it.
	forked bool
	// Policy is the VMA's memory policy (mbind), Name its anonymous name
	// (PR_SET_VMA_ANON_NAME); VMAs that differ in either never merge.
	Policy prog.Policy
	Name   prog.AnonName
}

func (v *VMA) private() bool { return v.Flags&VMShared == 0 }

// anon reports whether the VMA is anonymous private memory.
func (v *VMA) anon() bool { return v.File == nil }

// shmemAnon reports whether the VMA is anonymous shared memory.
func (v *VMA) String() string {
	return fmt.Sprintf("%#x-%#x %s", v.Start, v.End, v.protString())
}

func (v *VMA) protString() string {
	b := []byte("---p")
	if v.Flags&VMRead != 0 {
		b[0] = 'r'
	}
	if v.Flags&VMWrite != 0 {
		b[1] = 'w'
	}
	if v.Flags&VMShared != 0 {
		b[3] = 's'
	}
	return string(b)
}

// fileOff returns the file offset of address a in v.
func (v *VMA) fileOff(a uint64) uint64 { return v.PgOff + (a - v.Start) }

// findVMA returns the index of the VMA containing a, or -1.
func (m *MM) findVMA(a uint64) int {
	i := sort.Search(len(m.vmas), func(i int) bool { return m.vmas[i].End > a })
	if i < len(m.vmas) && m.vmas[i].Start <= a {
		return i
	}
	return -1
}

func (m *MM) vmaAt(a uint64) *VMA {
	if i := m.findVMA(a); i >= 0 {
		return m.vmas[i]
	}
	return nil
}

// splitAt makes a a VMA boundary if it lies inside a VMA.
func (m *MM) splitAt(a uint64) {
	i := m.findVMA(a)
	if i < 0 || m.vmas[i].Start == a {
		return
	}
	v := m.vmas[i]
	w := *v
	w.Start = a
	w.PgOff = v.PgOff + (a - v.Start)
	v.End = a
	v.splitGen, w.splitGen = m.k.opGen, m.k.opGen
	m.vmas = append(m.vmas, nil)
	copy(m.vmas[i+2:], m.vmas[i+1:])
	m.vmas[i+1] = &w
	// A huge PMD that now straddles two VMAs must be split.
	if a&pmdMask != 0 {
		m.splitHugeAt(a)
	}
}

// vmasIn splits at s and e and returns the VMAs inside [s, e), plus whether
// the range has holes.
func (m *MM) vmasIn(s, e uint64) (vs []*VMA, hole bool) {
	m.splitAt(s)
	m.splitAt(e)
	at := s
	for _, v := range m.vmas {
		if v.End <= s || v.Start >= e {
			continue
		}
		if v.Start > at {
			hole = true
		}
		vs = append(vs, v)
		at = v.End
	}
	if at < e {
		hole = true
	}
	return vs, hole
}

// overlapping returns the VMAs overlapping [s, e) without splitting.
func (m *MM) overlapping(s, e uint64) []*VMA {
	var vs []*VMA
	for _, v := range m.vmas {
		if v.End > s && v.Start < e {
			vs = append(vs, v)
		}
	}
	return vs
}

// removeVMAs drops the VMAs inside [s, e) (already split) from the list.
func (m *MM) removeVMAs(s, e uint64) {
	out := m.vmas[:0]
	for _, v := range m.vmas {
		if v.Start >= s && v.End <= e {
			continue
		}
		out = append(out, v)
	}
	m.vmas = out
}

func (m *MM) insertVMA(v *VMA) {
	i := sort.Search(len(m.vmas), func(i int) bool { return m.vmas[i].Start >= v.End })
	m.vmas = append(m.vmas, nil)
	copy(m.vmas[i+1:], m.vmas[i:])
	m.vmas[i] = v
}

const mergeFlags = ^uint16(0)

func mergeable(a, b *VMA) bool {
	if a.End != b.Start || a.Flags != b.Flags || a.File != b.File || a.Policy != b.Policy || a.Name != b.Name {
		return false
	}
	if a.PgOff+(a.End-a.Start) != b.PgOff {
		return false
	}
	if a.anonVMA != 0 && b.anonVMA != 0 {
		return a.anonVMA == b.anonVMA
	}
	if (a.anonVMA != 0 && a.forked) || (b.anonVMA != 0 && b.forked) {
		return false
	}
	return true
}

// setFlags changes v's flags, marking it for mergeDirty if they differ.
func (v *VMA) setFlags(f uint16) {
	if v.Flags != f {
		v.Flags = f
		v.dirty = true
	}
}

// mergeDirty merges adjacent compatible VMAs where at least one had its
// flags changed, as vma_modify does (an operation that changes nothing
// merges nothing), undoes splits of this operation that changed nothing
// (Linux does not split then), and clears the marks.
func (m *MM) mergeDirty() {
	for i := 0; i+1 < len(m.vmas); {
		a, b := m.vmas[i], m.vmas[i+1]
		resplit := a.splitGen == m.k.opGen && b.splitGen == m.k.opGen && !a.dirty && !b.dirty
		if (a.dirty || b.dirty || resplit) && mergeable(a, b) {
			a.End = b.End
			a.dirty = true
			if a.anonVMA == 0 {
				a.anonVMA, a.forked = b.anonVMA, b.forked
			}
			m.vmas = append(m.vmas[:i+1], m.vmas[i+2:]...)
			continue
		}
		i++
	}
	for _, v := range m.vmas {
		v.dirty = false
	}
}

// mergeAround merges adjacent compatible VMAs where at least one of the two
// touches [s, e], as Linux does for the VMAs an operation modified.
func (m *MM) mergeAround(s, e uint64) {
	for i := 0; i+1 < len(m.vmas); {
		a, b := m.vmas[i], m.vmas[i+1]
		if b.Start >= s && a.End <= e && mergeable(a, b) {
			a.End = b.End
			if a.anonVMA == 0 {
				a.anonVMA, a.forked = b.anonVMA, b.forked
			}
			m.vmas = append(m.vmas[:i+1], m.vmas[i+2:]...)
			continue
		}
		i++
	}
}

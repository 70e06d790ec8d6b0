package checker

import (
	"sort"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Address-space model. Pages are numbered globally over the whole arena:
// global page g is the page at prog.ArenaBase + g*prog.PageSize, so region
// r's page i is r*prog.SpanPages + i. Everything an operation can address
// lies in the arena; mappings that mremap moves out of it are dropped.

const arenaPages = prog.MaxRegions * prog.SpanPages

func gpage(region int, off uint64) int { return region*prog.SpanPages + int(off/prog.PageSize) }

func gaddr(g int) uint64 { return prog.ArenaBase + uint64(g)*prog.PageSize }

// regionOf splits a global page into region and page.
func regionOf(g int) (int, int) { return g / prog.SpanPages, g % prog.SpanPages }

// tri is a three-valued flag (VM_LOCKED may be unknown after some mremaps).
type tri uint8

const (
	no tri = iota
	yes
	maybe
)

// seg is a run of pages of one process with identical attributes: what a
// VMA (or a piece of one) is in the kernel. The model never merges
// segments, so every kernel VMA boundary is a segment boundary; a boundary
// between segments with equal attributes may or may not exist in the
// kernel (vma merging depends on anon_vma identity, which is not modelled).
type seg struct {
	start, end int             // global pages [start, end)
	kind       prog.RegionKind // for hugetlb and file kinds: the kind's Base()
	// huge: backed by 2 MiB hugetlb pages (hugetlb.go).
	huge bool
	// fs: the file system of the regular file behind a file kind's
	// segment (tmpfs, ext4); its content rules are the memfd's.
	fs        prog.FS
	obj       int // backing object (shmem or memfd) or -1
	pgoff     int // object page of start
	prot      prog.Prot
	dontfork  bool
	wipe      bool
	mergeable bool // VM_MERGEABLE (MADV_MERGEABLE on a private mapping)
	lock      tri
	// onfault: VM_LOCKONFAULT beside VM_LOCKED (mlock2 MLOCK_ONFAULT:
	// nothing is populated); meaningful only while lock is yes.
	onfault bool
	// pol is the VMA's memory policy (mbind), name its anonymous name
	// (PR_SET_VMA_ANON_NAME); fork copies both.
	pol  prog.Policy
	name prog.AnonName
	thp  prog.THP
	// uffd: the userfaultfd modes registered (uffdWP, uffdMissing:
	// uffd.go); fork clears them in the child (no
	// UFFD_FEATURE_EVENT_FORK).
	uffd uint8
	// unknown: the model lost track of these pages (after an operation
	// whose outcome it could not determine); any state and content is
	// accepted, and writes through them taint shared memory.
	unknown bool
	// origin is the operation that created this mapping (-1: program
	// set-up); originWhy says how (for explanations).
	origin    int
	originWhy string
}

// sameAttrs reports whether two adjacent segments could be one kernel VMA.
func sameAttrs(a, b *seg) bool {
	if a.unknown || b.unknown || a.lock == maybe || b.lock == maybe {
		return true
	}
	if a.kind != b.kind || a.huge != b.huge || a.fs != b.fs || a.obj != b.obj || a.prot != b.prot || a.dontfork != b.dontfork ||
		a.wipe != b.wipe || a.mergeable != b.mergeable || a.lock != b.lock || a.thp != b.thp || a.uffd != b.uffd ||
		a.pol != b.pol || a.name != b.name || a.lock == yes && a.onfault != b.onfault {
		return false
	}
	if a.obj >= 0 && a.pgoff+(a.end-a.start) != b.pgoff {
		return false
	}
	return true
}

// wv is one non-zero word of a page: its index (0..511) and value.
type wv struct {
	k uint16
	v uint64
}

// words is the sparse content of one page, sorted by word index.
type words []wv

func (w words) clone() words { return append(words(nil), w...) }

func (w words) equal(o words) bool {
	if len(w) != len(o) {
		return false
	}
	for i := range w {
		if w[i] != o[i] {
			return false
		}
	}
	return true
}

func (w words) search(k uint16) int {
	lo, hi := 0, len(w)
	for lo < hi {
		mid := (lo + hi) / 2
		if w[mid].k < k {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// get returns word k (0 if absent).
func (w words) get(k uint16) uint64 {
	if i := w.search(k); i < len(w) && w[i].k == k {
		return w[i].v
	}
	return 0
}

// set stores v (non-zero) at word k.
func (w *words) set(k uint16, v uint64) {
	s := *w
	i := s.search(k)
	if i < len(s) && s[i].k == k {
		s[i].v = v
		return
	}
	s = append(s, wv{})
	copy(s[i+1:], s[i:])
	s[i] = wv{k, v}
	*w = s
}

// page is the content of one page: one or more alternatives (MADV_FREE
// makes a page either its old content or zero until it is written), or
// unknown. Pages are shared between processes after fork and copied on
// write (refs counts holders).
type page struct {
	refs    int32
	unknown bool
	alts    []words
	// wild words may hold any value (a thread may write them).
	wild map[uint16]bool
}

func (p *page) setWild(w uint16) {
	if p.wild == nil {
		p.wild = map[uint16]bool{}
	}
	p.wild[w] = true
}

const maxAlts = 4

func newPage() *page { return &page{refs: 1, alts: []words{nil}} }

func (p *page) clone() *page {
	c := &page{refs: 1, unknown: p.unknown, alts: make([]words, len(p.alts))}
	for i, a := range p.alts {
		c.alts[i] = a.clone()
	}
	if len(p.wild) > 0 {
		c.wild = make(map[uint16]bool, len(p.wild))
		for k := range p.wild {
			c.wild[k] = true
		}
	}
	return c
}

// write stores v at word w in every alternative.
func (p *page) write(w uint16, v uint64) {
	for i := range p.alts {
		p.alts[i].set(w, v)
	}
	p.dedup()
}

func (p *page) dedup() {
	if len(p.alts) < 2 {
		return
	}
	out := p.alts[:1]
	for _, a := range p.alts[1:] {
		dup := false
		for _, b := range out {
			if a.equal(b) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, a)
		}
	}
	p.alts = out
}

// addZeroAlt makes zero an alternative content (MADV_FREE).
func (p *page) addZeroAlt() {
	for _, a := range p.alts {
		if len(a) == 0 {
			return
		}
	}
	if len(p.alts) >= maxAlts {
		p.unknown = true
		return
	}
	p.alts = append(p.alts, nil)
}

// isZero reports whether the page's only possible content is all zero.
func (p *page) isZero() bool {
	return !p.unknown && len(p.alts) == 1 && len(p.alts[0]) == 0 && len(p.wild) == 0
}

// without returns w minus the wild words.
func (w words) without(wild map[uint16]bool) words {
	if len(wild) == 0 {
		return w
	}
	var out words
	for _, x := range w {
		if !wild[x.k] {
			out = append(out, x)
		}
	}
	return out
}

// pageMap is a sparse map of pages, copied on write.
type pageMap map[int]*page

// own returns a page of m at key that the caller may modify, creating an
// empty one if absent.
func (m pageMap) own(key int) *page {
	p := m[key]
	if p == nil {
		p = newPage()
		m[key] = p
		return p
	}
	if p.refs > 1 {
		p.refs--
		p = p.clone()
		m[key] = p
	}
	return p
}

// drop removes key.
func (m pageMap) drop(key int) {
	if p := m[key]; p != nil {
		p.refs--
		delete(m, key)
	}
}

// keysIn returns the keys of m in [lo, hi), sorted.
func (m pageMap) keysIn(lo, hi int) []int {
	var ks []int
	if hi-lo < len(m) {
		for k := lo; k < hi; k++ {
			if _, ok := m[k]; ok {
				ks = append(ks, k)
			}
		}
		return ks
	}
	for k := range m {
		if k >= lo && k < hi {
			ks = append(ks, k)
		}
	}
	sort.Ints(ks)
	return ks
}

// object is a shared backing object: a memfd (file) or a shmem object
// created by an anonymous shared mapping.
type object struct {
	id      int
	memfd   bool
	region  int // memfd: the region it belongs to; shmem: the region of the creating mapping
	size    int // pages
	created int // op index, -1 at set-up
	pages   pageMap
}

// proc is one process of the program.
type proc struct {
	id      int
	parent  int
	forkOp  int // op index of the fork that created it (-1: main)
	forkSeq int // execution sequence number of that fork
	state   procState
	segs    []seg
	anon    pageMap // private content by global page (anon pages and COW copies of memfd-private pages)
	// reset records, for pages whose private content an operation
	// discarded, which operation did it (explanations only).
	reset map[int]int
	// holes are ranges the process lacks because they were MADV_DONTFORK
	// in its parent at fork (explanations only).
	holes []hole
	// crashed: the observation says the process stopped running.
	crashed bool
	// copyKilled: the observation says the child died before it reached
	// user space, after a fault injected into its side of the fork
	// (childfail, rollback.go); the model treats it as killed.
	copyKilled bool
}

type hole struct{ start, end int }

type procState uint8

const (
	unborn procState = iota
	blocked
	running
	exited
	killed
	forkFailed
)

// find returns the index of the segment containing g, or -1.
func (p *proc) find(g int) int {
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].end > g })
	if i < len(p.segs) && p.segs[i].start <= g {
		return i
	}
	return -1
}

// segAt returns the segment containing g, or nil.
func (p *proc) segAt(g int) *seg {
	if i := p.find(g); i >= 0 {
		return &p.segs[i]
	}
	return nil
}

// split makes g a segment boundary if it lies inside a segment.
func (p *proc) split(g int) {
	i := p.find(g)
	if i < 0 || p.segs[i].start == g {
		return
	}
	s := p.segs[i]
	left, right := s, s
	left.end = g
	right.start = g
	if right.obj >= 0 {
		right.pgoff += g - s.start
	}
	p.segs = append(p.segs, seg{})
	copy(p.segs[i+2:], p.segs[i+1:])
	p.segs[i] = left
	p.segs[i+1] = right
}

// span splits at lo and hi and returns the index range [i, j) of the
// segments inside [lo, hi).
func (p *proc) span(lo, hi int) (int, int) {
	p.split(lo)
	p.split(hi)
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].start >= lo })
	j := i
	for j < len(p.segs) && p.segs[j].end <= hi {
		j++
	}
	return i, j
}

// segsIn returns copies of the segments overlapping [lo, hi), clipped.
func (p *proc) segsIn(lo, hi int) []seg {
	var out []seg
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].end > lo })
	for ; i < len(p.segs) && p.segs[i].start < hi; i++ {
		s := p.segs[i]
		if s.start < lo {
			if s.obj >= 0 {
				s.pgoff += lo - s.start
			}
			s.start = lo
		}
		if s.end > hi {
			s.end = hi
		}
		out = append(out, s)
	}
	return out
}

// unmap removes every mapping in [lo, hi) and its private content.
func (p *proc) unmap(lo, hi int) {
	i, j := p.span(lo, hi)
	p.segs = append(p.segs[:i], p.segs[j:]...)
	for _, k := range p.anon.keysIn(lo, hi) {
		p.anon.drop(k)
	}
}

// insert adds s, which must not overlap any segment.
func (p *proc) insert(s seg) {
	if s.start >= s.end {
		return
	}
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].start >= s.end })
	p.segs = append(p.segs, seg{})
	copy(p.segs[i+1:], p.segs[i:])
	p.segs[i] = s
}

// boundary classifies the point g between pages g-1 and g as a kernel VMA
// boundary: 0 no boundary (inside one segment), 1 maybe, 2 certain (a gap
// or different attributes).
func (p *proc) boundary(g int) int {
	i := p.find(g)
	j := p.find(g - 1)
	if i < 0 || j < 0 {
		return 2
	}
	if i == j {
		return 0
	}
	if sameAttrs(&p.segs[j], &p.segs[i]) {
		return 1
	}
	return 2
}

// withinOneVMA reports whether [lo, hi) lies in one kernel VMA: 0 no, 1
// maybe, 2 certainly. lo must be mapped for anything but 0.
func (p *proc) withinOneVMA(lo, hi int) int {
	i := p.find(lo)
	if i < 0 {
		return 0
	}
	res := 2
	for ; p.segs[i].end < hi; i++ {
		if i+1 >= len(p.segs) || p.segs[i+1].start != p.segs[i].end || !sameAttrs(&p.segs[i], &p.segs[i+1]) {
			return 0
		}
		res = 1
	}
	return res
}

// setUnknown marks [lo, hi) as unknown in p: mapped or not, any content.
func (p *proc) setUnknown(lo, hi int, op int) {
	if lo >= hi {
		return
	}
	p.unmap(lo, hi)
	p.insert(seg{start: lo, end: hi, obj: -1, unknown: true, origin: op, originWhy: "lost track"})
}

// release drops the page references a finished process holds.
func (p *proc) release() {
	for k := range p.anon {
		p.anon.drop(k)
	}
}

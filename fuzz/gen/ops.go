package gen

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

const (
	page = prog.PageSize
	pmd  = prog.PMDSize
)

// simple returns a non-fork operation of kind k for proc (two for some
// mprotect patterns), on a random region.
func (g *generator) simple(proc int, k prog.OpKind) []prog.Op {
	switch k {
	case prog.OpCheck:
		return []prog.Op{{Proc: proc, Kind: prog.OpCheck}}
	case prog.OpStore:
		return []prog.Op{g.slotOp(proc, k, g.region())}
	case prog.OpPwrite:
		ri := g.memfdRegion()
		if ri < 0 {
			return []prog.Op{g.slotOp(proc, prog.OpStore, g.region())}
		}
		return []prog.Op{g.slotOp(proc, k, ri)}
	}
	if k.Pinned() {
		return g.pinnedOp(proc, k)
	}
	if k == prog.OpMigrate {
		return []prog.Op{g.migrateOp(proc, g.region())}
	}
	if k == prog.OpRemapFile {
		return g.rangeOp(proc, k, g.sharedRegion())
	}
	if k == prog.OpUffdReg {
		return g.rangeOp(proc, k, g.uffdRegion())
	}
	return g.rangeOp(proc, k, g.region())
}

// fix clamps op into range (see fixOp) against the generator's regions.
func (g *generator) fix(op prog.Op) prog.Op { return fixOp(op, g.p.Regions) }

func (g *generator) region() int { return g.r.IntN(len(g.p.Regions)) }

// uffdRegion draws the region of a uffdreg: seven times in eight one
// whose missing pages are not a private mapping's file holes (there a
// hole filled by the handler is a private zero page, no longer the
// file's, and the model stops following it: prog/vmaops.go).
func (g *generator) uffdRegion() int {
	ri := g.region()
	if chance(g.r, 0.125) {
		return ri
	}
	for k := range len(g.p.Regions) {
		j := (ri + k) % len(g.p.Regions)
		if kind := g.p.Regions[j].Kind; !(kind.Memfd() && !kind.Shared() && !kind.Hugetlb()) {
			return j
		}
	}
	return ri
}

// sharedRegion returns, mostly, a random shared region (remap_file_pages
// refuses private mappings with EINVAL), else any region.
func (g *generator) sharedRegion() int {
	var rs []int
	for i, r := range g.p.Regions {
		if r.Kind.Shared() {
			rs = append(rs, i)
		}
	}
	if len(rs) == 0 || chance(g.r, 0.15) {
		return g.region()
	}
	return oneOf(g.r, rs...)
}

// memfdRegion returns a random memfd region, or -1 if there is none.
func (g *generator) memfdRegion() int {
	var rs []int
	for i, r := range g.p.Regions {
		if r.Kind.Memfd() {
			rs = append(rs, i)
		}
	}
	if len(rs) == 0 {
		return -1
	}
	return oneOf(g.r, rs...)
}

func (g *generator) pages(ri int) int    { return g.p.Regions[ri].Pages }
func (g *generator) bytes(ri int) uint64 { return uint64(g.p.Regions[ri].Pages) * page }

// slotOp returns a store or pwrite on region ri: mostly near page, PMD and
// region-end boundaries, crossing them.
func (g *generator) slotOp(proc int, k prog.OpKind, ri int) prog.Op {
	op := prog.Op{Proc: proc, Kind: k, Region: ri, Stride: prog.SlotSize, Count: 1}
	pages, size := g.pages(ri), g.bytes(ri)
	if !chance(g.r, g.w.BoundaryProb) {
		op.Off = uint64(g.r.IntN(pages))*page + uint64(g.r.IntN(page/8))*8
		op.Count = oneOf(g.r, 1, 1, between(g.r, 2, 8), between(g.r, 8, 64))
		op.Stride = oneOf[uint64](g.r, 8, 8, 0x40, page)
		return g.capSlots(op)
	}
	d := oneOf[uint64](g.r, 8, 0x800, page, 2*page)
	cross := func(b uint64) {
		op.Off = b - min(d, b)
		if chance(g.r, 0.5) {
			op.Stride = page
			op.Count = between(g.r, 2, 4)
		} else {
			op.Count = int(d/8) + between(g.r, 1, int(d/8))
		}
	}
	switch g.r.IntN(6) {
	case 0: // across a PMD boundary
		b := uint64(pmd)
		if size >= pmd {
			b = uint64(between(g.r, 1, int(size/pmd))) * pmd
		} else if chance(g.r, 0.7) {
			b = uint64(between(g.r, 1, max(pages-1, 1))) * page
		}
		cross(b)
	case 1: // across the end of the region
		cross(size)
	case 2: // across a page boundary
		cross(uint64(between(g.r, 1, pages)) * page)
	case 3: // one slot in every page
		op.Off = uint64(g.r.IntN(page/8)) * 8
		op.Stride = page
		op.Count = oneOf(g.r, pages, between(g.r, 1, pages))
	case 4: // the start of the region
		op.Count = between(g.r, 1, 16)
		op.Stride = oneOf[uint64](g.r, 8, page)
	default: // past the end, where mremap or mmap may have put pages
		op.Off = size + uint64(g.r.IntN(pages))*page
		op.Count = between(g.r, 1, 4)
		op.Stride = oneOf[uint64](g.r, 8, page)
	}
	return g.capSlots(op)
}

// capSlots bounds the pages a store touches and clamps it into the span.
func (g *generator) capSlots(op prog.Op) prog.Op {
	return g.fix(capCount(op, g.w.MaxStorePages))
}

// capCount lowers the slot count of a store or pwrite so that it touches
// at most about maxPages pages.
func capCount(op prog.Op, maxPages int) prog.Op {
	if op.Stride == 0 {
		return op
	}
	if op.Stride < page {
		maxPages *= int(page / op.Stride)
	}
	op.Count = min(op.Count, max(maxPages, 1))
	return op
}

// span returns an (offset, length) range of region ri for a VMA operation.
func (g *generator) span(ri int) (off, n uint64) {
	pages, size := g.pages(ri), g.bytes(ri)
	pg := func(k int) uint64 { return uint64(k) * page }
	switch pick(g.r, g.w.Ranges[:]) {
	case 0: // whole region
		off, n = 0, size
	case 1: // head
		off, n = 0, pg(between(g.r, 1, max(pages-1, 1)))
	case 2: // tail
		k := between(g.r, 1, max(pages-1, 1))
		if pages == 1 {
			k = 0
		}
		off, n = pg(k), size-pg(k)
	case 3: // middle: splits the VMA in three
		if pages < 3 {
			off, n = 0, size
			break
		}
		a := between(g.r, 1, pages-2)
		off, n = pg(a), pg(between(g.r, 1, pages-a-1))
	case 4: // one page
		off, n = pg(g.r.IntN(pages)), page
	case 5: // around or on a PMD boundary
		if size < 2*page {
			off, n = 0, size
			break
		}
		b := uint64(pmd)
		switch {
		case size > pmd:
			b = uint64(between(g.r, 1, int(size/pmd))) * pmd
		case size < pmd && chance(g.r, 0.7):
			b = uint64(between(g.r, 1, pages-1)) * page // a page boundary instead
		}
		if chance(g.r, 0.3) && b >= pmd {
			off, n = b-pmd, pmd // exactly one PMD
			break
		}
		off = b - min(b, pg(between(g.r, 1, 16)))
		n = b - off + pg(between(g.r, 0, 16))
	default: // at or past the end of the region
		off = size - pg(between(g.r, 0, min(pages, 8)))
		if chance(g.r, 0.3) {
			off = size + pg(g.r.IntN(pages))
		}
		n = pg(between(g.r, 1, 16))
	}
	if chance(g.r, g.w.UnalignedProb) {
		switch g.r.IntN(3) {
		case 0:
			off += uint64(between(g.r, 1, page-1))
		case 1:
			n += uint64(between(g.r, 1, page-1))
		default:
			n = 0
		}
	}
	return off, n
}

// rangeOp returns a VMA operation of kind k on region ri.
func (g *generator) rangeOp(proc int, k prog.OpKind, ri int) []prog.Op {
	off, n := g.span(ri)
	op := prog.Op{Proc: proc, Kind: k, Region: ri, Off: off, Len: n}
	switch k {
	case prog.OpMprotect:
		op.Prot = prog.Prot(pick(g.r, g.w.Prots[:]))
		if op.Prot != prog.ProtRW && chance(g.r, 0.25) {
			// Take write permission away and give it back (r -> rw).
			back := op
			back.Prot = prog.ProtRW
			return []prog.Op{g.fix(op), g.fix(back)}
		}
	case prog.OpMadvise:
		op.Advice = prog.Advice(pick(g.r, g.w.Advices))
	case prog.OpMremap:
		op = g.mremap(op)
	default:
		g.vmaArgs(&op)
	}
	return []prog.Op{g.fix(op)}
}

// mremap fills in the mremap-specific fields of op.
func (g *generator) mremap(op prog.Op) prog.Op {
	pages, size := g.pages(op.Region), g.bytes(op.Region)
	pg := func(k int) uint64 { return uint64(k) * page }
	if op.Len == 0 {
		op.Len = page
	}
	dest := func() {
		op.Flags |= prog.MremapFixed
		op.To = g.region()
		if op.To == op.Region && len(g.p.Regions) > 1 && chance(g.r, 0.8) {
			op.To = (op.To + 1 + g.r.IntN(len(g.p.Regions)-1)) % len(g.p.Regions)
		}
		to := g.bytes(op.To)
		switch g.r.IntN(4) {
		case 0: // over the start of the destination
			op.ToOff = 0
		case 1: // over the middle of the destination
			op.ToOff = pg(g.r.IntN(g.pages(op.To)))
		case 2: // onto a PMD boundary past the destination
			op.ToOff = (to + pmd - 1) / pmd * pmd
		default: // into free space past the destination
			op.ToOff = to + pg(between(g.r, 0, 64))
		}
	}
	switch pick(g.r, g.w.Mremaps[:]) {
	case 0: // grow, in place if it can
		if chance(g.r, 0.5) {
			op.Off = pg(g.r.IntN(pages))
			op.Len = size - op.Off
		}
		op.NewLen = op.Len + pg(oneOf(g.r, 1, between(g.r, 1, 16), 512))
		op.Flags = oneOf(g.r, 0, prog.MremapMaymove)
	case 1: // shrink
		op.NewLen = max(op.Len/2&^(page-1), page)
	case 2: // move to a fixed place, maybe resizing
		op.Flags = prog.MremapMaymove
		op.NewLen = oneOf(g.r, op.Len, op.Len, op.Len*2, max(op.Len/2&^(page-1), page))
		dest()
	case 3: // keep the old range mapped
		op.Flags = prog.MremapMaymove | prog.MremapDontunmap
		op.NewLen = op.Len
		if chance(g.r, 0.5) {
			dest()
		}
	case 4: // let the kernel move it anywhere
		op.Flags = prog.MremapMaymove
		op.NewLen = op.Len + pg(between(g.r, 1, 512))
	default: // flag sets the kernel rejects
		op.NewLen = op.Len
		switch g.r.IntN(3) {
		case 0:
			dest()
			op.Flags = prog.MremapFixed
		case 1:
			op.Flags = prog.MremapDontunmap
		default:
			op.NewLen = 0
		}
	}
	return op
}

// vmaArgs draws the argument of a VMA operation of prog/vmaops.go (an
// mbind policy, an anonname name, a pmadvise advice).
func (g *generator) vmaArgs(op *prog.Op) {
	switch op.Kind {
	case prog.OpMbind:
		op.Policy = prog.Policy(pick(g.r, g.w.Policies[:]))
	case prog.OpAnonName:
		op.Name = prog.AnonName(g.r.IntN(prog.NumAnonNames))
	case prog.OpPMadvise:
		op.Advice = oneOf(g.r, prog.AdvCold, prog.AdvPageout)
	case prog.OpRemapFile:
		op.PgOff = g.pgoff(*op)
	}
}

// pgoff draws the file page a remapfile of op's range maps there: where
// the range is (it maps back and merges), another page of the region,
// further into a memfd or file, or (one time in eight) across and past
// the end of the object (the region's pages for shared anonymous memory,
// SpanPages for a memfd or file), where the pages are beyond EOF. Past
// EOF a later store kills its process and leaves the shared memory it
// wrote unjudged, so it stays rare.
func (g *generator) pgoff(op prog.Op) uint64 {
	pages := g.pages(op.Region)
	n := max(int(op.Len/page), 1)
	end := pages
	memfd := g.p.Regions[op.Region].Kind.Memfd()
	if memfd {
		end = prog.SpanPages
	}
	var pg int
	switch r := g.r.IntN(16); {
	case r < 4: // the identity
		pg = int(op.Off / page)
	case r < 10 || r < 14 && !memfd: // another page of the region
		pg = g.r.IntN(pages)
	case r < 14: // up to as far again past the region, inside a memfd
		pg = g.r.IntN(2 * pages)
	case r == 14: // across the end of the object
		pg = end - between(g.r, 1, n)
	default: // a few pages past it
		pg = end + g.r.IntN(4)
	}
	return uint64(min(max(pg, 0), prog.MaxPgOff))
}

package checker

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Linux errno values the model predicts.
const (
	eOK     = 0
	eSRCH   = 3
	eCHILD  = 10
	eNOMEM  = 12
	eFAULT  = 14
	eINVAL  = 22
	sigKILL = 9
)

// pred is the model's prediction of an operation's errno.
type pred struct {
	errnos []int  // acceptable errnos; empty: not predictable
	why    string // why (for explanations)
}

func certain(e int, why string) pred { return pred{errnos: []int{e}, why: why} }
func either(why string, es ...int) pred {
	return pred{errnos: es, why: why}
}
func unpredictable(why string) pred { return pred{why: why} }

func (p pred) allows(e int) bool {
	if len(p.errnos) == 0 {
		return true
	}
	for _, x := range p.errnos {
		if x == e {
			return true
		}
	}
	return false
}

func (p pred) first() int {
	if len(p.errnos) == 0 {
		return 0
	}
	return p.errnos[0]
}

type viewKey struct{ proc, at int }

// writeMode records where a store's slots landed (for isolation).
type writeMode uint8

const (
	wroteNothing writeMode = 0
	wrotePrivate writeMode = 1
	wroteShared  writeMode = 2
)

// machine runs the reference model over a program, either checking an
// observation (o != nil) or producing the expected one (exp != nil).
type machine struct {
	p     *prog.Program
	o     *obs.Observation
	exp   *obs.Observation
	procs []*proc
	objs  []*object
	memfd []int // region -> memfd object (or -1)

	seq    int   // execution counter
	opSeq  []int // op -> execution sequence number (-1: not executed)
	writes []writeMode
	// taintShared: a write went somewhere the model could not follow;
	// shared memory is no longer judged.
	taintShared bool

	// cmp judges the observation (Check); nil when the model predicts
	// (Expected). compare.go.
	cmp *comparer
	col *collector

	th  threadState
	pin pinState // pinned.go
	// racyFault: the main process stopped while threads could change its
	// mappings concurrently.
	racyFault bool
	// hasHuge: the program has hugetlb regions (hugetlb.go).
	hasHuge bool

	// expected mode: kernel-chosen mremap addresses and fake pids.
	nextFar uint64
	clock   int64

	spec   recorder // spec.go: records what the model accepts (NewSpec); noRecord otherwise
	kernel string   // expected mode: the release to follow (NewSpec only)
	// failFork, in expected mode, is 1 + the index of a fork operation
	// that fails (NewSpec only; 0: none).
	failFork int
	// copyKill, in expected mode, is 1 + the index of a fork operation
	// whose child dies of its failed copy before user space
	// (NewSpecCopyKilled only; 0: none).
	copyKill int
}

func newMachine(p *prog.Program, o *obs.Observation) *machine {
	m := &machine{
		p:       p,
		o:       o,
		procs:   make([]*proc, p.NumForks()+1),
		memfd:   make([]int, len(p.Regions)),
		opSeq:   make([]int, len(p.Ops)),
		writes:  make([]writeMode, len(p.Ops)),
		nextFar: 0x7e0000000000,
		col:     newCollector(),
		spec:    noRecord{},
	}
	for i := range m.opSeq {
		m.opSeq[i] = -1
	}
	m.pin.init()
	for _, r := range p.Regions {
		m.hasHuge = m.hasHuge || r.Kind.Hugetlb()
	}
	m.procs[0] = &proc{id: 0, parent: -1, forkOp: -1, state: running, anon: pageMap{}, reset: map[int]int{}}
	for i := 1; i < len(m.procs); i++ {
		m.procs[i] = &proc{id: i, state: unborn, forkOp: p.ForkOp(i - 1)}
		m.procs[i].parent = p.Ops[m.procs[i].forkOp].Proc
	}
	if o != nil {
		m.cmp = newComparer(m, p, o)
	} else {
		m.exp = &obs.Observation{Version: obs.Version, Ops: make([]obs.OpResult, len(p.Ops))}
	}
	return m
}

// checking: the model judges an observation (Check), not predicts.
func (m *machine) checking() bool { return m.cmp != nil }

// kernelBefore reports whether the observation comes from a Linux older
// than major.minor. Without a release (the expected observation, the
// simulated kernel) the model follows the newest behaviour it knows.
func (m *machine) kernelBefore(major, minor int) bool {
	rel := m.kernel
	if m.o != nil {
		rel = m.o.Kernel
	}
	if rel == "" {
		return false
	}
	var a, b int
	if n, _ := fmt.Sscanf(rel, "%d.%d", &a, &b); n != 2 {
		return false
	}
	return a < major || a == major && b < minor
}

// setup creates the regions (main process).
func (m *machine) setup() {
	main := m.procs[0]
	for i, r := range m.p.Regions {
		m.memfd[i] = -1
		s := seg{start: gpage(i, 0), end: gpage(i, 0) + r.Pages, kind: r.Kind.Base(), huge: r.Kind.Hugetlb(), fs: r.Kind.FS(), obj: -1, prot: prog.ProtRW,
			thp: r.THP, origin: -1, originWhy: "program set-up"}
		switch s.kind {
		case prog.AnonShared:
			s.obj = m.newObject(false, i, r.Pages, -1)
		case prog.MemfdPrivate, prog.MemfdShared:
			s.obj = m.newObject(true, i, prog.SpanPages, -1)
			m.memfd[i] = s.obj
		}
		main.insert(s)
	}
}

func (m *machine) newObject(memfd bool, region, size, op int) int {
	id := len(m.objs)
	m.objs = append(m.objs, &object{id: id, memfd: memfd, region: region, size: size, created: op, pages: pageMap{}})
	return id
}

// run executes the whole program.
func (m *machine) run() {
	m.setup()
	m.runProc(0)
	main := m.procs[0]
	// The main process joins every thread before its end view.
	for t := range m.th.handed {
		m.join(t)
	}
	for t := range m.th.pending {
		m.join(t)
	}
	if !main.crashed {
		m.view(main, obs.AtEnd)
	}
	main.state = exited
}

func (m *machine) runProc(id int) {
	pr := m.procs[id]
	for i := range m.p.Ops {
		if m.p.Ops[i].Proc != id {
			continue
		}
		if pr.crashed {
			return
		}
		m.exec(pr, i)
	}
}

// result returns what operation i returned, checking its errno against
// the prediction. In expected mode it makes up the predicted result.
func (m *machine) result(pr *proc, i int, pd pred) obs.OpResult {
	if !m.checking() {
		r := obs.OpResult{Ran: true, Errno: pd.first()}
		m.clock += 1000
		r.Start = m.clock
		m.clock += 1000
		r.End = m.clock
		m.exp.Ops[i] = r
		return r
	}
	r := m.o.Ops[i]
	m.spec.op(i, pd)
	if !pd.allows(r.Errno) {
		m.cmp.errnoFinding(pr, i, pd, r.Errno)
	}
	return r
}

func (m *machine) setRet(i int, ret uint64) {
	if !m.checking() {
		m.exp.Ops[i].Ret = ret
	}
}

// exec runs operation i in process pr.
func (m *machine) exec(pr *proc, i int) {
	op := &m.p.Ops[i]
	m.seq++
	m.opSeq[i] = m.seq
	if m.checking() && !m.o.Ops[i].Ran {
		m.notRun(pr, i)
		return
	}
	if op.Thread > 0 && m.checking() {
		m.threadOp(pr, i)
		return
	}
	if m.hugeOp(pr, i) { // hugetlb.go
		m.forgetPending(pr)
		m.rewild(pr)
		return
	}
	switch op.Kind {
	case prog.OpStore:
		m.store(pr, i)
	case prog.OpPwrite:
		m.pwrite(pr, i)
	case prog.OpMmap:
		m.mmap(pr, i)
	case prog.OpMunmap:
		m.munmap(pr, i)
	case prog.OpMprotect:
		m.mprotect(pr, i)
	case prog.OpMadvise:
		m.madvise(pr, i)
	case prog.OpMlock, prog.OpMunlock:
		m.mlock(pr, i)
	case prog.OpMremap:
		m.mremap(pr, i)
	case prog.OpFork:
		m.fork(pr, i)
	case prog.OpKill:
		m.kill(pr, i)
	case prog.OpWait:
		m.wait(pr, i)
	case prog.OpCheck:
		m.result(pr, i, certain(eOK, "check never fails"))
		m.view(pr, i)
	case prog.OpStoreLoop:
		// Expected mode: one pass at the hand-over.
		m.store(pr, i)
	case prog.OpJoin:
		m.result(pr, i, unpredictable("join"))
		m.join(op.Peer)
	case prog.OpMigrate:
		m.migrate(pr, i)
	case prog.OpMlockOnfault, prog.OpMbind, prog.OpAnonName, prog.OpPMadvise, prog.OpRemapFile:
		m.vmaOp(pr, i)
	case prog.OpUffdReg, prog.OpUffdUnreg:
		m.uffdMissOp(pr, i) // uffd.go
	default:
		if op.Kind.Pinned() {
			m.execPinned(pr, i)
		} else {
			m.unhandled(pr, i)
		}
	}
	switch op.Kind {
	case prog.OpMmap, prog.OpMunmap, prog.OpMremap, prog.OpMadvise, prog.OpMprotect, prog.OpMlock, prog.OpMunlock,
		prog.OpMlockOnfault, prog.OpMbind, prog.OpAnonName, prog.OpPMadvise, prog.OpRemapFile, prog.OpUffdReg, prog.OpUffdUnreg:
		if m.hasHuge {
			pr.mergeHuge() // hugetlb.go
		}
		m.forgetPending(pr)
		m.rewild(pr)
	}
}

// unhandled is the model's answer to an operation kind it has no rule
// for: nothing is predicted and a note says so (TestEveryOpKindModelled
// runs every kind, so this is reached only by a kind added without one).
func (m *machine) unhandled(pr *proc, i int) {
	m.result(pr, i, unpredictable("unhandled operation kind"))
	m.col.note("%s: the model has no rule for %s operations (unhandled operation kind); nothing after it is judged reliably", opRef(m.p, i), m.p.Ops[i].Kind)
}

// notRun handles an operation the observation says did not run although
// its process was running.
func (m *machine) notRun(pr *proc, i int) {
	op := &m.p.Ops[i]
	later := false
	for j := i + 1; j < len(m.p.Ops); j++ {
		if m.p.Ops[j].Proc == pr.id && m.o.Ops[j].Ran {
			later = true
			break
		}
	}
	racy := pr.id == 0 && len(m.th.pending) > 0
	if racy {
		// A thread may have been changing mappings under the main
		// thread (a view or store then faults): a harness race, not a
		// kernel finding.
		m.racyFault = true
		m.col.note("%s did not complete while a thread could be changing mappings under it", opRef(m.p, i))
	}
	if !racy {
		m.cmp.notRun(pr, i, later)
	}
	// Whatever part of it ran is unknown; a check that did not finish may
	// have left a partial view.
	m.taintOp(pr, i)
	if op.Kind == prog.OpCheck {
		m.cmp.forgetViews(pr.id, i)
	}
	if !later && !m.o.Truncated && op.Thread == 0 {
		pr.crashed = true
	}
}

// taintOp forgets what operation i may have done in pr.
func (m *machine) taintOp(pr *proc, i int) {
	op := &m.p.Ops[i]
	switch op.Kind {
	case prog.OpStore:
		op.SlotOffsets(func(k int, off uint64) { m.taintContent(pr, gpage(op.Region, off)) })
	case prog.OpPwrite:
		obj := m.objs[m.memfd[op.Region]]
		op.SlotOffsets(func(k int, off uint64) { obj.pages.own(int(off / prog.PageSize)).unknown = true })
	case prog.OpMmap, prog.OpMunmap, prog.OpMprotect, prog.OpMadvise, prog.OpMlock, prog.OpMunlock,
		prog.OpMlockOnfault, prog.OpMbind, prog.OpAnonName, prog.OpPMadvise, prog.OpRemapFile, prog.OpUffdReg, prog.OpUffdUnreg:
		lo := gpage(op.Region, op.Off&^(prog.PageSize-1))
		hi := gpage(op.Region, 0) + pagesUp(op.Off+op.Len)
		m.forget(pr, lo, hi, i)
	case prog.OpMremap:
		lo := gpage(op.Region, op.Off&^(prog.PageSize-1))
		n := max(pagesUp(op.Len), pagesUp(op.NewLen))
		m.forget(pr, lo, lo+n, i)
		if op.Flags&prog.MremapFixed != 0 {
			d := gpage(op.To, op.ToOff&^(prog.PageSize-1))
			m.forget(pr, d, d+pagesUp(op.NewLen), i)
		}
	case prog.OpFork:
		m.procs[op.Fork+1].state = forkFailed
	default:
		if op.Kind.Pinned() {
			m.taintPinned(pr, i)
		}
	}
}

// forget marks [lo, hi) of pr unknown (mapped or not, any content). Writes
// through unknown pages taint shared memory (see store).
func (m *machine) forget(pr *proc, lo, hi, op int) {
	lo = max(lo, 0)
	hi = min(hi, arenaPages)
	if lo >= hi {
		return
	}
	m.col.v.Stats.Lost++
	pr.setUnknown(lo, hi, op)
}

// taintContent makes the content of page g of pr unknown.
func (m *machine) taintContent(pr *proc, g int) {
	s := pr.segAt(g)
	if s == nil || s.unknown {
		if s != nil {
			m.taintShared = true
		}
		return
	}
	switch s.kind {
	case prog.AnonPrivate, prog.MemfdPrivate:
		pr.anon.own(g).unknown = true
	default:
		m.objs[s.obj].pages.own(s.pgoff + g - s.start).unknown = true
	}
}

func pagesUp(b uint64) int { return int((b + prog.PageSize - 1) / prog.PageSize) }

func aligned(b uint64) bool { return b%prog.PageSize == 0 }

// beyondEOF reports whether page g of segment s lies past its object's end.
func (m *machine) beyondEOF(s *seg, g int) bool {
	return s.obj >= 0 && s.pgoff+(g-s.start) >= m.objs[s.obj].size
}

// ---- store and pwrite ----

type slotWrite struct {
	k   int
	g   int
	w   uint16
	seg int // index into the process's segments
}

func (m *machine) store(pr *proc, i int) {
	op := &m.p.Ops[i]
	var plan []slotWrite
	skipped := 0
	unsure := false
	op.SlotOffsets(func(k int, off uint64) {
		g := gpage(op.Region, off)
		s := pr.segAt(g)
		switch {
		case s == nil:
			skipped++
		case s.unknown:
			unsure = true
		case s.prot != prog.ProtRW || m.beyondEOF(s, g):
			skipped++
		default:
			plan = append(plan, slotWrite{k: k, g: g, w: uint16(off % prog.PageSize / prog.SlotSize), seg: pr.find(g)})
		}
	})
	r := m.result(pr, i, certain(eOK, "a store never fails"))
	if !m.checking() {
		m.exp.Ops[i].Skipped = skipped
		r.Skipped = skipped
	}
	m.spec.skipped(i, !unsure, skipped)
	if unsure {
		// Slots on pages the model lost track of: their fate is unknown,
		// and their values may show wherever a shared page can.
		m.taintShared = true
		m.writes[i] |= wrotePrivate | wroteShared
		op.SlotOffsets(func(k int, off uint64) { m.taintContent(pr, gpage(op.Region, off)) })
	} else if r.Skipped != skipped {
		m.cmp.skippedFinding(pr, i, skipped, r.Skipped)
		op.SlotOffsets(func(k int, off uint64) {
			g := gpage(op.Region, off)
			if pr.segAt(g) == nil {
				m.forget(pr, g, g+1, i)
			} else {
				m.taintContent(pr, g)
			}
		})
		m.taintShared = true
		return
	}
	for _, sw := range plan {
		s := &pr.segs[sw.seg]
		m.writeWord(pr, s, sw.g, sw.w, prog.SlotValue(i, sw.k))
		if s.kind.Shared() {
			m.writes[i] |= wroteShared
		} else {
			m.writes[i] |= wrotePrivate
		}
	}
}

// writeWord performs a store of v at word w of page g through segment s.
func (m *machine) writeWord(pr *proc, s *seg, g int, w uint16, v uint64) {
	var pg *page
	switch s.kind {
	case prog.AnonPrivate:
		pg = pr.anon.own(g)
	case prog.MemfdPrivate:
		m.cowFile(pr, s, g)
		pg = pr.anon.own(g)
	default:
		pg = m.objs[s.obj].pages.own(s.pgoff + g - s.start)
	}
	pg.write(w, v)
	if pg.wild[w] && !m.cellActive(pr, g, w) && !s.kind.Shared() {
		delete(pg.wild, w)
	}
}

// cowFile gives pr a private copy of file page g of memfd-private segment
// s, if it has none yet (a write fault or a populating write).
func (m *machine) cowFile(pr *proc, s *seg, g int) {
	if _, ok := pr.anon[g]; ok {
		return
	}
	var np *page
	if fp := m.objs[s.obj].pages[s.pgoff+g-s.start]; fp != nil {
		np = fp.clone()
	} else {
		np = newPage()
	}
	pr.anon[g] = np
}

func (m *machine) pwrite(pr *proc, i int) {
	op := &m.p.Ops[i]
	obj := m.objs[m.memfd[op.Region]]
	r := m.result(pr, i, certain(eOK, "pwrite inside a memfd never fails"))
	op.SlotOffsets(func(k int, off uint64) {
		pg := obj.pages.own(int(off / prog.PageSize))
		if r.Errno != 0 {
			pg.unknown = true
			return
		}
		pg.write(uint16(off%prog.PageSize/prog.SlotSize), prog.SlotValue(i, k))
	})
	m.writes[i] |= wroteShared
}

// ---- mmap, munmap ----

func (m *machine) mmap(pr *proc, i int) {
	op := &m.p.Ops[i]
	addr := prog.Base(op.Region) + op.Off
	if op.Len == 0 || !aligned(op.Off) {
		m.result(pr, i, certain(eINVAL, "mmap with zero length or an unaligned address fails with EINVAL"))
		m.setRet(i, ^uint64(0))
		return
	}
	r := m.result(pr, i, certain(eOK, "MAP_FIXED mmap of a valid range succeeds"))
	lo := gpage(op.Region, op.Off)
	hi := lo + pagesUp(op.Len)
	if r.Errno != 0 {
		m.forget(pr, lo, hi, i)
		return
	}
	if m.checking() && r.Ret != addr {
		m.cmp.address(pr, i, op.Region, "mmap", fmt.Sprintf("returned %#x, MAP_FIXED asked for %#x", r.Ret, addr))
	}
	m.setRet(i, addr)
	pr.unmap(lo, hi)
	kind := m.p.Regions[op.Region].Kind.Base()
	s := seg{start: lo, end: hi, kind: kind, fs: m.p.Regions[op.Region].Kind.FS(), obj: -1, prot: prog.ProtRW, origin: i, originWhy: "mmap"}
	switch kind {
	case prog.AnonShared:
		s.obj = m.newObject(false, op.Region, hi-lo, i)
	case prog.MemfdPrivate, prog.MemfdShared:
		s.obj = m.memfd[op.Region]
		s.pgoff = int(op.Off / prog.PageSize)
	}
	pr.insert(s)
}

func (m *machine) munmap(pr *proc, i int) {
	op := &m.p.Ops[i]
	if op.Len == 0 || !aligned(op.Off) {
		m.result(pr, i, certain(eINVAL, "munmap with zero length or an unaligned address fails with EINVAL"))
		return
	}
	lo := gpage(op.Region, op.Off)
	hi := lo + pagesUp(op.Len)
	pd := certain(eOK, "munmap of an aligned range succeeds")
	for _, g := range []int{lo, hi} {
		switch m.hugeCut(pr, g) {
		case yes:
			m.result(pr, i, certain(eINVAL, hugeBadSplit("munmap", g)))
			return
		case maybe:
			pd = unpredictable("the range ends in pages the model lost track of, in a program with hugetlb regions")
		}
	}
	r := m.result(pr, i, pd)
	if len(pd.errnos) == 0 || r.Errno != 0 {
		m.forget(pr, lo, hi, i)
		return
	}
	pr.unmap(lo, hi)
}

// rangeArgs settles the argument checks that madvise and mprotect share:
// an unaligned start fails with EINVAL and a zero length does nothing
// (both results are recorded; ok is false). Otherwise it returns the
// global page range [lo, hi) the operation covers.
func (m *machine) rangeArgs(pr *proc, i int, name string) (lo, hi int, ok bool) {
	op := &m.p.Ops[i]
	if !aligned(op.Off) {
		m.result(pr, i, certain(eINVAL, name+" of an unaligned address fails with EINVAL"))
		return 0, 0, false
	}
	if op.Len == 0 {
		m.result(pr, i, certain(eOK, name+" of zero length does nothing"))
		return 0, 0, false
	}
	lo = gpage(op.Region, op.Off)
	return lo, lo + pagesUp(op.Len), true
}

// ---- mprotect ----

func (m *machine) mprotect(pr *proc, i int) {
	op := &m.p.Ops[i]
	lo, hi, ok := m.rangeArgs(pr, i, "mprotect")
	if !ok {
		return
	}
	// The kernel applies the new protection VMA by VMA from lo until it
	// meets a hole (ENOMEM); a hole at lo changes nothing.
	end, gap, unsure := m.contiguousPrefix(pr, lo, hi)
	var pd pred
	switch {
	case unsure:
		pd = unpredictable("the range covers pages the model lost track of")
	case m.hugeCut(pr, lo) == maybe || m.hugeCut(pr, hi) == maybe:
		// A hugetlb VMA may or may not have to be split at an end.
		unsure = true
		pd = unpredictable("the range ends next to pages the model lost track of, in a program with hugetlb regions")
	case m.hugeProtCut(pr, lo, op.Prot):
		// The first VMA cannot be split: nothing changes.
		m.result(pr, i, certain(eINVAL, hugeBadSplit("mprotect", lo)))
		return
	case gap:
		pd = certain(eNOMEM, "the range contains unmapped pages")
	case m.hugeProtCut(pr, hi, op.Prot):
		// The VMAs before the last one changed.
		pd = certain(eINVAL, hugeBadSplit("mprotect", hi))
		end = pr.segAt(hi).start
	default:
		pd = certain(eOK, "the range is mapped")
	}
	r := m.result(pr, i, pd)
	if unsure || !pd.allows(r.Errno) {
		m.forget(pr, lo, hi, i)
		return
	}
	a, b := pr.span(lo, end)
	for j := a; j < b; j++ {
		s := &pr.segs[j]
		old := s.prot
		s.prot = op.Prot
		// A locked private mapping that becomes writable is populated
		// with write faults, which breaks COW of file pages.
		if s.kind == prog.MemfdPrivate && old != prog.ProtRW && op.Prot == prog.ProtRW {
			m.populate(pr, s, s.start, s.end, s.lock, true)
		}
	}
}

// contiguousPrefix returns the end of the mapped run of pages starting at
// lo (within hi), whether the range has a hole, and whether unknown pages
// make that unsure.
func (m *machine) contiguousPrefix(pr *proc, lo, hi int) (end int, gap, unsure bool) {
	g := lo
	for g < hi {
		s := pr.segAt(g)
		if s == nil {
			return g, true, unsure
		}
		if s.unknown {
			unsure = true
		}
		g = min(s.end, hi)
	}
	return hi, false, unsure
}

// populate models the kernel faulting in [lo, hi) of segment s (mlock,
// mprotect of a locked mapping, growth of a locked mapping): for a
// writable memfd-private mapping the write faults give the process
// private copies of the file pages. lock says whether the populate happens
// (maybe: unknown). It returns false if a page beyond the end of the file
// stopped it.
func (m *machine) populate(pr *proc, s *seg, lo, hi int, lock tri, onlyIfLocked bool) bool {
	if onlyIfLocked && (lock == no || s.onfault) {
		// VM_LOCKONFAULT: populate_vma_page_range faults nothing in.
		return true
	}
	for g := lo; g < hi; g++ {
		if m.beyondEOF(s, g) {
			return false
		}
		if s.kind != prog.MemfdPrivate || s.prot != prog.ProtRW {
			continue
		}
		if onlyIfLocked && lock == maybe {
			if _, ok := pr.anon[g]; !ok {
				pr.anon.own(g).unknown = true
			}
			continue
		}
		m.cowFile(pr, s, g)
	}
	return true
}

// ---- madvise ----

// adviceOK says whether advice a is accepted on segment s: yes, no, or
// maybe (unknown lock state).
func adviceOK(a prog.Advice, s *seg) tri {
	d := a.Info()
	if d.Populate {
		// check_vma_flags: the access the fault needs (locks do not
		// matter).
		if s.prot == prog.ProtNone || d.PopulateWrite && s.prot != prog.ProtRW {
			return no
		}
		return yes
	}
	if d.AnonPrivateOnly && s.kind != prog.AnonPrivate {
		return no
	}
	if d.NotLocked {
		switch s.lock {
		case yes:
			return no
		case maybe:
			return maybe
		}
	}
	return yes
}

// adviceWhy says why an advice fails with EINVAL (from its descriptor).
func adviceWhy(a prog.Advice) string {
	d := a.Info()
	switch {
	case d.PopulateWrite:
		return d.Linux + " needs a writable mapping (EINVAL otherwise)"
	case d.Populate:
		return d.Linux + " needs a readable mapping (EINVAL otherwise)"
	case d.NotLocked && d.AnonPrivateOnly:
		return d.Linux + " works only on unlocked private anonymous mappings (EINVAL otherwise)"
	case d.AnonPrivateOnly:
		return d.Linux + " works only on private anonymous mappings (EINVAL otherwise)"
	case d.NotLocked:
		return d.Linux + " fails with EINVAL on VM_LOCKED mappings"
	}
	return ""
}

func (m *machine) madvise(pr *proc, i int) {
	op := &m.p.Ops[i]
	lo, hi, ok := m.rangeArgs(pr, i, "madvise")
	if !ok {
		return
	}
	if v := op.Advice.Info().Since; m.kernelBefore(v[0], v[1]) {
		m.result(pr, i, certain(eINVAL, fmt.Sprintf("Linux before %d.%d does not know %s (EINVAL)", v[0], v[1], op.Advice.Info().Linux)))
		return
	}
	if op.Advice == prog.AdvCollapse {
		// MADV_COLLAPSE never changes content; whether it succeeds
		// depends on THP state the model does not know.
		m.result(pr, i, unpredictable("MADV_COLLAPSE success depends on THP availability"))
		return
	}
	// The kernel walks the VMAs in order, skipping holes (ENOMEM at the
	// end) and stopping at the first VMA that rejects the advice. Since
	// Linux 6.9 MADV_POPULATE_* no longer walks: it faults page by page
	// and stops at the first hole (ENOMEM).
	type step struct{ lo, hi int }
	var steps []step
	errno, why := eOK, "the advice applies to the whole mapped range"
	gap := false
	stopAt := hi // where certain knowledge ends
	populate := op.Advice.Info().Populate
	for g := lo; g < hi; {
		s := pr.segAt(g)
		if s == nil && populate && !m.kernelBefore(6, 9) {
			errno, why = eNOMEM, "MADV_POPULATE_* stops at the first unmapped page (ENOMEM, Linux 6.9+)"
			break
		}
		if s == nil {
			gap = true
			next := hi
			if t := pr.segsIn(g, hi); len(t) > 0 {
				next = t[0].start
			}
			g = next
			continue
		}
		if s.unknown {
			stopAt = g
			break
		}
		e := min(s.end, hi)
		ok, eh, hwhy := adviceOK(op.Advice, s), e, adviceWhy(op.Advice)
		if s.huge {
			ok, eh, hwhy = hugeAdvice(op.Advice, s, g, e) // hugetlb.go
		}
		if ok == maybe {
			stopAt = g
			break
		}
		if ok == no {
			errno, why = eINVAL, hwhy
			break
		}
		if eh != e {
			// MADV_DONTNEED on hugetlb: the end rounded down.
			steps = append(steps, step{g, eh})
			g = e
			continue
		}
		if populate && s.obj >= 0 && m.beyondEOF(s, e-1) {
			// The fault past the end of the object is a SIGBUS.
			if eof := s.start + max(0, m.objs[s.obj].size-s.pgoff); eof > g {
				steps = append(steps, step{g, eof})
			}
			errno, why = eFAULT, "MADV_POPULATE_* reaches a page past the end of the backing object (SIGBUS: EFAULT)"
			break
		}
		steps = append(steps, step{g, e})
		g = e
	}
	var pd pred
	switch {
	case stopAt < hi:
		pd = unpredictable("the range covers pages whose lock state or mapping the model lost track of")
	case errno == eOK && gap:
		pd = certain(eNOMEM, "the range contains unmapped pages")
	default:
		pd = certain(errno, why)
	}
	r := m.result(pr, i, pd)
	if stopAt == hi && !pd.allows(r.Errno) {
		m.forget(pr, lo, hi, i)
		return
	}
	for _, st := range steps {
		m.applyAdvice(pr, i, st.lo, st.hi)
	}
	if stopAt < hi {
		// Unknown whether the walk went on past stopAt.
		m.forget(pr, stopAt, hi, i)
	}
}

// applyAdvice applies the advice of op i to [lo, hi), all mapped and
// accepting it.
func (m *machine) applyAdvice(pr *proc, i, lo, hi int) {
	op := &m.p.Ops[i]
	switch op.Advice {
	case prog.AdvDontneed, prog.AdvDontneedLocked:
		for _, s := range pr.segsIn(lo, hi) {
			if s.kind.Shared() {
				continue
			}
			for _, k := range pr.anon.keysIn(s.start, s.end) {
				if !pr.anon[k].isZero() {
					pr.reset[k] = i
				}
				pr.anon.drop(k)
			}
		}
	case prog.AdvFree:
		for _, k := range pr.anon.keysIn(lo, hi) {
			if pr.anon[k].isZero() {
				continue
			}
			pr.anon.own(k).addZeroAlt()
			pr.reset[k] = i
		}
	case prog.AdvDontfork, prog.AdvDofork, prog.AdvWipeonfork, prog.AdvKeeponfork, prog.AdvHugepage, prog.AdvNohugepage:
		m.setAttr(pr, lo, hi, func(s *seg) bool { return adviceChanges(op.Advice, s) })
	case prog.AdvMergeable, prog.AdvUnmergeable:
		// VM_MERGEABLE on private mappings only (ksm_madvise ignores
		// shared ones); merging by ksmd and unmerging keep content.
		m.setAttr(pr, lo, hi, func(s *seg) bool {
			if s.kind.Shared() || s.huge {
				return false
			}
			return set(&s.mergeable, op.Advice == prog.AdvMergeable)
		})
	case prog.AdvPageout, prog.AdvCold, prog.AdvCollapse, prog.AdvPopulateRead:
		// Reclaim hints, THP collapse and read faults change neither
		// content nor the mapping's attributes.
	case prog.AdvPopulateWrite:
		// Write faults: a writable private file mapping gets private
		// copies of the file's pages (later file changes no longer show).
		for _, s := range pr.segsIn(lo, hi) {
			t := s
			m.populate(pr, &t, max(lo, s.start), min(hi, s.end), yes, false)
		}
	default:
		m.col.note("%s: the model has no rule for advice %v (unhandled advice); its effect is not judged", opRef(m.p, i), op.Advice)
		m.forget(pr, lo, hi, i)
	}
}

// adviceChanges applies an attribute advice to s and says whether it
// changed anything (the kernel splits a VMA only then).
func adviceChanges(a prog.Advice, s *seg) bool {
	switch a {
	case prog.AdvDontfork:
		return set(&s.dontfork, true)
	case prog.AdvDofork:
		return set(&s.dontfork, false)
	case prog.AdvWipeonfork:
		return set(&s.wipe, true)
	case prog.AdvKeeponfork:
		return set(&s.wipe, false)
	case prog.AdvHugepage:
		return set(&s.thp, prog.THPOn)
	case prog.AdvNohugepage:
		return set(&s.thp, prog.THPOff)
	}
	return false
}

func set[T comparable](p *T, v T) bool {
	if *p == v {
		return false
	}
	*p = v
	return true
}

// setAttr applies change to the segments in [lo, hi), splitting only
// where the attribute changes (as the kernel splits VMAs only then).
func (m *machine) setAttr(pr *proc, lo, hi int, change func(*seg) bool) {
	for _, s := range pr.segsIn(lo, hi) {
		t := s
		if !change(&t) {
			continue
		}
		a, b := pr.span(s.start, s.end)
		for j := a; j < b; j++ {
			change(&pr.segs[j])
		}
	}
}

// ---- mlock, munlock ----

func (m *machine) mlock(pr *proc, i int) {
	op := &m.p.Ops[i]
	onfault := op.Kind == prog.OpMlockOnfault // mlock2(MLOCK_ONFAULT): no populate
	lock := op.Kind == prog.OpMlock || onfault
	// mlock and munlock round the start down and the end up.
	lo := gpage(op.Region, op.Off&^(prog.PageSize-1))
	hi := gpage(op.Region, 0) + pagesUp(op.Off+op.Len)
	if lo == hi {
		m.result(pr, i, certain(eOK, "zero length does nothing"))
		return
	}
	end, gap, unsure := m.contiguousPrefix(pr, lo, hi)
	pd := certain(eOK, "the range is mapped")
	if gap {
		pd = certain(eNOMEM, "the range contains unmapped pages")
	}
	// mlock then faults the range in, VMA by VMA; a PROT_NONE mapping or
	// a page past the end of its object stops it with ENOMEM (the lock
	// flags stay applied).
	populateStop := hi
	if lock && !gap && !unsure {
		for _, s := range pr.segsIn(lo, hi) {
			if onfault && !s.huge {
				continue
			}
			if s.prot == prog.ProtNone {
				populateStop = s.start
				pd = certain(eNOMEM, "mlock cannot populate a PROT_NONE mapping (the lock flag is still applied)")
				break
			}
			if s.obj >= 0 && s.pgoff+(s.end-s.start) > m.objs[s.obj].size {
				populateStop = s.start + max(0, m.objs[s.obj].size-s.pgoff)
				pd = certain(eNOMEM, "mlock cannot populate pages past the end of the backing object (the lock flag is still applied)")
				break
			}
		}
	}
	if unsure {
		pd = unpredictable("the range covers pages the model lost track of")
	}
	r := m.result(pr, i, pd)
	if unsure || !pd.allows(r.Errno) {
		m.forget(pr, lo, hi, i)
		return
	}
	a, b := pr.span(lo, end)
	for j := a; j < b; j++ {
		if pr.segs[j].huge {
			continue // mlock_fixup leaves hugetlb VMAs as they are
		}
		if lock {
			pr.segs[j].lock = yes
		} else {
			pr.segs[j].lock = no
		}
		pr.segs[j].onfault = onfault
	}
	if lock && !gap {
		for _, s := range pr.segsIn(lo, populateStop) {
			// Without VM_LOCKONFAULT a hugetlb VMA is populated by
			// mlock2(MLOCK_ONFAULT) too.
			if !onfault || s.huge {
				t := s
				m.populate(pr, &t, s.start, s.end, yes, false)
			}
		}
	}
}

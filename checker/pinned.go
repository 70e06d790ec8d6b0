package checker

import (
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The model of the pinned and out-of-fault-path operations (see
// fuzz/prog/pinned.go for what each does). What Linux promises, and what
// the model checks:
//
//   - /proc/PID/mem writes (FOLL_FORCE) reach private mappings whatever
//     their protection, breaking COW; shared mappings only if writable.
//     process_vm_writev needs a writable mapping. Either way the write
//     lands in the target process only: a write into a blocked child
//     shows in the child's start view and never in its parent.
//   - An O_DIRECT read and an io_uring fixed read write whole pages. A
//     fixed read writes the pages pinned at registration, wherever they are
//     now: fork gives the child a copy of a pinned anonymous page at fork
//     time (so later fixed reads reach only the parent); after munmap or
//     MADV_DONTNEED the pinned page is no longer mapped and the data goes
//     nowhere visible.
//   - A pipe that vmsplice filled references the spliced pages: a read
//     returns, for each word, either what it held at the vmsplice or a
//     value the splicing process (or, for shared pages, anyone) wrote to
//     that word since. A value another process wrote privately — the
//     classic vmsplice/COW leak — or a lost value is a finding.
//   - userfaultfd write protection with WP_ASYNC never changes content.

// eAGAIN, eIO and eOPNOTSUPP complete the errno values in model.go.
const (
	eIO        = 5
	eAGAIN     = 11
	eOPNOTSUPP = 95
)

// pipePage is one page a vmsplice put into a pipe.
type pipePage struct {
	proc    int // the process that spliced it
	seq     int // execution sequence number of the vmsplice
	op      int
	g       int     // its global page in proc at the vmsplice
	alts    []words // its content then
	wild    map[uint16]bool
	unknown bool
	shared  bool // a shared object's page: anyone's writes through it show
}

// pinState is the model's state of pipes and the registered io_uring buffer.
type pinState struct {
	pipes    [prog.MaxPipes][]pipePage
	pipeLost [prog.MaxPipes]bool
	// uring holds the pages pinned by the last successful uringreg, from
	// its start; uringOp is that operation (-1: none).
	uring    []*page
	uringOp  int
	uringBad bool // the model cannot tell what is registered
	// pinned are the private pages that a registration pins: fork copies
	// them for the child instead of sharing them.
	pinned map[*page]bool
}

func (s *pinState) init() { s.uringOp = -1; s.pinned = map[*page]bool{} }

// forkPage returns the page a child gets at fork for pr's private page pg.
func (s *pinState) forkPage(pg *page) *page {
	if s.pinned[pg] {
		return pg.clone()
	}
	pg.refs++
	return pg
}

// skippedOp reports whether the executor skipped operation i (a resource
// was missing); if so its result is not predicted and the verdict notes it.
func (m *machine) skippedOp(pr *proc, i int) bool {
	if !m.checking() || m.o.Ops[i].Skip == "" {
		return false
	}
	m.result(pr, i, unpredictable("skipped"))
	m.col.note("%s was skipped by the executor: %s", opRef(m.p, i), m.o.Ops[i].Skip)
	return true
}

// execPinned runs a pinned operation in the model.
func (m *machine) execPinned(pr *proc, i int) {
	op := &m.p.Ops[i]
	if m.skippedOp(pr, i) {
		if op.Kind == prog.OpUringReg {
			m.pin.uring, m.pin.uringOp = nil, -1
		}
		return
	}
	m.uffdNoRetry(pr, i) // uffd.go
	switch op.Kind {
	case prog.OpProcMem, prog.OpPVWrite:
		m.remoteWrite(pr, i)
	case prog.OpODirect:
		m.odirect(pr, i)
	case prog.OpVmsplice:
		m.vmsplice(pr, i)
	case prog.OpReadPipe:
		m.readPipe(pr, i)
	case prog.OpUringReg:
		m.uringReg(pr, i)
	case prog.OpUringRead:
		m.uringRead(pr, i)
	case prog.OpUffdWP:
		// Registration rules (holes, protections, file types) changed
		// across kernel versions; content never changes, but the
		// registered VMAs get VM_UFFD_WP and split from their
		// neighbours.
		r := m.result(pr, i, unpredictable("userfaultfd registration rules differ between kernel versions"))
		lo, hi := ioPages(op)
		if r.Errno != 0 {
			m.forget(pr, lo, hi, i) // a registration may have stopped half-way
			return
		}
		m.setAttr(pr, lo, hi, func(s *seg) bool { return set(&s.uffd, uffdWP) })
	default:
		m.unhandled(pr, i)
	}
}

// ioPages returns the global pages of an operation's page-aligned range.
func ioPages(op *prog.Op) (lo, hi int) {
	lo = gpage(op.Region, op.Off)
	return lo, lo + int(op.Len/prog.PageSize)
}

func (m *machine) remoteWrite(pr *proc, i int) {
	op := &m.p.Ops[i]
	target := pr
	if op.Into > 0 {
		target = m.procs[op.Into]
	}
	switch target.state {
	case forkFailed:
		m.result(pr, i, certain(eSRCH, "the fork failed: there is no child to write into"))
		m.expectSkipped(i, op.Count, 0)
		return
	case killed:
		// SIGKILL is asynchronous: the child may still have its memory,
		// so writes may or may not land; only shared pages show it.
		m.result(pr, i, unpredictable("the target was killed: whether its memory is still there depends on how far its exit got"))
		op.SlotOffsets(func(k int, off uint64) {
			g := gpage(op.Region, off)
			switch s := target.segAt(g); {
			case s == nil || !s.kind.Shared():
			case s.unknown:
				m.taintShared = true
			default:
				m.objs[s.obj].pages.own(s.pgoff + g - s.start).setWild(uint16(off % prog.PageSize / prog.SlotSize))
			}
		})
		return
	}
	force := op.Kind == prog.OpProcMem
	var plan []slotWrite
	refused, unsure := 0, false
	op.SlotOffsets(func(k int, off uint64) {
		g := gpage(op.Region, off)
		s := target.segAt(g)
		switch {
		case s == nil:
			refused++
		case s.unknown:
			unsure = true
		case m.beyondEOF(s, g):
			refused++
		case s.prot == prog.ProtRW || (force && !s.kind.Shared()):
			plan = append(plan, slotWrite{k: k, g: g, w: uint16(off % prog.PageSize / prog.SlotSize), seg: target.find(g)})
		default:
			refused++
		}
	})
	r := m.result(pr, i, certain(eOK, "refused slots are counted, not failed"))
	m.expectSkipped(i, refused, uint64(op.Count-refused))
	m.spec.skipped(i, !unsure, refused)
	taint := func() {
		m.taintShared = true
		m.writes[i] |= wrotePrivate | wroteShared
		op.SlotOffsets(func(k int, off uint64) { m.taintContent(target, gpage(op.Region, off)) })
	}
	if unsure {
		taint()
		return
	}
	if m.checking() && r.Errno == 0 && r.Skipped != refused {
		rule := "process_vm_writev needs a writable mapping"
		if force {
			rule = "a /proc/PID/mem write (FOLL_FORCE) reaches every private mapping and writable shared ones"
		}
		m.cmp.refusedSlots(pr, target, i, r.Skipped, refused, rule)
		taint()
		return
	}
	for _, sw := range plan {
		s := &target.segs[sw.seg]
		m.writeWord(target, s, sw.g, sw.w, prog.SlotValue(i, sw.k))
		m.noteWrite(i, s)
	}
}

// expectSkipped fills in the expected observation's skipped count and
// return value.
func (m *machine) expectSkipped(i, skipped int, ret uint64) {
	if !m.checking() {
		m.exp.Ops[i].Skipped = skipped
		m.exp.Ops[i].Ret = ret
	}
}

func (m *machine) noteWrite(i int, s *seg) {
	if s.kind.Shared() {
		m.writes[i] |= wroteShared
	} else {
		m.writes[i] |= wrotePrivate
	}
}

// rangeState says whether every page of [lo, hi) of pr is mapped with at
// least protection want and inside its object; unsure if the model lost
// track of one.
func (m *machine) rangeState(pr *proc, lo, hi int, want prog.Prot) (all, unsure, fileBacked bool) {
	all = true
	for g := lo; g < hi; g++ {
		s := pr.segAt(g)
		switch {
		case s == nil:
			all = false
		case s.unknown:
			unsure = true
		default:
			if s.obj >= 0 {
				fileBacked = true
			}
			if s.prot < want || m.beyondEOF(s, g) {
				all = false
			}
		}
	}
	return all, unsure, fileBacked
}

// mixedFiles reports whether [lo, hi) of pr spans mappings of more than
// one backing: anonymous private memory (no file) and each shmem or memfd
// object (its own file).
func (m *machine) mixedFiles(pr *proc, lo, hi int) bool {
	first, seen := 0, false
	for g := lo; g < hi; g++ {
		s := pr.segAt(g)
		if s == nil || s.unknown {
			continue
		}
		if !seen {
			first, seen = s.obj, true
		} else if s.obj != first {
			return true
		}
	}
	return false
}

// checkRet reports an operation that succeeded with an unexpected byte
// count.
func (m *machine) checkRet(pr *proc, i int, r obs.OpResult, want uint64) bool {
	if !m.checking() || r.Errno != 0 || r.Ret == want {
		return true
	}
	m.cmp.byteCount(pr, i, r.Ret, want)
	return false
}

// taintRange forgets the content of [lo, hi) of pr after operation i
// wrote there in a way the model cannot follow (it may have written
// anywhere in the range, shared pages included).
func (m *machine) taintRange(pr *proc, i, lo, hi int) {
	m.taintShared = true
	m.writes[i] |= wrotePrivate | wroteShared
	for g := lo; g < hi; g++ {
		m.taintContent(pr, g)
	}
}

func (m *machine) odirect(pr *proc, i int) {
	op := &m.p.Ops[i]
	lo, hi := ioPages(op)
	all, unsure, _ := m.rangeState(pr, lo, hi, prog.ProtRW)
	switch {
	case unsure:
		m.result(pr, i, unpredictable("the model lost track of the range"))
		m.taintRange(pr, i, lo, hi)
		return
	case !all:
		// GUP fails on the first bad page; pages before it may or may
		// not have been read into.
		m.result(pr, i, either("part of the range is not writable", eFAULT, eOK))
		m.taintRange(pr, i, lo, hi)
		return
	}
	r := m.result(pr, i, certain(eOK, "the whole range is mapped writable"))
	m.setRet(i, op.Len)
	if r.Errno != 0 || !m.checkRet(pr, i, r, op.Len) {
		m.taintRange(pr, i, lo, hi)
		return
	}
	for g := lo; g < hi; g++ {
		s := pr.segAt(g)
		base := uint64(g-lo) * prog.PageSize
		for w := uint16(0); w < prog.PageSize/prog.SlotSize; w++ {
			m.writeWord(pr, s, g, w, prog.DenseValue(i, base+uint64(w)*prog.SlotSize))
		}
		m.noteWrite(i, s)
	}
}

func (m *machine) vmsplice(pr *proc, i int) {
	op := &m.p.Ops[i]
	lo, hi := ioPages(op)
	n := 0
	for g := lo; g < hi; g++ {
		s := pr.segAt(g)
		if s != nil && s.unknown {
			m.result(pr, i, unpredictable("the model lost track of the range"))
			m.pin.pipeLost[op.Pipe] = true
			return
		}
		if s == nil || s.prot == prog.ProtNone || m.beyondEOF(s, g) {
			break
		}
		n++
	}
	if n == 0 {
		m.result(pr, i, certain(eFAULT, "the first page is not readable"))
		return
	}
	r := m.result(pr, i, certain(eOK, "the range starts with readable pages"))
	want := uint64(n) * prog.PageSize
	m.setRet(i, want)
	if r.Errno != 0 || !m.checkRet(pr, i, r, want) {
		m.pin.pipeLost[op.Pipe] = true
		return
	}
	for g := lo; g < lo+n; g++ {
		s := pr.segAt(g)
		pp := pipePage{proc: pr.id, seq: m.opSeq[i], op: i, g: g,
			shared: s.kind.Shared() || (s.kind == prog.MemfdPrivate && pr.anon[g] == nil)}
		pg, unk := m.expContent(pr, s, g)
		switch {
		case unk:
			pp.unknown = true
		case pg != nil:
			c := pg.clone()
			pp.alts, pp.wild = c.alts, c.wild
		}
		m.pin.pipes[op.Pipe] = append(m.pin.pipes[op.Pipe], pp)
	}
}

func (m *machine) readPipe(pr *proc, i int) {
	op := &m.p.Ops[i]
	pages, lost := m.pin.pipes[op.Pipe], m.pin.pipeLost[op.Pipe]
	m.pin.pipes[op.Pipe], m.pin.pipeLost[op.Pipe] = nil, false
	m.spec.pipe(m, i, pages, lost)
	if lost {
		m.result(pr, i, unpredictable("the model lost track of what the pipe holds"))
		return
	}
	if len(pages) == 0 {
		m.result(pr, i, certain(eAGAIN, "the pipe is empty"))
		return
	}
	r := m.result(pr, i, certain(eOK, "the pipe holds spliced pages"))
	want := uint64(len(pages)) * prog.PageSize
	m.setRet(i, want)
	if !m.checking() {
		for p, pp := range pages {
			if len(pp.alts) > 0 {
				for _, x := range pp.alts[0] {
					m.exp.Ops[i].Data = append(m.exp.Ops[i].Data, obs.Word{Region: -1, Off: uint64(p)*prog.PageSize + uint64(x.k)*prog.SlotSize, Value: x.v})
				}
			}
		}
		return
	}
	if r.Errno != 0 || !m.checkRet(pr, i, r, want) {
		return
	}
	m.cmp.pipeRead(pr, i, pages, r.Data, want)
}

// pipeAccepts reports whether word w of spliced page pp may read as v at
// readpipe op i.
func (m *machine) pipeAccepts(pp *pipePage, w uint16, v uint64, i int) bool {
	if pp.wild[w] {
		return true
	}
	if len(pp.alts) == 0 && v == 0 {
		return true
	}
	for _, a := range pp.alts {
		if a.get(w) == v {
			return true
		}
	}
	j, k, ok := prog.DecodeSlotValue(v)
	if !ok || j < 0 || j >= len(m.p.Ops) || m.opSeq[j] <= pp.seq || m.opSeq[j] > m.opSeq[i] {
		return false
	}
	if off, ok := m.slotOffset(j, k); !ok || uint16(off%prog.PageSize/prog.SlotSize) != w {
		return false
	}
	wr := &m.p.Ops[j]
	if wr.Proc == pp.proc && wr.Into == 0 {
		return true
	}
	return pp.shared && (m.writes[j]&wroteShared != 0 || wr.Kind == prog.OpPwrite)
}

// slotOffset returns the region offset that value k of operation j was
// written to.
func (m *machine) slotOffset(j, k int) (uint64, bool) {
	op := &m.p.Ops[j]
	switch {
	case op.Kind == prog.OpStoreLoop:
		return op.Off + uint64(k%op.Count)*op.Stride, true // k counts writes over all passes
	case op.Kind.WritesSlots():
		if k >= op.Count {
			return 0, false
		}
		return op.Off + uint64(k)*op.Stride, true
	case op.Kind == prog.OpODirect || op.Kind == prog.OpUringRead:
		off := uint64(k) * prog.SlotSize
		if off >= op.Len {
			return 0, false
		}
		return op.Off + off, true
	}
	return 0, false
}

func (m *machine) uringReg(pr *proc, i int) {
	op := &m.p.Ops[i]
	m.pin.uring, m.pin.uringOp, m.pin.uringBad = nil, -1, false
	lo, hi := ioPages(op)
	all, unsure, file := m.rangeState(pr, lo, hi, prog.ProtRW)
	var pd pred
	switch {
	case unsure:
		pd = unpredictable("the model lost track of the range")
	case !all && file:
		pd = either("part of the range is not writable (and kernels before 6.3 refuse file-backed buffers)", eFAULT, eOPNOTSUPP)
	case !all:
		pd = certain(eFAULT, "part of the range is not mapped writable")
	case nonShmemFile(pr, lo, hi) && m.kernelBefore(6, 5) && !m.mixedFiles(pr, lo, hi):
		pd = certain(eOPNOTSUPP, "before Linux 6.5 io_uring refuses a buffer in a file that is neither shmem nor hugetlbfs (ext4) with EOPNOTSUPP")
	case nonShmemFile(pr, lo, hi):
		// Since 6.5 GUP refuses a long-term writable pin of a shared
		// mapping of such a file (EFAULT) and pins a private one.
		pd = either("io_uring and GUP refuse ext4-backed buffers in ways that changed across versions (EOPNOTSUPP before 6.5, EFAULT for shared mappings since, EINVAL for mixed files)", eOK, eOPNOTSUPP, eFAULT, eINVAL)
	case m.kernelBefore(6, 5) && m.mixedFiles(pr, lo, hi):
		// io_pin_pages pinned every page, then compared each page's
		// vm_file with the first one ("io_uring/rsrc: disallow
		// multi-source reg buffers", in 6.3 and the 6.1 and 5.15 stable
		// trees; gone in 6.5, when the check moved into GUP).
		pd = either("before Linux 6.5 a buffer spanning mappings of different files (or anonymous and shmem memory) is refused (EINVAL) by kernels with the multi-source check", eOK, eINVAL)
	case file:
		pd = either("kernels before 6.3 refuse file-backed (shmem) buffers", eOK, eOPNOTSUPP)
	default:
		pd = certain(eOK, "the range is anonymous and writable")
	}
	r := m.result(pr, i, pd)
	if unsure {
		m.pin.uringBad = r.Errno == 0
		return
	}
	// Pinning for write breaks COW page by page, up to the first page it
	// cannot pin, and that stays so even when the registration then
	// fails: a memfd-private page there is private from now on.
	for g := lo; g < hi; g++ {
		s := pr.segAt(g)
		if s == nil || s.prot != prog.ProtRW || m.beyondEOF(s, g) {
			break
		}
		if s.kind == prog.MemfdPrivate {
			m.cowFile(pr, s, g)
		}
	}
	if r.Errno != 0 {
		return
	}
	if !all {
		m.pin.uringBad = true
		return
	}
	m.pin.uringOp = i
	for g := lo; g < hi; g++ {
		s := pr.segAt(g)
		var pg *page
		switch s.kind {
		case prog.AnonPrivate:
			pg = pr.anon.own(g)
			m.pin.pinned[pg] = true
		case prog.MemfdPrivate:
			m.cowFile(pr, s, g)
			pg = pr.anon.own(g)
			m.pin.pinned[pg] = true
		default:
			pg = m.objs[s.obj].pages.own(s.pgoff + g - s.start)
		}
		m.pin.uring = append(m.pin.uring, pg)
	}
}

func (m *machine) uringRead(pr *proc, i int) {
	op := &m.p.Ops[i]
	switch {
	case m.pin.uringBad:
		m.result(pr, i, unpredictable("the model does not know what is registered"))
		lo, hi := ioPages(op)
		m.taintRange(pr, i, lo, hi)
		return
	case m.pin.uringOp < 0:
		m.result(pr, i, certain(eFAULT, "no buffer is registered"))
		return
	}
	r := m.result(pr, i, certain(eOK, "the range lies in the registered buffer"))
	m.setRet(i, op.Len)
	if r.Errno != 0 || !m.checkRet(pr, i, r, op.Len) {
		lo, hi := ioPages(op)
		m.taintRange(pr, i, lo, hi)
		return
	}
	reg := &m.p.Ops[m.pin.uringOp]
	first := int((op.Off - reg.Off) / prog.PageSize)
	for p := 0; p < int(op.Len/prog.PageSize); p++ {
		pg := m.pin.uring[first+p]
		for w := uint16(0); w < prog.PageSize/prog.SlotSize; w++ {
			pg.write(w, prog.DenseValue(i, uint64(p)*prog.PageSize+uint64(w)*prog.SlotSize))
		}
		if m.pin.pinned[pg] {
			m.writes[i] |= wrotePrivate
		} else {
			m.writes[i] |= wroteShared
		}
	}
}

// taintPinned forgets what pinned operation i, which did not complete,
// may have done.
func (m *machine) taintPinned(pr *proc, i int) {
	op := &m.p.Ops[i]
	switch op.Kind {
	case prog.OpProcMem, prog.OpPVWrite:
		target := pr
		if op.Into > 0 {
			target = m.procs[op.Into]
		}
		m.taintShared = true
		op.SlotOffsets(func(k int, off uint64) { m.taintContent(target, gpage(op.Region, off)) })
	case prog.OpODirect, prog.OpUringRead:
		lo, hi := ioPages(op)
		m.taintRange(pr, i, lo, hi)
		if op.Kind == prog.OpUringRead {
			m.pin.uringBad = true
		}
	case prog.OpVmsplice, prog.OpReadPipe:
		m.pin.pipeLost[op.Pipe] = true
	case prog.OpUringReg:
		m.pin.uringBad = true
	}
}

// pinnedCells calls fn with every word address a pinned write operation
// writes (odirect: every word of its pages).
func pinnedCells(op *prog.Op, fn func(off uint64)) {
	if op.Kind == prog.OpODirect {
		for off := uint64(0); off < op.Len; off += prog.SlotSize {
			fn(op.Off + off)
		}
		return
	}
	op.SlotOffsets(func(k int, off uint64) { fn(off) })
}

// threadPinned handles a pinned write handed to a thread (check mode): its
// words are wild until the join, like a thread store's.
func (m *machine) threadPinned(pr *proc, i int) {
	op := &m.p.Ops[i]
	if m.th.active == nil {
		m.th.active = map[cell]int{}
		m.th.handed = map[int][]cell{}
	}
	if m.th.pinned == nil {
		m.th.pinned = map[int][]int{}
	}
	if m.o.Ops[i].Skip != "" {
		m.col.note("%s was skipped by the executor: %s", opRef(m.p, i), m.o.Ops[i].Skip)
		return
	}
	pinnedCells(op, func(off uint64) {
		c := mkCell(gpage(op.Region, off), uint16(off%prog.PageSize/prog.SlotSize))
		m.th.active[c]++
		m.th.handed[op.Thread] = append(m.th.handed[op.Thread], c)
		m.markWild(pr, c)
	})
	m.writes[i] |= wrotePrivate | wroteShared
	m.th.pinned[op.Thread] = append(m.th.pinned[op.Thread], i)
}

// settlePinned runs at the join of thread t: a pinned write of t that
// fully succeeded has finished, so its values must now be in the main
// process, unless another operation may have touched its pages since the
// hand-over (then they stay wild). This is what catches a fork that lets
// an O_DIRECT read racing with it land in the child's copy of a page.
func (m *machine) settlePinned(t int) {
	ops := m.th.pinned[t]
	delete(m.th.pinned, t)
	main := m.procs[0]
	for _, i := range ops {
		op := &m.p.Ops[i]
		r := m.o.Ops[i]
		want := uint64(op.Count)
		if op.Kind == prog.OpODirect {
			want = op.Len
		}
		if r.Skip != "" || r.Errno != 0 || r.Skipped != 0 || r.Ret != want || m.touchedSince(i, t) {
			continue
		}
		pinnedCells(op, func(off uint64) {
			g := gpage(op.Region, off)
			s := main.segAt(g)
			if s == nil || s.unknown || s.prot != prog.ProtRW || m.beyondEOF(s, g) {
				return
			}
			k := int((off - op.Off) / prog.SlotSize)
			v := prog.DenseValue(i, off-op.Off)
			if op.Kind != prog.OpODirect {
				k = int((off - op.Off) / op.Stride)
				v = prog.SlotValue(i, k)
			}
			m.writeWord(main, s, g, uint16(off%prog.PageSize/prog.SlotSize), v)
		})
	}
}

// touchedSince reports whether any operation of the main process other
// than thread t's op i, handed over or run after i (fork, wait, kill, check
// and join aside), may have touched the pages op i writes.
func (m *machine) touchedSince(i, t int) bool {
	op := &m.p.Ops[i]
	lo, hi := op.Off/prog.PageSize, (op.Off+op.Len+prog.PageSize-1)/prog.PageSize
	if op.Kind != prog.OpODirect {
		hi = (op.Off+uint64(op.Count-1)*op.Stride)/prog.PageSize + 1
	}
	for j := range m.p.Ops {
		o := &m.p.Ops[j]
		if j == i || o.Proc != 0 || m.opSeq[j] < 0 {
			continue
		}
		switch o.Kind {
		case prog.OpFork, prog.OpWait, prog.OpKill, prog.OpCheck, prog.OpJoin:
			continue
		}
		// Operations handed over before i may still run after it if
		// they are on another thread.
		if m.opSeq[j] < m.opSeq[i] && (o.Thread == 0 || o.Thread == t || m.joinedBefore(o.Thread, i)) {
			continue
		}
		if o.Kind.ChangesVMA() || o.Kind == prog.OpPwrite {
			return true // conservative: mappings or file content changed
		}
		for p := lo; p < hi; p++ {
			if touches(o, op.Region, int(p)) {
				return true
			}
		}
	}
	return false
}

// joinedBefore reports whether thread t was joined after its operations
// handed over before op i and before op i ran (so none of them overlaps
// i).
func (m *machine) joinedBefore(t, i int) bool {
	last := -1
	for j := range m.p.Ops {
		o := &m.p.Ops[j]
		if o.Kind == prog.OpJoin && o.Peer == t && m.opSeq[j] >= 0 && m.opSeq[j] < m.opSeq[i] {
			last = max(last, m.opSeq[j])
		}
	}
	for j := range m.p.Ops {
		o := &m.p.Ops[j]
		if o.Thread == t && o.Proc == 0 && m.opSeq[j] >= 0 && m.opSeq[j] < m.opSeq[i] && m.opSeq[j] > last {
			return false
		}
	}
	return true
}

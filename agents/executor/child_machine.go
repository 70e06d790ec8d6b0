package executor

// The interpreter as every process of a program runs it, forked children
// included (doc.go): operations, views of memory, /proc/self/maps and the
// shared report buffer.

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

//forkfuzz:childsafe
func (m *machine) now() int64 { return monoNow(&m.ts) }

// monoNow is CLOCK_MONOTONIC in nanoseconds, read into the scratch ts.
//
//forkfuzz:childsafe
func monoNow(ts *[2]int64) int64 {
	rawSyscall6(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0, 0)
	return ts[0]*1e9 + ts[1]
}

// rec appends one record to the shared report buffer.
//
//forkfuzz:childsafe
func (m *machine) rec(typ, a, b, c, d, e, f uint64) {
	n := atomic.AddUint64((*uint64)(unsafe.Pointer(&m.rep[8])), 1) - 1
	capacity := uint64(len(m.rep)-obs.HeaderSize) / obs.RecordSize
	if n >= capacity {
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&m.rep[24])), 1)
		return
	}
	r := m.rep[obs.HeaderSize+n*obs.RecordSize : obs.HeaderSize+(n+1)*obs.RecordSize]
	le := binary.LittleEndian
	le.PutUint64(r[0:], typ)
	le.PutUint64(r[8:], a)
	le.PutUint64(r[16:], b)
	le.PutUint64(r[24:], c)
	le.PutUint64(r[32:], d)
	le.PutUint64(r[40:], e)
	le.PutUint64(r[48:], f)
}

//forkfuzz:childsafe
func (m *machine) recOp(i int, errno uintptr, ret uint64, start, end int64, skipped int) {
	m.rec(obs.RecOp, uint64(i), uint64(errno), ret, uint64(start), uint64(end), uint64(skipped))
}

// readMaps parses /proc/self/maps into m.vmas (sorted by address).
//
//forkfuzz:childsafe
func (m *machine) readMaps() uintptr {
	m.nvma = 0
	fd, e := rawSyscall6(unix.SYS_OPENAT, uintptr(atFdcwd), uintptr(unsafe.Pointer(&m.mapsPath[0])), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return e
	}
	n := 0
	for n < len(m.maps) {
		r, e := sys3(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&m.maps[n])), uintptr(len(m.maps)-n))
		if e == uintptr(unix.EINTR) {
			continue
		}
		if e != 0 {
			sys1(unix.SYS_CLOSE, fd)
			return e
		}
		if r == 0 {
			break
		}
		n += int(r)
	}
	sys1(unix.SYS_CLOSE, fd)
	m.parseMaps(m.maps[:n])
	return 0
}

// parseMaps parses maps text; lines it cannot parse are skipped.
//
//forkfuzz:childsafe
func (m *machine) parseMaps(b []byte) {
	m.nvma = 0
	for len(b) > 0 && m.nvma < maxVMAs {
		eol := 0
		for eol < len(b) && b[eol] != '\n' {
			eol++
		}
		line := b[:eol]
		if eol < len(b) {
			b = b[eol+1:]
		} else {
			b = b[eol:]
		}
		var v vma
		var ok bool
		pos := 0
		if v.start, pos, ok = hexField(line, pos, '-'); !ok {
			continue
		}
		if v.end, pos, ok = hexField(line, pos, ' '); !ok {
			continue
		}
		if pos+5 > len(line) {
			continue
		}
		if line[pos] == 'r' {
			v.prot |= obs.VMARead
		}
		if line[pos+1] == 'w' {
			v.prot |= obs.VMAWrite
		}
		if line[pos+2] == 'x' {
			v.prot |= obs.VMAExec
		}
		if line[pos+3] == 's' {
			v.prot |= obs.VMAShared
		}
		pos += 5
		if v.off, pos, ok = hexField(line, pos, ' '); !ok {
			continue
		}
		// The device, MAJOR:MINOR in hex.
		var major, minor uint64
		if major, pos, ok = hexField(line, pos, ':'); !ok {
			continue
		}
		if minor, pos, ok = hexField(line, pos, ' '); !ok {
			continue
		}
		v.dev = major<<32 | minor
		for pos < len(line) && line[pos] >= '0' && line[pos] <= '9' {
			v.inode = v.inode*10 + uint64(line[pos]-'0')
			pos++
		}
		m.vmas[m.nvma] = v
		m.nvma++
	}
}

//forkfuzz:childsafe
func hexField(b []byte, pos int, sep byte) (uint64, int, bool) {
	var v uint64
	start := pos
	for pos < len(b) && b[pos] != sep {
		c := b[pos]
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, pos, false
		}
		pos++
	}
	if pos == start || pos >= len(b) {
		return 0, pos, false
	}
	return v, pos + 1, true
}

// findVMA returns the index of the VMA containing addr, or -1.
//
//forkfuzz:childsafe
func (m *machine) findVMA(addr uint64) int {
	lo, hi := 0, m.nvma
	for lo < hi {
		mid := (lo + hi) / 2
		if m.vmas[mid].end <= addr {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < m.nvma && m.vmas[lo].start <= addr {
		return lo
	}
	return -1
}

//forkfuzz:childsafe
func (m *machine) objSize(dev, inode uint64) (uint64, bool) {
	for i := 0; i < m.nobj; i++ {
		if m.objs[i].dev == dev && m.objs[i].inode == inode {
			return m.objs[i].size, true
		}
	}
	return 0, false
}

//forkfuzz:childsafe
func (m *machine) addObj(dev, inode, size uint64) {
	for i := 0; i < m.nobj; i++ {
		if m.objs[i].dev == dev && m.objs[i].inode == inode {
			m.objs[i].size = size
			return
		}
	}
	if m.nobj < maxObjs {
		m.objs[m.nobj] = obj{dev, inode, size}
		m.nobj++
	}
}

// pageState classifies the page at addr, which lies in VMA v.
//
//forkfuzz:childsafe
func (m *machine) pageState(v *vma, addr uint64) obs.PageState {
	if v.prot&obs.VMARead == 0 {
		return obs.NoAccess
	}
	if v.inode != 0 {
		size, ok := m.objSize(v.dev, v.inode)
		if !ok || v.off+(addr-v.start) >= size {
			return obs.BeyondEOF
		}
	}
	return obs.Readable
}

// view records what this process sees in every region.
//
//forkfuzz:childsafe
func (m *machine) view(at int) {
	start := m.now()
	m.viewRecs(at)
	m.addWork(workView, start)
}

// viewRecs records the view (view).
//
//forkfuzz:childsafe
func (m *machine) viewRecs(at int) {
	m.rec(obs.RecViewBegin, uint64(m.proc), uint64(int64(at)), 0, 0, 0, 0)
	truncated := uint64(0)
	if e := m.readMaps(); e != 0 {
		m.rec(obs.RecEvent, obs.EventChildFault, uint64(at), uint64(e), 0, 0, 0)
		m.rec(obs.RecViewEnd, 1, 0, 0, 0, 0, 0)
		return
	}
	for i := 0; i < m.nvma; i++ {
		v := &m.vmas[i]
		if v.end > arena.Base() && v.start < arena.End() {
			m.rec(obs.RecVMA, arena.Canonical(v.start), arena.Canonical(v.end-1)+1, v.prot, v.off, v.inode, 0)
		}
	}
	words, capped := 0, false
	for r := range m.p.Regions {
		wordy := m.wordRegions&(1<<uint(r)) != 0
		base := arena.RegionBase(r)
		end := base + prog.SpanBytes
		runFirst, runN, runState := 0, 0, obs.PageState(0)
		for i := 0; i < m.nvma; i++ {
			v := &m.vmas[i]
			if v.end <= base || v.start >= end {
				continue
			}
			lo, hi := v.start, v.end
			if lo < base {
				lo = base
			}
			if hi > end {
				hi = end
			}
			for addr := lo; addr < hi; addr += prog.PageSize {
				pg := int((addr - base) / prog.PageSize)
				st := m.pageState(v, addr)
				if runN > 0 && (st != runState || pg != runFirst+runN) {
					m.rec(obs.RecRun, uint64(r), uint64(runFirst), uint64(runN), uint64(runState), 0, 0)
					runN = 0
				}
				if runN == 0 {
					runFirst, runState = pg, st
				}
				runN++
				if st != obs.Readable {
					continue
				}
				// Most pages are sparse: only the non-zero 64-byte
				// blocks are copied (under TCG every instruction counts).
				mask := scanPage(&m.page, uintptr(addr))
				if pg&15 == 15 {
					m.kc.drainHalf(m.ks)
				}
				var digest uint64
				nz := 0
				for b := 0; mask != 0; b, mask = b+8, mask>>1 {
					if mask&1 == 0 {
						continue
					}
					for w := b; w < b+8; w++ {
						val := m.page[w]
						if val == 0 {
							continue
						}
						digest += obs.WordDigest(uint64(w*8), val)
						nz++
						switch {
						case !wordy:
							truncated = 1
						case words < m.wordCap:
							m.rec(obs.RecWord, uint64(r), addr-base+uint64(w*8), val, 0, 0, 0)
							words++
						default:
							truncated, capped = 1, true
						}
					}
				}
				if nz > 0 {
					m.rec(obs.RecPage, uint64(r), uint64(pg), digest, uint64(nz), 0, 0)
				}
			}
		}
		if runN > 0 {
			m.rec(obs.RecRun, uint64(r), uint64(runFirst), uint64(runN), uint64(runState), 0, 0)
		}
	}
	if capped {
		m.rec(obs.RecEvent, obs.EventViewOverrun, uint64(m.proc), uint64(m.wordCap), 0, 0, 0)
	}
	m.rec(obs.RecViewEnd, truncated, 0, 0, 0, 0, 0)
}

// noteShared records the size of the shared object mapped at addr (a new
// anonymous shared mapping) so views know where it ends.
//
//forkfuzz:childsafe
func (m *machine) noteShared(addr, size uint64) {
	if m.readMaps() != 0 {
		return
	}
	// Any surviving piece of the mapping names the object: a thread may
	// already have unmapped its start.
	for i := 0; i < m.nvma; i++ {
		v := &m.vmas[i]
		if v.end > addr && v.start < addr+size && v.inode != 0 && v.off == v.start-addr {
			m.addObj(v.dev, v.inode, size)
			return
		}
	}
}

//forkfuzz:childsafe
func mapFlags(k prog.RegionKind) uintptr {
	f := uintptr(unix.MAP_PRIVATE)
	if k.Shared() {
		f = unix.MAP_SHARED
	}
	if !k.Memfd() {
		f |= unix.MAP_ANONYMOUS
		if k.Hugetlb() {
			f |= unix.MAP_HUGETLB | unix.MAP_HUGE_2MB
		}
	}
	return f
}

// anonObject reports whether a kind's anonymous mapping has an object
// behind it with an inode in /proc/self/maps (shmem for anon-shared, a
// hugetlbfs file for the anonymous hugetlb kinds, private or shared).
//
//forkfuzz:childsafe
func anonObject(k prog.RegionKind) bool {
	return !k.Memfd() && (k.Shared() || k.Hugetlb())
}

// runProc runs every operation of process proc in order.
//
//forkfuzz:childsafe
func (m *machine) runProc(proc int) {
	for i := range m.p.Ops {
		op := &m.p.Ops[i]
		if op.Proc != proc {
			continue
		}
		if op.Thread > 0 { //forkfuzz:hostonly prog.Validate: threads run only in the main process
			m.post(i)
			continue
		}
		if !m.inChild && m.held.pid != 0 && prog.HoldEnds(op) {
			m.unhold()
		}
		if m.kc != nil {
			m.kc.op = i
			if m.inChild {
				size := m.kc.growFor(m.bigOp(op), op.Kind == prog.OpFork, m.filledOutsideFork())
				if size > 0 {
					t := m.now()
					m.kc.grow(m.ks, size)
					m.addWork(workGrow, t)
				}
			}
		}
		if !m.inChild && m.held.pid != 0 && i != m.held.op {
			m.heldProbe(i, "before operation")
		}
		start := m.now()
		m.exec(i)
		m.addWork(int(op.Kind), start)
		if !m.inChild && m.held.pid != 0 && i != m.held.op {
			m.heldProbe(i, "during operation")
		}
		m.kc.drain(m.ks)
		if !m.inChild && m.held.pid != 0 && i != m.held.op {
			if m.held.left--; m.held.left == 0 {
				m.unhold()
			}
		}
	}
	if !m.inChild && m.held.pid != 0 {
		m.unhold()
	}
	if proc == 0 && m.kc != nil {
		m.kc.op = len(m.p.Ops) // what follows: threads' end, the last view
	}
}

// bigOp: whether op may record more kernel coverage in one system call
// than a child's kcov buffer holds, and how much (kcovState.grow: 0 no,
// 1 kcovGrownWords, 2 kcovForkWords).
//
//forkfuzz:childsafe
func (m *machine) bigOp(op *prog.Op) int {
	switch op.Kind {
	case prog.OpFork:
		return 2
	case prog.OpWait, prog.OpKill, prog.OpJoin:
		return 0
	case prog.OpMigrate, prog.OpMunmap, prog.OpMremap, prog.OpMadvise, prog.OpMlock, prog.OpMunlock, prog.OpMprotect,
		prog.OpMlockOnfault, prog.OpMbind, prog.OpAnonName, prog.OpPMadvise, prog.OpRemapFile, prog.OpUffdReg, prog.OpUffdUnreg:
		if op.Len >= kcovBigOp || op.Len == 0 {
			return 1
		}
	}
	if int(op.Region) < len(m.p.Regions) && m.p.Regions[op.Region].THP != prog.THPOff {
		return 1
	}
	return 0
}

//forkfuzz:childsafe
func roundUp(x uint64) uint64 { return (x + pageMask) &^ pageMask }

// exec runs operation i in the current process.
//
//forkfuzz:childsafe
func (m *machine) exec(i int) {
	op := &m.p.Ops[i]
	addr := uintptr(arena.RegionBase(op.Region) + op.Off)
	start := m.now()
	var errno uintptr
	var ret uint64
	skipped := 0
	switch op.Kind {
	case prog.OpStore:
		if e := m.readMaps(); e != 0 {
			errno = e
			break
		}
		for k := 0; k < op.Count; k++ {
			a := uint64(addr) + uint64(k)*op.Stride
			vi := m.findVMA(a)
			if vi < 0 || m.vmas[vi].prot&obs.VMAWrite == 0 || m.pageState(&m.vmas[vi], a&^pageMask) == obs.BeyondEOF {
				skipped++
				continue
			}
			store64(uintptr(a), prog.SlotValue(i, k))
			if k&15 == 15 {
				m.kc.drainHalf(m.ks)
			}
		}
	case prog.OpPwrite:
		for k := 0; k < op.Count; k++ {
			m.page[0] = prog.SlotValue(i, k)
			_, e := rawSyscall6(unix.SYS_PWRITE64, uintptr(m.memfd[op.Region]), uintptr(unsafe.Pointer(&m.page[0])), 8, uintptr(op.Off+uint64(k)*op.Stride), 0, 0)
			if e != 0 {
				errno = e
				break
			}
			if k&15 == 15 {
				m.kc.drainHalf(m.ks)
			}
		}
	case prog.OpMmap:
		kind := m.p.Regions[op.Region].Kind
		r, e := sysMmap(addr, uintptr(op.Len), unix.PROT_READ|unix.PROT_WRITE, mapFlags(kind)|unix.MAP_FIXED, m.memfd[op.Region], uintptr(op.Off))
		errno, ret = e, arena.Canonical(uint64(r))
		if e == 0 && anonObject(kind) {
			m.noteShared(uint64(r), roundUp(op.Len))
		}
	case prog.OpMunmap:
		errno = sysMunmap(addr, uintptr(op.Len))
	case prog.OpMprotect:
		prot := op.Prot.Info().Value
		if prot < 0 {
			m.recSkip(i, obs.SkipUnhandled, uintptr(unix.EINVAL))
			break
		}
		_, errno = sys3(unix.SYS_MPROTECT, addr, uintptr(op.Len), uintptr(prot))
	case prog.OpMadvise:
		adv := op.Advice.Info().Value
		if adv < 0 {
			m.recSkip(i, obs.SkipUnhandled, uintptr(unix.EINVAL))
			break
		}
		if noKSM && (op.Advice == prog.AdvMergeable || op.Advice == prog.AdvUnmergeable) {
			m.recSkip(i, obs.SkipNoKSM, uintptr(unix.EINVAL))
			break
		}
		_, errno = sys3(unix.SYS_MADVISE, addr, uintptr(op.Len), uintptr(adv))
		if errno == 0 && op.Advice == prog.AdvMergeable && !m.inChild {
			m.ksmSettle() // ksm.go: the next fork meets the merged pages
		}
	case prog.OpMlock:
		_, errno = sys2(unix.SYS_MLOCK, addr, uintptr(op.Len))
	case prog.OpMunlock:
		_, errno = sys2(unix.SYS_MUNLOCK, addr, uintptr(op.Len))
	case prog.OpMremap:
		flags := op.Flags.Linux()
		if flags < 0 {
			m.recSkip(i, obs.SkipUnhandled, uintptr(unix.EINVAL))
			break
		}
		var to uintptr
		if op.Flags&prog.MremapFixed != 0 {
			to = uintptr(arena.RegionBase(op.To) + op.ToOff)
		}
		r, e := rawSyscall6(unix.SYS_MREMAP, addr, uintptr(op.Len), uintptr(op.NewLen), uintptr(flags), to, 0)
		errno, ret = e, arena.Canonical(uint64(r))
		if e == 0 && !m.inChild && (uint64(r) < arena.Base() || uint64(r) >= arena.End()) {
			m.noteMoved(uint64(r), op.NewLen)
		}
	case prog.OpFork:
		if !m.inChild && m.wantsRollback(i) { // measured forks are the main process's
			m.forkMeasured(i, op.Fork, start)
			return
		}
		m.fork(i, op.Fork, start)
		return
	case prog.OpKill:
		if pid := m.pids[op.Fork]; pid > 0 {
			_, errno = sys2(unix.SYS_KILL, uintptr(pid), uintptr(unix.SIGKILL))
		} else {
			errno = uintptr(unix.ESRCH)
		}
	case prog.OpWait:
		ret, errno = m.wait(op.Fork)
		if !m.inChild {
			m.th.stop[op.Fork].Store(true) // ends storeloops until=fN
			reaped := m.kc.mark(m.ks)
			m.afterWait(i, op.Fork) // measurements: the harness's coverage, dropped
			if m.fe.on {
				m.fe.waited(i, op.Fork)
			}
			m.kc.cut(m.ks, reaped)
		}
	case prog.OpJoin:
		m.join(op.Peer) //forkfuzz:hostonly prog.Validate: join runs on the main thread of the main process
	case prog.OpCheck:
		m.view(i)
	case prog.OpMigrate:
		errno, ret = m.migrateOnce(i)
	case prog.OpUffdReg, prog.OpUffdUnreg:
		var skip int
		if errno, skip = m.uffdOp(op, addr); skip != 0 {
			m.recSkip(i, uint64(skip), errno)
			errno = 0
		}
	case prog.OpMlockOnfault, prog.OpMbind, prog.OpAnonName, prog.OpPMadvise, prog.OpRemapFile:
		var skip int
		if errno, ret, skip = m.vmaOp(op, addr); skip != 0 {
			m.recSkip(i, uint64(skip), errno)
			errno, ret = 0, 0
		}
	default:
		if op.Kind.Pinned() {
			errno, ret, skipped = m.execPinned(i)
		} else {
			// A kind the executor does not know: say so in the
			// observation (TestEveryOpKindHandled runs every kind).
			m.recSkip(i, obs.SkipUnhandled, uintptr(unix.ENOSYS))
		}
	}
	m.recOp(i, errno, ret, start, m.now(), skipped)
}

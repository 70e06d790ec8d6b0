package sim

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/agents/executor"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// arenaEnd is the end of the address range programs use.
const arenaEnd = prog.ArenaBase + prog.MaxRegions*prog.SpanBytes

// DefaultWordCap bounds the non-zero words recorded per view, as the
// executor's default.
const DefaultWordCap = 1 << 18

// proc is one simulated process.
type proc struct {
	mm     *MM
	copy   *asyncCopy // Async-fork copy creating this process, if any
	failed bool       // fork failed: no process
	killed bool
}

// machine runs one program on a kernel.
type machine struct {
	k       *Kernel
	p       *prog.Program
	o       *obs.Observation
	procs   []*proc // index: process number (0 main, I+1 child of fI)
	memfds  []*File // memfd of each memfd region
	clock   int64
	tsc     uint64
	wordCap int
	// wordRegions: the regions whose views carry words (bit r).
	wordRegions uint64
	// viewPages is scratch for view: the pages behind v.Pages.
	viewPages []*Page
	// loops are the storeloops running on threads of the main process.
	loops   []*loop
	threads map[int]*obs.ThreadLog
	rb      map[int]*obs.Rollback // rollback.go: measurements by fork
}

// loop is a running storeloop: a thread writing its slots over and over
// until the main thread has waited for fork Fork.
type loop struct {
	op, passes int
}

// Run executes p on a fresh kernel with cfg and returns the observation,
// shaped exactly as the executor's (docs/semantics.md), plus the kernel
// (for its page tables and events). Kernel events are also appended to the
// observation's Events.
func Run(p *prog.Program, cfg Config, wordCap int) (*obs.Observation, *Kernel, error) {
	return run(p, cfg, wordCap, ^uint64(0))
}

// run is Run whose views carry words only in the regions of wordRegions
// (bit r), as the executor's with Options.DigestsFirst.
func run(p *prog.Program, cfg Config, wordCap int, wordRegions uint64) (*obs.Observation, *Kernel, error) {
	if err := p.Validate(); err != nil {
		return nil, nil, fmt.Errorf("sim: invalid program: %w", err)
	}
	for i, r := range p.Regions {
		if r.Kind.Hugetlb() {
			// A refusal (agents.Refused), not a harness error.
			return nil, nil, fmt.Errorf("sim: region r%d is %s: the simulated kernel has no hugetlb pages: %w", i, r.Kind, executor.ErrNoHugetlb)
		}
		if r.Kind.FS() == prog.Ext4 {
			// tmpfs files are shmem, as memfds are; ext4's page cache
			// rules (io_uring refuses it, userfaultfd cannot register
			// it) are not simulated.
			return nil, nil, fmt.Errorf("sim: region r%d is %s: the simulated kernel has no ext4: %w", i, r.Kind, executor.ErrNoFileSystem)
		}
	}
	k, err := NewKernel(cfg)
	if err != nil {
		return nil, nil, err
	}
	if wordCap <= 0 {
		wordCap = DefaultWordCap
	}
	x := &machine{k: k, p: p, wordCap: wordCap, wordRegions: wordRegions, o: newObs(p),
		procs: make([]*proc, p.NumForks()+1), memfds: make([]*File, len(p.Regions))}
	main := &proc{mm: k.newMM()}
	x.procs[0] = main
	x.setup(main.mm)
	x.runProc(0)
	for _, l := range x.loops {
		x.o.Ops[l.op].Ret = uint64(l.passes)
	}
	x.loops = nil
	x.view(0, obs.AtEnd)
	for t := 1; t <= prog.MaxThreads; t++ {
		if tl := x.threads[t]; tl != nil {
			x.o.Threads = append(x.o.Threads, *tl)
		}
	}
	x.o.Maps = maps(main.mm)
	for _, c := range append([]*asyncCopy(nil), k.copies...) {
		k.runCopy(c) // cannot happen for valid programs; keeps the kernel sane
	}
	if k.cfg.Mode == Async {
		k.checkPMDs(main.mm, -1)
	}
	x.o.Events = append(x.o.Events, k.events...)
	if p.Arena != prog.ArenaTop {
		// No Go heap to be below: the placement changes nothing here.
		x.o.Events = append(x.o.Events, obs.NewEvent(obs.EvNote, "arena %v: the simulated kernel has no Go runtime to place the regions against; they ran at the canonical addresses", p.Arena))
	}
	k.main = main.mm
	return x.o, k, nil
}

func newObs(p *prog.Program) *obs.Observation {
	return &obs.Observation{Version: obs.Version, Ops: make([]obs.OpResult, len(p.Ops))}
}

// MainMM is the main process's address space of the last run.
func (k *Kernel) MainMM() *MM { return k.main }

func (k *Kernel) mmEntries() []PMDInfo { return k.main.PMDEntries() }

func (x *machine) setup(m *MM) {
	for i, r := range x.p.Regions {
		base := prog.Base(i)
		length := uint64(r.Pages) * prog.PageSize
		v := &VMA{Start: base, End: base + length, Flags: VMRead | VMWrite}
		switch r.Kind.Base() {
		case prog.AnonPrivate:
			v.PgOff = base
		case prog.AnonShared:
			v.Flags |= VMShared
			v.File = x.k.newFile(length)
			v.File.AnonShmem = true
		case prog.MemfdPrivate, prog.MemfdShared:
			x.memfds[i] = x.k.newFile(prog.SpanBytes)
			v.File = x.memfds[i]
			if r.Kind.Shared() {
				v.Flags |= VMShared
			}
		}
		switch r.THP {
		case prog.THPOn:
			v.Flags |= VMHugePage
		case prog.THPOff:
			v.Flags |= VMNoHugePage
		}
		m.insertVMA(v)
	}
}

func (x *machine) runProc(pid int) {
	for i := range x.p.Ops {
		if x.p.Ops[i].Proc == pid {
			x.exec(i)
		}
	}
}

// runLoops is a scheduling point for the storeloop threads: each may
// write another pass of its slots.
func (x *machine) runLoops() {
	for _, l := range x.loops {
		if x.k.sched.IntN(2) == 0 {
			op := &x.p.Ops[l.op]
			x.stores(l.op, op, l.passes*op.Count)
			l.passes++
		}
	}
}

// stores writes the slots of op (numbered from base); thread stores are
// logged with their (virtual) TSC times. It returns the skipped slots.
func (x *machine) stores(i int, op *prog.Op, base int) int {
	m := x.procs[op.Proc].mm
	addr := prog.Base(op.Region) + op.Off
	var tl *obs.ThreadLog
	if op.Thread > 0 {
		if x.threads == nil {
			x.threads = make(map[int]*obs.ThreadLog)
		}
		if tl = x.threads[op.Thread]; tl == nil {
			tl = &obs.ThreadLog{Thread: op.Thread}
			x.threads[op.Thread] = tl
		}
	}
	skipped := 0
	for s := 0; s < op.Count; s++ {
		a := addr + uint64(s)*op.Stride
		v := m.vmaAt(a)
		if v == nil || v.Flags&VMWrite == 0 || beyondEOF(v, a) {
			skipped++
			continue
		}
		x.k.preempt()
		val := prog.SlotValue(i, base+s)
		x.tsc++
		inv := x.tsc
		if pg := m.faultWrite(a, v); pg != nil {
			x.k.setWord(pg, int(a&pageMask)/8, val)
		}
		x.tsc++
		if tl != nil {
			tl.Stores = append(tl.Stores, obs.TimedStore{Op: i, Slot: base + s, Value: val, Inv: inv, Resp: x.tsc})
		}
	}
	return skipped
}

func (x *machine) exec(i int) {
	op := &x.p.Ops[i]
	k := x.k
	k.opGen++
	k.preempt()
	if op.Proc == 0 && op.Thread == 0 {
		x.runLoops()
	}
	m := x.procs[op.Proc].mm
	addr := prog.Base(op.Region) + op.Off
	res := obs.OpResult{Ran: true, Start: x.clock}
	x.clock += 1000
	switch op.Kind {
	case prog.OpStore:
		res.Skipped = x.stores(i, op, 0)
	case prog.OpStoreLoop:
		// The thread starts its loop now; later passes run at the main
		// thread's scheduling points until the wait of op.Fork.
		l := &loop{op: i}
		x.stores(i, op, 0)
		l.passes = 1
		x.loops = append(x.loops, l)
	case prog.OpJoin:
	case prog.OpPwrite:
		f := x.memfds[op.Region]
		for s := 0; s < op.Count; s++ {
			off := op.Off + uint64(s)*op.Stride
			k.setWord(f.page(off/pageSize, true), int(off&pageMask)/8, prog.SlotValue(i, s))
		}
	case prog.OpMmap:
		kind := x.p.Regions[op.Region].Kind
		res.Errno = m.Mmap(addr, op.Len, kind.Shared(), x.memfds[op.Region], op.Off)
		if res.Errno == 0 {
			res.Ret = addr
		} else {
			res.Ret = ^uint64(0)
		}
	case prog.OpMunmap:
		res.Errno = m.Munmap(addr, op.Len)
	case prog.OpMprotect:
		res.Errno = m.Mprotect(addr, op.Len, op.Prot)
	case prog.OpMadvise:
		res.Errno = m.Madvise(addr, op.Len, op.Advice)
	case prog.OpMlock, prog.OpMunlock:
		res.Errno = m.Mlock(addr, op.Len, op.Kind == prog.OpMlock)
	case prog.OpMlockOnfault:
		res.Errno = m.MlockOnfault(addr, op.Len)
	case prog.OpMbind, prog.OpAnonName, prog.OpPMadvise, prog.OpRemapFile, prog.OpUffdReg, prog.OpUffdUnreg:
		if why, ok := k.cfg.Lacks[op.Kind]; ok {
			res.Skip = why
			break
		}
		res.Ret, res.Errno = x.vmaOp(m, op, addr)

	case prog.OpMremap:
		var to uint64
		if op.Flags&prog.MremapFixed != 0 {
			to = prog.Base(op.To) + op.ToOff
		}
		r, e := m.Mremap(addr, op.Len, op.NewLen, op.Flags, to)
		res.Errno = e
		if e == 0 {
			res.Ret = r
		} else {
			res.Ret = ^uint64(0)
		}
	case prog.OpFork:
		x.tsc++
		res.TSCStart = x.tsc
		res.Ret, res.Errno = x.fork(op.Proc, op.Fork)
		x.tsc++
		res.TSCEnd = x.tsc
		if op.Proc != 0 {
			res.TSCStart, res.TSCEnd = 0, 0
		}
	case prog.OpKill:
		c := x.procs[op.Fork+1]
		if c == nil || c.failed {
			res.Errno = ESRCH
			break
		}
		if !c.killed {
			c.killed = true
			if c.copy != nil && !c.copy.done {
				k.abortCopy(c.copy)
			}
		}
	case prog.OpWait:
		res.Ret, res.Errno = x.wait(op.Fork)
		if op.Proc == 0 {
			out := x.loops[:0]
			for _, l := range x.loops {
				if x.p.Ops[l.op].Fork == op.Fork {
					x.o.Ops[l.op].Ret = uint64(l.passes)
					continue
				}
				out = append(out, l)
			}
			x.loops = out
		}
	case prog.OpCheck:
		x.view(op.Proc, i)
	case prog.OpProcMem, prog.OpPVWrite:
		res.Ret, res.Skipped, res.Errno = x.remoteWrite(i, op)
	case prog.OpMigrate, prog.OpMigrateLoop:
		// Pages have no physical placement here: nothing to move, and no
		// migration entry for a fork to meet. Skipped, and said so.
		res.Skip = "the simulated kernel does not model page placement (NUMA nodes) or migration: " + op.Kind.String()
	default:
		if op.Kind.Pinned() {
			// Pipes, O_DIRECT, io_uring and userfaultfd are not modelled.
			res.Skip = "the simulated kernel does not model " + op.Kind.String()
		} else {
			// A kind added without a rule here (TestEveryOpKindSimulated).
			res.Skip = "unhandled by the simulated kernel: " + op.Kind.String()
		}
	}
	res.End = x.clock
	if op.Kind == prog.OpStoreLoop {
		res.Ret = x.o.Ops[i].Ret
	}
	x.o.Ops[i] = res
}

// remoteWrite runs procmem (FOLL_FORCE: any private mapping, writable
// shared ones) or pvwrite (writable mappings only) into this process or
// the child of fork Into-1, through the target's fault path as GUP does.
func (x *machine) remoteWrite(i int, op *prog.Op) (written uint64, refused, errno int) {
	target := op.Proc
	if op.Into > 0 {
		target = op.Into
	}
	c := x.procs[target]
	if c == nil || c.failed {
		return 0, op.Count, ESRCH
	}
	// A killed child keeps its memory until it has exited, which it does
	// at the wait here (on Linux, some time after the kill).
	m := c.mm
	for s := 0; s < op.Count; s++ {
		a := prog.Base(op.Region) + op.Off + uint64(s)*op.Stride
		v := m.vmaAt(a)
		ok := v != nil && !beyondEOF(v, a) &&
			(v.Flags&VMWrite != 0 || op.Kind == prog.OpProcMem && v.Flags&VMShared == 0)
		if !ok {
			refused++
			continue
		}
		x.k.preempt()
		if cp := c.copy; cp != nil && !cp.done && !x.k.mut.has(MutAsyncRemoteNoSync) {
			// A fault in a child whose copy is still running must copy
			// that PMD from the parent first, like the parent's sync.
			x.k.syncPMD(cp.parent, cp, a&^(pmdSize-1), a)
		}
		if pg := m.faultWrite(a, v); pg != nil {
			x.k.setWord(pg, int(a&pageMask)/8, prog.SlotValue(i, s))
			written++
		} else {
			refused++
		}
	}
	return written, refused, 0
}

// Pid is the fake pid of the child of fork f.
func Pid(f int) uint64 { return 4096 + uint64(f) }

func (x *machine) fork(parent, f int) (uint64, int) {
	k := x.k
	pm := x.procs[parent].mm
	ctx := k.newAllocCtx()
	x.startInjection(parent, f, ctx)
	k.ctx = ctx
	var child *MM
	var err error
	switch k.cfg.Mode {
	case Eager:
		child, err = k.forkEager(pm)
	case OnDemand:
		child, err = k.forkOnDemand(pm)
	case Async:
		child, err = k.forkAsync(pm, f, ctx)
	}
	k.ctx = nil
	if err != nil {
		k.injected = append(k.injected, f)
		k.event(obs.EvInjectedForkFail, f, "fork f%d: allocation %d failed in the fork path: fork fails with ENOMEM", f, ctx.failAt)
		x.procs[f+1] = &proc{failed: true}
		if k.cfg.Mode == Async {
			k.checkPMDs(pm, f)
		}
		x.forked(f, ctx, ENOMEM)
		return ^uint64(0), ENOMEM
	}
	c := &proc{mm: child}
	if k.cfg.Mode == Async && len(pm.copies) > 0 {
		if last := pm.copies[len(pm.copies)-1]; last.child == child {
			c.copy = last
		}
	}
	x.procs[f+1] = c
	x.forked(f, ctx, 0)
	if parent == 0 {
		x.childFail(x.p.ForkOp(f), f) // childfail.go
	}
	return Pid(f), 0
}

// wait lets the child of fork f run (its copy completes first: the child
// copies before returning to user space) and reaps it.
func (x *machine) wait(f int) (uint64, int) {
	c := x.procs[f+1]
	if c == nil || c.failed {
		return ^uint64(0), ECHILD
	}
	if c.copy != nil && !c.copy.done {
		x.k.runCopy(c.copy)
	}
	if c.copy != nil && c.copy.killed && !c.killed {
		c.killed = true
		x.k.injected = append(x.k.injected, f)
		x.k.event(obs.EvInjectedCopyFail, f, "fork f%d: allocation %d failed in the background copy: the child is killed", f, c.copy.ctx.failAt)
	}
	status := uint64(0)
	if c.killed {
		status = 9 // SIGKILL
	} else {
		x.view(f+1, obs.AtStart)
		x.runProc(f + 1)
	}
	c.mm.teardown()
	x.reaped(f)
	return status, 0
}

// maps renders the arena VMAs of m like /proc/self/maps.
func maps(m *MM) string {
	var b []byte
	for _, v := range m.vmas {
		if v.End <= prog.ArenaBase || v.Start >= arenaEnd {
			continue
		}
		var off, ino uint64
		dev := "00:00"
		if v.File != nil {
			off, ino, dev = v.PgOff, v.File.Ino, "00:01"
		}
		b = fmt.Appendf(b, "%x-%x %s %08x %s %d\n", v.Start, v.End, v.protString(), off, dev, ino)
	}
	return string(b)
}

// view records what process pid sees (obs.View) through its page tables.
func (x *machine) view(pid, at int) {
	m := x.procs[pid].mm
	v := obs.View{Proc: pid, At: at}
	for _, a := range m.vmas {
		if a.End <= prog.ArenaBase || a.Start >= arenaEnd {
			continue
		}
		vm := obs.VMA{Start: a.Start, End: a.End, Prot: a.protString()}
		if a.File != nil {
			vm.Offset, vm.Inode = a.PgOff, a.File.Ino
		}
		v.VMAs = append(v.VMAs, vm)
	}
	for r := range x.p.Regions {
		base := prog.Base(r)
		end := base + prog.SpanBytes
		var run obs.Run
		flush := func() {
			if run.N > 0 {
				v.Runs = append(v.Runs, run)
			}
			run = obs.Run{}
		}
		for _, a := range m.overlapping(base, end) {
			lo, hi := max(a.Start, base), min(a.End, end)
			for pa := lo; pa < hi; pa += pageSize {
				pg := int((pa - base) / pageSize)
				st := obs.Readable
				switch {
				case a.Flags&VMRead == 0:
					st = obs.NoAccess
				case beyondEOF(a, pa):
					st = obs.BeyondEOF
				}
				if run.N > 0 && (st != run.State || pg != run.First+run.N) {
					flush()
				}
				if run.N == 0 {
					run = obs.Run{Region: r, First: pg, State: st}
				}
				run.N++
				if st != obs.Readable {
					continue
				}
				page := m.readPage(pa, a)
				if page == nil || page.data == nil {
					continue
				}
				idx, digest := page.scan()
				if len(idx) > 0 {
					v.Pages = append(v.Pages, obs.PageDigest{Region: r, Page: pg, Digest: digest, NonZero: len(idx)})
					x.viewPages = append(x.viewPages, page)
				}
			}
		}
		flush()
	}
	// Second pass: the words, into a slice of the exact size.
	n := 0
	for _, pg := range x.viewPages {
		n += len(pg.nz)
	}
	v.Words = make([]obs.Word, 0, min(n, x.wordCap))
	for i, pg := range x.viewPages {
		pd := &v.Pages[i]
		off := uint64(pd.Page) * pageSize
		if x.wordRegions&(1<<uint(pd.Region)) == 0 {
			v.Truncated = true
			continue
		}
		for _, w := range pg.nz {
			if len(v.Words) == x.wordCap {
				v.Truncated = true
				break
			}
			v.Words = append(v.Words, obs.Word{Region: pd.Region, Off: off + uint64(w)*8, Value: pg.data[w]})
		}
	}
	clear(x.viewPages)
	x.viewPages = x.viewPages[:0]
	if len(v.Words) == 0 {
		v.Words = nil
	}
	x.o.Views = append(x.o.Views, v)
}

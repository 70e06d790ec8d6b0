package executor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Options tune one run.
type Options struct {
	// WordCap bounds the non-zero words recorded per view (0: default).
	WordCap int
	// DigestsFirst records views' words only in the regions whose words
	// may change out of the program's order (prog.Program.RacedRegions);
	// elsewhere a view holds page digests only. The checker judges such
	// pages by digest and says when it needed words it did not get.
	DigestsFirst bool `json:"digests_first,omitempty"`
	// Corrupt is a test-only switch that makes the executor falsify the
	// observation in a stated way, to prove that the oracles bite. See
	// Corruptions.
	Corrupt string
	// ForkImpl names the fork-implementation profile (forkimpl.go) the
	// program's processes fork with; "" leaves the executor as it is.
	// With a profile the observation carries per-fork evidence.
	ForkImpl string `json:",omitempty"`
	// ForkImplNoEvidence (test only) applies ForkImpl but takes no
	// evidence: children are not held off the CPU around forks, so a
	// test can show that a finding does not depend on the hold-off.
	ForkImplNoEvidence bool `json:",omitempty"`
	// Symbols asks for the kernel's text symbols (/proc/kallsyms) in the
	// observation's coverage, to symbolize its PCs (kcov.go).
	Symbols bool `json:"symbols,omitempty"`
	// NoCover turns KCOV collection off for this run.
	NoCover bool `json:"no_cover,omitempty"`
	// NoForkPages turns the page census around forks off (atfork.go;
	// for measuring its cost).
	NoForkPages bool `json:"no_fork_pages,omitempty"`
	// NoWriterSpread leaves writer threads on whatever CPU the scheduler
	// picks, including the forking thread's, and the Go collector on
	// while they run (threads.go; for measuring the difference).
	NoWriterSpread bool `json:"no_writer_spread,omitempty"`
	// HeapTHP puts the executor's own heap mappings on transparent huge
	// pages after the trim (heapthp.go; for measuring its effect).
	HeapTHP bool `json:"heap_thp,omitempty"`
	// SyncKcovDrain drains the main process's KCOV buffer after a fork on
	// the main thread, as before its second buffer (kcov_async.go; for
	// measuring the difference).
	SyncKcovDrain bool `json:"sync_kcov_drain,omitempty"`
	// ChildKcovGrow says which operations of a forked child get a bigger
	// KCOV buffer than its own 64K entries (child_kcov.go): GrowAll,
	// GrowOps or GrowNone; empty: DefaultChildKcovGrow.
	ChildKcovGrow string `json:"child_kcov_grow,omitempty"`
	// RecyclePTEKB: when the executor's page tables (VmPTE) are at least
	// this many KiB after the run, the Remote starts a fresh executor
	// before the next (0: never). Page tables are freed only by munmap,
	// so a long-lived executor's grow, and every fork of the main process
	// walks them (docs/throughput.md).
	RecyclePTEKB int64 `json:"recycle_pte_kb,omitempty"`
	// TimeoutMs bounds this run (0: the Remote's Timeout). The host
	// scales it with the program and the guest's measured speed, and
	// gives a run that decides a harness event a longer one.
	TimeoutMs int `json:"timeout_ms,omitempty"`
}

// GODEBUG setting the executor process needs: forked children run Go code
// on the goroutine stack they inherit, which must never be shrunk (moved)
// by the collector between the stack pre-growth and a fork.
const NeedGODEBUG = "gcshrinkstackoff=1"

// HasGODEBUG reports whether this process was started with NeedGODEBUG.
func HasGODEBUG() bool {
	have := strings.Split(os.Getenv("GODEBUG"), ",")
	for _, kv := range strings.Split(NeedGODEBUG, ",") {
		if !slices.Contains(have, kv) {
			return false
		}
	}
	return true
}

// EnvWithGODEBUG returns env with NeedGODEBUG added to GODEBUG.
func EnvWithGODEBUG(env []string) []string {
	out := make([]string, 0, len(env)+1)
	found := false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			found = true
			if v != "" {
				v += ","
			}
			kv = "GODEBUG=" + v + NeedGODEBUG
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, "GODEBUG="+NeedGODEBUG)
	}
	return out
}

// ReexecWithGODEBUG re-executes the running program with NeedGODEBUG
// added to its environment unless it already has it (a running process
// cannot change GODEBUG). It returns only on failure, or at once when the
// setting is there. Test binaries that run the executor in-process call it
// from TestMain.
func ReexecWithGODEBUG() error {
	if HasGODEBUG() {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("re-exec with GODEBUG=%s: %w", NeedGODEBUG, err)
	}
	err = syscall.Exec(exe, os.Args, EnvWithGODEBUG(os.Environ()))
	return fmt.Errorf("re-exec with GODEBUG=%s: %w", NeedGODEBUG, err)
}

// Executor runs programs in this process with real system calls. Programs
// run one at a time on a dedicated, locked OS thread whose goroutine stack
// was grown in advance.
type Executor struct {
	reqs chan request
}

type request struct {
	p    *prog.Program
	opt  Options
	resp chan response
}

type response struct {
	o   *obs.Observation
	err error
}

// Report buffer size: views of big programs need room; the mapping is
// MAP_NORESERVE and only the used part is ever touched.
const reportSize = 512 << 20

// stackReserve is how much goroutine stack the executor's thread grows
// before running programs; nested children recurse on it.
const stackReserve = 4 << 20

// New starts an executor. The process must have been started with
// GODEBUG=gcshrinkstackoff=1 (see NeedGODEBUG).
func New() (*Executor, error) {
	if !HasGODEBUG() {
		return nil, fmt.Errorf("executor: the process must run with GODEBUG=%s (forkfuzz sets it when it starts an executor)", NeedGODEBUG)
	}
	rep, err := unix.Mmap(-1, 0, reportSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("executor: map report buffer: %w", err)
	}
	ctl, err := unix.Mmap(-1, 0, ctlSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("executor: map control page: %w", err)
	}
	x := &Executor{reqs: make(chan request)}
	m := newMachine(rep, ctl, make([]byte, mapsBufSize))
	m.kc = openKcov()
	if m.kc != nil {
		m.kc.work = (*int64)(unsafe.Pointer(&ctl[workOff+workDrain*8]))
	}
	reserveHeapTables() // stackcache.go
	go x.loop(m)
	return x, nil
}

// Run executes one program and returns what every process saw. An error
// means the harness could not run the program (not a finding).
func (x *Executor) Run(p *prog.Program, opt Options) (*obs.Observation, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("executor: invalid program: %w", err)
	}
	if _, err := parseChildGrow(opt.ChildKcovGrow); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	r := request{p: p, opt: opt, resp: make(chan response, 1)}
	x.reqs <- r
	res := <-r.resp
	return res.o, res.err
}

func (x *Executor) loop(m *machine) {
	runtime.LockOSThread() // never unlocked: children's PDEATHSIG is tied to this thread
	growStack(stackReserve)
	releaseStack()
	debug.SetPanicOnFault(true)
	for r := range x.reqs {
		o, err := runOne(m, r.p, r.opt)
		r.resp <- response{o, err}
	}
}

// stackLow is the lowest stack address growStack's frames reached.
var stackLow uintptr

//go:noinline
func growStack(n int) byte {
	var buf [64 << 10]byte
	buf[n%len(buf)] = byte(n)
	if n <= len(buf) {
		stackLow = uintptr(unsafe.Pointer(&buf[0]))
		return buf[0]
	}
	return growStack(n-len(buf)) + buf[n%len(buf)]
}

// stackKeep is how much stack below its frame releaseStack leaves
// resident.
const stackKeep = 64 << 10

// releaseStack returns to the kernel the stack pages growStack zeroed
// below the caller's frame, but stackKeep: the goroutine keeps its grown
// stack (children recurse on it and must never reach a growth check),
// and pages it does not use are no longer resident, so no fork copies
// their page table entries. A page used again faults in as zeros, as
// fresh stack would. Failures are ignored (the pages stay resident).
//
//go:noinline
func releaseStack() {
	var here byte
	sp := uintptr(unsafe.Pointer(&here))
	lo := (stackLow + prog.PageSize - 1) &^ (prog.PageSize - 1)
	if stackLow == 0 || sp < stackKeep || sp-stackKeep <= lo {
		return
	}
	hi := (sp - stackKeep) &^ (prog.PageSize - 1)
	if hi > lo {
		unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_DONTNEED)
	}
}

// heapTrim is the resident Go heap above which the executor collects and
// returns memory to the kernel before a program.
const heapTrim = 64 << 20

// trimHeap returns the executor's free heap to the kernel when it holds
// more than heapTrim. Every fork of the main process copies the page
// tables of its resident memory: programs with writer threads run with
// the collector off, and a long-lived guest executor's heap grows until
// a fork alone fills the main KCOV buffer copying the page tables of
// garbage (docs/coverage.md and docs/executor.md have the numbers).
func trimHeap() {
	if residentHeap() > heapTrim {
		debug.FreeOSMemory()
	}
}

// residentHeap is the Go heap not returned to the kernel.
func residentHeap() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapSys - ms.HeapReleased
}

func runOne(m *machine, p *prog.Program, opt Options) (o *obs.Observation, err error) {
	wordCap := opt.WordCap
	if wordCap <= 0 {
		wordCap = defaultWords
	}
	arena = p.Arena
	ph := newPhases()
	trimHeap()
	ph.mark("trim")
	if opt.HeapTHP {
		heapOnHugePages()
		ph.mark("heap-thp")
	}
	m.reset(p, wordCap)
	if opt.DigestsFirst {
		m.wordRegions = p.RacedRegions()
	}
	m.rb = newRollbackState()
	m.rb.corrupt = opt.Corrupt
	rep := m.rep
	// Before the reply, so that a kernel report the teardown causes is
	// this program's; timed as a phase of its own (the observation holds
	// ph.us, so the mark made after runOne returned is in it).
	defer func() {
		m.cleanup()
		ph.mark("cleanup")
	}()
	if err := m.fe.start(opt.ForkImpl, opt.ForkImplNoEvidence); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	m.startUffd() // before the regions exist: uffdmiss.go
	if err := m.setup(); err != nil {
		return nil, err
	}
	m.setupPinned()
	defer m.cleanupPinned()
	m.th.noSpread = opt.NoWriterSpread
	if !opt.NoWriterSpread && hasStoreLoop(p) {
		// A collection that starts while the main thread is in the raw
		// fork system call cannot stop the world until fork returns (the
		// main thread keeps its P), and meanwhile it has stopped the
		// writers: no store overlaps the fork. Writers' logs are reserved
		// ahead (threads.go), so the program allocates little.
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
	}
	m.census = nil
	if !opt.NoForkPages {
		if m.pc == nil {
			m.pc = new(pageCensus)
		}
		m.census = m.pc
		m.pc.done = nil
	}
	var fault string
	var threads []obs.ThreadLog
	mem := executorMem()
	ph.mark("setup")
	func() {
		defer func() {
			if r := recover(); r != nil {
				fault = fmt.Sprintf("main process faulted: %v", r)
			}
		}()
		m.kc.begin(p.NumForks(), opt.NoCover, opt.SyncKcovDrain)
		m.kc.setGrow(opt.ChildKcovGrow) // checked by Run
		m.runProc(0)
		for f := range m.th.stop {
			m.th.stop[f].Store(true)
		}
		threads = m.finishThreads()
		m.view(obs.AtEnd)
	}()
	if fault != "" {
		for f := range m.th.stop {
			m.th.stop[f].Store(true)
		}
		threads = m.finishThreads()
	}
	ph.mark("program")
	n := int(min(uint64(len(rep)), obs.HeaderSize+m.recCount()*obs.RecordSize))
	o, err = obs.Decode(rep[:n], len(p.Ops), len(p.Regions))
	if err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	if fault != "" {
		o.Events = append(o.Events, obs.NewEvent(obs.EvMainFault, "%s", fault))
	}
	o.Threads = threads
	o.Rollbacks, o.Events = m.rb.done, append(o.Events, m.rb.events...)
	loops := loopSpans(p)
	for i, op := range p.Ops {
		if op.Kind == prog.OpFork && op.Proc == 0 {
			o.Ops[i].TSCStart, o.Ops[i].TSCEnd = m.forkTSC[op.Fork][0], m.forkTSC[op.Fork][1]
			stores, moves := loops.at(i)
			if len(threads) > 0 && o.Ops[i].TSCStart != 0 && (stores || moves) {
				ov := obs.CountOverlap(threads, o.Ops[i].TSCStart, o.Ops[i].TSCEnd)
				ov.Writers, ov.Movers = stores, moves
				o.Ops[i].Overlap = &ov
			}
		}
	}
	if m.census != nil {
		o.ForkPages = m.census.take()
	}
	o.Holds, m.holds = m.holds, nil
	trimThreadLogs(p, o)
	ph.mark("decode")
	o.Cover = m.kc.result(p.NumForks())
	if opt.Symbols && o.Cover.Available() {
		o.Cover.Symbols = textSymbols()
	}
	ph.mark("kcov-result")
	o.Maps = arenaMaps()
	if arena != prog.ArenaTop {
		o.ArenaBase = arena.Base()
	}
	o.Kernel = kernelRelease()
	o.ForkImpl = m.fe.result()
	if opt.Corrupt != "" {
		if err := corrupt(p, o, opt.Corrupt); err != nil {
			return nil, err
		}
	}
	o.Work = m.takeWork()
	o.ExecutorMem = mem
	ph.mark("finish")
	o.Phases = ph.us
	return o, nil
}

// phases times the executor's steps of a run (obs.Observation.Phases):
// host-side code of the executor's main process only, never a child's.
type phases struct {
	last time.Time
	us   map[string]int64
}

func newPhases() *phases { return &phases{last: time.Now(), us: map[string]int64{}} }

// mark charges the time since the last mark to name.
func (p *phases) mark(name string) {
	now := time.Now()
	p.us[name] += now.Sub(p.last).Microseconds()
	p.last = now
}

// hasStoreLoop reports whether p has a storeloop.
func hasStoreLoop(p *prog.Program) bool {
	for _, op := range p.Ops {
		if op.Kind == prog.OpStoreLoop {
			return true
		}
	}
	return false
}

// hasWriter reports whether a storeloop runs until fork f's wait.
// loopSpan is a storeloop or migrateloop: from the operation that hands it
// out (op) to the wait it runs until (end).
type loopSpan struct {
	op, end int
	kind    prog.OpKind
}

type loopSet []loopSpan

// loopSpans lists p's loops.
func loopSpans(p *prog.Program) loopSet {
	waitAt := map[int]int{}
	for j, op := range p.Ops {
		if op.Kind == prog.OpWait && op.Proc == 0 {
			waitAt[op.Fork] = j
		}
	}
	var ls loopSet
	for j, op := range p.Ops {
		if op.Kind.RunsUntil() {
			ls = append(ls, loopSpan{op: j, end: waitAt[op.Fork], kind: op.Kind})
		}
	}
	return ls
}

// at says whether storeloops and migrateloops run at the operation at
// index i: handed out before it, until a wait after it.
func (ls loopSet) at(i int) (stores, moves bool) {
	for _, l := range ls {
		if l.op < i && l.end > i {
			stores = stores || l.kind == prog.OpStoreLoop
			moves = moves || l.kind == prog.OpMigrateLoop
		}
	}
	return stores, moves
}

func (m *machine) recCount() uint64 {
	return binary.LittleEndian.Uint64(m.rep[8:])
}

// ErrNoHugetlb marks a run refused because a hugetlb region could not be
// mapped: the host or guest has too few free 2 MiB huge pages
// (/proc/sys/vm/nr_hugepages). The run has no observation: nothing is
// judged, and the error says why.
var ErrNoHugetlb = errors.New("not enough free 2 MiB hugetlb pages (see /proc/sys/vm/nr_hugepages); hugetlb region skipped, program not run")

// setup creates the regions. Main process only.
func (m *machine) setup() error {
	for i, r := range m.p.Regions {
		base := arena.RegionBase(i)
		length := uint64(r.Pages) * prog.PageSize
		if r.Kind.Memfd() {
			fd, err := m.regionFile(r.Kind, i)
			if err != nil {
				return err
			}
			m.memfd[i] = fd
			if err := unix.Ftruncate(fd, prog.SpanBytes); err != nil {
				return fmt.Errorf("executor: size file of r%d: %w", i, err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return fmt.Errorf("executor: stat file of r%d: %w", i, err)
			}
			m.addObj(uint64(unix.Major(st.Dev))<<32|uint64(unix.Minor(st.Dev)), st.Ino, prog.SpanBytes)
		}
		a, e := sysMmap(uintptr(base), uintptr(length), unix.PROT_READ|unix.PROT_WRITE, mapFlags(r.Kind)|unix.MAP_FIXED_NOREPLACE, m.memfd[i], 0)
		if e != 0 && r.Kind.Hugetlb() {
			return fmt.Errorf("executor: map %s region r%d (%d MiB): %w: %w", r.Kind, i, length>>20, unix.Errno(e), ErrNoHugetlb)
		}
		if e != 0 || uint64(a) != base {
			return fmt.Errorf("executor: map r%d at %#x: %w", i, base, unix.Errno(e))
		}
		if anonObject(r.Kind) {
			m.noteShared(base, length)
		}
		adv := uintptr(0)
		switch r.THP {
		case prog.THPOn:
			adv = unix.MADV_HUGEPAGE
		case prog.THPOff:
			adv = unix.MADV_NOHUGEPAGE
		}
		if adv != 0 {
			if _, e := sys3(unix.SYS_MADVISE, uintptr(base), uintptr(length), adv); e != 0 {
				return fmt.Errorf("executor: thp advice on r%d: %w", i, unix.Errno(e))
			}
		}
	}
	return nil
}

// regionFile opens the file behind region i of kind k: a memfd, or a
// regular file on the kind's file system (filekinds.go).
func (m *machine) regionFile(k prog.RegionKind, i int) (int, error) {
	if k.FS() != prog.NoFS {
		return openRegionFile(k, i)
	}
	flags := unix.MFD_CLOEXEC
	if k.Hugetlb() {
		flags |= unix.MFD_HUGETLB | unix.MFD_HUGE_2MB
	}
	fd, err := unix.MemfdCreate(fmt.Sprintf("forkfuzz-r%d", i), flags)
	if err != nil {
		return -1, fmt.Errorf("executor: memfd for r%d: %w", i, err)
	}
	return fd, nil
}

// noteMoved remembers a mapping an mremap moved out of the arena. Main process only.
func (m *machine) noteMoved(addr, length uint64) {
	m.moved = append(m.moved, span{addr, length})
}

// cleanup kills leftover children and removes everything the program
// mapped. Main process only.
func (m *machine) cleanup() {
	for f, pid := range m.pids {
		if pid > 0 {
			unix.Kill(pid, unix.SIGKILL)
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, 0, nil)
			m.pids[f] = 0
		}
	}
	sysMunmap(uintptr(arena.Base()), prog.MaxRegions*prog.SpanBytes)
	m.sentinelRelease()
	for _, s := range m.moved {
		sysMunmap(uintptr(s.addr), uintptr(s.length))
	}
	for i, fd := range m.memfd {
		if fd >= 0 {
			unix.Close(fd)
			m.memfd[i] = -1
		}
	}
	m.stopUffd()
}

// arenaMaps returns the lines of /proc/self/maps inside the arena.
func arenaMaps() string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return ""
	}
	var out bytes.Buffer
	for _, line := range bytes.Split(b, []byte("\n")) {
		lo, rest, ok := bytes.Cut(line, []byte("-"))
		if !ok {
			continue
		}
		hi, _, _ := bytes.Cut(rest, []byte(" "))
		l, err1 := strconv.ParseUint(string(lo), 16, 64)
		h, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 == nil && err2 == nil && h > arena.Base() && l < arena.End() {
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.String()
}

// kernelRelease is uname -r of the running kernel.
func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

package executor

// Fault injection inside fork (prog.Op.FailNth) and the rollback
// measurements around it (obs.Rollback). Everything here runs in the main
// executor process only (the program validator allows fail_nth only on
// forks of the main process), so it may use the Go runtime, except between
// arming /proc/thread-self/fail-nth and reading it back, where only raw
// system calls run: any allocation there would consume the fault.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Paths of the kernel interfaces used here.
const (
	failNthPath    = "/proc/thread-self/fail-nth"
	debugfsDir     = "/sys/kernel/debug"
	statRefresh    = "/proc/sys/vm/stat_refresh"
	PMDModuleDir   = debugfsDir + "/forkfuzz_pmd"
	pmdPidFile     = PMDModuleDir + "/pid"
	pmdTableFile   = PMDModuleDir + "/pmds"
	watchdogCode   = 71
	pageTableTries = 5
)

// failSettings are the fault-injection knobs the executor sets so that the
// allocations fork makes count as failure points for fail-nth
// (Documentation/fault-injection/fault-injection.rst): by default
// failslab and fail_page_alloc ignore allocations that may sleep
// (ignore-gfp-wait=Y, i.e. every GFP_KERNEL allocation, including page
// tables), and fail_page_alloc ignores order-0 pages (min-order=1) and
// highmem. probability stays 0, so nothing fails except through fail-nth,
// which the kernel checks before probability, task-filter and times.
// verbose=2 makes the kernel log "FAULT_INJECTION: forcing a failure"
// with a stack trace when it injects; the executor reads it back from
// /dev/kmsg to say where the fault hit (obs.Rollback.Site). Neither line
// is a kernel report (kernel/report ignores them).
// writeTimeout bounds the rollback write pass (see writePass); tests
// shorten it with FORKFUZZ_ROLLBACK_WRITE_TIMEOUT.
var writeTimeout = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("FORKFUZZ_ROLLBACK_WRITE_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 20 * time.Second
}()

var failSettings = []struct{ file, value string }{
	{"failslab/ignore-gfp-wait", "N"},
	{"failslab/verbose", "2"},
	{"fail_page_alloc/ignore-gfp-wait", "N"},
	{"fail_page_alloc/ignore-gfp-highmem", "N"},
	{"fail_page_alloc/min-order", "0"},
	{"fail_page_alloc/verbose", "2"},
}

var faultSetup struct {
	once    sync.Once
	applied []string
	err     error
}

// FaultInjection prepares the kernel for fail-nth injection into fork and
// returns the settings it applied. An error says why injection cannot work
// here (no fail-nth in this kernel, no debugfs, not root); callers report
// it, they never pretend the fault was injected.
func FaultInjection() ([]string, error) {
	faultSetup.once.Do(func() { faultSetup.applied, faultSetup.err = setupFaultInjection() })
	return faultSetup.applied, faultSetup.err
}

func setupFaultInjection() ([]string, error) {
	if _, err := os.Stat(failNthPath); err != nil {
		return nil, fmt.Errorf("this kernel has no %s (needs CONFIG_FAULT_INJECTION): %w", failNthPath, err)
	}
	if _, err := os.Stat(debugfsDir + "/failslab"); err != nil {
		// Mount debugfs if nobody did (the VM agent does at boot).
		if merr := unix.Mount("debugfs", debugfsDir, "debugfs", 0, ""); merr != nil && !errors.Is(merr, unix.EBUSY) {
			return nil, fmt.Errorf("no %s/failslab and mounting debugfs failed: %v", debugfsDir, merr)
		}
	}
	var applied []string
	for _, s := range failSettings {
		path := debugfsDir + "/" + s.file
		if err := os.WriteFile(path, []byte(s.value), 0); err != nil {
			return applied, fmt.Errorf("configure fault injection: %w (needs CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC, CONFIG_FAULT_INJECTION_DEBUG_FS and root)", err)
		}
		applied = append(applied, path+"="+s.value)
	}
	return applied, nil
}

// rollbackState holds the measurements of forks whose "after" part is
// still to come (a killed child not yet reaped, an injected fork that
// succeeded) and the finished ones. Main process only.
type rollbackState struct {
	pending  map[int]*obs.Rollback // by fork
	done     []obs.Rollback
	events   []obs.Event
	digest   [512]uint64
	resident []byte // mincore vector scratch
	wdStack  []byte // the raw watchdog thread's stack
	corrupt  string // Options.Corrupt (rollback-write-hang acts during the run)
}

func newRollbackState() *rollbackState {
	return &rollbackState{pending: map[int]*obs.Rollback{}}
}

// wantsRollback reports whether fork op i of the main process is measured:
// it carries fail_nth, or the main process kills its child.
func (m *machine) wantsRollback(i int) bool {
	op := &m.p.Ops[i]
	if m.inChild || op.Proc != 0 || m.rb == nil {
		return false
	}
	if op.FailNth > 0 || op.OOMMemcg > 0 {
		return true
	}
	for _, o := range m.p.Ops {
		if o.Kind == prog.OpKill && o.Fork == op.Fork && o.Proc == 0 {
			return true
		}
	}
	return false
}

// forkMeasured runs fork op i (fork f) of the main process with fault
// injection if it asks for it, measuring the parent before and after.
func (m *machine) forkMeasured(i, f int, start int64) {
	op := &m.p.Ops[i]
	rb := &obs.Rollback{Fork: f, Op: i, At: i, Cause: obs.CauseKill, FailNth: op.FailNth}
	fd := -1
	if op.FailNth > 0 {
		rb.Cause = obs.CauseFailNth
		setup, err := FaultInjection()
		rb.Setup = setup
		if err == nil {
			fd, err = unix.Open(failNthPath, unix.O_RDWR|unix.O_CLOEXEC, 0) // on this locked thread: thread-self is the forking thread
		}
		if err != nil {
			rb.Injection, rb.Reason = obs.InjUnsupported, err.Error()
			m.rb.events = append(m.rb.events, obs.ForkEvent(obs.EvInjectNotApplied, f, "fork f%d: fail_nth=%d not injected, the fork ran without it: %v", f, op.FailNth, err))
			fd = -1
		}
	}
	if fd >= 0 {
		defer m.primeStackCache()() // stackcache.go: the same failure sites every run
	}
	m.measureBefore(rb)
	kmsg := -1
	if fd >= 0 {
		kmsg = kmsgOpen()
	}
	var lim *memcgLimit
	if op.OOMMemcg > 0 {
		if rb.Cause == obs.CauseKill {
			rb.Cause = obs.CauseOOMMemcg
		}
		var what string
		var err error
		lim, what, err = armMemcg(op.OOMMemcg)
		if err != nil {
			rb.Memcg = "unsupported: " + err.Error()
			m.rb.events = append(m.rb.events, obs.ForkEvent(obs.EvInjectNotApplied, f, "fork f%d: oom_memcg=%d not applied, the fork ran without a memory limit: %v", f, op.OOMMemcg, err))
		} else {
			rb.Setup = append(rb.Setup, what)
		}
	}
	// Everything the injected fork needs, prepared before it (see
	// rawForkInjected): the read-back lands in this fork's slot of the
	// MAP_SHARED control page (bytes 32..55; the child only waits on
	// bytes 0..3), which fork does not write-protect.
	num := new([24]byte)
	zero := new([1]byte)
	zero[0] = '0'
	back := m.ctl[f*64+32 : f*64+56]
	a := &injectArgs{failFd: -1, memFd: -1, kbuf: uintptr(unsafe.Pointer(&num[0])), zero: uintptr(unsafe.Pointer(&zero[0])),
		back: uintptr(unsafe.Pointer(&back[0])), backLen: int64(len(back))}
	if fd >= 0 {
		a.failFd = int64(fd)
		a.klen = int64(len(strconv.AppendInt(num[:0], int64(op.FailNth), 10)))
	}
	if lim != nil {
		a.memFd = int64(lim.fd)
		a.limit, a.limitLen, a.max = uintptr(unsafe.Pointer(&lim.limit[0])), int64(lim.limitN), uintptr(unsafe.Pointer(&lim.max[0]))
	}

	sigBlockAll(&m.sigAll, &m.sigOld)
	inv := rdtscp()
	pid, errno, backN, armErr := rawForkInjected(a)
	if errno == 0 && pid == 0 {
		m.child(f) // the kernel resets fail-nth in the child (dup_task_struct)
	}
	resp := rdtscp()
	var backErr uintptr
	if int64(backN) < 0 {
		backErr, backN = uintptr(-int64(backN)), 0
	}
	armErr = uintptr(-int64(armErr))
	sigRestore(&m.sigOld)
	m.forkTSC[f] = [2]uint64{inv, resp}
	end := m.now()
	if lim != nil {
		hit, what := lim.disarm()
		rb.MemcgHit = hit
		rb.Memcg = what
		if armErr != 0 {
			rb.MemcgHit, rb.Memcg = false, "unsupported: writing memory.max failed: "+unix.Errno(armErr).Error()
		}
	}
	if errno == 0 {
		m.pids[f] = int(pid)
	}
	rb.Errno = int(errno)
	if kmsg >= 0 {
		rb.Site = kmsgSite(kmsg)
		unix.Close(kmsg)
	}
	if fd >= 0 {
		unix.Close(fd)
		switch {
		case backErr != 0:
			rb.Injection, rb.Reason = obs.InjUnsupported, fmt.Sprintf("arming or reading back %s failed: %v", failNthPath, unix.Errno(backErr))
		default:
			left, err := strconv.Atoi(strings.TrimSpace(string(back[:min(int(backN), len(back))])))
			switch {
			case err != nil:
				rb.Injection, rb.Reason = obs.InjUnsupported, fmt.Sprintf("%s read back %q", failNthPath, back[:backN])
			case left == 0:
				rb.Injection = obs.InjInjected
			default:
				rb.Injection, rb.Remaining = obs.InjNotReached, left
			}
		}
	}
	m.recOp(i, errno, uint64(pid), start, end, 0)
	if errno != 0 {
		m.measureAfter(rb, i)
		return
	}
	m.rb.pending[f] = rb
}

// afterWait finishes the measurements of fork f once its child was reaped
// by wait operation i.
func (m *machine) afterWait(i, f int) {
	if m.rb == nil || m.inChild {
		return
	}
	rb := m.rb.pending[f]
	if rb == nil {
		return
	}
	delete(m.rb.pending, f)
	m.measureAfter(rb, i)
}

func (m *machine) measureBefore(rb *obs.Rollback) {
	rb.ChildrenBefore = threadChildren()
	rb.MapsBefore = arenaMaps()
	if m.threadsRemap() {
		rb.MemoryNote = "not measured: threads of the program may change mappings meanwhile, so touching memory could fault"
	} else {
		rb.DigestBefore, rb.PagesBefore = m.contentDigest()
		rb.BaselineFaults, _, _ = m.writePass(rb, "before")
	}
	rb.PageTablesBefore, rb.VmPTEBefore = pageTableCounters()
	if n := otherProcesses(); n > quietProcesses {
		// PageTables is a machine-wide counter: with other processes
		// running (the host, not a forkfuzz VM) it moves for reasons of
		// its own and a leak cannot be told from noise.
		rb.PageTablesBefore = -1
		rb.PageTablesNote = fmt.Sprintf("not measured: %d other user processes share the machine-wide PageTables counter (a forkfuzz VM has %d at most)", n, quietProcesses)
	}
	rb.PMDSource, rb.PMDBefore = readPMDs()
	rb.VMAsBefore, rb.VMAsBelowArena = processVMAs()
}

// processVMAs counts the main process's VMAs, and those below the arena
// (dup_mmap copies VMAs in address order, so only those come before the
// program's regions in the order of fork's failure points).
func processVMAs() (all, below int) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		lo, _, ok := strings.Cut(line, "-")
		if !ok {
			continue
		}
		all++
		if a, err := strconv.ParseUint(lo, 16, 64); err == nil && a < prog.ArenaBase {
			below++
		}
	}
	return all, below
}

// threadsRemap reports whether a thread of the program changes mappings:
// the main thread's digests and write passes could then fault on memory
// a thread unmaps under them.
func (m *machine) threadsRemap() bool {
	for i := range m.p.Ops {
		if op := &m.p.Ops[i]; op.Thread > 0 && op.Kind.ChangesVMA() {
			return true
		}
	}
	return false
}

// quietProcesses is how many user processes besides the executor and its
// children a machine may run for PageTables to be judged: in a forkfuzz
// VM, the init and the agent.
const quietProcesses = 4

// otherProcesses counts user processes (a non-empty cmdline: not kernel
// threads) other than this one and its children.
func otherProcesses() int {
	me := os.Getpid()
	kids := map[int]bool{}
	for _, c := range threadChildren() {
		kids[c] = true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 1 << 30
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me || kids[pid] {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && len(b) > 0 {
			n++
		}
	}
	return n
}

// measureAfter takes the "after" measurements; the order matters: page
// tables and PMD flags before anything touches memory (a write would make
// an Async-fork kernel synchronize and restore the RW bit, hiding the
// bug), content before the write pass.
func (m *machine) measureAfter(rb *obs.Rollback, at int) {
	rb.At = at
	rb.Comparable = m.comparable(rb)
	rb.ChildrenAfter = threadChildren()
	rb.PageTablesAfter, rb.VmPTEAfter = pageTableCounters()
	if rb.PageTablesBefore < 0 {
		rb.PageTablesAfter = -1
	}
	for try := 1; try < pageTableTries && rb.PageTablesBefore >= 0 && leakKB(rb) > 0; try++ {
		// Other processes allocate and free page tables too: a leak is
		// what stays, so look again a few times and keep the smallest.
		time.Sleep(20 * time.Millisecond)
		pt, pte := pageTableCounters()
		if pt-pte < rb.PageTablesAfter-rb.VmPTEAfter {
			rb.PageTablesAfter, rb.VmPTEAfter = pt, pte
		}
	}
	_, rb.PMDAfter = readPMDs()
	rb.MapsAfter = arenaMaps()
	if rb.MemoryNote == "" {
		rb.DigestAfter, rb.PagesAfter = m.contentDigest()
		if m.rb.corrupt == "rollback-write-hang" {
			m.trapFirstPage()
		}
		rb.Faults, rb.WritePages, rb.PassNanos = m.writePass(rb, "after")
	}
	m.rb.done = append(m.rb.done, *rb)
}

func leakKB(rb *obs.Rollback) int64 {
	return (rb.PageTablesAfter - rb.PageTablesBefore) - (rb.VmPTEAfter - rb.VmPTEBefore)
}

// comparable reports whether nothing but the fork, a kill of its child
// and its wait ran between the two measurements, and no thread of the
// main process can write meanwhile: then maps and content must not change.
func (m *machine) comparable(rb *obs.Rollback) bool {
	for _, op := range m.p.Ops {
		if op.Thread > 0 {
			return false
		}
	}
	for j := rb.Op + 1; j < rb.At; j++ {
		op := &m.p.Ops[j]
		if op.Proc == 0 && !(op.Kind == prog.OpKill && op.Fork == rb.Fork) {
			return false
		}
	}
	if rb.Errno == 0 {
		// The child ran its operations unless it was killed first.
		killed := false
		for j := rb.Op + 1; j < rb.At; j++ {
			if m.p.Ops[j].Kind == prog.OpKill && m.p.Ops[j].Fork == rb.Fork {
				killed = true
			}
		}
		if !killed {
			return false
		}
	}
	return true
}

// contentDigest sums obs.WordDigest(address, value) over every non-zero
// word of every readable page of the arena.
func (m *machine) contentDigest() (uint64, int) {
	if m.readMaps() != 0 {
		return 0, 0
	}
	var d uint64
	pages := 0
	for i := 0; i < m.nvma; i++ {
		v := m.vmas[i]
		if v.end <= prog.ArenaBase || v.start >= arenaEnd {
			continue
		}
		for addr := max(v.start, prog.ArenaBase); addr < min(v.end, arenaEnd); addr += prog.PageSize {
			if m.pageState(&v, addr) != obs.Readable {
				continue
			}
			copyPage(&m.rb.digest, uintptr(addr))
			for w, val := range m.rb.digest {
				if val != 0 {
					d += obs.WordDigest(addr+uint64(w*8), val)
				}
			}
			pages++
		}
	}
	return d, pages
}

// writePass writes (atomic or 0) one word of every resident writable
// arena page that is not a private file mapping (a write there would replace the
// page-cache page by a private copy and change what later file writes
// show), counting the forking thread's minor faults. A pass that does not
// finish within writeTimeout means a write fault that never resolves: the
// watchdog says so on stderr (the console, in a VM) and ends the executor
// with status 71, which the caller sees as a crash of this program.
func (m *machine) writePass(rb *obs.Rollback, when string) (faults int64, pages int, nanos int64) {
	if m.readMaps() != 0 {
		return 0, 0, 0
	}
	stop := m.startWatchdog(fmt.Sprintf("forkfuzz executor: rollback:write-hang: the write pass %s fork f%d (fail_nth=%d, injection %q) has not finished after %v: a write fault that never resolves (a PMD left write-protected?)\n",
		when, rb.Fork, rb.FailNth, rb.Injection, writeTimeout))
	defer stop()
	var ru0, ru1 unix.Rusage
	t0 := time.Now()
	unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
	for i := 0; i < m.nvma; i++ {
		v := m.vmas[i]
		if v.end <= prog.ArenaBase || v.start >= arenaEnd || v.prot&obs.VMAWrite == 0 {
			continue
		}
		if v.inode != 0 && v.prot&obs.VMAShared == 0 {
			continue // private file mapping
		}
		lo, hi := max(v.start, prog.ArenaBase), min(v.end, arenaEnd)
		// Only resident pages (mincore): the pass must not populate
		// memory the program never touched, and a PMD without resident
		// pages under it has no PTE table to leave write-protected.
		n := int((hi - lo) / prog.PageSize)
		if cap(m.rb.resident) < n {
			m.rb.resident = make([]byte, n)
		}
		res := m.rb.resident[:n]
		if _, e := sys3(unix.SYS_MINCORE, uintptr(lo), uintptr(hi-lo), uintptr(unsafe.Pointer(&res[0]))); e != 0 {
			for j := range res {
				res[j] = 1
			}
		}
		for addr := lo; addr < hi; addr += prog.PageSize {
			if res[(addr-lo)/prog.PageSize]&1 == 0 || m.pageState(&v, addr) != obs.Readable {
				continue
			}
			orZero(uintptr(addr))
			pages++
		}
	}
	unix.Getrusage(unix.RUSAGE_THREAD, &ru1)
	return ru1.Minflt - ru0.Minflt, pages, time.Since(t0).Nanoseconds()
}

func orZero(addr uintptr)

// startWatchdog arms a watchdog that, unless the returned stop is called
// within writeTimeout, prints msg on stderr and ends the executor with
// status 71. It runs on a raw thread outside the Go runtime
// (rawWatchdogThread) with raw system calls only, so it fires even when
// the runtime cannot make progress because the forking thread faults
// forever, and it never holds up the runtime itself (a goroutine blocked
// in a raw system call would stall every stop-the-world).
func (m *machine) startWatchdog(msg string) (stop func()) {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	dl := time.Duration(ts.Nano()) + writeTimeout
	w := &watchdog{deadline: [2]int64{int64(dl / time.Second), int64(dl % time.Second)}, msg: []byte(msg)}
	if m.rb.wdStack == nil {
		st, err := unix.Mmap(-1, 0, watchdogStack, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			m.rb.events = append(m.rb.events, obs.NewEvent(obs.EvMeasureUnavailable, "write-pass watchdog not started: %v", err))
			return func() {}
		}
		m.rb.wdStack = st
	}
	top := uintptr(unsafe.Pointer(&m.rb.wdStack[0])) + watchdogStack
	var all, old uint64 = ^uint64(0), 0
	sigBlockAll(&all, &old)
	_, e := rawWatchdogThread(top, &w.flag, &w.deadline, &w.msg[0], len(w.msg), &w.ctid)
	sigRestore(&old)
	if e != 0 {
		m.rb.events = append(m.rb.events, obs.NewEvent(obs.EvMeasureUnavailable, "write-pass watchdog not started: clone: %v", unix.Errno(e)))
		return func() {}
	}
	// Start the pass only once the watchdog waits.
	for atomic.LoadUint32(&w.flag[1]) == 0 {
		runtime.Gosched()
	}
	return func() {
		atomic.StoreUint32(&w.flag[0], 1)
		unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&w.flag[0])), 129, 1, 0, 0, 0) // FUTEX_WAKE|FUTEX_PRIVATE_FLAG
		// Wait until the thread is gone (the kernel clears ctid): its
		// stack is reused by the next watchdog.
		for {
			v := atomic.LoadUint32(&w.ctid)
			if v == 0 {
				break
			}
			unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&w.ctid)), 0, uintptr(v), 0, 0, 0) // FUTEX_WAIT (clear_child_tid wakes shared)
		}
		runtime.KeepAlive(w)
	}
}

// watchdog is what a watchdog thread reads; it must stay reachable (and
// in place) until the thread is gone.
type watchdog struct {
	flag     [2]uint32 // [0]: stop; [1]: the thread is waiting
	ctid     uint32
	deadline [2]int64
	msg      []byte
}

// watchdogStack is the raw watchdog thread's stack size.
const watchdogStack = 64 << 10

func rawWatchdogThread(stack uintptr, flag *[2]uint32, deadline *[2]int64, msg *byte, n int, ctid *uint32) (tid, errno uintptr)

// injectArgs are the arguments of rawForkInjected (failnth_amd64.s reads
// them by offset: keep the order, every field 8 bytes).
type injectArgs struct {
	failFd   int64   // 0: /proc/thread-self/fail-nth, or -1
	kbuf     uintptr // 8: K in decimal
	klen     int64   // 16
	back     uintptr // 24: read-back buffer (MAP_SHARED)
	backLen  int64   // 32
	zero     uintptr // 40: "0"
	memFd    int64   // 48: memory.max, or -1
	limit    uintptr // 56: the limit in decimal
	limitLen int64   // 64
	max      uintptr // 72: "max"
}

func rawForkInjected(a *injectArgs) (pid, errno, backN, armErr uintptr)

// kmsgOpen opens the kernel log positioned at its end, or returns -1.
func kmsgOpen() int {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	if _, err := unix.Seek(fd, 0, 2); err != nil { // SEEK_END
		unix.Close(fd)
		return -1
	}
	return fd
}

// kmsgSite reads the kernel log records written since kmsgOpen and
// returns where fault injection struck: the fault attribute's name and the
// first frames of the stack trace that are not fault-injection or
// allocator plumbing, innermost first, e.g. "failslab: vm_area_dup <-
// dup_mmap <- copy_process <- kernel_clone". "" if the log says nothing.
func kmsgSite(fd int) string {
	var lines []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EPIPE {
			continue // records were overwritten; go on with the next
		}
		if err != nil || n <= 0 {
			break
		}
		rec := string(buf[:n])
		if i := strings.IndexByte(rec, ';'); i >= 0 {
			rec = rec[i+1:]
		}
		rec, _, _ = strings.Cut(rec, "\n") // dictionary lines follow
		// /dev/kmsg escapes newlines inside a message as \x0a.
		lines = append(lines, strings.Split(rec, `\x0a`)...)
	}
	return ParseFaultSite(lines)
}

// plumbing are frames of the fault-injection and allocation machinery, not
// the site that asked for memory.
var plumbing = []string{"dump_stack", "should_fail", "fail_dump", "should_failslab", "__should_failslab",
	"should_fail_alloc_page", "__should_fail_alloc_page", "slab_pre_alloc_hook", "kmem_cache_alloc", "__kmem_cache_alloc",
	"kmalloc", "__kmalloc", "kmalloc_trace", "__alloc_pages", "alloc_pages", "get_page_from_freelist", "prepare_alloc_pages",
	"__get_free_pages", "get_zeroed_page", "kmem_cache_zalloc", "kzalloc", "slab_alloc", "__slab_alloc", "___slab_alloc",
	"allocate_slab", "new_slab", "alloc_slab_page", "__alloc_pages_node", "alloc_pages_node", "__folio_alloc", "folio_alloc",
	"vma_alloc_folio", "alloc_pages_vma", "kmem_cache_alloc_node", "__kmalloc_node", "kvmalloc_node", "mas_alloc_nodes",
	"kmem_cache_alloc_bulk", "__kmem_cache_alloc_bulk", "mas_node_count_gfp"}

// ParseFaultSite finds the last fault-injection report in kernel log
// lines and summarizes it (see kmsgSite).
func ParseFaultSite(lines []string) string {
	start := -1
	for i, l := range lines {
		if strings.Contains(l, "FAULT_INJECTION: forcing a failure") {
			start = i
		}
	}
	if start < 0 {
		return ""
	}
	name := "fault"
	var frames []string
	trace := false
	for _, l := range lines[start+1:] {
		t := strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(t, "name "); ok && name == "fault" {
			name, _, _ = strings.Cut(rest, ",")
			continue
		}
		if strings.HasPrefix(t, "Call Trace:") {
			trace = true
			continue
		}
		if !trace || t == "<TASK>" {
			continue
		}
		if t == "</TASK>" || strings.HasPrefix(t, "FAULT_INJECTION") || strings.HasPrefix(t, "entry_SYSCALL") || strings.HasPrefix(t, "do_syscall") {
			break
		}
		if strings.HasPrefix(t, "? ") {
			continue // an unreliable frame
		}
		fn, _, ok := strings.Cut(t, "+0x")
		if !ok || strings.ContainsAny(fn, " :") {
			continue
		}
		skip := false
		for _, p := range plumbing {
			if strings.HasPrefix(fn, p) {
				skip = true
			}
		}
		if !skip && len(frames) < 6 {
			frames = append(frames, fn)
		}
	}
	if len(frames) == 0 {
		return name
	}
	return name + ": " + strings.Join(frames, " <- ")
}

// threadChildren lists the children of the calling thread
// (/proc/thread-self/children, CONFIG_PROC_CHILDREN), sorted; nil if the
// file cannot be read.
func threadChildren() []int {
	b, err := os.ReadFile("/proc/thread-self/children")
	if err != nil {
		return nil
	}
	out := []int{}
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// pageTableCounters returns PageTables from /proc/meminfo and this
// process's VmPTE from /proc/self/status, in kB, after folding the per-CPU
// vmstat deltas into the global counters (a write to
// /proc/sys/vm/stat_refresh; without it /proc/meminfo lags by up to the
// per-CPU thresholds). Values are -1 when unknown.
func pageTableCounters() (pageTables, vmPTE int64) {
	exact := os.WriteFile(statRefresh, []byte("1"), 0) == nil
	pageTables, vmPTE = -1, -1
	if b, err := os.ReadFile("/proc/meminfo"); err == nil && exact {
		pageTables = kbField(b, "PageTables:")
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		vmPTE = kbField(b, "VmPTE:")
	}
	return pageTables, vmPTE
}

func kbField(b []byte, key string) int64 {
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte(key)); ok {
			f := strings.Fields(string(rest))
			if len(f) > 0 {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// readPMDs reads this process's PMD entries inside the arena from the
// forkfuzz_pmd module (kernel/pmdmod). source says where they came from,
// or starts with "absent:" and says why there are none.
func readPMDs() (source string, pmds []obs.PMDEntry) {
	if _, err := os.Stat(pmdTableFile); err != nil {
		return "absent: no " + pmdTableFile + " (the forkfuzz_pmd module is not loaded); only the behavioural checks apply", nil
	}
	if err := os.WriteFile(pmdPidFile, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return "absent: " + err.Error(), nil
	}
	b, err := os.ReadFile(pmdTableFile)
	if err != nil {
		return "absent: " + err.Error(), nil
	}
	pmds, err = ParsePMDs(b)
	if err != nil {
		return "absent: " + err.Error(), nil
	}
	var in []obs.PMDEntry
	for _, e := range pmds {
		if e.Addr >= prog.ArenaBase && e.Addr < arenaEnd {
			in = append(in, e)
		}
	}
	return "module " + pmdTableFile, in
}

// ParsePMDs parses the forkfuzz_pmd module's table: one line per PMD
// entry, "ADDR FLAGS" with ADDR in hex and FLAGS three characters, 'p' or
// '-' (present), 'w' or '-' (RW), 'h' or '-' (huge), e.g.
// "3f0000000000 pw-". Lines starting with '#' are comments.
func ParsePMDs(b []byte) ([]obs.PMDEntry, error) {
	var out []obs.PMDEntry
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f[1]) != 3 {
			return nil, fmt.Errorf("pmd table line %d: %q: want \"ADDR FLAGS\"", n+1, line)
		}
		addr, err := strconv.ParseUint(strings.TrimPrefix(f[0], "0x"), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("pmd table line %d: bad address %q", n+1, f[0])
		}
		fl := f[1]
		bit := func(i int, c byte) (bool, error) {
			switch fl[i] {
			case c:
				return true, nil
			case '-':
				return false, nil
			}
			return false, fmt.Errorf("pmd table line %d: bad flags %q", n+1, fl)
		}
		var e obs.PMDEntry
		e.Addr = addr
		if e.Present, err = bit(0, 'p'); err != nil {
			return nil, err
		}
		if e.RW, err = bit(1, 'w'); err != nil {
			return nil, err
		}
		if e.Huge, err = bit(2, 'h'); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// RollbackCorruptions are test-only corruptions of rollback measurements
// (Options.Corrupt, like Corruptions, which lists those that falsify views
// and apply to any program with a fork); they need a program whose
// observation has a rollback measurement (fail_nth, oom_memcg or kill).
var RollbackCorruptions = map[string]string{
	"rollback-fault-storm": "the first rollback measurement's write pass reports three faults per page",
	"rollback-pmd-rw":      "the first rollback measurement shows its first PTE-table PMD write-protected after the fork",
	"rollback-write-hang":  "before the write pass after a fork, writes to the first page of the first anonymous private region are blocked with a userfaultfd write-protection nobody resolves: the pass hangs (tests the watchdog)",
}

// trapFirstPage makes writes to the first page of the first anonymous
// private arena mapping block forever: a userfaultfd write-protection
// that nobody resolves (reads still work), much like a PMD left
// write-protected whose faults never resolve. Test-only
// (rollback-write-hang); failures are events.
func (m *machine) trapFirstPage() {
	const (
		sysUserfaultfd   = 323
		uffdUserModeOnly = 1
		uffdioAPI        = 0xc018aa3f
		uffdioRegister   = 0xc020aa00
		uffdioWP         = 0xc018aa06
		modeWP           = 2 // UFFDIO_REGISTER_MODE_WP
		wpModeWP         = 1 // UFFDIO_WRITEPROTECT_MODE_WP
	)
	if m.readMaps() != 0 {
		return
	}
	fail := func(what string, e error) {
		m.rb.events = append(m.rb.events, obs.NewEvent(obs.EvMeasureUnavailable, "rollback-write-hang: %s: %v", what, e))
	}
	for i := 0; i < m.nvma; i++ {
		v := m.vmas[i]
		if v.start < prog.ArenaBase || v.start >= arenaEnd || v.inode != 0 || v.prot&obs.VMAShared != 0 || v.prot&obs.VMAWrite == 0 {
			continue
		}
		fd, _, e := unix.Syscall(sysUserfaultfd, unix.O_CLOEXEC|uffdUserModeOnly, 0, 0)
		if e != 0 {
			fd, _, e = unix.Syscall(sysUserfaultfd, unix.O_CLOEXEC, 0, 0)
		}
		if e != 0 {
			fail("userfaultfd", e)
			return
		}
		api := [3]uint64{0xAA, 0, 0}
		reg := [4]uint64{v.start, prog.PageSize, modeWP, 0}
		wp := [3]uint64{v.start, prog.PageSize, wpModeWP}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, uffdioAPI, uintptr(unsafe.Pointer(&api[0]))); e != 0 {
			fail("UFFDIO_API", e)
			return
		}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, uffdioRegister, uintptr(unsafe.Pointer(&reg[0]))); e != 0 {
			fail("UFFDIO_REGISTER (write-protect mode)", e)
			return
		}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, uffdioWP, uintptr(unsafe.Pointer(&wp[0]))); e != 0 {
			fail("UFFDIO_WRITEPROTECT", e)
			return
		}
		return // fd stays open: the executor is about to be ended by the watchdog
	}
	m.rb.events = append(m.rb.events, obs.NewEvent(obs.EvMeasureUnavailable, "rollback-write-hang: no anonymous private mapping to trap"))
}

// corruptRollback applies the test-only rollback corruptions; ok is false
// for other names.
func corruptRollback(o *obs.Observation, name string) (ok bool, err error) {
	switch name {
	case "rollback-write-hang":
		return true, nil // acted during the run (trapFirstPage)
	case "rollback-fault-storm":
		if len(o.Rollbacks) == 0 {
			return true, fmt.Errorf("corruption %s: no rollback measurement (use fail_nth, oom_memcg or kill)", name)
		}
		rb := &o.Rollbacks[0]
		rb.Faults = 3*int64(rb.WritePages) + 100
		return true, nil
	case "rollback-pmd-rw":
		for i := range o.Rollbacks {
			for j := range o.Rollbacks[i].PMDAfter {
				if e := &o.Rollbacks[i].PMDAfter[j]; e.Present && !e.Huge && e.RW {
					e.RW = false
					return true, nil
				}
			}
		}
		return true, fmt.Errorf("corruption %s: no PTE-table PMD in a rollback measurement (is the forkfuzz_pmd module loaded?)", name)
	}
	return false, nil
}

package executor

// Fault injection inside fork (prog.Op.FailNth) and the rollback
// measurements around it (obs.Rollback). Everything here runs in the main
// executor process only (the program validator allows fail_nth only on
// forks of the main process), so it may use the Go runtime, except between
// arming /proc/thread-self/fail-nth and reading it back, where only raw
// system calls run: any allocation there would consume the fault.
//
// This file arms the fault and forks; the measurements are in
// rollback_measure.go, the write pass in writetrap.go, its watchdog in
// watchdog.go, the fault site in kmsg.go and the test-only corruptions in
// rollback_corrupt.go.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
	armBuf   []byte // childfail.go: the child-arm buffer (MAP_SHARED), once mapped
}

// childBuf maps the child-arm buffer once; nil if it cannot (the child
// is then armed from Go, arm).
func (r *rollbackState) childBuf() []byte {
	if r.armBuf == nil {
		b, err := unix.Mmap(-1, 0, prog.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil
		}
		r.armBuf = b
	}
	return r.armBuf
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
	if op.FailNth > 0 || op.OOMMemcg > 0 || op.ChildFail > 0 || op.ChildOOM > 0 {
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
	fd := m.openFailNth(op, f, rb)
	// Coverage: the fork's, not the harness's (as in fork). Priming the
	// stack cache forks twice and the measurement walks every page
	// table: what they record is dropped right before the fork, and what
	// the measurements after it record, when the operation ends. Never a
	// drain between the priming and the fork: it takes most of a second
	// under TCG, time in which other tasks on CPU 0 could take the
	// primed stacks.
	m.kc.drain(m.ks)
	kept := m.kc.mark(m.ks) // the program's, left for the main process's drainer (kcov_async.go)
	forked := uint64(0)     // the fork's PCs, at the fork's return
	defer func() { m.kc.cut(m.ks, forked) }()
	sentinel := false
	if fd >= 0 {
		if why := m.sentinelArm(); why != "" {
			rb.PartUnknown = why
		} else {
			sentinel = true
		}
		defer m.primeStackCache()() // stackcache.go: the same failure sites every run
	}
	m.measureBefore(rb)
	kmsg := -1
	if fd >= 0 {
		kmsg = kmsgOpen()
	}
	lim := m.armParentMemcg(op, f, rb)
	cf := m.armChildFault(op, f, rb)
	a, back, bufs := m.injectArgsFor(op, f, fd, cf, lim)

	cargs := new(cloneArgs)
	if m.fe.on {
		m.fe.before()
	}
	if sentinel {
		m.sentinelTouch()
	}
	m.kc.cut(m.ks, kept)
	m.th.forkBegins() // writers' logs keep what this fork may need (threads.go)
	sigBlockAll(&m.sigAll, &m.sigOld)
	inv := rdtscp()
	var pid, errno, backN, armErr uintptr
	if cf.clim != nil {
		pid, errno = forkIntoGroup(cf.clim, cargs)
	} else {
		pid, errno, backN, armErr = rawForkInjected(a)
	}
	if errno == 0 && pid == 0 {
		m.child(f) // the kernel resets fail-nth in the child (dup_task_struct)
	}
	resp := rdtscp()
	runtime.KeepAlive(bufs)
	forked = m.kc.mark(m.ks)
	m.kc.forkFilled(f, forked)
	if errno != 0 && sentinel {
		rb.Part = m.sentinelProbe() // sentinel.go: before anything else touches memory
	}
	var backErr uintptr
	if int64(backN) < 0 {
		backErr, backN = uintptr(-int64(backN)), 0
	}
	armErr = uintptr(-int64(armErr))
	sigRestore(&m.sigOld)
	m.forkTSC[f] = [2]uint64{inv, resp}
	m.th.forkEnds(inv, resp)
	m.settleChildFault(cf, a, rb, i, f, pid, errno)
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
	injectionDone(rb, fd, kmsg, back, backN, backErr)
	m.recOp(i, errno, uint64(pid), start, end, 0)
	if errno != 0 {
		m.measureAfter(rb, i)
		return
	}
	m.rb.pending[f] = rb
}

// injectionDone closes a fork's fail-nth file fd and kernel log kmsg
// (either -1: not opened) and records in rb what the fault did: the site
// the kernel reported, and the read-back of fail-nth.
func injectionDone(rb *obs.Rollback, fd, kmsg int, back []byte, backN, backErr uintptr) {
	if kmsg >= 0 {
		rb.Site = kmsgSite(kmsg)
		unix.Close(kmsg)
	}
	if fd < 0 {
		return
	}
	unix.Close(fd)
	readBackFailNth(rb, back, backN, backErr)
	// fd >= 0: FaultInjection applied verbose=2, so the kernel reports
	// every injected fault unless the allocation asked it not to
	// (obs.Rollback.Silent).
	rb.Silent = kmsg >= 0 && rb.Injection == obs.InjInjected && rb.Site == ""
}

// openFailNth opens this thread's fail-nth file for a fork that asks for
// fail_nth (-1: none asked, or fault injection unsupported: said in rb
// and as an event).
func (m *machine) openFailNth(op *prog.Op, f int, rb *obs.Rollback) int {
	if op.FailNth <= 0 {
		return -1
	}
	rb.Cause = obs.CauseFailNth
	setup, err := FaultInjection()
	rb.Setup = setup
	fd := -1
	if err == nil {
		fd, err = unix.Open(failNthPath, unix.O_RDWR|unix.O_CLOEXEC, 0) // on this locked thread: thread-self is the forking thread
	}
	if err != nil {
		rb.Injection, rb.Reason = obs.InjUnsupported, err.Error()
		m.rb.events = append(m.rb.events, obs.ForkEvent(obs.EvInjectNotApplied, f, "fork f%d: fail_nth=%d not injected, the fork ran without it: %v", f, op.FailNth, err))
		return -1
	}
	return fd
}

// armParentMemcg puts the parent under a memory cgroup limit for a fork
// with oom_memcg (nil: none asked, or unsupported: said in rb).
func (m *machine) armParentMemcg(op *prog.Op, f int, rb *obs.Rollback) *memcgLimit {
	if op.OOMMemcg <= 0 {
		return nil
	}
	if rb.Cause == obs.CauseKill {
		rb.Cause = obs.CauseOOMMemcg
	}
	q := m.quiesceForLimit()
	lim, what, err := armMemcg(op.OOMMemcg)
	if err != nil {
		q.end()
		rb.Memcg = "unsupported: " + err.Error()
		m.rb.events = append(m.rb.events, obs.ForkEvent(obs.EvInjectNotApplied, f, "fork f%d: oom_memcg=%d not applied, the fork ran without a memory limit: %v", f, op.OOMMemcg, err))
		return nil
	}
	lim.quiet = q
	rb.Setup = append(rb.Setup, what)
	stderrMark(fmt.Sprintf("%s (fork f%d)", limitArmedMarker, f))
	return lim
}

// childFault is a fork's fault for its child (childfail, child_oom):
// arm is nil when none is armed.
type childFault struct {
	hold childHold
	arm  *childArm
	clim *childLimit // child_oom (childoom.go)
	attr string
}

// armChildFault prepares childfail or child_oom (childfail.go): the
// child is armed while it is held off the CPU, by the evidence machinery
// or by hold.
func (m *machine) armChildFault(op *prog.Op, f int, rb *obs.Rollback) *childFault {
	cf := &childFault{attr: fmt.Sprintf("childfail=%d", op.ChildFail)}
	if op.ChildOOM > 0 {
		cf.attr = fmt.Sprintf("child_oom=%d", op.ChildOOM)
	}
	if op.ChildFail <= 0 && op.ChildOOM <= 0 {
		return cf
	}
	rb.Cause = obs.CauseChildFail
	arm := newChildArm(op.ChildFail, -1)
	arm.cf.ChildOOM = op.ChildOOM
	var err error
	if op.ChildFail > 0 {
		rb.Setup, err = FaultInjection()
	} else if cf.clim, err = armChildOOM(op.ChildOOM); err == nil {
		rb.Setup = append(rb.Setup, cf.clim.what)
	}
	if err != nil {
		arm.cf.Injection, arm.cf.Reason = obs.InjUnsupported, err.Error()
		m.rb.events = append(m.rb.events, obs.ForkEvent(obs.EvInjectNotApplied, f, "fork f%d: %s not injected, the child ran without it: %v", f, cf.attr, err))
		rb.Child = arm.cf
		return cf
	}
	arm.kmsg = kmsgOpen()
	if !m.fe.on {
		cf.hold.before()
	}
	cf.arm = arm
	return cf
}

// injectBufs are the buffers injectArgs points to. They must outlive the
// fork: injectArgs holds them as uintptrs, which keep nothing alive (nor
// keep them off injectArgsFor's stack frame, gone by the fork).
type injectBufs struct {
	num  [24]byte // K in decimal
	zero [1]byte  // "0"
}

// injectArgsFor prepares everything the injected fork needs before it
// (see rawForkInjected), and returns the read-back buffer: it lands in
// fork f's slot of the MAP_SHARED control page (bytes 32..55; the child
// only waits on bytes 0..3), which fork does not write-protect. The
// caller keeps bufs alive (runtime.KeepAlive) until the fork returned.
func (m *machine) injectArgsFor(op *prog.Op, f, fd int, cf *childFault, lim *memcgLimit) (a *injectArgs, back []byte, bufs *injectBufs) {
	bufs = new(injectBufs)
	num, zero := &bufs.num, &bufs.zero
	zero[0] = '0'
	back = m.ctl[f*64+32 : f*64+56]
	a = &injectArgs{failFd: -1, memFd: -1, kbuf: uintptr(unsafe.Pointer(&num[0])), zero: uintptr(unsafe.Pointer(&zero[0])),
		back: uintptr(unsafe.Pointer(&back[0])), backLen: int64(len(back))}
	if fd >= 0 {
		a.failFd = int64(fd)
		a.klen = int64(len(strconv.AppendInt(num[:0], int64(op.FailNth), 10)))
	}
	if cf.arm != nil && op.ChildFail > 0 && m.rb.childBuf() != nil {
		// The child's K: kbuf/klen (the parent's fail-nth is not armed).
		a.klen = int64(len(strconv.AppendInt(num[:0], int64(op.ChildFail), 10)))
		prepareAsm(m.rb.armBuf)
		a.child = uintptr(unsafe.Pointer(&m.rb.armBuf[0]))
	}
	if lim != nil {
		a.memFd = int64(lim.fd)
		a.limit, a.limitLen, a.max = uintptr(unsafe.Pointer(&lim.limit[0])), int64(lim.limitN), uintptr(unsafe.Pointer(&lim.max[0]))
	}
	return a, back, bufs
}

// settleChildFault finishes fork op i's child fault after the fork (arms
// the child, lets it run, records what happened) and the evidence's or
// the hold's part of it.
func (m *machine) settleChildFault(cf *childFault, a *injectArgs, rb *obs.Rollback, i, f int, pid, errno uintptr) {
	arm := cf.arm
	if arm != nil && errno == 0 {
		if a.child != 0 {
			arm.fromAsm(m.rb.armBuf, int(pid))
		} else {
			arm.arm(int(pid))
		}
	}
	if arm != nil {
		arm.armed()
		if errno != 0 {
			if arm.kmsg >= 0 {
				unix.Close(arm.kmsg)
			}
			if cf.clim != nil {
				_, rb.Memcg = cf.clim.lift(0, false)
			}
			rb.Child, arm = nil, nil // no child: nothing was armed
		} else if !m.fe.on && !cf.hold.fifo && arm.cf.Ran == "" {
			arm.cf.Ran = "not held off the CPU (" + cf.hold.err + "): the child may have started its copy before it was armed"
		}
	}
	op := &m.p.Ops[i]
	if m.fe.on {
		m.fe.after(m, i, f, int(pid), errno)
	} else if op.ChildFail > 0 || op.ChildOOM > 0 {
		cf.hold.after(int(pid))
	}
	if arm != nil {
		rb.Child = arm.settle(cf.clim)
		if rb.Child.Injection == obs.InjUnsupported {
			m.rb.events = append(m.rb.events, obs.ForkEvent(obs.EvInjectNotApplied, f, "fork f%d: %s not injected, the child ran without it: %s", f, cf.attr, rb.Child.Reason))
		}
	}
}

// readBackFailNth says in rb whether the parent's fail-nth fault was
// injected, from what the file read back after the fork.
func readBackFailNth(rb *obs.Rollback, back []byte, backN, backErr uintptr) {
	if backErr != 0 {
		rb.Injection, rb.Reason = obs.InjUnsupported, fmt.Sprintf("arming or reading back %s failed: %v", failNthPath, unix.Errno(backErr))
		return
	}
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
	child    uintptr // 80: the child-arm buffer (childfail: K is kbuf, klen), or 0
}

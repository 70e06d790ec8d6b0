package executor

// Forking, and the forked child's side of it: the functions that return
// twice (//forkfuzz:fork: in the parent with the child's pid, in the child
// with 0), the fork operation, the child's body and wait, which a child
// runs too for its own children (doc.go).

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// rawFork is clone(SIGCHLD); the child resets its goroutine's stack
// guard (sys_linux_amd64.s, doc.go).
//
//forkfuzz:fork
//forkfuzz:childsafe
func rawFork() (pid, errno uintptr)

// rawForkInjected is the fork with fault injection armed around it, in
// assembly so nothing touches memory in between (failnth_amd64.s; its
// arguments: injectArgs, failnth.go).
//
//forkfuzz:fork
//forkfuzz:childsafe
func rawForkInjected(a *injectArgs) (pid, errno, backN, armErr uintptr)

// rawClone3 is a fork through clone3 (failnth_amd64.s; child_oom:
// childoom.go).
//
//forkfuzz:fork
//forkfuzz:childsafe
func rawClone3(args *cloneArgs, size uintptr) (pid, errno uintptr)

// forkIntoGroup forks the child into l's memory cgroup (childoom.go).
//
//forkfuzz:fork
//forkfuzz:childsafe
func forkIntoGroup(l *childLimit, args *cloneArgs) (pid, errno uintptr) {
	*args = cloneArgs{flags: cloneIntoCgroup, exitSignal: uint64(unix.SIGCHLD), cgroup: uint64(l.dirFd)}
	return rawClone3(args, unsafe.Sizeof(*args))
}

// fork runs a fork operation. In the child it never returns.
//
//forkfuzz:childsafe
func (m *machine) fork(i, f int, start int64) {
	ev := m.fe.on && !m.inChild
	hold := m.p.Ops[i].Hold > 0 && !m.inChild && m.proc == 0
	if hold && !ev {
		m.held.h.before()
	}
	// Coverage: the fork's, not the harness's around it. The census
	// reads page flags and smaps, the evidence walks page tables: what
	// they record is dropped (kcov.go, cut), which also spares a drain
	// of millions of PCs (most of a second under TCG).
	m.kc.drain(m.ks)
	kept := m.kc.mark(m.ks) // the program's, left for the main process's drainer (kcov_async.go)
	if ev {
		m.fe.before()
	}
	census := m.census != nil && !m.inChild && m.proc == 0
	if census {
		t := m.now()
		m.census.before(m, f)
		m.addWork(workCensus, t)
	}
	m.kc.cut(m.ks, kept)
	if !m.inChild && m.proc == 0 {
		m.th.forkBegins() // writers' logs keep what this fork may need (threads.go)
	}
	sigBlockAll(&m.sigAll, &m.sigOld)
	inv := rdtscp()
	pid, errno := rawFork()
	if errno == 0 && pid == 0 {
		m.child(f)
	}
	resp := rdtscp()
	forked := m.kc.mark(m.ks)
	if !m.inChild && m.proc == 0 {
		m.kc.forkFilled(f, forked)
	}
	sigRestore(&m.sigOld)
	if !m.inChild {
		m.forkTSC[f] = [2]uint64{inv, resp}
		if m.proc == 0 {
			m.th.forkEnds(inv, resp)
		}
	}
	// The evidence first, while the child is still held off the CPU:
	// the census reads every region's page tables and can block (the
	// mmap lock), and a parent that blocks lets the child run.
	if ev {
		t := m.now()
		m.fe.look(m, i, f, int(pid), errno)
		m.addWork(workEvidence, t)
	}
	if census {
		// A hold skips the census's second scan: its reads of pagemap can
		// block the parent, and a parent that blocks lets the child run.
		t := m.now()
		m.census.after(m, errno == 0 && !hold)
		m.addWork(workCensus, t)
	}
	if hold {
		m.keepHeld(i, int(pid), errno, ev)
	} else if ev {
		m.fe.release(int(pid), errno)
	}
	// Not before the evidence: under Async-fork the child's deferred
	// copy runs meanwhile, and a drain takes most of a second under TCG.
	m.kc.cut(m.ks, forked)
	m.kc.drain(m.ks)
	end := m.now()
	if errno == 0 {
		m.pids[f] = int(pid)
	}
	m.recOp(i, errno, uint64(pid), start, end, 0)
}

// child is the body of the child of fork f: wait to be released, look,
// run its operations, exit.
//
//forkfuzz:childsafe
func (m *machine) child(f int) {
	m.inChild = true
	m.proc = f + 1
	m.ks = childSlot(f)
	for j := range m.pids {
		m.pids[j] = 0
	}
	sys2(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL))
	if m.kc != nil {
		m.kc.op = -1 // not the parent's fork: the child's own ops follow
	}
	m.kc.enableChild(f)
	m.kc.forgetCache()
	if m.um != nil {
		m.um.fd = -1 // the inherited one is the parent's (child_uffd.go)
	}
	w := uintptr(unsafe.Pointer(&m.ctl[f*64]))
	for atomic.LoadUint32((*uint32)(unsafe.Pointer(&m.ctl[f*64]))) == 0 {
		rawSyscall6(unix.SYS_FUTEX, w, futexWait, 0, 0, 0, 0)
	}
	m.view(obs.AtStart)
	m.kc.drain(m.ks)
	m.runProc(f + 1)
	m.kc.drain(m.ks)
	m.kc.disableChild(m.ks)
	sysExit(0)
}

// wait releases the child of fork f and reaps it.
//
//forkfuzz:childsafe
func (m *machine) wait(f int) (uint64, uintptr) {
	pid := m.pids[f]
	if pid <= 0 {
		return 0, uintptr(unix.ECHILD)
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&m.ctl[f*64])), 1)
	sys3(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&m.ctl[f*64])), futexWake, 1)
	for {
		var e uintptr
		if m.inChild {
			_, e = rawSyscall6(unix.SYS_WAIT4, uintptr(pid), uintptr(unsafe.Pointer(&m.status)), 0, 0, 0, 0)
		} else {
			e = blockingWait4(pid, &m.status)
		}
		if e == uintptr(unix.EINTR) {
			continue
		}
		m.pids[f] = 0
		return uint64(uint32(m.status)), e
	}
}

// pauseForever is the body of a stack-cache sponge child: it waits until
// SIGKILL ends it (other signals are blocked).
//
//forkfuzz:childsafe
func pauseForever() {
	for {
		sys1(unix.SYS_PAUSE, 0)
	}
}

package executor

// Fault injection into the child's side of a fork (prog.Op.ChildFail).
// Under Async-fork the child copies the PMD and PTE levels of the
// parent's page tables in its own context (schedule_tail) before it first
// returns to user space; the parent's fail-nth cannot reach that (fork
// resets the child's fail-nth), and make-it-fail with probability and
// interval counts every task's allocations in one global counter. So the
// parent arms the child itself, right after fork returned and while the
// child is still held off the CPU (pinned to the parent's CPU, the parent
// SCHED_FIFO; the evidence machinery of forkimpl.go does the same):
//
//  1. kill(child, SIGSTOP): the child stops on its way to user space,
//     after everything the kernel does for it before that, and before it
//     runs a single user instruction;
//  2. write K to /proc/CHILD/task/CHILD/fail-nth: the K-th failure point
//     of the child's own context fails (failslab and fail_page_alloc
//     with the settings of FaultInjection, verbose=2 so the kernel logs
//     the failing stack);
//  3. let the child run, waitid(WSTOPPED|WEXITED|WNOWAIT): it either
//     stopped (it survived everything before user space) or died there;
//  4. read the child's fail-nth back (a zombie's /proc entry is still
//     there): 0 means the fault was injected, else the child passed
//     K-remaining failure points; write 0 (disarm); read the kernel log
//     for the site and whose stack it was; SIGCONT a stopped child.
//
// Main process only; the parent may use the Go runtime throughout (its
// own fail-nth is not armed).

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// childHold keeps a new child off the CPU when the evidence machinery
// does not (no --fork-impl): the parent pins itself to its CPU and runs
// SCHED_FIFO (with SCHED_RESET_ON_FORK: the child is SCHED_OTHER on the
// same CPU, so it cannot run while the parent is runnable).
type childHold struct {
	orig         unix.CPUSet
	pinned, fifo bool
	err          string
}

func (h *childHold) before() {
	*h = childHold{}
	if err := unix.SchedGetaffinity(0, &h.orig); err != nil {
		h.err = "sched_getaffinity: " + err.Error()
		return
	}
	var cpu uint32
	if _, errno := sys3(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); errno != 0 {
		h.err = "getcpu: " + unix.Errno(errno).Error()
		return
	}
	var one unix.CPUSet
	one.Set(int(cpu))
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		h.err = "sched_setaffinity: " + err.Error()
		return
	}
	h.pinned = true
	p := schedParam{prio: 1}
	if _, errno := sys3(unix.SYS_SCHED_SETSCHEDULER, 0, unix.SCHED_FIFO|unix.SCHED_RESET_ON_FORK, uintptr(unsafe.Pointer(&p))); errno != 0 {
		h.err = "sched_setscheduler SCHED_FIFO: " + unix.Errno(errno).Error()
		return
	}
	h.fifo = true
}

func (h *childHold) after(pid int) {
	if h.fifo {
		p := schedParam{}
		sys3(unix.SYS_SCHED_SETSCHEDULER, 0, schedOther, uintptr(unsafe.Pointer(&p)))
	}
	if h.pinned {
		if pid > 0 {
			unix.SchedSetaffinity(pid, &h.orig)
		}
		unix.SchedSetaffinity(0, &h.orig)
	}
}

// childArm is an armed child: what armChild did, for settle. It is
// allocated before the fork: between the fork and the write that arms
// the child, the parent makes only raw system calls on these buffers (an
// allocation could start a garbage collection, whose stop-the-world may
// block the parent and let the child run, and copy, unarmed).
type childArm struct {
	cf    *obs.ChildFault
	pid   int
	fd    int // the child's fail-nth, or -1
	kmsg  int
	k     [24]byte
	kn    int
	path  [64]byte // /proc/PID/task/PID/fail-nth
	stat  [64]byte // /proc/PID/schedstat
	buf   [128]byte
	ran   bool
	err   uintptr
	where string
}

func newChildArm(k, kmsg int) *childArm {
	a := &childArm{cf: &obs.ChildFault{FailNth: k}, fd: -1, kmsg: kmsg}
	if k > 0 {
		a.kn = len(strconv.AppendInt(a.k[:0], int64(k), 10))
	}
	return a
}

// putPath writes "/proc/PID" + rest + NUL into dst (no allocation).
func putPath(dst []byte, pid int, rest string) {
	n := copy(dst, "/proc/")
	n += len(strconv.AppendInt(dst[n:n], int64(pid), 10))
	for i := 0; i < len(rest); i++ {
		if rest[i] == '#' {
			n += len(strconv.AppendInt(dst[n:n], int64(pid), 10))
			continue
		}
		dst[n] = rest[i]
		n++
	}
	dst[n] = 0
}

// arm runs in the parent right after fork returned pid, while the child
// is held off the CPU (steps 1 and 2 above): raw system calls only. For
// childfail, rawForkInjected does the same in assembly (fromAsm), before
// the parent's first store after clone (a store to the stack, which fork
// write-protected, faults, and under Async-fork copies a PMD to the child
// and can block on the mmap lock while Go runtime threads fault too:
// then the child ran, and might have copied, before it was armed, often
// on a loaded machine: docs/executor.md); child_oom uses this one (its
// child is limited from birth; SIGSTOP only has to come before user
// space).
func (a *childArm) arm(pid int) {
	a.pid = pid
	if _, a.err = sys2(unix.SYS_KILL, uintptr(pid), uintptr(unix.SIGSTOP)); a.err != 0 {
		a.where = "SIGSTOP to the child"
		return
	}
	putPath(a.path[:], pid, "/task/#/fail-nth")
	putPath(a.stat[:], pid, "/schedstat")
	fd := ^uintptr(0)
	if a.kn > 0 {
		var e uintptr
		fd, e = rawSyscall6(unix.SYS_OPENAT, uintptr(atFdcwd), uintptr(unsafe.Pointer(&a.path[0])), unix.O_RDWR|unix.O_CLOEXEC, 0, 0, 0)
		if e != 0 {
			a.err, a.where = e, "open the child's fail-nth"
			return
		}
	}
	// Whether the child has been on a CPU yet, read right before the
	// write that arms it: if it has, it may have passed failure points
	// unarmed (its schedstat's third field counts its runs).
	if sf, e := rawSyscall6(unix.SYS_OPENAT, uintptr(atFdcwd), uintptr(unsafe.Pointer(&a.stat[0])), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0); e == 0 {
		n, e := rawSyscall6(unix.SYS_READ, sf, uintptr(unsafe.Pointer(&a.buf[0])), uintptr(len(a.buf)), 0, 0, 0)
		rawSyscall6(unix.SYS_CLOSE, sf, 0, 0, 0, 0, 0)
		if e == 0 && int(n) > 0 && int(n) <= len(a.buf) {
			b := a.buf[:n]
			for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
				b = b[:len(b)-1]
			}
			a.ran = len(b) > 0 && b[len(b)-1] != '0' || len(b) > 1 && b[len(b)-2] != ' '
		}
	}
	if a.kn == 0 {
		return // child_oom: nothing to write
	}
	if _, e := rawSyscall6(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&a.k[0])), uintptr(a.kn), 0, 0, 0); e != 0 {
		rawSyscall6(unix.SYS_CLOSE, fd, 0, 0, 0, 0, 0)
		a.err, a.where = e, "write the child's fail-nth"
		return
	}
	a.fd = int(fd)
}

// Layout of the child-arm buffer of rawForkInjected (failnth_amd64.s), a
// MAP_SHARED page (fork does not write-protect it): the path at 0 (Go
// writes "/proc/", the assembly the pid and a suffix), kill's result at
// 40, the fail-nth open's at 48 (fd or -errno), the write's at 56, the
// child's schedstat at 64..190, the suffixes "/schedstat" at 192 and
// "/fail-nth" at 208, the pid's digits at 224..247.
const (
	armKill   = 40
	armOpen   = 48
	armWrite  = 56
	armStat   = 64
	armSufSt  = 192
	armSufNth = 208
	armBufLen = 256
)

// prepareAsm readies buf for rawForkInjected to arm the child.
func prepareAsm(buf []byte) {
	clear(buf[:armBufLen])
	copy(buf, "/proc/")
	copy(buf[armSufSt:], "/schedstat\x00")
	copy(buf[armSufNth:], "/fail-nth\x00")
}

// fromAsm takes what rawForkInjected did to arm the child pid.
func (a *childArm) fromAsm(buf []byte, pid int) {
	a.pid = pid
	word := func(off int) int64 { return *(*int64)(unsafe.Pointer(&buf[off])) }
	if e := word(armKill); e < 0 {
		a.err, a.where = uintptr(-e), "SIGSTOP to the child"
		return
	}
	if fd := word(armOpen); fd < 0 {
		a.err, a.where = uintptr(-fd), "open the child's fail-nth"
		return
	} else {
		a.fd = int(fd)
	}
	if n := word(armWrite); n < 0 {
		unix.Close(a.fd)
		a.fd = -1
		a.err, a.where = uintptr(-n), "write the child's fail-nth"
		return
	}
	st := strings.Fields(string(buf[armStat : armStat+clen(buf[armStat:armSufSt])]))
	copy(a.buf[:], buf[armStat:armSufSt])
	a.ran = len(st) == 3 && st[2] != "0"
}

// armed finishes arm's bookkeeping once the Go runtime may be used again.
func (a *childArm) armed() {
	switch {
	case a.err != 0:
		a.cf.Injection, a.cf.Reason = obs.InjUnsupported, fmt.Sprintf("%s (/proc/%d/task/%d/fail-nth): %v", a.where, a.pid, a.pid, unix.Errno(a.err))
	case a.ran && a.kn == 0:
		// child_oom: limited from birth; only SIGSTOP came late.
		a.cf.Ran = "the child had been on a CPU before it was sent SIGSTOP (it may have reached user space under its limit): schedstat " + strings.TrimSpace(string(a.buf[:clen(a.buf[:])]))
	case a.ran:
		a.cf.Ran = "the child had been on a CPU before it was armed: schedstat " + strings.TrimSpace(string(a.buf[:clen(a.buf[:])]))
	}
}

func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}

// settle waits for the armed child to stop on its way to user space or
// to die, and records what happened (steps 3 and 4 above). The child
// must be free to run by now.
// lim is the child_oom limit (nil for childfail).
func (a *childArm) settle(lim *childLimit) *obs.ChildFault {
	cf := a.cf
	if a.kmsg >= 0 {
		defer unix.Close(a.kmsg)
	}
	if cf.Injection == obs.InjUnsupported {
		// SIGSTOP may have been sent before arming failed.
		if lim != nil {
			_, cf.Memcg = lim.lift(a.pid, true)
		}
		sys2(unix.SYS_KILL, uintptr(a.pid), uintptr(unix.SIGCONT))
		return cf
	}
	if a.fd >= 0 {
		defer unix.Close(a.fd)
	}
	var info [128]byte
	for {
		_, _, e := unix.Syscall6(unix.SYS_WAITID, 1 /* P_PID */, uintptr(a.pid), uintptr(unsafe.Pointer(&info[0])),
			unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			cf.Injection, cf.Reason = obs.InjUnsupported, "waitid for the armed child: "+e.Error()
			return cf
		}
		break
	}
	// siginfo_t: si_signo 0, si_errno 4, si_code 8, si_pid 16, si_uid 20, si_status 24.
	code := *(*int32)(unsafe.Pointer(&info[8]))
	status := int(*(*int32)(unsafe.Pointer(&info[24])))
	switch code {
	case 5: // CLD_STOPPED
		cf.Outcome = obs.ChildStopped
	case 2, 3: // CLD_KILLED, CLD_DUMPED
		cf.Outcome, cf.Signal = obs.ChildDied, status
	case 1: // CLD_EXITED
		cf.Outcome, cf.Status = obs.ChildDied, status
	default:
		cf.Outcome = fmt.Sprintf("waitid si_code %d status %d", code, status)
	}
	if lim != nil {
		var hit bool
		hit, cf.Memcg = lim.lift(a.pid, cf.Outcome == obs.ChildStopped)
		cf.Injection = obs.InjNotReached
		if hit {
			cf.Injection = obs.InjInjected
		}
	}
	var buf [24]byte
	n, err := 0, error(nil)
	if a.fd >= 0 {
		n, err = unix.Pread(a.fd, buf[:], 0)
		unix.Pwrite(a.fd, []byte("0"), 0)
	}
	left, perr := strconv.Atoi(strings.TrimSpace(string(buf[:max(n, 0)])))
	switch {
	case lim != nil:
	case err != nil || perr != nil:
		cf.Injection, cf.Reason = obs.InjUnsupported, fmt.Sprintf("reading the child's fail-nth back: %q %v", buf[:max(n, 0)], err)
	case left == 0:
		cf.Injection = obs.InjInjected
	default:
		cf.Injection, cf.Remaining = obs.InjNotReached, left
	}
	if a.kmsg >= 0 {
		lines := kmsgReport(a.kmsg)
		cf.Site = ParseFaultSite(lines)
		cf.Phase = FaultPhase(lines, a.pid)
		// Read after the child stopped or died: its report, if any, is
		// whole (a child_oom limit reports none of its own).
		cf.Silent = lim == nil && cf.Injection == obs.InjInjected && cf.Site == ""
	}
	if cf.Outcome == obs.ChildStopped {
		sys2(unix.SYS_KILL, uintptr(a.pid), uintptr(unix.SIGCONT))
	}
	return cf
}

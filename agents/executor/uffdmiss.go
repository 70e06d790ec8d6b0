package executor

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// A program with uffdreg or uffdunreg gets a fault handler process
// (child_uffd.go): forked from the executor before the program's regions
// are mapped, so it shares none of their pages (a fork would make them
// COW-shared and change what the program's own forks see), and killed
// when the program is over. The handler is a process, not a thread: a
// thread of this Go process blocked in a page fault cannot be stopped by
// the runtime, and a handler thread returning from a system call during a
// stop-the-world would wait for it forever.

// The kernel's struct sizes (child_uffd.go).
var (
	_ = [1]struct{}{}[unsafe.Sizeof(uffdioCopyArg{})-40]
	_ = [1]struct{}{}[unsafe.Sizeof(uffdioZeropageArg{})-32]
	_ = [1]struct{}{}[unsafe.Sizeof(pollFd{})-8]
	_ = [1]struct{}{}[unsafe.Sizeof(msgHdr{})-56]
)

// uffdMissErrno is what a MISSING registration of a scratch page answers
// (0: uffdreg can run; EPERM: vm.unprivileged_userfaultfd=0 and no
// CAP_SYS_PTRACE; ENOSYS: no CONFIG_USERFAULTFD).
var uffdMissErrno = probeUffdMissing()

func probeUffdMissing() uintptr {
	a, done, e := probePage()
	defer done()
	if e != 0 {
		return e
	}
	fd, e := uffdOpenRaw()
	if e != 0 {
		return e
	}
	defer unix.Close(fd)
	reg := uffdioRegisterArg{rng: uffdioRange{start: uint64(a), len: prog.PageSize}, mode: uffdioRegisterModeMissing}
	_, e = sys3(unix.SYS_IOCTL, uintptr(fd), uffdioRegister, uintptr(unsafe.Pointer(&reg)))
	return e
}

// usesUffd reports whether p has a uffdreg or uffdunreg.
func usesUffd(p *prog.Program) bool {
	for _, op := range p.Ops {
		if op.Kind == prog.OpUffdReg || op.Kind == prog.OpUffdUnreg {
			return true
		}
	}
	return false
}

// startUffd opens the main process's userfaultfd and starts the handler
// when the program needs them. On failure m.um stays nil and m.umErr
// says why (the operations are then skipped with it).
func (m *machine) startUffd() {
	m.um, m.umErr = nil, uffdMissErrno
	if !usesUffd(m.p) || uffdMissErrno != 0 {
		return
	}
	socks, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		m.umErr = uintptr(err.(unix.Errno))
		return
	}
	fd, e := uffdOpenRaw()
	if e != 0 {
		unix.Close(socks[0])
		unix.Close(socks[1])
		m.umErr = e
		return
	}
	u := &uffdMiss{fd: fd, sock: socks[0], srvSock: socks[1]}
	pid, e := m.forkUffdServer(u)
	unix.Close(socks[1])
	if e != 0 {
		unix.Close(socks[0])
		unix.Close(fd)
		m.umErr = e
		return
	}
	u.pid = int(pid)
	m.um = u
}

// forkUffdServer forks the handler with every signal blocked (only
// SIGKILL reaches it).
func (m *machine) forkUffdServer(u *uffdMiss) (uintptr, uintptr) {
	sigBlockAll(&m.sigAll, &m.sigOld)
	pid, errno := rawFork()
	if errno == 0 && pid == 0 {
		uffdServe(u)
	}
	sigRestore(&m.sigOld)
	return pid, errno
}

// stopUffd kills and reaps the handler and closes the program's
// userfaultfd, once the program's regions are unmapped (nothing can wait
// for a fault any more).
func (m *machine) stopUffd() {
	u := m.um
	if u == nil {
		return
	}
	m.um = nil
	unix.Kill(u.pid, unix.SIGKILL)
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(u.pid, &ws, 0, nil); err != unix.EINTR {
			break
		}
	}
	unix.Close(u.sock)
	unix.Close(u.fd)
}

package executor

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// uffdreg and uffdunreg (fuzz/prog/vmaops.go) as the main process, its
// threads and its children run them, and the fault handler process that
// resolves their missing-page faults (uffdmiss.go starts and stops it).
// Raw system calls only (doc.go).

const (
	uffdioRegisterModeMissing = 1 << 0 // UFFDIO_REGISTER_MODE_MISSING
	uffdEventPagefault        = 0x12   // UFFD_EVENT_PAGEFAULT
	uffdMsgSize               = 32     // sizeof(struct uffd_msg)
	// Ioctl numbers (include/uapi/linux/userfaultfd.h):
	//   UFFDIO_WAKE     = _IOR (0xAA, 0x02, struct uffdio_range)    (16 bytes)
	//   UFFDIO_COPY     = _IOWR(0xAA, 0x03, struct uffdio_copy)     (40 bytes)
	//   UFFDIO_ZEROPAGE = _IOWR(0xAA, 0x04, struct uffdio_zeropage) (32 bytes)
	uffdioWake     = 2<<30 | 16<<16 | 0xAA<<8 | 0x02 // 0x8010aa02
	uffdioCopy     = 3<<30 | 40<<16 | 0xAA<<8 | 0x03 // 0xc028aa03
	uffdioZeropage = 3<<30 | 32<<16 | 0xAA<<8 | 0x04 // 0xc020aa04
	// uffdMaxFds bounds the userfaultfds the handler serves in one
	// program: the main process's and one per child that registers.
	uffdMaxFds = 1 + prog.MaxForks
	uffdHuge   = 2 << 20
)

// uffdioCopyArg is struct uffdio_copy; uffdioZeropageArg struct
// uffdio_zeropage.
type uffdioCopyArg struct {
	dst, src, len, mode uint64
	copied              int64
}

type uffdioZeropageArg struct {
	rng      uffdioRange
	mode     uint64
	zeropage int64
}

// pollFd is struct pollfd; msgHdr struct msghdr; iovec struct iovec.
type pollFd struct {
	fd            int32
	events, revts int16
}

type msgHdr struct {
	name       uint64
	namelen    uint32
	_          uint32
	iov        uint64
	iovlen     uint64
	control    uint64
	controllen uint64
	flags      int32
	_          uint32
}

type iovec struct{ base, len uint64 }

// uffdMiss is a program's userfaultfd state. The handler process and
// every child work on their own copy of it (fork copies it): fd is the
// calling process's userfaultfd (-1 until a child's first uffdreg or
// uffdunreg opens its own), sock the executor's end of the socket the
// children hand theirs to the handler through.
type uffdMiss struct {
	fd   int
	sock int
	// The handler's side: its socket end, the descriptors it polls, a
	// 2 MiB zero source for hugetlb faults, and buffers for recvmsg.
	srvSock int
	pfds    [uffdMaxFds + 1]pollFd
	npfd    int
	zero    uintptr
	msg     [uffdMsgSize]byte
	hdr     msgHdr
	iov     iovec
	one     [1]byte
	ctl     [24]byte // CMSG_SPACE(sizeof(int))
	pid     int
	// failFill (tests only) is the errno every fill fails with
	// instead of being tried (resolve).
	failFill uintptr
}

// uffdOp runs uffdreg or uffdunreg at addr. skip is obs.SkipNoUffdMissing
// when the process has no userfaultfd with a handler behind it.
//
//forkfuzz:childsafe
func (m *machine) uffdOp(op *prog.Op, addr uintptr) (errno uintptr, skip int) {
	u := m.um
	if u == nil {
		return m.umErr, obs.SkipNoUffdMissing
	}
	if u.fd < 0 {
		if e := u.openOwn(); e != 0 {
			return e, obs.SkipNoUffdMissing
		}
	}
	if op.Kind == prog.OpUffdUnreg {
		r := uffdioRange{start: uint64(addr), len: op.Len}
		_, errno = sys3(unix.SYS_IOCTL, uintptr(u.fd), uffdioUnregister, uintptr(unsafe.Pointer(&r)))
		return errno, 0
	}
	reg := uffdioRegisterArg{rng: uffdioRange{start: uint64(addr), len: op.Len}, mode: uffdioRegisterModeMissing}
	_, errno = sys3(unix.SYS_IOCTL, uintptr(u.fd), uffdioRegister, uintptr(unsafe.Pointer(&reg)))
	return errno, 0
}

// uffdOpenRaw opens a userfaultfd that also takes faults the kernel
// takes on the process's behalf (no UFFD_USER_MODE_ONLY: a MADV_POPULATE
// or mlock of a registered range waits for the handler instead of
// failing) and does UFFDIO_API without features.
//
//forkfuzz:childsafe
func uffdOpenRaw() (int, uintptr) {
	r, e := sys1(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|unix.O_NONBLOCK)
	if e != 0 {
		return -1, e
	}
	if _, e := uffdAPICall(int(r), 0); e != 0 {
		sys1(unix.SYS_CLOSE, r)
		return -1, e
	}
	return int(r), 0
}

// openOwn gives a child its own userfaultfd (the one it inherited is its
// parent's: its registrations would be the parent's) and hands a copy to
// the handler (sendmsg, SCM_RIGHTS).
//
//forkfuzz:childsafe
func (u *uffdMiss) openOwn() uintptr {
	fd, e := uffdOpenRaw()
	if e != 0 {
		return e
	}
	u.prepMsg()
	// struct cmsghdr {len u64; level i32; type i32} then the int.
	*(*uint64)(unsafe.Pointer(&u.ctl[0])) = 20 // CMSG_LEN(sizeof(int))
	*(*int32)(unsafe.Pointer(&u.ctl[8])) = unix.SOL_SOCKET
	*(*int32)(unsafe.Pointer(&u.ctl[12])) = unix.SCM_RIGHTS
	*(*int32)(unsafe.Pointer(&u.ctl[16])) = int32(fd)
	if _, e := sys3(unix.SYS_SENDMSG, uintptr(u.sock), uintptr(unsafe.Pointer(&u.hdr)), 0); e != 0 {
		sys1(unix.SYS_CLOSE, uintptr(fd))
		return e
	}
	u.fd = fd
	return 0
}

// prepMsg points hdr at one data byte and the control buffer.
//
//forkfuzz:childsafe
func (u *uffdMiss) prepMsg() {
	u.iov = iovec{base: uint64(uintptr(unsafe.Pointer(&u.one[0]))), len: 1}
	u.hdr = msgHdr{iov: uint64(uintptr(unsafe.Pointer(&u.iov))), iovlen: 1,
		control: uint64(uintptr(unsafe.Pointer(&u.ctl[0]))), controllen: uint64(len(u.ctl))}
}

// uffdServe is the body of the fault handler process: it polls the main
// process's userfaultfd, those children hand it and its socket, and
// answers every missing-page fault with zeros: UFFDIO_ZEROPAGE, or on
// hugetlb (which has no zeropage) UFFDIO_COPY of a zero 2 MiB page. It
// never returns: SIGKILL ends it (uffdmiss.go; PDEATHSIG too).
//
//forkfuzz:childsafe
func uffdServe(u *uffdMiss) {
	sys2(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL))
	a, e := sysMmap(0, uffdHuge, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE, -1, 0)
	if e == 0 {
		u.zero = a
	}
	u.pfds[0] = pollFd{fd: int32(u.srvSock), events: unix.POLLIN}
	u.pfds[1] = pollFd{fd: int32(u.fd), events: unix.POLLIN}
	u.npfd = 2
	for {
		if _, e := sys3(unix.SYS_POLL, uintptr(unsafe.Pointer(&u.pfds[0])), uintptr(u.npfd), ^uintptr(0)); e != 0 {
			continue // EINTR
		}
		if u.pfds[0].revts&unix.POLLIN != 0 {
			u.accept()
		} else if u.pfds[0].revts&(unix.POLLHUP|unix.POLLERR) != 0 {
			sysExit(0) // every executor end is closed
		}
		for k := 1; k < u.npfd; k++ {
			switch r := u.pfds[k].revts; {
			case r&unix.POLLIN != 0:
				u.drainFaults(int(u.pfds[k].fd))
			case r&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0:
				u.pfds[k].fd = -1 // poll skips it from now on
			}
		}
	}
}

// accept takes a userfaultfd a child sent.
//
//forkfuzz:childsafe
func (u *uffdMiss) accept() {
	u.prepMsg()
	n, e := sys3(unix.SYS_RECVMSG, uintptr(u.srvSock), uintptr(unsafe.Pointer(&u.hdr)), unix.MSG_DONTWAIT)
	if e != 0 || n == 0 || u.hdr.controllen < 20 {
		return
	}
	fd := *(*int32)(unsafe.Pointer(&u.ctl[16]))
	if u.npfd >= len(u.pfds) {
		sys1(unix.SYS_CLOSE, uintptr(fd))
		return
	}
	u.pfds[u.npfd] = pollFd{fd: fd, events: unix.POLLIN}
	u.npfd++
}

// drainFaults reads fd's messages until none is left and resolves each
// page fault.
//
//forkfuzz:childsafe
func (u *uffdMiss) drainFaults(fd int) {
	for {
		n, e := sys3(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&u.msg[0])), uffdMsgSize)
		if e != 0 || n != uffdMsgSize {
			return
		}
		if u.msg[0] == uffdEventPagefault {
			u.resolve(fd, uintptr(*(*uint64)(unsafe.Pointer(&u.msg[16]))))
		}
	}
}

// resolve fills the missing page at addr with zeros and wakes whoever
// waits for it. A fill that fails for any reason but EEXIST (filled
// meanwhile) would fail again for the retried fault, forever: an
// executor hang that the replays would blame on the kernel. So the range
// is unregistered before the wake, and the retried fault is an ordinary
// one, as without userfaultfd: it gets a zero page, or fails as it would
// have (SIGBUS for a hugetlb page that cannot be had).
//
//forkfuzz:childsafe
func (u *uffdMiss) resolve(fd int, addr uintptr) {
	pg := addr &^ (prog.PageSize - 1)
	r := uffdioRange{start: uint64(pg), len: prog.PageSize}
	z := uffdioZeropageArg{rng: r}
	e := u.fill(fd, uffdioZeropage, uintptr(unsafe.Pointer(&z)))
	if e == 0 {
		return
	}
	if e == uintptr(unix.EINVAL) && u.zero != 0 {
		// hugetlb: UFFDIO_ZEROPAGE is EINVAL there.
		hp := addr &^ (uffdHuge - 1)
		c := uffdioCopyArg{dst: uint64(hp), src: uint64(u.zero), len: uffdHuge}
		if e = u.fill(fd, uffdioCopy, uintptr(unsafe.Pointer(&c))); e == 0 {
			return
		}
		r = uffdioRange{start: uint64(hp), len: uffdHuge}
	}
	if e != uintptr(unix.EEXIST) {
		if _, ue := sys3(unix.SYS_IOCTL, uintptr(fd), uffdioUnregister, uintptr(unsafe.Pointer(&r))); ue == uintptr(unix.EINVAL) && r.len == prog.PageSize {
			// A hugetlb range is unregistered whole huge pages at a
			// time (no zero source to fill it with: u.zero).
			r = uffdioRange{start: uint64(addr &^ (uffdHuge - 1)), len: uffdHuge}
			sys3(unix.SYS_IOCTL, uintptr(fd), uffdioUnregister, uintptr(unsafe.Pointer(&r)))
		}
	}
	sys3(unix.SYS_IOCTL, uintptr(fd), uffdioWake, uintptr(unsafe.Pointer(&r)))
}

// fill runs one filling ioctl (UFFDIO_ZEROPAGE, UFFDIO_COPY) on fd.
//
//forkfuzz:childsafe
func (u *uffdMiss) fill(fd int, req, arg uintptr) uintptr {
	if u.failFill != 0 {
		return u.failFill
	}
	_, e := sys3(unix.SYS_IOCTL, uintptr(fd), req, arg)
	return e
}

package executor

// Raw, allocation-free helpers for two kernel facilities that interact with
// fork() in interesting ways: io_uring fixed (pinned) buffers and
// userfaultfd asynchronous write protection. Like child_sys.go, everything here
// makes only raw system calls (rawSyscall6), allocates nothing, stores no Go
// pointers and calls nothing in the runtime (sync/atomic loads and stores
// are compiler intrinsics), so a forked child may call it. The kernel ABI
// structs are defined here by hand, byte for byte as in the kernel's
// include/uapi/linux/io_uring.h and include/uapi/linux/userfaultfd.h;
// golang.org/x/sys/unix has only the system call numbers. Sizes are checked
// at compile time below and offsets in pinsys_test.go.

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ---------------------------------------------------------------------------
// io_uring

// io_uring constants (include/uapi/linux/io_uring.h).
const (
	ioringOpReadFixed  = 4 // IORING_OP_READ_FIXED
	ioringOpWriteFixed = 5 // IORING_OP_WRITE_FIXED

	ioringFeatSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP

	ioringEnterGetevents = 1 << 0 // IORING_ENTER_GETEVENTS

	ioringRegisterBuffers   = 0 // IORING_REGISTER_BUFFERS
	ioringUnregisterBuffers = 1 // IORING_UNREGISTER_BUFFERS

	ioringOffSqRing = 0x0        // IORING_OFF_SQ_RING
	ioringOffCqRing = 0x8000000  // IORING_OFF_CQ_RING
	ioringOffSqes   = 0x10000000 // IORING_OFF_SQES

	ioUringSqeSize = 64 // sizeof(struct io_uring_sqe) without IORING_SETUP_SQE128
	ioUringCqeSize = 16 // sizeof(struct io_uring_cqe) without IORING_SETUP_CQE32
)

// ioSqringOffsets is struct io_sqring_offsets (40 bytes).
type ioSqringOffsets struct {
	head        uint32
	tail        uint32
	ringMask    uint32
	ringEntries uint32
	flags       uint32
	dropped     uint32
	array       uint32
	resv1       uint32
	userAddr    uint64 // resv2 before Linux 6.5
}

// ioCqringOffsets is struct io_cqring_offsets (40 bytes).
type ioCqringOffsets struct {
	head        uint32
	tail        uint32
	ringMask    uint32
	ringEntries uint32
	overflow    uint32
	cqes        uint32
	flags       uint32
	resv1       uint32
	userAddr    uint64 // resv2 before Linux 6.5
}

// ioUringParams is struct io_uring_params (120 bytes).
type ioUringParams struct {
	sqEntries    uint32
	cqEntries    uint32
	flags        uint32
	sqThreadCPU  uint32
	sqThreadIdle uint32
	features     uint32
	wqFd         uint32
	resv         [3]uint32
	sqOff        ioSqringOffsets
	cqOff        ioCqringOffsets
}

// ioUringSqe is struct io_uring_sqe (64 bytes), with the unions reduced to
// the members the read/write opcodes use.
type ioUringSqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64 // union: off, addr2, cmd_op
	addr        uint64 // union: addr, splice_off_in
	len         uint32
	rwFlags     uint32 // union: rw_flags, fsync_flags, ...
	userData    uint64
	bufIndex    uint16 // union: buf_index, buf_group
	personality uint16
	spliceFdIn  int32 // union: splice_fd_in, file_index, ...
	addr3       uint64
	pad2        uint64
}

// ioUringCqe is struct io_uring_cqe (16 bytes).
type ioUringCqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Compile-time size checks: each index is out of range (or the constant
// underflows) unless the size is exactly the kernel's.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(ioSqringOffsets{})-40]
	_ = [1]struct{}{}[unsafe.Sizeof(ioCqringOffsets{})-40]
	_ = [1]struct{}{}[unsafe.Sizeof(ioUringParams{})-120]
	_ = [1]struct{}{}[unsafe.Sizeof(ioUringSqe{})-ioUringSqeSize]
	_ = [1]struct{}{}[unsafe.Sizeof(ioUringCqe{})-ioUringCqeSize]
)

// uringIovec is struct iovec.
type uringIovec struct {
	base uint64
	len  uint64
}

// uring is an io_uring instance with at most one fixed buffer, driven one
// request at a time. All of its fields are fixed-size plain values: the
// rings are addressed by uintptr (they are mmapped, not Go memory), so a
// uring may live in the executor's machine struct and be used by a forked
// child. The zero uring is closed.
type uring struct {
	fd     int
	isOpen bool
	single bool // SQ and CQ rings share one mapping (IORING_FEAT_SINGLE_MMAP)
	hasBuf bool // fixed buffer 0 is registered

	sqRing, sqRingLen uintptr
	cqRing, cqRingLen uintptr
	sqes, sqesLen     uintptr

	// Addresses inside the rings.
	sqHead, sqTail, sqMask, sqArray uintptr
	cqHead, cqTail, cqMask, cqCqes  uintptr

	seq    uint64        // user_data of the last request
	params ioUringParams // handed to io_uring_setup; kept so no stack address escapes
	iov    uringIovec    // handed to IORING_REGISTER_BUFFERS
}

// ringU32 turns a uintptr into a *uint32 without going through a uintptr to
// unsafe.Pointer conversion that go vet's unsafeptr check would flag. Only
// for addresses the Go heap does not own (mmapped rings), which the
// collector neither scans nor moves.
//
//forkfuzz:childsafe
func ringU32(addr uintptr) *uint32 { return (*uint32)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))) }

//forkfuzz:childsafe
func sqeAt(addr uintptr) *ioUringSqe {
	return (*ioUringSqe)(*(*unsafe.Pointer)(unsafe.Pointer(&addr)))
}

//forkfuzz:childsafe
func cqeAt(addr uintptr) *ioUringCqe {
	return (*ioUringCqe)(*(*unsafe.Pointer)(unsafe.Pointer(&addr)))
}

//forkfuzz:childsafe
func (u *uring) ok() bool { return u.isOpen }

// setup creates a ring with `entries` entries (setup flags 0) and maps it.
// errno != 0 if io_uring is unavailable: ENOSYS (not built in), EPERM
// (kernel.io_uring_disabled=2, or =1 and not in io_uring_group; seccomp),
// ENOMEM, ... A ring that was open is closed first.
//
//forkfuzz:childsafe
func (u *uring) setup(entries uint32) (errno uintptr) {
	u.close()
	u.params = ioUringParams{}
	r, e := rawSyscall6(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&u.params)), 0, 0, 0, 0)
	if e != 0 {
		return e
	}
	u.fd = int(r)
	u.isOpen = true
	p := &u.params
	u.sqRingLen = uintptr(p.sqOff.array) + uintptr(p.sqEntries)*4
	u.cqRingLen = uintptr(p.cqOff.cqes) + uintptr(p.cqEntries)*ioUringCqeSize
	u.single = p.features&ioringFeatSingleMmap != 0
	if u.single && u.cqRingLen > u.sqRingLen {
		u.sqRingLen = u.cqRingLen
	}
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const flags = unix.MAP_SHARED | unix.MAP_POPULATE
	addr, e := sysMmap(0, u.sqRingLen, prot, flags, u.fd, ioringOffSqRing)
	if e != 0 {
		u.close()
		return e
	}
	u.sqRing = addr
	if u.single {
		u.cqRing, u.cqRingLen = u.sqRing, u.sqRingLen
	} else {
		addr, e = sysMmap(0, u.cqRingLen, prot, flags, u.fd, ioringOffCqRing)
		if e != 0 {
			u.close()
			return e
		}
		u.cqRing = addr
	}
	u.sqesLen = uintptr(p.sqEntries) * ioUringSqeSize
	addr, e = sysMmap(0, u.sqesLen, prot, flags, u.fd, ioringOffSqes)
	if e != 0 {
		u.close()
		return e
	}
	u.sqes = addr
	u.sqHead = u.sqRing + uintptr(p.sqOff.head)
	u.sqTail = u.sqRing + uintptr(p.sqOff.tail)
	u.sqMask = u.sqRing + uintptr(p.sqOff.ringMask)
	u.sqArray = u.sqRing + uintptr(p.sqOff.array)
	u.cqHead = u.cqRing + uintptr(p.cqOff.head)
	u.cqTail = u.cqRing + uintptr(p.cqOff.tail)
	u.cqMask = u.cqRing + uintptr(p.cqOff.ringMask)
	u.cqCqes = u.cqRing + uintptr(p.cqOff.cqes)
	return 0
}

// close unmaps the rings and closes the ring fd (dropping its fixed
// buffers and their page pins once no other process holds the fd). Safe
// on a zero or already closed uring.
//
//forkfuzz:childsafe
func (u *uring) close() {
	if u.sqes != 0 {
		sysMunmap(u.sqes, u.sqesLen)
	}
	if u.cqRing != 0 && !u.single {
		sysMunmap(u.cqRing, u.cqRingLen)
	}
	if u.sqRing != 0 {
		sysMunmap(u.sqRing, u.sqRingLen)
	}
	if u.isOpen {
		sys1(unix.SYS_CLOSE, uintptr(u.fd))
	}
	u.fd, u.isOpen, u.single, u.hasBuf = 0, false, false, false
	u.sqRing, u.sqRingLen, u.cqRing, u.cqRingLen, u.sqes, u.sqesLen = 0, 0, 0, 0, 0, 0
	u.sqHead, u.sqTail, u.sqMask, u.sqArray = 0, 0, 0, 0
	u.cqHead, u.cqTail, u.cqMask, u.cqCqes = 0, 0, 0, 0
}

// registerBuffer registers [addr, addr+length) as fixed buffer 0
// (IORING_REGISTER_BUFFERS with one iovec), unregistering any previous
// registration first. The kernel pins the pages (FOLL_WRITE|FOLL_LONGTERM),
// faulting them in for writing, so memory without write permission fails
// with EFAULT.
//
//forkfuzz:childsafe
func (u *uring) registerBuffer(addr, length uintptr) (errno uintptr) {
	if !u.isOpen {
		return uintptr(unix.EBADF)
	}
	if u.hasBuf {
		e := u.register(ioringUnregisterBuffers, 0, 0)
		if e != 0 && e != uintptr(unix.ENXIO) {
			return e
		}
		u.hasBuf = false
	}
	u.iov = uringIovec{base: uint64(addr), len: uint64(length)}
	if e := u.register(ioringRegisterBuffers, uintptr(unsafe.Pointer(&u.iov)), 1); e != 0 {
		return e
	}
	u.hasBuf = true
	return 0
}

// register calls io_uring_register, again while a signal interrupts it
// (kernels before 6.3 quiesce the ring interruptibly for buffer updates,
// and the Go runtime sends its threads signals).
//
//forkfuzz:childsafe
func (u *uring) register(op, arg, n uintptr) uintptr {
	for try := 0; ; try++ {
		_, e := rawSyscall6(unix.SYS_IO_URING_REGISTER, uintptr(u.fd), op, arg, n, 0, 0)
		if e != uintptr(unix.EINTR) || try == 1000 {
			return e
		}
	}
}

// readFixed submits one IORING_OP_READ_FIXED (buf_index 0) reading length
// bytes from fd at file offset off into addr (which must lie in the
// registered buffer), waits for its completion and returns the CQE's res
// (bytes read or -errno). errno is for the ring itself (io_uring_enter
// failing other than with EINTR).
//
//forkfuzz:childsafe
func (u *uring) readFixed(fd int, addr, length uintptr, off uint64) (res int32, errno uintptr) {
	return u.rw(ioringOpReadFixed, fd, addr, length, off)
}

// writeFixed is readFixed with IORING_OP_WRITE_FIXED (memory to file).
//
//forkfuzz:childsafe
func (u *uring) writeFixed(fd int, addr, length uintptr, off uint64) (res int32, errno uintptr) {
	return u.rw(ioringOpWriteFixed, fd, addr, length, off)
}

//forkfuzz:childsafe
func (u *uring) rw(op uint8, fd int, addr, length uintptr, off uint64) (res int32, errno uintptr) {
	if !u.isOpen {
		return 0, uintptr(unix.EBADF)
	}
	if length > 1<<32-1 {
		return 0, uintptr(unix.EINVAL)
	}
	// Only this goroutine produces SQEs, so the tail is ours to read plainly;
	// the kernel advances the head.
	tail := atomic.LoadUint32(ringU32(u.sqTail))
	head := atomic.LoadUint32(ringU32(u.sqHead))
	mask := *ringU32(u.sqMask)
	if tail-head > mask { // ring full: cannot happen one request at a time
		return 0, uintptr(unix.EBUSY)
	}
	idx := tail & mask
	u.seq++
	*sqeAt(u.sqes + uintptr(idx)*ioUringSqeSize) = ioUringSqe{
		opcode:   op,
		fd:       int32(fd),
		off:      off,
		addr:     uint64(addr),
		len:      uint32(length),
		userData: u.seq,
		bufIndex: 0,
	}
	*ringU32(u.sqArray + uintptr(idx)*4) = idx
	// Release: the SQE and array slot are visible before the new tail.
	atomic.StoreUint32(ringU32(u.sqTail), tail+1)

	for {
		// Submit whatever the kernel has not consumed yet (0 if an earlier,
		// interrupted io_uring_enter already submitted it) and wait.
		toSubmit := tail + 1 - atomic.LoadUint32(ringU32(u.sqHead))
		_, e := rawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), uintptr(toSubmit), 1, ioringEnterGetevents, 0, 0)
		if e != 0 && e != uintptr(unix.EINTR) && e != uintptr(unix.EAGAIN) {
			return 0, e
		}
		for {
			ch := atomic.LoadUint32(ringU32(u.cqHead))
			ct := atomic.LoadUint32(ringU32(u.cqTail)) // acquire: CQE contents after tail
			if ch == ct {
				break
			}
			cqe := cqeAt(u.cqCqes + uintptr(ch&*ringU32(u.cqMask))*ioUringCqeSize)
			ud, r := cqe.userData, cqe.res
			atomic.StoreUint32(ringU32(u.cqHead), ch+1) // release the slot
			if ud == u.seq {
				return r, 0
			}
			// A stale completion of an earlier request whose wait failed: drop it.
		}
	}
}

// ---------------------------------------------------------------------------
// userfaultfd

// userfaultfd constants (include/uapi/linux/userfaultfd.h).
const (
	uffdAPI = 0xAA // UFFD_API

	uffdUserModeOnly = 1 // UFFD_USER_MODE_ONLY (Linux 5.11)

	uffdFeaturePagefaultFlagWP = 1 << 0  // UFFD_FEATURE_PAGEFAULT_FLAG_WP: uffd-wp exists (5.7)
	uffdFeatureWPUnpopulated   = 1 << 13 // UFFD_FEATURE_WP_UNPOPULATED (6.4)
	uffdFeatureWPAsync         = 1 << 15 // UFFD_FEATURE_WP_ASYNC (6.7)

	uffdioRegisterModeWP     = 1 << 1 // UFFDIO_REGISTER_MODE_WP
	uffdioWriteprotectModeWP = 1 << 0 // UFFDIO_WRITEPROTECT_MODE_WP

	// ioctl numbers: _IOC(dir, type, nr, size) = dir<<30 | size<<16 |
	// type<<8 | nr, with type UFFDIO = 0xAA, dir _IOC_READ|_IOC_WRITE = 3
	// for _IOWR and _IOC_READ = 2 for _IOR.
	//   UFFDIO_API          = _IOWR(0xAA, 0x3F, struct uffdio_api)          (24 bytes)
	//   UFFDIO_REGISTER     = _IOWR(0xAA, 0x00, struct uffdio_register)     (32 bytes)
	//   UFFDIO_UNREGISTER   = _IOR (0xAA, 0x01, struct uffdio_range)        (16 bytes)
	//   UFFDIO_WRITEPROTECT = _IOWR(0xAA, 0x06, struct uffdio_writeprotect) (24 bytes)
	uffdioAPI          = 3<<30 | 24<<16 | 0xAA<<8 | 0x3F // 0xc018aa3f
	uffdioRegister     = 3<<30 | 32<<16 | 0xAA<<8 | 0x00 // 0xc020aa00
	uffdioUnregister   = 2<<30 | 16<<16 | 0xAA<<8 | 0x01 // 0x8010aa01
	uffdioWriteprotect = 3<<30 | 24<<16 | 0xAA<<8 | 0x06 // 0xc018aa06
)

// uffdioAPIArg is struct uffdio_api.
type uffdioAPIArg struct {
	api      uint64
	features uint64
	ioctls   uint64
}

// uffdioRange is struct uffdio_range.
type uffdioRange struct {
	start uint64
	len   uint64
}

// uffdioRegisterArg is struct uffdio_register.
type uffdioRegisterArg struct {
	rng    uffdioRange
	mode   uint64
	ioctls uint64
}

// uffdioWriteprotectArg is struct uffdio_writeprotect.
type uffdioWriteprotectArg struct {
	rng  uffdioRange
	mode uint64
}

var (
	_ = [1]struct{}{}[unsafe.Sizeof(uffdioAPIArg{})-24]
	_ = [1]struct{}{}[unsafe.Sizeof(uffdioRange{})-16]
	_ = [1]struct{}{}[unsafe.Sizeof(uffdioRegisterArg{})-32]
	_ = [1]struct{}{}[unsafe.Sizeof(uffdioWriteprotectArg{})-24]
)

// uffdAPICall does UFFDIO_API asking for features and returns the features
// the kernel offers. A failed UFFDIO_API leaves the fd uninitialized, so
// the caller may try again with fewer features; a successful one cannot be
// repeated.
//
//forkfuzz:childsafe
func uffdAPICall(fd int, features uint64) (offered uint64, errno uintptr) {
	a := uffdioAPIArg{api: uffdAPI, features: features}
	_, e := rawSyscall6(unix.SYS_IOCTL, uintptr(fd), uffdioAPI, uintptr(unsafe.Pointer(&a)), 0, 0, 0)
	return a.features, e
}

// uffdOpen opens a userfaultfd (UFFD_USER_MODE_ONLY|O_CLOEXEC|O_NONBLOCK,
// or without UFFD_USER_MODE_ONLY on kernels before 5.11, which reject it
// with EINVAL) and enables UFFD_FEATURE_WP_ASYNC with
// UFFD_FEATURE_WP_UNPOPULATED (which 6.7+ kernels add to WP_ASYNC anyway).
// In asynchronous mode a write to a write-protected page never produces a
// message: the kernel clears the page's uffd-wp bit and lets the write
// through, so no handler thread is needed and nothing can block. On
// failure fd is -1 and reason is a static string.
//
//forkfuzz:childsafe
func uffdOpen() (fd int, errno uintptr, reason string) {
	const flags = unix.O_CLOEXEC | unix.O_NONBLOCK
	r, e := sys1(unix.SYS_USERFAULTFD, flags|uffdUserModeOnly)
	if e == uintptr(unix.EINVAL) {
		r, e = sys1(unix.SYS_USERFAULTFD, flags)
	}
	switch e {
	case 0:
	case uintptr(unix.ENOSYS):
		return -1, e, "userfaultfd: ENOSYS (kernel built without CONFIG_USERFAULTFD)"
	case uintptr(unix.EPERM):
		return -1, e, "userfaultfd: EPERM (vm.unprivileged_userfaultfd=0 without CAP_SYS_PTRACE, or seccomp)"
	default:
		return -1, e, "userfaultfd: the system call failed"
	}
	fd = int(r)
	_, e = uffdAPICall(fd, uffdFeatureWPAsync|uffdFeatureWPUnpopulated)
	if e == uintptr(unix.EINVAL) {
		_, e = uffdAPICall(fd, uffdFeatureWPAsync)
	}
	if e == 0 {
		return fd, 0, ""
	}
	if e != uintptr(unix.EINVAL) {
		sys1(unix.SYS_CLOSE, uintptr(fd))
		return -1, e, "userfaultfd: UFFDIO_API failed"
	}
	// Find out what is missing (this initializes the fd, which is dropped).
	offered, e2 := uffdAPICall(fd, 0)
	sys1(unix.SYS_CLOSE, uintptr(fd))
	switch {
	case e2 != 0:
		return -1, e2, "userfaultfd: UFFDIO_API rejects UFFD_API"
	case offered&uffdFeaturePagefaultFlagWP == 0:
		return -1, e, "userfaultfd: no write-protect support (needs Linux 5.7 and CONFIG_HAVE_ARCH_USERFAULTFD_WP)"
	case offered&uffdFeatureWPAsync == 0:
		return -1, e, "userfaultfd: kernel lacks UFFD_FEATURE_WP_ASYNC (needs Linux 6.7)"
	}
	return -1, e, "userfaultfd: UFFDIO_API rejects UFFD_FEATURE_WP_ASYNC"
}

// uffdWriteProtect registers [addr, addr+length) with fd in write-protect
// mode (UFFDIO_REGISTER, UFFDIO_REGISTER_MODE_WP) and write-protects it
// (UFFDIO_WRITEPROTECT, UFFDIO_WRITEPROTECT_MODE_WP), which sets the
// uffd-wp bit (bit 57 in /proc/pid/pagemap) on every page of the range.
// addr and length must be page-aligned. Returns the first errno.
//
//forkfuzz:childsafe
func uffdWriteProtect(fd int, addr, length uintptr) (errno uintptr) {
	reg := uffdioRegisterArg{rng: uffdioRange{start: uint64(addr), len: uint64(length)}, mode: uffdioRegisterModeWP}
	if _, e := rawSyscall6(unix.SYS_IOCTL, uintptr(fd), uffdioRegister, uintptr(unsafe.Pointer(&reg)), 0, 0, 0); e != 0 {
		return e
	}
	wp := uffdioWriteprotectArg{rng: uffdioRange{start: uint64(addr), len: uint64(length)}, mode: uffdioWriteprotectModeWP}
	_, e := rawSyscall6(unix.SYS_IOCTL, uintptr(fd), uffdioWriteprotect, uintptr(unsafe.Pointer(&wp)), 0, 0, 0)
	return e
}

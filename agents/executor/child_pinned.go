package executor

// The pinned operations (pinned.go) as any process runs them, forked
// children included (doc.go).

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// execPinned runs pinned operation i. Reachable from children: raw
// syscalls only, no allocation.
//
//forkfuzz:childsafe
func (m *machine) execPinned(i int) (errno uintptr, ret uint64, skipped int) {
	op := &m.p.Ops[i]
	r := &m.pin
	addr := uintptr(arena.RegionBase(op.Region) + op.Off)
	length := uintptr(op.Len)
	switch op.Kind {
	case prog.OpProcMem, prog.OpPVWrite:
		return m.remoteWrite(i)
	case prog.OpODirect:
		if r.dfd < 0 {
			m.recSkip(i, obs.SkipNoODirect, r.dfdErr)
			return 0, 0, 0
		}
		off := m.fillScratch(i)
		return okRet(rawSyscall6(unix.SYS_PREAD64, uintptr(r.dfd), addr, length, uintptr(off), 0, 0))
	case prog.OpVmsplice:
		r.iov[0], r.iov[1] = uint64(addr), uint64(length)
		return okRet(rawSyscall6(unix.SYS_VMSPLICE, uintptr(r.pipes[op.Pipe][1]), uintptr(unsafe.Pointer(&r.iov[0])), 1, unix.SPLICE_F_NONBLOCK, 0, 0))
	case prog.OpReadPipe:
		total := uint64(0)
		for {
			n, e := sys3(unix.SYS_READ, uintptr(r.pipes[op.Pipe][0]), uintptr(unsafe.Pointer(&m.page[0])), prog.PageSize)
			if e == uintptr(unix.EINTR) {
				continue
			}
			if e != 0 || n == 0 {
				if total == 0 {
					errno = e
				}
				break
			}
			for w := uintptr(0); w < n/8; w++ {
				if v := m.page[w]; v != 0 {
					m.rec(obs.RecData, uint64(i), total+uint64(w*8), v, 0, 0, 0)
				}
			}
			total += uint64(n)
		}
		return errno, total, 0
	case prog.OpUringReg, prog.OpUringRead:
		if !r.ring.ok() {
			m.recSkip(i, obs.SkipNoUring, r.ringErr)
			return 0, 0, 0
		}
		if op.Kind == prog.OpUringReg {
			return r.ring.registerBuffer(addr, length), 0, 0
		}
		if r.bfd < 0 {
			m.recSkip(i, obs.SkipNoScratch, r.bfdErr)
			return 0, 0, 0
		}
		off := m.fillScratch(i)
		res, e := r.ring.readFixed(r.bfd, addr, length, off)
		if e != 0 {
			return e, 0, 0
		}
		if res < 0 {
			return uintptr(-res), 0, 0
		}
		return 0, uint64(res), 0
	case prog.OpUffdWP:
		if r.uffd < 0 {
			m.recSkip(i, r.uffdCode, r.uffdErr)
			return 0, 0, 0
		}
		return uffdWriteProtect(r.uffd, addr, length), 0, 0
	}
	m.recSkip(i, obs.SkipUnhandled, uintptr(unix.ENOSYS))
	return 0, 0, 0
}

// okRet turns a raw syscall's result into (errno, ret, skipped), with
// ret 0 on failure.
//
//forkfuzz:childsafe
func okRet(res, e uintptr) (uintptr, uint64, int) {
	if e != 0 {
		return e, 0, 0
	}
	return 0, uint64(res), 0
}

// fillScratch writes operation i's data (word k = SlotValue(i, k)) into
// the scratch file through the page cache and returns its file offset.
//
//forkfuzz:childsafe
func (m *machine) fillScratch(i int) uint64 {
	op := &m.p.Ops[i]
	base := uint64(i) * prog.MaxIOPages * prog.PageSize
	for p := uint64(0); p < op.Len/prog.PageSize; p++ {
		for w := range m.page {
			m.page[w] = prog.DenseValue(i, p*prog.PageSize+uint64(w*8))
		}
		rawSyscall6(unix.SYS_PWRITE64, uintptr(m.pin.bfd), uintptr(unsafe.Pointer(&m.page[0])), prog.PageSize, uintptr(base+p*prog.PageSize), 0, 0)
	}
	return base
}

// remoteWrite runs procmem or pvwrite: one write per slot, into this
// process or into the child of fork Into-1. skipped counts the slots the
// kernel refused; errno is the first error other than the expected
// refusal (EIO for /proc/PID/mem, EFAULT for process_vm_writev).
//
//forkfuzz:childsafe
func (m *machine) remoteWrite(i int) (errno uintptr, ret uint64, skipped int) {
	op := &m.p.Ops[i]
	r := &m.pin
	pid := uintptr(0)
	if op.Into > 0 {
		if p := m.pids[op.Into-1]; p > 0 {
			pid = uintptr(p)
		} else {
			return uintptr(unix.ESRCH), 0, op.Count
		}
	}
	refusal := uintptr(unix.EFAULT)
	fd := uintptr(0)
	if op.Kind == prog.OpProcMem {
		refusal = uintptr(unix.EIO)
		m.memPath(pid)
		f, e := rawSyscall6(unix.SYS_OPENAT, uintptr(atFdcwd), uintptr(unsafe.Pointer(&r.path[0])), unix.O_RDWR|unix.O_CLOEXEC, 0, 0, 0)
		if e != 0 {
			return e, 0, op.Count
		}
		fd = f
	} else if pid == 0 {
		pid, _ = sys1(unix.SYS_GETPID, 0)
	}
	for k := 0; k < op.Count; k++ {
		a := arena.RegionBase(op.Region) + op.Off + uint64(k)*op.Stride
		m.page[0] = prog.SlotValue(i, k)
		var n, e uintptr
		if op.Kind == prog.OpProcMem {
			n, e = rawSyscall6(unix.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(&m.page[0])), 8, uintptr(a), 0, 0)
		} else {
			r.iov[0], r.iov[1] = uint64(uintptr(unsafe.Pointer(&m.page[0]))), 8
			r.iov[2], r.iov[3] = a, 8
			n, e = rawSyscall6(unix.SYS_PROCESS_VM_WRITEV, pid, uintptr(unsafe.Pointer(&r.iov[0])), 1, uintptr(unsafe.Pointer(&r.iov[2])), 1, 0)
		}
		if e != 0 || n != 8 {
			skipped++
			if e != 0 && e != refusal && errno == 0 {
				errno = e
			}
			continue
		}
		ret++
	}
	if op.Kind == prog.OpProcMem {
		sys1(unix.SYS_CLOSE, fd)
	}
	return errno, ret, skipped
}

// recSkip records that operation i was skipped, and why.
//
//forkfuzz:childsafe
func (m *machine) recSkip(i int, code uint64, e uintptr) {
	m.rec(obs.RecSkip, uint64(i), code, uint64(e), 0, 0, 0)
}

// memPath writes "/proc/self/mem" or "/proc/PID/mem", NUL-terminated,
// into r.path (at most 31 bytes: a uintptr has at most 20 digits).
//
//forkfuzz:childsafe
func (m *machine) memPath(pid uintptr) {
	p := &m.pin.path
	n := copy(p[:], "/proc/")
	if pid == 0 {
		n += copy(p[n:], "self")
	} else {
		var d [20]byte
		k := len(d)
		for v := pid; ; v /= 10 {
			k--
			d[k] = byte('0' + v%10)
			if v < 10 {
				break
			}
		}
		n += copy(p[n:], d[k:])
	}
	copy(p[n:], "/mem\x00")
}

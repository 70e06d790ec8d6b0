package executor

// Raw system calls of the VMA operations (child_vmaops.go), for code
// that runs in a forked child: no allocation, nothing from the runtime.

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// PR_SET_VMA's option and the MLOCK_ONFAULT flag (x/sys/unix names them;
// TestLinuxConstants checks these against it).
const (
	prSetVMA         = 0x53564d41
	prSetVMAAnonName = 0
	mlockOnfault     = 1
)

// mbindSys is mbind(addr, n, mode, {0} or no nodemask, no flags).
//
//forkfuzz:childsafe
func mbindSys(addr, n uintptr, mode int, node0 bool) (uintptr, uintptr) {
	var mask uint64 = 1
	var p, maxnode uintptr
	if node0 {
		p, maxnode = uintptr(unsafe.Pointer(&mask)), 65
	}
	return rawSyscall6(unix.SYS_MBIND, addr, n, uintptr(mode), p, maxnode, 0)
}

// anonNameSys is prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, n, name)
// (name nil: NULL, which removes the name).
//
//forkfuzz:childsafe
func anonNameSys(addr, n uintptr, name []byte) (uintptr, uintptr) {
	var p uintptr
	if len(name) > 0 {
		p = uintptr(unsafe.Pointer(&name[0]))
	}
	return rawSyscall6(unix.SYS_PRCTL, prSetVMA, prSetVMAAnonName, addr, n, p, 0)
}

// pmadviseSys is process_madvise of [addr, addr+n) of the calling process
// with advice adv, through a pidfd of its own opened for the call; iov is
// the caller's room for the iovec. It returns the bytes advised.
//
//forkfuzz:childsafe
func pmadviseSys(iov *[2]uint64, addr, n uintptr, adv int) (uintptr, uintptr) {
	pid, _ := sys1(unix.SYS_GETPID, 0)
	fd, e := sys2(unix.SYS_PIDFD_OPEN, pid, 0)
	if e != 0 {
		return 0, e
	}
	iov[0], iov[1] = uint64(addr), uint64(n)
	r, e := rawSyscall6(unix.SYS_PROCESS_MADVISE, fd, uintptr(unsafe.Pointer(iov)), 1, uintptr(adv), 0, 0)
	sys1(unix.SYS_CLOSE, fd)
	return r, e
}

// remapFileSys is remap_file_pages(addr, n, prot 0, pgoff, flags 0).
//
//forkfuzz:childsafe
func remapFileSys(addr, n, pgoff uintptr) (uintptr, uintptr) {
	return rawSyscall6(unix.SYS_REMAP_FILE_PAGES, addr, n, 0, pgoff, 0, 0)
}

package executor

// This file and sys_linux_amd64.s are the only places that make raw system
// calls or touch raw memory. Everything here is safe to call in a forked
// child of a multi-threaded Go process: no allocation, no stack growth
// beyond the pre-grown stack, no runtime calls.

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Implemented in sys_linux_amd64.s.
//
//forkfuzz:childsafe
func rawSyscall6(trap, a1, a2, a3, a4, a5, a6 uintptr) (r1, errno uintptr)

//forkfuzz:fork
//forkfuzz:childsafe
func rawFork() (pid, errno uintptr)

//forkfuzz:childsafe
func load64(addr uintptr) uint64

//forkfuzz:childsafe
func store64(addr uintptr, v uint64)

//forkfuzz:childsafe
func copyPage(dst *[512]uint64, addr uintptr)

//forkfuzz:childsafe
func sys1(trap, a1 uintptr) (uintptr, uintptr) { return rawSyscall6(trap, a1, 0, 0, 0, 0, 0) }

//forkfuzz:childsafe
func sys2(trap, a1, a2 uintptr) (uintptr, uintptr) {
	return rawSyscall6(trap, a1, a2, 0, 0, 0, 0)
}

//forkfuzz:childsafe
func sys3(trap, a1, a2, a3 uintptr) (uintptr, uintptr) {
	return rawSyscall6(trap, a1, a2, a3, 0, 0, 0)
}

//forkfuzz:childsafe
func sysMmap(addr, length, prot, flags uintptr, fd int, off uintptr) (uintptr, uintptr) {
	return rawSyscall6(unix.SYS_MMAP, addr, length, prot, flags, uintptr(fd), off)
}

//forkfuzz:childsafe
func sysMunmap(addr, length uintptr) uintptr {
	_, e := sys2(unix.SYS_MUNMAP, addr, length)
	return e
}

//forkfuzz:childsafe
func sysExit(code int) {
	for {
		sys1(unix.SYS_EXIT_GROUP, uintptr(code))
	}
}

// atFdcwd is AT_FDCWD as a variable, so it converts to uintptr.
var atFdcwd = unix.AT_FDCWD

// sigBlockAll sets the calling thread's signal mask to *all and saves the old one.
//
//forkfuzz:childsafe
func sigBlockAll(all, old *uint64) {
	rawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(all)), uintptr(unsafe.Pointer(old)), 8, 0, 0)
}

//forkfuzz:childsafe
func sigRestore(old *uint64) {
	rawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(old)), 0, 8, 0, 0)
}

// blockingWait4 waits for pid through the runtime's syscall path, so the
// main process's other goroutines keep running. Main process only.
func blockingWait4(pid int, status *int32) uintptr {
	_, _, e := unix.Syscall6(unix.SYS_WAIT4, uintptr(pid), uintptr(unsafe.Pointer(status)), 0, 0, 0, 0)
	return uintptr(e)
}

// futex operations (shared, not FUTEX_PRIVATE: parent and child wait on
// a MAP_SHARED word).
const (
	futexWait = 0
	futexWake = 1
)

// Implemented in sys_linux_amd64.s: fenced TSC timestamps.
//
//forkfuzz:childsafe
func rdtscp() uint64
func storeTimed(addr uintptr, v uint64) (inv, resp uint64)

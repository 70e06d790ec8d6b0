package executor

// Raw system calls and memory access for code that runs in a forked child
// (doc.go): the declarations without a body are assembly
// (sys_linux_amd64.s); the rest are thin wrappers. Nothing here allocates,
// grows the stack or calls into the Go runtime.

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// atFdcwd is AT_FDCWD as a variable, so it converts to uintptr.
var atFdcwd = unix.AT_FDCWD

// futex operations (shared, not FUTEX_PRIVATE: parent and child wait on
// a MAP_SHARED word).
const (
	futexWait = 0
	futexWake = 1
)

// rawSyscall6 is a system call that does not tell the Go runtime
// (SYSCALL and nothing else).
//
//forkfuzz:childsafe
func rawSyscall6(trap, a1, a2, a3, a4, a5, a6 uintptr) (r1, errno uintptr)

// load64 and store64 are one plain load and store, copyPage reads a 4 KiB
// page with plain loads: through the process's own page tables, never
// through get_user_pages (doc.go).
//
//forkfuzz:childsafe
func load64(addr uintptr) uint64

//forkfuzz:childsafe
func store64(addr uintptr, v uint64)

//forkfuzz:childsafe
func copyPage(dst *[512]uint64, addr uintptr)

// scanPage reads the page at addr with plain loads and copies its
// non-zero 64-byte blocks to dst; bit b of mask says block b (words
// 8b..8b+7) was copied.
//
//forkfuzz:childsafe
func scanPage(dst *[512]uint64, addr uintptr) (mask uint64)

// rdtscp is a fenced TSC timestamp.
//
//forkfuzz:childsafe
func rdtscp() uint64

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

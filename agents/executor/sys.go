package executor

// The main process's side of the raw system calls of child_sys.go: these
// go through the Go runtime or are used by its threads only, so no forked
// child calls them.

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// blockingWait4 waits for pid through the runtime's syscall path, so the
// main process's other goroutines keep running. Main process only.
func blockingWait4(pid int, status *int32) uintptr {
	_, _, e := unix.Syscall6(unix.SYS_WAIT4, uintptr(pid), uintptr(unsafe.Pointer(status)), 0, 0, 0, 0)
	return uintptr(e)
}

// storeTimed is a plain store between fenced TSC timestamps
// (sys_linux_amd64.s), for the writer threads' logs (threads.go).
func storeTimed(addr uintptr, v uint64) (inv, resp uint64)

// madvise advises [addr, addr+n) through the runtime's syscall path (the
// executor's own memory, heapthp.go). Main process only.
func madvise(addr, n uint64, advice int) error {
	_, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(addr), uintptr(n), uintptr(advice))
	if e != 0 {
		return e
	}
	return nil
}

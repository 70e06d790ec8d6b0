package executor

// The fork benchmark's forked child (forkbench.go, doc.go).

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// benchClock writes CLOCK_MONOTONIC into ts (two words: s, ns). Safe in a
// forked child.
//
//forkfuzz:childsafe
func benchClock(ts *uint64) {
	rawSyscall6(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(ts)), 0, 0, 0, 0)
}

// benchChild is the forked child: note the time, wait for the parent's
// go, read every page, exit. Raw system calls and loads only.
//
//forkfuzz:childsafe
func benchChild(ctl []uint64, goWord *uint32, base, size uintptr) {
	benchClock(&ctl[bcReadyS])
	sys2(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL))
	for atomic.LoadUint32(goWord) == 0 {
		rawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(goWord)), futexWait, 0, 0, 0, 0)
	}
	benchClock(&ctl[bcReadS])
	var sum uint64
	for a := base; a < base+size; a += benchPage {
		sum += load64(a)
	}
	benchClock(&ctl[bcReadEndS])
	ctl[bcSum] = sum
	sysExit(0)
}

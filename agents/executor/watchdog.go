package executor

// The rollback write pass's watchdog: a raw thread outside the Go runtime
// that ends the executor when a write fault never resolves (split from
// failnth.go).

import (
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// writeTimeout bounds the rollback write pass (see writePass); tests
// shorten it with FORKFUZZ_ROLLBACK_WRITE_TIMEOUT.
var writeTimeout = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("FORKFUZZ_ROLLBACK_WRITE_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 20 * time.Second
}()

// startWatchdog arms a watchdog that, unless the returned stop is called
// within writeTimeout, prints msg on stderr and ends the executor with
// status 71. It runs on a raw thread outside the Go runtime
// (rawWatchdogThread) with raw system calls only, so it fires even when
// the runtime cannot make progress because the forking thread faults
// forever, and it never holds up the runtime itself (a goroutine blocked
// in a raw system call would stall every stop-the-world).
func (m *machine) startWatchdog(msg string) (stop func()) {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	dl := time.Duration(ts.Nano()) + writeTimeout
	w := &watchdog{deadline: [2]int64{int64(dl / time.Second), int64(dl % time.Second)}, msg: []byte(msg)}
	if m.rb.wdStack == nil {
		st, err := unix.Mmap(-1, 0, watchdogStack, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			m.rb.events = append(m.rb.events, obs.NewEvent(obs.EvMeasureUnavailable, "write-pass watchdog not started: %v", err))
			return func() {}
		}
		m.rb.wdStack = st
	}
	top := uintptr(unsafe.Pointer(&m.rb.wdStack[0])) + watchdogStack
	var all, old uint64 = ^uint64(0), 0
	sigBlockAll(&all, &old)
	_, e := rawWatchdogThread(top, &w.flag, &w.deadline, &w.msg[0], len(w.msg), &w.ctid)
	sigRestore(&old)
	if e != 0 {
		m.rb.events = append(m.rb.events, obs.NewEvent(obs.EvMeasureUnavailable, "write-pass watchdog not started: clone: %v", unix.Errno(e)))
		return func() {}
	}
	// Start the pass only once the watchdog waits.
	for atomic.LoadUint32(&w.flag[1]) == 0 {
		runtime.Gosched()
	}
	return func() {
		atomic.StoreUint32(&w.flag[0], 1)
		unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&w.flag[0])), 129, 1, 0, 0, 0) // FUTEX_WAKE|FUTEX_PRIVATE_FLAG
		// Wait until the thread is gone (the kernel clears ctid): its
		// stack is reused by the next watchdog.
		for {
			v := atomic.LoadUint32(&w.ctid)
			if v == 0 {
				break
			}
			unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&w.ctid)), 0, uintptr(v), 0, 0, 0) // FUTEX_WAIT (clear_child_tid wakes shared)
		}
		runtime.KeepAlive(w)
	}
}

// watchdog is what a watchdog thread reads; it must stay reachable (and
// in place) until the thread is gone.
type watchdog struct {
	flag     [2]uint32 // [0]: stop; [1]: the thread is waiting
	ctid     uint32
	deadline [2]int64
	msg      []byte
}

// watchdogStack is the raw watchdog thread's stack size.
const watchdogStack = 64 << 10

func rawWatchdogThread(stack uintptr, flag *[2]uint32, deadline *[2]int64, msg *byte, n int, ctid *uint32) (tid, errno uintptr)

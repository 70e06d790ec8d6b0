package executor

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The main process's wait for ksmd after MADV_MERGEABLE (ksm.go). It
// runs in the program's interpreter, which forked children run too.

// ksmScans reads ksmd's full-scan count (ok false on an error).
//
//forkfuzz:childsafe
func ksmScans(buf *[24]byte) (n uint64, ok bool) {
	r, errno := rawSyscall6(unix.SYS_PREAD64, uintptr(ksmScansFd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
	if errno != 0 || r == 0 {
		return 0, false
	}
	for _, c := range buf[:r] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// ksmSettle waits for ksmSettleScans full scans of ksmd (at most
// ksmMaxWait) and says whether they came.
//
//forkfuzz:childsafe
func (m *machine) ksmSettle() bool {
	if ksmScansFd < 0 {
		return false
	}
	var buf [24]byte
	n0, ok := ksmScans(&buf)
	if !ok {
		return false
	}
	start := m.now()
	ts := [2]int64{0, ksmPoll}
	for m.now()-start < ksmMaxWait {
		rawSyscall6(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0, 0, 0)
		if n, ok := ksmScans(&buf); !ok || n >= n0+ksmSettleScans {
			return ok
		}
	}
	return false
}

package executor

import (
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Deterministic KSM (issue 31): ksmd merges the identical pages of
// MADV_MERGEABLE mappings in the background, so whether a later fork
// meets KSM pages depended on how long the program ran. After
// MADV_MERGEABLE succeeds in the main process, the executor waits until
// ksmd has finished ksmSettleScans more full scans (a page is merged on
// the scan after the one that first saw it unchanged), at most
// ksmMaxWait: then the fork meets the pages merged. Whether it did is
// measured by the page census at fork (KSM pages), not assumed. Where
// ksmd does not run (/sys/kernel/mm/ksm/run is not 1) nothing waits.
const (
	ksmSettleScans = 3
	ksmMaxWait     = 1e9 // ns
	ksmPoll        = 2e6 // ns
)

// ksmScansFd is /sys/kernel/mm/ksm/full_scans, opened at start while
// ksmd runs (-1 otherwise).
var ksmScansFd = openKSMScans()

func openKSMScans() int {
	b, err := os.ReadFile("/sys/kernel/mm/ksm/run")
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return -1
	}
	fd, err := unix.Open("/sys/kernel/mm/ksm/full_scans", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

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

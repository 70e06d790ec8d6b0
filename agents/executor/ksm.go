package executor

import (
	"os"
	"strings"

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

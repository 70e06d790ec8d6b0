package obs

import (
	"fmt"
	"syscall"
)

// Reasons for skipping an operation (RecSkip codes). The executor decides
// them where it sets up what pinned operations need; the text says what is
// missing, so a user knows which feature their kernel or machine lacks.
const (
	SkipNoUring   = 1 // io_uring_setup failed
	SkipNoODirect = 2 // the scratch file cannot be opened with O_DIRECT
	SkipNoUffd    = 3 // userfaultfd cannot be opened
	SkipNoWPAsync = 4 // the kernel lacks UFFD_FEATURE_WP_ASYNC
	SkipNoScratch = 5 // no scratch file for odirect/uringread data
	// SkipUnhandled: the executor has no handler for the operation's
	// kind or argument (a new enum value not taught to it: a bug in
	// forkfuzz, caught by the executor's table tests).
	SkipUnhandled = 6
	// SkipNoKSM: MADV_MERGEABLE/UNMERGEABLE on a kernel without KSM
	// (no /sys/kernel/mm/ksm: CONFIG_KSM=n answers EINVAL).
	SkipNoKSM = 7
	// SkipNoNUMA: migrate/migrateloop with fewer than two NUMA nodes with
	// memory (move_pages has nowhere to move a page; a VM gets two).
	SkipNoNUMA = 8
	// SkipNoMempolicy: mbind on a kernel without NUMA (ENOSYS) or where
	// node 0 has no memory the executor may use (EINVAL).
	SkipNoMempolicy = 9
	// SkipNoAnonName: anonname on a kernel without CONFIG_ANON_VMA_NAME
	// (prctl PR_SET_VMA answers EINVAL).
	SkipNoAnonName = 10
	// SkipNoPMadvise: pmadvise where process_madvise of the executor's
	// own memory fails (no pidfd_open or process_madvise, or EPERM).
	SkipNoPMadvise = 11
	// SkipNoUffdMissing: uffdreg/uffdunreg where a userfaultfd that also
	// takes the kernel's own faults cannot be opened and registered in
	// MISSING mode (no CONFIG_USERFAULTFD; EPERM where
	// vm.unprivileged_userfaultfd is 0 and the executor lacks
	// CAP_SYS_PTRACE), or its fault handler could not be started.
	SkipNoUffdMissing = 12
	numSkipReasons    = 13
)

var skipText = [numSkipReasons]string{
	SkipNoUring:       "io_uring unavailable (io_uring_setup: %v)",
	SkipNoODirect:     "O_DIRECT unavailable on the executor's scratch filesystem (open: %v)",
	SkipNoUffd:        "userfaultfd unavailable (%v)",
	SkipNoWPAsync:     "userfaultfd write-protect needs UFFD_FEATURE_WP_ASYNC (Linux 6.7+) (%v)",
	SkipNoScratch:     "no scratch file for data (%v)",
	SkipUnhandled:     "unhandled by the executor: forkfuzz does not know how to run this operation (%v)",
	SkipNoKSM:         "KSM unavailable: the kernel has no /sys/kernel/mm/ksm (CONFIG_KSM) (%v)",
	SkipNoNUMA:        "page migration needs two NUMA nodes with memory (/sys/devices/system/node/has_memory) (%v)",
	SkipNoMempolicy:   "mbind of node 0 fails on this kernel: no NUMA, or no memory on node 0 for the executor (%v)",
	SkipNoAnonName:    "anonymous VMA names need CONFIG_ANON_VMA_NAME (prctl PR_SET_VMA_ANON_NAME: %v)",
	SkipNoPMadvise:    "process_madvise of the executor's own memory is unavailable (%v)",
	SkipNoUffdMissing: "userfaultfd MISSING registration with a fault handler is unavailable (%v)",
}

// SkipReason renders a RecSkip record's reason.
func SkipReason(code, errno uint64) string {
	if code == 0 || code >= numSkipReasons {
		return fmt.Sprintf("skipped (unknown reason %d, errno %d)", code, errno)
	}
	return fmt.Sprintf(skipText[code], syscall.Errno(errno))
}

package prog

// VMA changes that go through neither mprotect, madvise nor mremap (issue
// 31). Each splits a VMA where it changes an attribute, none but
// remapfile changes content, and each may run on a thread racing a fork:
//
//	mlockonfault r off len
//	    mlock2(MLOCK_ONFAULT): VM_LOCKED|VM_LOCKONFAULT without faulting
//	    the range in (a PROT_NONE range is no error, unlike mlock).
//	mbind r off len policy=P
//	    mbind(2) with policy P (default, preferred, bind, interleave on
//	    node 0; local) and no flags: a hole anywhere is EFAULT and
//	    changes nothing (default: only a range with nothing mapped).
//	    Pages stay where they are.
//	anonname r off len name=N
//	    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME) with name N (none
//	    removes it): anonymous mappings only (EBADF on files, and on
//	    shared anonymous ones before Linux 6.2). A kernel without
//	    CONFIG_ANON_VMA_NAME answers EINVAL: the executor finds out once
//	    and skips it there, saying why.
//	pmadvise r off len advice=A
//	    process_madvise(2) of one iovec through a pidfd of the process
//	    itself, with MADV_COLD or MADV_PAGEOUT: madvise's rules; the
//	    result is the bytes advised. Skipped where the kernel has no
//	    process_madvise (Linux 5.10) or refuses it to the executor.
//	remapfile r off len pgoff=N
//	    remap_file_pages(2) (deprecated, emulated since Linux 3.16) with
//	    prot 0, no flags and file page N: start and len are rounded
//	    down to pages (less than a page: EINVAL). The VMA at start must
//	    be a shared mapping (memfd, file or shared anonymous: shmem),
//	    and any VMA the range runs on into must follow without a hole,
//	    map the same file and have the same VM_ flags (so mprotect,
//	    mlock, dontfork or hugepage advice between them is EINVAL;
//	    mbind and anonymous names are not flags). The range then becomes
//	    a fresh MAP_SHARED|MAP_FIXED|MAP_POPULATE mapping of that file
//	    at page N with the first VMA's protection, locked (MAP_LOCKED)
//	    if it was: advice, policy, name and uffd registration are gone,
//	    and the pages show the file's pages N, N+1, ... (past the end of
//	    the file: beyond EOF, as a mapping there would be).
//	uffdreg r off len
//	    UFFDIO_REGISTER of the range with UFFDIO_REGISTER_MODE_MISSING on
//	    the process's userfaultfd (one per process, opened at its first
//	    uffdreg; fork does not pass registrations on: no
//	    UFFD_FEATURE_EVENT_FORK). A handler process resolves every
//	    missing-page fault there with zeros (UFFDIO_ZEROPAGE; UFFDIO_COPY
//	    of a zero huge page on hugetlb), so content follows the usual
//	    rules, but faults go through handle_userfault and the range's
//	    VMAs split from their neighbours. Registration replaces a WP
//	    mode. Private file mappings (memfd, tmpfs) are accepted by the
//	    kernel, but a hole resolved there is a private zero page, no
//	    longer the file's: the model stops following such pages. Kernel
//	    accesses without FAULT_FLAG_ALLOW_RETRY (/proc/self/mem and
//	    io_uring's long-term pins on Linux 6.1) may fail with EFAULT on a
//	    missing page there.
//	uffdunreg r off len
//	    UFFDIO_UNREGISTER of the range: every userfaultfd mode is gone
//	    there and the VMAs may merge again. Without an earlier uffdreg in
//	    the process it opens the userfaultfd all the same.

// MaxPgOff bounds a remapfile's pgoff: twice the pages of a memfd or
// file region's file (SpanPages), so a range may lie past its end.
const MaxPgOff = 2 * SpanPages

// Policy is an mbind memory policy.
type Policy uint8

const (
	PolicyDefault Policy = iota
	PolicyPreferred
	PolicyBind
	PolicyInterleave
	PolicyLocal
	numPolicies
)

// AnonName is the name anonname gives a range.
type AnonName uint8

const (
	AnonNone AnonName = iota
	AnonA
	AnonB
	numAnonNames
)

// PMadviseAdvice reports whether pmadvise may pass advice a (process_madvise
// knows fewer advices than madvise; these two on every kernel it exists on).
func PMadviseAdvice(a Advice) bool { return a == AdvCold || a == AdvPageout }

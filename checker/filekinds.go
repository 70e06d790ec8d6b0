package checker

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// The file kinds (prog's tmpfs-* and ext4-*): a regular file mapped like
// a memfd. Their content rules are the memfd's (seg.kind is the memfd
// kind, seg.fs the file system); what differs on ext4 (Linux 6.1, read in
// io_uring/rsrc.c and include/linux/userfaultfd_k.h):
//   - io_uring refuses a fixed buffer in a file that is neither shmem nor
//     hugetlbfs (io_pin_pages: EOPNOTSUPP, after pinning for write, so a
//     private mapping's pages are private copies afterwards, as with a
//     memfd); since 6.5 GUP decides instead (a writable shared mapping of
//     such a file EFAULT, a private one pinned), see uringReg;
//   - userfaultfd cannot register it (vma_can_userfault: EINVAL): uffdwp
//     is unpredictable on every kind already.
// A tmpfs file is shmem: every rule is the memfd's.

// nonShmemFile reports whether a page in [lo, hi) of pr is mapped from a
// file that is neither shmem nor hugetlbfs (ext4).
func nonShmemFile(pr *proc, lo, hi int) bool {
	for g := lo; g < hi; g++ {
		if s := pr.segAt(g); s != nil && !s.unknown && s.fs == prog.Ext4 {
			return true
		}
	}
	return false
}

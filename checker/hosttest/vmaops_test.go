package hosttest

import (
	"strings"
	"syscall"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// vmaOpCase is a program of the VMA operations that do not go through
// mprotect, madvise's classic advices or mremap (issue 31), and the
// errno the host kernel must give its operation number op.
type vmaOpCase struct {
	name  string
	text  string
	op    int
	errno syscall.Errno
}

const vmaHead = "forkfuzz v1\nregion r0 anon-private pages=8\nregion r1 memfd-private pages=8\nregion r2 memfd-shared pages=8\nregion r3 anon-shared pages=8\n"

var vmaOpCases = []vmaOpCase{
	{"populate-write-private-file", "pwrite r1 off=0x1000 count=1 stride=0x8\nmadvise r1 off=0x0 len=0x4000 advice=populate_write\npwrite r1 off=0x1008 count=1 stride=0x8\nfork f0\nf0: check\nwait f0", 1, 0},
	{"populate-read-private-file", "pwrite r1 off=0x1000 count=1 stride=0x8\nmadvise r1 off=0x0 len=0x4000 advice=populate_read\npwrite r1 off=0x1008 count=1 stride=0x8\ncheck", 1, 0},
	{"populate-write-readonly", "mprotect r0 off=0x1000 len=0x1000 prot=r\nmadvise r0 off=0x0 len=0x4000 advice=populate_write\ncheck", 1, syscall.EINVAL},
	{"populate-read-readonly", "mprotect r1 off=0x1000 len=0x1000 prot=r\nmadvise r1 off=0x0 len=0x4000 advice=populate_read\ncheck", 1, 0},
	{"populate-read-protnone", "mprotect r2 off=0x2000 len=0x1000 prot=none\nmadvise r2 off=0x0 len=0x4000 advice=populate_read", 1, syscall.EINVAL},
	{"populate-hole", "munmap r1 off=0x1000 len=0x1000\nmadvise r1 off=0x0 len=0x4000 advice=populate_write\npwrite r1 off=0x3000 count=1 stride=0x8\ncheck", 1, syscall.ENOMEM},
	{"populate-in-child", "store r0 off=0x0 count=4 stride=0x1000\nfork f0\nf0: madvise r0 off=0x0 len=0x8000 advice=populate_write\nf0: madvise r3 off=0x0 len=0x8000 advice=populate_read\nstore r0 off=0x8 count=4 stride=0x1000\nf0: check\nwait f0", 2, 0},
	{"dontneed-locked", "store r0 off=0x0 count=8 stride=0x1000\nmlock r0 off=0x0 len=0x4000\nmadvise r0 off=0x0 len=0x8000 advice=dontneed_locked\ncheck", 2, 0},
	{"dontneed-on-locked", "mlock r0 off=0x0 len=0x4000\nmadvise r0 off=0x0 len=0x8000 advice=dontneed", 1, syscall.EINVAL},
	{"dontneed-locked-private-file", "pwrite r1 off=0x0 count=8 stride=0x1000\nstore r1 off=0x8 count=8 stride=0x1000\nmlock r1 off=0x2000 len=0x2000\nmadvise r1 off=0x0 len=0x8000 advice=dontneed_locked\nfork f0\nf0: check\nwait f0", 3, 0},
	// mlock2(MLOCK_ONFAULT): no populate, so PROT_NONE is no error;
	// locked (dontneed refused), not inherited; its VMA does not merge
	// with a plain mlock's (mremap across them: EFAULT).
	{"onfault-protnone", "mprotect r0 off=0x1000 len=0x1000 prot=none\nmlockonfault r0 off=0x0 len=0x4000\nmadvise r0 off=0x0 len=0x1000 advice=dontneed\nfork f0\nf0: madvise r0 off=0x0 len=0x1000 advice=dontneed\nwait f0", 1, 0},
	{"onfault-refuses-dontneed", "mlockonfault r0 off=0x0 len=0x4000\nmadvise r0 off=0x0 len=0x1000 advice=dontneed", 1, syscall.EINVAL},
	{"onfault-hole", "munmap r0 off=0x2000 len=0x1000\nmlockonfault r0 off=0x0 len=0x4000\nmadvise r0 off=0x0 len=0x1000 advice=cold", 1, syscall.ENOMEM},
	{"onfault-vs-mlock-split", "mlock r0 off=0x0 len=0x7000\nmlockonfault r0 off=0x7000 len=0x1000\nmremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none", 2, syscall.EFAULT},
	{"onfault-private-file-grow", "pwrite r1 off=0x0 count=8 stride=0x1000\nmlockonfault r1 off=0x0 len=0x8000\nmremap r1 off=0x0 len=0x8000 newlen=0xa000 flags=none\npwrite r1 off=0x9008 count=1 stride=0x8\nmprotect r1 off=0x0 len=0x2000 prot=r\nmprotect r1 off=0x0 len=0x2000 prot=rw\npwrite r1 off=0x8 count=1 stride=0x8\ncheck", 1, 0},
	// mbind: EFAULT for a hole, changing nothing; a policy splits the
	// VMA (mremap across: EFAULT); same policy again merges.
	{"mbind-split", "mbind r0 off=0x7000 len=0x1000 policy=bind\nmremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none", 1, syscall.EFAULT},
	{"mbind-merge", "mbind r3 off=0x7000 len=0x1000 policy=interleave\nmbind r3 off=0x6000 len=0x1000 policy=interleave\nmremap r3 off=0x6000 len=0x2000 newlen=0x3000 flags=none\ncheck", 2, 0},
	{"mbind-default-merges-back", "mbind r2 off=0x7000 len=0x1000 policy=preferred\nmbind r2 off=0x7000 len=0x1000 policy=default\nmremap r2 off=0x6000 len=0x2000 newlen=0x3000 flags=none\ncheck", 2, 0},
	{"mbind-hole", "munmap r1 off=0x3000 len=0x1000\nmbind r1 off=0x0 len=0x8000 policy=local\nmremap r1 off=0x6000 len=0x2000 newlen=0x3000 flags=none", 1, syscall.EFAULT},
	{"mbind-default-hole", "munmap r3 off=0x1000 len=0x1000\nmbind r3 off=0x0 len=0x8000 policy=default", 1, 0},
	{"mbind-default-nothing", "munmap r3 off=0x0 len=0x2000\nmbind r3 off=0x0 len=0x2000 policy=default", 1, syscall.EFAULT},
	{"mbind-inherited", "mbind r0 off=0x7000 len=0x1000 policy=bind\nfork f0\nf0: mremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none\nf0: check\nwait f0", 2, syscall.EFAULT},
	// PR_SET_VMA_ANON_NAME (skipped where the kernel lacks it).
	{"anonname", "anonname r0 off=0x7000 len=0x1000 name=a\nmremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none", 0, 0},
	{"anonname-file", "anonname r1 off=0x0 len=0x1000 name=b", 0, syscall.EBADF},
	// process_madvise of the process's own memory.
	{"pmadvise-pageout", "store r0 off=0x0 count=8 stride=0x1000\npmadvise r0 off=0x0 len=0x8000 advice=pageout\nfork f0\nf0: check\nwait f0\ncheck", 1, 0},
	{"pmadvise-locked", "mlock r0 off=0x0 len=0x1000\npmadvise r0 off=0x0 len=0x8000 advice=cold", 1, syscall.EINVAL},
	{"pmadvise-hole", "munmap r2 off=0x1000 len=0x1000\npmadvise r2 off=0x0 len=0x8000 advice=cold", 1, syscall.ENOMEM},
	{"pmadvise-child", "store r3 off=0x0 count=8 stride=0x1000\nfork f0\nf0: pmadvise r3 off=0x0 len=0x8000 advice=pageout\nf0: check\nwait f0", 2, 0},
	// remap_file_pages: shared mappings only; the range must be one
	// file's mappings with the same flags and no hole; the pages then
	// show the object from pgoff on (past its end: beyond EOF).
	{"remapfile-memfd-shared", "pwrite r2 off=0x5008 count=1 stride=0x8\nremapfile r2 off=0x0 len=0x2000 pgoff=0x5\nstore r2 off=0x10 count=1 stride=0x8\ncheck", 1, 0},
	{"remapfile-anon-shared", "store r3 off=0x7010 count=1 stride=0x8\nremapfile r3 off=0x0 len=0x1000 pgoff=0x7\nstore r3 off=0x18 count=1 stride=0x8\ncheck", 1, 0},
	{"remapfile-anon-private", "remapfile r0 off=0x0 len=0x1000 pgoff=0x0", 0, syscall.EINVAL},
	{"remapfile-memfd-private", "remapfile r1 off=0x0 len=0x1000 pgoff=0x1", 0, syscall.EINVAL},
	{"remapfile-short", "remapfile r2 off=0x0 len=0x800 pgoff=0x1", 0, syscall.EINVAL},
	{"remapfile-across-mprotect", "mprotect r2 off=0x1000 len=0x1000 prot=r\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0", 1, syscall.EINVAL},
	{"remapfile-from-readonly", "mprotect r2 off=0x0 len=0x1000 prot=r\nremapfile r2 off=0x0 len=0x1000 pgoff=0x4\nstore r2 off=0x0 count=2 stride=0x1000\ncheck", 1, 0},
	{"remapfile-across-dontfork", "madvise r3 off=0x1000 len=0x1000 advice=dontfork\nremapfile r3 off=0x0 len=0x4000 pgoff=0x0", 1, syscall.EINVAL},
	{"remapfile-drops-dontfork", "store r3 off=0x0 count=8 stride=0x1000\nmadvise r3 off=0x1000 len=0x1000 advice=dontfork\nremapfile r3 off=0x1000 len=0x1000 pgoff=0x1\nremapfile r3 off=0x0 len=0x4000 pgoff=0x0\nfork f0\nf0: check\nwait f0", 3, 0},
	{"remapfile-across-mbind", "mbind r2 off=0x1000 len=0x1000 policy=bind\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0\ncheck", 1, 0},
	{"remapfile-across-hole", "munmap r2 off=0x2000 len=0x1000\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0", 1, syscall.EINVAL},
	{"remapfile-into-end-hole", "remapfile r2 off=0x6000 len=0x4000 pgoff=0x0", 0, syscall.EINVAL},
	{"remapfile-across-another-object", "munmap r3 off=0x4000 len=0x4000\nmmap r3 off=0x4000 len=0x4000\nremapfile r3 off=0x3000 len=0x2000 pgoff=0x0", 2, syscall.EINVAL},
	{"remapfile-across-remapped", "store r2 off=0x0 count=8 stride=0x1000\nremapfile r2 off=0x1000 len=0x1000 pgoff=0x20\nremapfile r2 off=0x0 len=0x4000 pgoff=0x2\ncheck", 2, 0},
	{"remapfile-past-eof", "store r3 off=0x0 count=8 stride=0x1000\nremapfile r3 off=0x4000 len=0x4000 pgoff=0x6\nstore r3 off=0x4008 count=4 stride=0x1000\ncheck\nfork f0\nf0: check\nwait f0", 1, 0},
	{"remapfile-locked", "store r2 off=0x0 count=8 stride=0x1000\nmlock r2 off=0x0 len=0x4000\nremapfile r2 off=0x0 len=0x4000 pgoff=0x4\nmadvise r2 off=0x0 len=0x1000 advice=dontneed\ncheck", 2, 0},
	{"remapfile-across-locked", "mlock r2 off=0x0 len=0x1000\nremapfile r2 off=0x0 len=0x2000 pgoff=0x0", 1, syscall.EINVAL},
	{"remapfile-drops-onfault", "mlockonfault r3 off=0x0 len=0x1000\nremapfile r3 off=0x0 len=0x1000 pgoff=0x2\nmlock r3 off=0x1000 len=0x1000\nremapfile r3 off=0x0 len=0x2000 pgoff=0x0\ncheck", 3, 0},
	{"remapfile-before-fork", "pwrite r2 off=0x3008 count=1 stride=0x8\nremapfile r2 off=0x0 len=0x1000 pgoff=0x3\nfork f0\nf0: check\nf0: store r2 off=0x10 count=1 stride=0x8\nwait f0\ncheck", 1, 0},
	{"remapfile-in-child", "pwrite r2 off=0x6008 count=1 stride=0x8\nstore r3 off=0x5000 count=1 stride=0x8\nfork f0\nf0: remapfile r2 off=0x0 len=0x2000 pgoff=0x6\nf0: remapfile r3 off=0x0 len=0x1000 pgoff=0x5\nf0: store r2 off=0x10 count=1 stride=0x8\nf0: check\nwait f0\ncheck", 3, 0},
	{"remapfile-threads-racing-fork", "store r2 off=0x0 count=8 stride=0x1000\nt1: remapfile r2 off=0x0 len=0x4000 pgoff=0x4\nt2: remapfile r3 off=0x2000 len=0x2000 pgoff=0x0\nfork f0\nstore r0 off=0x8 count=8 stride=0x1000\nf0: check\nwait f0\njoin t1\njoin t2\ncheck", 1, 0},
	// userfaultfd MISSING registration: the handler fills missing pages
	// with zeros (content as usual); the VMA splits (mremap across:
	// EFAULT) and merges back on unregistration; fork does not pass it on.
	{"uffdreg-fault-then-fork", "store r0 off=0x0 count=1 stride=0x8\nuffdreg r0 off=0x0 len=0x8000\nstore r0 off=0x1000 count=4 stride=0x1000\ncheck\nfork f0\nf0: store r0 off=0x6000 count=2 stride=0x8\nf0: check\nwait f0\nstore r0 off=0x7000 count=1 stride=0x8\ncheck", 1, 0},
	{"uffdreg-split", "uffdreg r0 off=0x7000 len=0x1000\nmremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none", 1, syscall.EFAULT},
	{"uffdunreg-merges-back", "uffdreg r0 off=0x7000 len=0x1000\nuffdunreg r0 off=0x7000 len=0x1000\nmremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none\ncheck", 1, 0},
	{"uffdreg-shmem", "store r3 off=0x0 count=1 stride=0x8\nuffdreg r3 off=0x0 len=0x8000\nuffdreg r2 off=0x0 len=0x8000\ncheck\nfork f0\nf0: store r3 off=0x2000 count=1 stride=0x8\nf0: store r2 off=0x3000 count=1 stride=0x8\nwait f0\ncheck", 2, 0},
	{"uffdreg-private-file", "pwrite r1 off=0x1000 count=1 stride=0x8\nuffdreg r1 off=0x0 len=0x4000\ncheck\npwrite r1 off=0x2008 count=1 stride=0x8\nfork f0\nf0: check\nwait f0\ncheck", 1, 0},
	{"uffdreg-populate", "uffdreg r0 off=0x0 len=0x8000\nmadvise r0 off=0x0 len=0x4000 advice=populate_write\nmlock r0 off=0x4000 len=0x2000\ncheck", 2, 0},
	{"uffdreg-in-child", "fork f0\nf0: uffdreg r0 off=0x0 len=0x8000\nf0: store r0 off=0x1000 count=2 stride=0x1000\nf0: fork f1\nf1: store r0 off=0x2000 count=1 stride=0x8\nf1: check\nf0: wait f1\nf0: uffdunreg r0 off=0x0 len=0x2000\nf0: check\nwait f0\ncheck", 1, 0},
	{"uffdreg-uringreg", "uffdreg r0 off=0x0 len=0x8000\nuringreg r0 off=0x0 len=0x2000\nstore r0 off=0x0 count=2 stride=0x1000\ncheck", 0, 0},
	{"uffdreg-procmem", "uffdreg r0 off=0x0 len=0x8000\nprocmem r0 off=0x10 count=2 stride=0x1000\ncheck", 0, 0},
	{"uffdreg-threads-racing-fork", "store r0 off=0x0 count=8 stride=0x1000\nt1: uffdreg r0 off=0x2000 len=0x4000\nt2: store r3 off=0x0 count=4 stride=0x1000\nt1: store r0 off=0x3008 count=2 stride=0x1000\nt2: uffdreg r3 off=0x0 len=0x8000\nfork f0\nf0: store r0 off=0x5000 count=1 stride=0x8\nf0: check\nwait f0\njoin t1\njoin t2\nuffdunreg r0 off=0x0 len=0x8000\ncheck", 1, 0},
	// On a thread while the main thread forks.
	{"threads-racing-fork", "store r0 off=0x0 count=8 stride=0x1000\nt1: mbind r0 off=0x2000 len=0x2000 policy=bind\nt2: mlockonfault r1 off=0x0 len=0x4000\nt1: pmadvise r0 off=0x0 len=0x8000 advice=pageout\nt2: madvise r2 off=0x0 len=0x8000 advice=populate_write\nt3: anonname r0 off=0x0 len=0x1000 name=b\nfork f0\nstore r0 off=0x8 count=8 stride=0x1000\nf0: check\nwait f0\njoin t1\njoin t2\njoin t3\ncheck", 6, 0},
}

// TestVMAOps runs each case on the host kernel: the model accepts the
// observation, and the kernel gave the errno the case names.
func TestVMAOps(t *testing.T) {
	for _, c := range vmaOpCases {
		t.Run(c.name, func(t *testing.T) {
			p, err := prog.Parse([]byte(vmaHead + strings.TrimSpace(c.text) + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			o, err := exe(t).Run(p, executor.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := o.Ops[c.op]
			if r.Skip != "" {
				t.Skipf("op %d skipped on this kernel: %s", c.op, r.Skip)
			}
			if !r.Ran || syscall.Errno(r.Errno) != c.errno {
				t.Errorf("op %d `%v`: ran %v errno %v, want %v", c.op, p.Ops[c.op], r.Ran, syscall.Errno(r.Errno), c.errno)
			}
			if v := checker.Check(p, o); !v.OK() {
				t.Errorf("the model rejects the host's run:\n%s", v.Report())
			}
		})
	}
}

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

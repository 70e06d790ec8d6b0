package vm

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/checker"
)

// vmaOpsOn61 are programs of the VMA operations of fuzz/prog/vmaops.go
// and the new madvise advices, with the errno Linux 6.1 gives operation
// op (skip: the reference kernel cannot do it, the executor must skip it).
var vmaOpsOn61 = []struct {
	name, text string
	op         int
	errno      syscall.Errno
	skip       bool
}{
	// 6.1 walks the VMAs for MADV_POPULATE_*: the PROT_NONE VMA after
	// the hole answers (6.9+ stops at the hole: ENOMEM).
	{"populate-hole-then-protnone", "munmap r0 off=0x1000 len=0x1000\nmprotect r0 off=0x2000 len=0x1000 prot=none\nmadvise r0 off=0x0 len=0x4000 advice=populate_read", 2, syscall.EINVAL, false},
	{"populate-write-private-file", "pwrite r1 off=0x1000 count=1 stride=0x8\nmadvise r1 off=0x0 len=0x4000 advice=populate_write\npwrite r1 off=0x1008 count=1 stride=0x8\nfork f0\nf0: check\nwait f0", 1, 0, false},
	{"populate-hole-6.1", "munmap r1 off=0x1000 len=0x1000\nmadvise r1 off=0x0 len=0x4000 advice=populate_write\npwrite r1 off=0x3000 count=1 stride=0x8\ncheck", 1, syscall.ENOMEM, false},
	{"dontneed-locked", "store r0 off=0x0 count=8 stride=0x1000\nmlock r0 off=0x0 len=0x4000\nmadvise r0 off=0x0 len=0x8000 advice=dontneed_locked\ncheck", 2, 0, false},
	{"onfault-protnone", "mprotect r0 off=0x1000 len=0x1000 prot=none\nmlockonfault r0 off=0x0 len=0x4000\nfork f0\nf0: madvise r0 off=0x0 len=0x1000 advice=dontneed\nwait f0", 1, 0, false},
	{"onfault-vs-mlock-split", "mlock r0 off=0x0 len=0x7000\nmlockonfault r0 off=0x7000 len=0x1000\nmremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none", 2, syscall.EFAULT, false},
	{"mbind-split", "mbind r0 off=0x7000 len=0x1000 policy=bind\nmremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none", 1, syscall.EFAULT, false},
	{"mbind-hole", "munmap r1 off=0x3000 len=0x1000\nmbind r1 off=0x0 len=0x8000 policy=interleave", 1, syscall.EFAULT, false},
	{"mbind-default-hole", "munmap r3 off=0x1000 len=0x1000\nmbind r3 off=0x0 len=0x8000 policy=default", 1, 0, false},
	{"mbind-inherited", "mbind r2 off=0x7000 len=0x1000 policy=preferred\nfork f0\nf0: mremap r2 off=0x6000 len=0x2000 newlen=0x3000 flags=none\nf0: check\nwait f0", 2, syscall.EFAULT, false},
	// The reference kernel has no CONFIG_ANON_VMA_NAME.
	{"anonname", "anonname r0 off=0x1000 len=0x1000 name=a\ncheck", 0, 0, true},
	{"pmadvise-pageout", "store r0 off=0x0 count=8 stride=0x1000\npmadvise r0 off=0x0 len=0x8000 advice=pageout\nfork f0\nf0: check\nwait f0\ncheck", 1, 0, false},
	{"pmadvise-locked", "mlock r0 off=0x0 len=0x1000\npmadvise r0 off=0x0 len=0x8000 advice=cold", 1, syscall.EINVAL, false},
	{"threads-racing-fork", "store r0 off=0x0 count=8 stride=0x1000\nt1: mbind r0 off=0x2000 len=0x2000 policy=bind\nt2: mlockonfault r1 off=0x0 len=0x4000\nt1: pmadvise r0 off=0x0 len=0x8000 advice=pageout\nt2: madvise r2 off=0x0 len=0x8000 advice=populate_write\nfork f0\nstore r0 off=0x8 count=8 stride=0x1000\nf0: check\nwait f0\njoin t1\njoin t2\ncheck", 5, 0, false},
}

const vmaOpsHead = "forkfuzz v1\nregion r0 anon-private pages=8\nregion r1 memfd-private pages=8\nregion r2 memfd-shared pages=8\nregion r3 anon-shared pages=8\n"

// TestQEMUVMAOps runs vmaOpsOn61 on the reference kernel: each operation
// gives the errno of Linux 6.1 (or is skipped where that kernel cannot do
// it), and the model, following the observation's release, accepts every
// run.
func TestQEMUVMAOps(t *testing.T) {
	needQEMU(t)
	tg := bootTarget(t, referenceKernel(t), nil, 30*time.Second, nil)
	for _, c := range vmaOpsOn61 {
		t.Run(c.name, func(t *testing.T) {
			p := mustParse(t, vmaOpsHead+c.text+"\n")
			o, err := tg.Run(p, agents.Options{})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if !strings.HasPrefix(o.Kernel, "6.1.") {
				t.Fatalf("kernel %q, want the 6.1 reference kernel", o.Kernel)
			}
			r := o.Ops[c.op]
			switch {
			case c.skip && r.Skip == "":
				t.Errorf("op %d `%v` ran (errno %d), want it skipped on this kernel", c.op, p.Ops[c.op], r.Errno)
			case !c.skip && r.Skip != "":
				t.Errorf("op %d `%v` skipped: %s", c.op, p.Ops[c.op], r.Skip)
			case !c.skip && (!r.Ran || syscall.Errno(r.Errno) != c.errno):
				t.Errorf("op %d `%v`: ran %v errno %v, want %v", c.op, p.Ops[c.op], r.Ran, syscall.Errno(r.Errno), c.errno)
			}
			if v := checker.Check(p, o); !v.OK() {
				t.Errorf("the model rejects the reference kernel's run:\n%s", v.Report())
			}
		})
	}
}

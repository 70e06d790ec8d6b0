package sim

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// remapHead has one region of each kind remapfile meets: r0
// anon-private, r1 memfd-private, r2 memfd-shared, r3 anon-shared.
const remapHead = "forkfuzz v1\nregion r0 anon-private pages=8\nregion r1 memfd-private pages=8\nregion r2 memfd-shared pages=8\nregion r3 anon-shared pages=8\n"

// TestRemapFile runs remap_file_pages programs on every model: the errno
// of the operation named is Linux's (checked on the host by the checker's
// hosttest), and the checker accepts the whole run.
func TestRemapFile(t *testing.T) {
	for _, c := range []struct {
		name, text string
		op, errno  int
	}{
		{"memfd", "pwrite r2 off=0x5008 count=1 stride=0x8\nremapfile r2 off=0x0 len=0x2000 pgoff=0x5\nstore r2 off=0x10 count=1 stride=0x8\nfork f0\nf0: check\nf0: store r2 off=0x18 count=1 stride=0x8\nwait f0\ncheck", 1, 0},
		{"shmem-past-eof", "store r3 off=0x0 count=8 stride=0x1000\nremapfile r3 off=0x4000 len=0x4000 pgoff=0x6\nstore r3 off=0x4008 count=4 stride=0x1000\nfork f0\nf0: check\nwait f0\ncheck", 1, 0},
		{"private", "remapfile r1 off=0x0 len=0x1000 pgoff=0x1", 0, EINVAL},
		{"short", "remapfile r2 off=0x0 len=0x800 pgoff=0x1", 0, EINVAL},
		{"across-mprotect", "mprotect r2 off=0x1000 len=0x1000 prot=r\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0", 1, EINVAL},
		{"across-hole", "munmap r2 off=0x2000 len=0x1000\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0", 1, EINVAL},
		{"into-end-hole", "remapfile r2 off=0x6000 len=0x4000 pgoff=0x0", 0, EINVAL},
		{"across-another-object", "munmap r3 off=0x4000 len=0x4000\nmmap r3 off=0x4000 len=0x4000\nremapfile r3 off=0x3000 len=0x2000 pgoff=0x0", 2, EINVAL},
		{"across-mbind", "mbind r2 off=0x1000 len=0x1000 policy=bind\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0\ncheck", 1, 0},
		{"drops-dontfork", "store r3 off=0x0 count=8 stride=0x1000\nmadvise r3 off=0x1000 len=0x1000 advice=dontfork\nremapfile r3 off=0x1000 len=0x1000 pgoff=0x1\nremapfile r3 off=0x0 len=0x4000 pgoff=0x0\nfork f0\nf0: check\nwait f0", 3, 0},
		{"locked", "store r2 off=0x0 count=8 stride=0x1000\nmlock r2 off=0x0 len=0x4000\nremapfile r2 off=0x0 len=0x4000 pgoff=0x4\nmadvise r2 off=0x0 len=0x1000 advice=dontneed\ncheck", 2, 0},
		{"stays-locked", "mlock r2 off=0x0 len=0x1000\nremapfile r2 off=0x0 len=0x1000 pgoff=0x3\nremapfile r2 off=0x0 len=0x2000 pgoff=0x0", 2, EINVAL},
		{"drops-onfault", "mlockonfault r3 off=0x0 len=0x1000\nremapfile r3 off=0x0 len=0x1000 pgoff=0x2\nmlock r3 off=0x1000 len=0x1000\nremapfile r3 off=0x0 len=0x2000 pgoff=0x0\ncheck", 3, 0},
		{"in-child", "pwrite r2 off=0x6008 count=1 stride=0x8\nstore r0 off=0x0 count=8 stride=0x1000\nfork f0\nf0: remapfile r2 off=0x0 len=0x2000 pgoff=0x6\nf0: store r2 off=0x10 count=1 stride=0x8\nstore r0 off=0x8 count=8 stride=0x1000\nf0: check\nwait f0\ncheck", 3, 0},
	} {
		p, err := prog.Parse([]byte(remapHead + strings.TrimSpace(c.text) + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, mode := range []Mode{Eager, OnDemand, Async} {
			tg, _ := NewTarget(Config{Mode: mode, SchedSeed: 3})
			o, err := tg.Run(p, execOpts)
			if err != nil {
				t.Fatalf("%s %v: %v", c.name, mode, err)
			}
			if r := o.Ops[c.op]; !r.Ran || r.Errno != c.errno || r.Skip != "" {
				t.Errorf("%s %v: op %d `%v`: ran %v errno %d skip %q, want errno %d", c.name, mode, c.op, p.Ops[c.op], r.Ran, r.Errno, r.Skip, c.errno)
			}
			if v := checker.Check(p, o); !v.OK() {
				t.Errorf("%s %v: the model disagrees with the sim:\n%s", c.name, mode, v.Report())
			}
		}
	}
}

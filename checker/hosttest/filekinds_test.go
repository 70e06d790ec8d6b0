package hosttest

import (
	"strings"
	"syscall"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// fileCase is a program over a private (r0) and a shared (r1) region of
// one file kind's file system (KP, KS stand for the kinds), and what the
// host must give: the errno of operation op (-1: none checked).
type fileCase struct {
	name  string
	text  string
	op    int
	errno syscall.Errno
}

var fileCases = []fileCase{
	{"cow-both-ways", "pwrite r0 off=0x0 count=4 stride=0x1000\nstore r0 off=0x8 count=4 stride=0x1000\nstore r1 off=0x0 count=4 stride=0x1000\nfork f0\nstore r0 off=0x10 count=4 stride=0x1000\nf0: store r1 off=0x18 count=4 stride=0x1000\nf0: check\nwait f0\npwrite r0 off=0x2000 count=2 stride=0x8\ncheck", -1, 0},
	{"dontneed-private-rereads-file", "pwrite r0 off=0x0 count=4 stride=0x1000\nstore r0 off=0x0 count=4 stride=0x1000\nmadvise r0 off=0x0 len=0x4000 advice=dontneed\nfork f0\nf0: check\nwait f0\ncheck", 2, 0},
	{"free-einval", "store r0 off=0x0 count=2 stride=0x1000\nmadvise r0 off=0x0 len=0x2000 advice=free", 1, syscall.EINVAL},
	{"wipeonfork-einval", "madvise r1 off=0x0 len=0x2000 advice=wipeonfork", 0, syscall.EINVAL},
	{"mergeable-private", "store r0 off=0x0 count=8 stride=0x1000\nmadvise r0 off=0x0 len=0x8000 advice=mergeable\nfork f0\nf0: check\nwait f0", 1, 0},
	{"collapse-thp", "store r1 off=0x0 count=8 stride=0x1000\nmadvise r1 off=0x0 len=0x8000 advice=hugepage\nmadvise r0 off=0x0 len=0x8000 advice=collapse\nfork f0\nf0: check\nwait f0", 1, 0},
	{"mprotect-cow", "pwrite r0 off=0x0 count=4 stride=0x1000\nmprotect r0 off=0x0 len=0x4000 prot=r\nfork f0\nf0: mprotect r0 off=0x0 len=0x4000 prot=rw\nf0: store r0 off=0x0 count=2 stride=0x1000\npwrite r0 off=0x8 count=4 stride=0x1000\nf0: check\nwait f0\ncheck", -1, 0},
	{"mremap-grow-and-move", "store r1 off=0x0 count=4 stride=0x1000\nmremap r1 off=0x0 len=0x8000 newlen=0xc000 flags=none\nstore r1 off=0x9000 count=1 stride=0x8\nfork f0\nf0: mremap r0 off=0x0 len=0x4000 newlen=0x6000 flags=maymove\nf0: check\nwait f0\ncheck", 1, 0},
	{"mmap-again", "store r0 off=0x0 count=8 stride=0x1000\nmunmap r0 off=0x2000 len=0x2000\nmmap r0 off=0x2000 len=0x2000\npwrite r0 off=0x2000 count=1 stride=0x8\nfork f0\nf0: check\nwait f0\ncheck", 2, 0},
	{"pageout-populate-mlock", "store r1 off=0x0 count=8 stride=0x1000\nmadvise r1 off=0x0 len=0x8000 advice=pageout\nmadvise r0 off=0x0 len=0x8000 advice=populate_write\nmlock r0 off=0x0 len=0x4000\nfork f0\nf0: check\nwait f0\ncheck", -1, 0},
	{"uringreg", "pwrite r0 off=0x0 count=2 stride=0x1000\nuringreg r0 off=0x0 len=0x2000\nfork f0\nf0: check\nwait f0\npwrite r0 off=0x8 count=2 stride=0x1000\ncheck", -1, 0},
	{"odirect-vmsplice", "store r1 off=0x0 count=4 stride=0x1000\nvmsplice r1 off=0x0 len=0x2000 pipe=p0\nfork f0\nstore r1 off=0x8 count=4 stride=0x1000\nf0: check\nwait f0\nreadpipe p0\nodirect r0 off=0x0 len=0x1000\ncheck", -1, 0},
	{"remapfile", "store r1 off=0x5010 count=1 stride=0x8\nremapfile r1 off=0x0 len=0x2000 pgoff=0x5\nstore r1 off=0x18 count=1 stride=0x8\nfork f0\nf0: check\nwait f0\ncheck", 1, 0},
	{"remapfile-private-einval", "remapfile r0 off=0x0 len=0x1000 pgoff=0x1", 0, syscall.EINVAL},
	{"remapfile-past-eof", "remapfile r1 off=0x0 len=0x2000 pgoff=0x7fff\nstore r1 off=0x0 count=2 stride=0x1000\ncheck\nfork f0\nf0: check\nwait f0", 0, 0},
	{"threads-at-fork", "store r0 off=0x0 count=8 stride=0x1000\nt1: storeloop r1 off=0x0 count=4 stride=0x1000 until=f0\nfork f0\nstore r0 off=0x8 count=8 stride=0x1000\nf0: check\nwait f0\njoin t1\ncheck", -1, 0},
}

// TestFileKinds runs every case on each file kind's file system on the
// host: the model accepts the observation, the errnos are the host's, and
// on ext4 the census at a fork counts the file's page cache. A file
// system the host has no writable directory on is skipped, saying so
// (executor.FileDir).
func TestFileKinds(t *testing.T) {
	for _, fs := range prog.FileSystems() {
		t.Run(fs.String(), func(t *testing.T) {
			dir, err := executor.FileDir(fs)
			if err != nil {
				t.Skipf("no %s here: %v", fs, err)
			}
			t.Logf("files on %s", dir)
			kp, ks := fs.String()+"-private", fs.String()+"-shared"
			head := "forkfuzz v1\nregion r0 " + kp + " pages=8\nregion r1 " + ks + " pages=8\n"
			fileCensus := 0
			for _, c := range fileCases {
				t.Run(c.name, func(t *testing.T) {
					p, err := prog.Parse([]byte(head + c.text + "\n"))
					if err != nil {
						t.Fatal(err)
					}
					o, err := exe(t).Run(p, executor.Options{})
					if err != nil {
						t.Fatal(err)
					}
					if c.op >= 0 {
						if r := o.Ops[c.op]; !r.Ran || syscall.Errno(r.Errno) != c.errno {
							t.Errorf("op %d `%v`: ran %v errno %v, want %v", c.op, p.Ops[c.op], r.Ran, syscall.Errno(r.Errno), c.errno)
						}
					}
					if v := checker.Check(p, o); !v.OK() {
						t.Errorf("the model rejects the host's run:\n%s", v.Report())
					}
					for _, fp := range o.ForkPages {
						fileCensus += fp.File
					}
					for i, r := range o.Ops {
						if r.Skip != "" && !strings.Contains(r.Skip, "O_DIRECT") {
							t.Logf("op %d skipped: %s", i, r.Skip)
						}
					}
				})
			}
			if fs == prog.Ext4 && fileCensus == 0 {
				t.Errorf("no census counted an ext4 page-cache page at any fork")
			}
			t.Logf("page-cache pages counted at forks: %d", fileCensus)
		})
	}
}

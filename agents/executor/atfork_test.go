package executor

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestForkPageCensus checks the census around a fork against what the
// program did: every written page of a private anonymous region is
// resident before the fork and shared with the child after it; mlocked
// pages are counted as mlocked where /proc/kpageflags is readable; a
// DONTFORK region stays exclusive.
func TestForkPageCensus(t *testing.T) {
	for _, tc := range []struct {
		name, text                          string
		present, shared, exclusive, mlocked int
	}{
		{"cow", "region r0 anon-private pages=8 thp=off\nstore r0 off=0x0 count=8 stride=0x1000\nfork f0\nwait f0\n", 8, 8, 0, 0},
		{"mlock", "region r0 anon-private pages=8 thp=off\nmlock r0 off=0x0 len=0x8000\nfork f0\nwait f0\n", 8, 8, 0, 8},
		{"dontfork", "region r0 anon-private pages=4 thp=off\nregion r1 anon-private pages=4 thp=off\nstore r0 off=0x0 count=4 stride=0x1000\nstore r1 off=0x0 count=4 stride=0x1000\nmadvise r1 off=0x0 len=0x4000 advice=dontfork\nfork f0\nwait f0\n", 8, 4, 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, o := run(t, "forkfuzz v1\n"+tc.text, Options{})
			if len(o.ForkPages) != 1 {
				t.Fatalf("ForkPages = %+v, want one census", o.ForkPages)
			}
			c := o.ForkPages[0]
			if c.Err != "" {
				t.Fatalf("census incomplete: %s", c.Err)
			}
			if c.Present != tc.present || c.Shared != tc.shared || c.Exclusive != tc.exclusive {
				t.Errorf("census %+v: want present %d, shared %d, exclusive %d", c, tc.present, tc.shared, tc.exclusive)
			}
			if _, err := os.Stat("/proc/kpageflags"); err == nil && os.Geteuid() == 0 {
				if !c.Flags {
					t.Errorf("census %+v: kpageflags is readable as root but was not read", c)
				} else if c.Mlocked != tc.mlocked {
					t.Errorf("census %+v: want %d mlocked", c, tc.mlocked)
				}
			}
			if _, o := run(t, "forkfuzz v1\n"+tc.text, Options{NoForkPages: true}); len(o.ForkPages) != 0 {
				t.Errorf("NoForkPages: census %+v taken anyway", o.ForkPages)
			}
		})
	}
}

// TestForkOverlapCounted checks that a fork with a writer thread running
// through it carries the overlap count, consistent with the logs.
func TestForkOverlapCounted(t *testing.T) {
	p, o := run(t, "forkfuzz v1\nregion r0 anon-private pages=16 thp=off\nstore r0 off=0x0 count=16 stride=0x1000\nt1: storeloop r0 off=0x0 count=16 stride=0x1000 until=f0\nfork f0\nwait f0\njoin t1\n", Options{})
	fi := p.ForkOp(0)
	ov := o.Ops[fi].Overlap
	if ov == nil {
		t.Fatalf("fork has no overlap count (TSC %d..%d, %d thread logs)", o.Ops[fi].TSCStart, o.Ops[fi].TSCEnd, len(o.Threads))
	}
	if ov.Inside > ov.Stores || ov.Blocked > ov.Stores {
		t.Errorf("overlap %+v: parts exceed the whole", *ov)
	}
	t.Logf("overlap on this kernel: %+v, fork pages %+v", *ov, o.ForkPages)
}

// BenchmarkWriterOverlap runs a writer thread storing to every page of a
// 64-page region through a fork, with the writer moved off the forking
// thread's CPU (spread) and left where the scheduler puts it, and reports
// the mean stores per fork that completed inside the call and that were
// blocked by it:
//
//	go test -run '^$' -bench WriterOverlap -benchtime 200x ./agents/executor/
func BenchmarkWriterOverlap(b *testing.B) {
	text := "forkfuzz v1\nregion r0 anon-private pages=64 thp=off\nstore r0 off=0x0 count=64 stride=0x1000\nt1: storeloop r0 off=0x8 count=64 stride=0x1000 until=f0\nfork f0\nwait f0\njoin t1\n"
	for _, c := range []struct {
		name string
		opt  Options
	}{{"spread", Options{}}, {"nospread", Options{NoWriterSpread: true}}, {"nocensus", Options{NoForkPages: true}}} {
		b.Run(c.name, func(b *testing.B) {
			var inside, blocked, with int
			for i := 0; i < b.N; i++ {
				p, o := run(b, text, c.opt)
				if ov := o.Ops[p.ForkOp(0)].Overlap; ov != nil {
					inside += ov.Inside
					blocked += ov.Blocked
					if ov.Inside > 0 {
						with++
					}
				}
			}
			b.ReportMetric(float64(inside)/float64(b.N), "inside/fork")
			b.ReportMetric(float64(blocked)/float64(b.N), "blocked/fork")
			b.ReportMetric(float64(with)/float64(b.N), "forks-overlapped")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "programs/s")
		})
	}
}

// BenchmarkForkPagesCost measures what the page census around forks costs
// on the host: the same 64 generated programs (default weights) with the
// census and without it, interleaved in one run:
//
//	go test -run '^$' -bench ForkPagesCost -benchtime 128x ./agents/executor/
func BenchmarkForkPagesCost(b *testing.B) {
	ps := make([]*prog.Program, 64)
	for i := range ps {
		ps[i] = gen.Generate(rand.New(rand.NewPCG(9, uint64(i))), gen.DefaultWeights())
	}
	x := executor(b)
	for _, c := range []struct {
		name string
		opt  Options
	}{{"census", Options{}}, {"nocensus", Options{NoForkPages: true}}} {
		b.Run(c.name, func(b *testing.B) {
			forks := 0
			for i := 0; i < b.N; i++ {
				p := ps[i%len(ps)]
				if _, err := x.Run(p, c.opt); err != nil {
					b.Fatal(err)
				}
				forks += p.NumForks()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "programs/s")
			b.ReportMetric(float64(forks)/b.Elapsed().Seconds(), "forks/s")
		})
	}
}

// TestForkPageCensusZeropage checks that the census tells the shared
// zeropage and the huge zeropage apart from other pages: a check (a view:
// it reads every page) of an untouched private anonymous region before a
// fork maps the zeropage at each page, or, in a THP region of whole PMDs,
// the huge zeropage, and neither is counted as THP.
func TestForkPageCensusZeropage(t *testing.T) {
	if _, err := os.Stat("/proc/kpageflags"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs /proc/kpageflags readable (root): the zeropage is told by KPF_ZERO_PAGE")
	}
	if ok, why := readMapsZeropage(); !ok {
		t.Skipf("this kernel (%s) does not map the shared zeropage on a read fault of private anonymous memory (%s): nothing to count", kernelRelease(), why)
	}
	_, o := run(t, "forkfuzz v1\nregion r0 anon-private pages=8 thp=off\nstore r0 off=0x0 count=2 stride=0x1000\ncheck\nfork f0\nwait f0\n", Options{})
	if len(o.ForkPages) != 1 || !o.ForkPages[0].Flags {
		t.Fatalf("ForkPages = %+v, want one census with flags", o.ForkPages)
	}
	if c := o.ForkPages[0]; c.Present != 8 || c.Zero != 6 || c.HugeZero != 0 || c.THP != 0 || c.Hugetlb != 0 {
		t.Errorf("census %+v: want 8 present of which 6 zeropage, no huge zeropage, THP or hugetlb", c)
	}
	en, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	zp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/use_zero_page")
	if strings.Contains(string(en), "[never]") || strings.TrimSpace(string(zp)) != "1" {
		t.Skipf("THP %q, use_zero_page %q: no huge zeropage on a read fault", strings.TrimSpace(string(en)), strings.TrimSpace(string(zp)))
	}
	_, o = run(t, "forkfuzz v1\nregion r0 anon-private pages=1024 thp=on\ncheck\nfork f0\nwait f0\n", Options{})
	if len(o.ForkPages) != 1 {
		t.Fatalf("ForkPages = %+v, want one census", o.ForkPages)
	}
	if c := o.ForkPages[0]; c.HugeZero != 1024 || c.Zero != 0 || c.THP != 0 || c.PMDMapped != 0 {
		t.Errorf("census %+v: want 1024 pages of the huge zeropage and no THP", c)
	}
}

// readMapsZeropage reports whether a read fault on untouched private
// anonymous memory maps the shared zeropage here (KPF_ZERO_PAGE in
// /proc/kpageflags): Linux 6.18 hosts of this machine map a new page.
func readMapsZeropage() (bool, string) {
	b, err := unix.Mmap(-1, 0, prog.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return false, "mmap: " + err.Error()
	}
	defer unix.Munmap(b)
	if b[0] != 0 { // the read fault
		return false, "fresh memory not zero"
	}
	e, err := readWordAt("/proc/self/pagemap", uint64(uintptr(unsafe.Pointer(&b[0])))/prog.PageSize)
	if err != nil || e&pmPresent == 0 || e&pmPFN == 0 {
		return false, fmt.Sprintf("pagemap entry %#x, %v", e, err)
	}
	fl, err := readWordAt("/proc/kpageflags", e&pmPFN)
	if err != nil {
		return false, "kpageflags: " + err.Error()
	}
	if fl&kpfZero == 0 {
		return false, fmt.Sprintf("the page read has PFN %#x, flags %#x, without KPF_ZERO_PAGE", e&pmPFN, fl)
	}
	return true, ""
}

// readWordAt reads the little-endian 64-bit word at index i of file name.
func readWordAt(name string, i uint64) (uint64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var w [8]byte
	if _, err := f.ReadAt(w[:], int64(i*8)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(w[:]), nil
}

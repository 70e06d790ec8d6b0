package executor

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// hugetlbFree is HugePages_Free from /proc/meminfo (-1: unknown).
func hugetlbFree() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "HugePages_Free:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// TestHugetlbRegions maps each hugetlb kind (one 2 MiB page), writes it,
// forks, and reads it in the child: the census at fork counts 512 hugetlb
// base pages and the child sees the parent's words. Where the host has too
// few free huge pages (nr_hugepages 0), the run must fail with
// ErrNoHugetlb (the program is not run, nothing is judged) and the test
// skips saying so; the test does not reserve huge pages itself.
func TestHugetlbRegions(t *testing.T) {
	for k := prog.RegionKind(0); int(k) < prog.NumRegionKinds; k++ {
		if !k.Hugetlb() {
			continue
		}
		t.Run(k.String(), func(t *testing.T) {
			text := "forkfuzz v1\nregion r0 " + k.String() + " pages=512 thp=default\n" +
				"store r0 off=0x0 count=4 stride=0x1000\nfork f0\nf0: check\nwait f0\n"
			p, err := prog.Parse([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			// A private mapping reserves one page; the child's view of a
			// private page is read-only (no COW copy needed).
			free := hugetlbFree()
			o, err := executor(t).Run(p, Options{})
			if free < 1 {
				if !errors.Is(err, ErrNoHugetlb) {
					t.Fatalf("HugePages_Free %d: run error %v, want ErrNoHugetlb", free, err)
				}
				t.Skipf("HugePages_Free %d on this host (nr_hugepages 0?): the run was refused as it should be: %v", free, err)
			}
			if err != nil {
				t.Fatalf("HugePages_Free %d: %v", free, err)
			}
			if len(o.ForkPages) != 1 || o.ForkPages[0].Hugetlb == 0 {
				t.Errorf("census %+v: want hugetlb pages at the fork", o.ForkPages)
			}
			var v = o.Views[0]
			for k := uint64(0); k < 4; k++ {
				if got, want := word(&v, 0, k*0x1000), prog.SlotValue(0, int(k)); got != want {
					t.Errorf("child word at %#x = %#x, want %#x", k*0x1000, got, want)
				}
			}
			t.Logf("census %+v", o.ForkPages[0])
		})
	}
}

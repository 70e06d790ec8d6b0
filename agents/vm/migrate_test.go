package vm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/checker/judge"
)

func TestNUMAArgs(t *testing.T) {
	for _, tc := range []struct {
		mem, cpus, nodes int
		want             []string
	}{
		{1024, 2, 1, nil},
		{1024, 2, 0, nil},
		{1024, 2, 2, []string{"-object", "memory-backend-ram,id=ffmem0,size=1024M", "-numa", "node,nodeid=0,memdev=ffmem0,cpus=0-1",
			"-object", "memory-backend-ram,id=ffmem1,size=256M", "-numa", "node,nodeid=1,memdev=ffmem1"}},
		{1000, 1, 3, []string{"-object", "memory-backend-ram,id=ffmem0,size=1000M", "-numa", "node,nodeid=0,memdev=ffmem0,cpus=0-0",
			"-object", "memory-backend-ram,id=ffmem1,size=256M", "-numa", "node,nodeid=1,memdev=ffmem1",
			"-object", "memory-backend-ram,id=ffmem2,size=256M", "-numa", "node,nodeid=2,memdev=ffmem2"}},
	} {
		if got := numaArgs(tc.mem, tc.cpus, tc.nodes); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("numaArgs(%d, %d, %d) = %q, want %q", tc.mem, tc.cpus, tc.nodes, got, tc.want)
		}
	}
	tg := &Target{cfg: Config{Memory: 1024, CPUs: 2, NUMANodes: 2, Kernel: "k"}, initrd: "i"}
	line := strings.Join(qemu{}.args(tg, "s"), " ")
	if !strings.Contains(line, "-m 1280 ") || !strings.Contains(line, "-numa node,nodeid=1") || !strings.Contains(line, "numa_balancing=disable") {
		t.Errorf("two-node VM's QEMU command line lacks the second node or numa_balancing=disable: %s", line)
	}
}

// migrateProg moves a written region between the guest's two NUMA nodes
// once, then all through a fork, whose child and parent then check it.
const migrateProg = `forkfuzz v1
region r0 anon-private pages=64 thp=off
store r0 off=0x0 count=64 stride=0x1000
migrate r0 off=0x0 len=0x40000
t1: migrateloop r0 off=0x0 len=0x40000 until=f0
fork f0
store r0 off=0x8 count=64 stride=0x1000
f0: check
wait f0
join t1
check
`

// migrate runs migrateProg in a VM: pages must really move (the VM has two
// nodes), the fork must say how many moves overlapped it, and the
// verdict must be clean on a good kernel.
func migrate(t *testing.T, tg *Target) {
	p := mustParse(t, migrateProg)
	o, err := tg.Run(p, agents.Options{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for i, op := range p.Ops {
		if r := o.Ops[i]; r.Skip != "" {
			t.Fatalf("op %d %v skipped: %s", i, op.Kind, r.Skip)
		}
	}
	if got := o.Ops[1].Ret; got != 64 {
		t.Errorf("migrate moved %d of 64 pages", got)
	}
	if o.Ops[2].Ret == 0 {
		t.Errorf("migrateloop moved no page")
	}
	ov := o.Ops[3].Overlap
	if ov == nil || !ov.Movers {
		t.Fatalf("the fork under a migrateloop has no overlap record: %+v", ov)
	}
	t.Logf("migrate moved %d pages; migrateloop %d page moves; at the fork: %d passes, %d pages moved during the call (%d ticks)",
		o.Ops[1].Ret, o.Ops[2].Ret, ov.MovePasses, ov.Moved, ov.Ticks)
	v, err := judge.Judge(p, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() {
		t.Errorf("a good kernel fails the migrate program: %+v", v.Issues)
	}
}

// TestGuestHugePages checks that every guest reserves 2 MiB hugetlb pages
// at boot on its kernel command line, a small share of its memory.
func TestGuestHugePages(t *testing.T) {
	for _, tc := range []struct{ mem, want int }{{1024, 16}, {2048, 32}, {64, 2}, {256, 4}} {
		if got := guestHugePages(tc.mem); got != tc.want {
			t.Errorf("guestHugePages(%d MiB) = %d, want %d", tc.mem, got, tc.want)
		}
	}
	tg := &Target{cfg: Config{Memory: 1024, CPUs: 2, Kernel: "k"}, initrd: "i"}
	if line := strings.Join(qemu{}.args(tg, "s"), " "); !strings.Contains(line, " hugepages=16 ") {
		t.Errorf("1 GiB VM's QEMU command line reserves no 16 huge pages: %s", line)
	}
}

package executor

import (
	"reflect"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/checker"
)

func TestParseNodeList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int32
	}{
		{"", nil},
		{"0", []int32{0}},
		{"0-1", []int32{0, 1}},
		{"0,2-3", []int32{0, 2, 3}},
		{"1-0", nil},
		{"0,x", []int32{0}},
		{"-1", nil},
	} {
		if got := parseNodeList(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseNodeList(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	nodes := []int32{0, 2, 3}
	for _, tc := range [][2]int32{{0, 2}, {2, 3}, {3, 0}, {-14, 0}, {7, 0}} {
		if got := nextNode(nodes, tc[0]); got != tc[1] {
			t.Errorf("nextNode(%v, %d) = %d, want %d", nodes, tc[0], got, tc[1])
		}
	}
}

// TestMigrateHost runs migrate and migrateloop on this machine: with two
// NUMA nodes the pages move; with one, both are skipped and say why. The
// verdict is clean either way.
func TestMigrateHost(t *testing.T) {
	p, o := run(t, `forkfuzz v1
region r0 anon-private pages=16 thp=off
store r0 off=0x0 count=16 stride=0x1000
migrate r0 off=0x0 len=0x10000
t1: migrateloop r0 off=0x0 len=0x10000 until=f0
fork f0
store r0 off=0x8 count=16 stride=0x1000
f0: check
wait f0
join t1
check
`, Options{})
	if len(numaNodes) < 2 {
		for _, i := range []int{1, 2} {
			if r := o.Ops[i]; !strings.Contains(r.Skip, "two NUMA nodes") {
				t.Errorf("one NUMA node: op %d (%v) not skipped with the reason: %+v", i, p.Ops[i].Kind, r)
			}
		}
		t.Logf("%d NUMA node(s) with memory here: migrate skipped (%s)", len(numaNodes), o.Ops[1].Skip)
	} else if o.Ops[1].Ret == 0 || o.Ops[2].Ret == 0 {
		t.Errorf("%d NUMA nodes, but no page moved: migrate %+v, migrateloop %+v", len(numaNodes), o.Ops[1], o.Ops[2])
	}
	if ov := o.Ops[3].Overlap; ov == nil || !ov.Movers || ov.Writers {
		t.Errorf("fork under a migrateloop: overlap %+v, want movers and no writers", ov)
	}
	v := checker.Check(p, o)
	if len(v.Findings) != 0 {
		t.Errorf("findings: %v", v.Findings)
	}
	var notes string
	for _, n := range v.Notes {
		notes += n + "\n"
	}
	if len(numaNodes) < 2 && !strings.Contains(notes, "skipped by the executor") {
		t.Errorf("the skipped migrate is not noted in the verdict: %q", notes)
	}
}

package checker

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// In a page an io_uring registration pinned, the kernel copies the page
// into the child during the fork while the writer keeps storing: each cell
// alone must hold a value it had during the fork call, not all of them at
// one instant. The same torn view outside a pinned page stays a finding
// (TestTornSnapshotIsFlaggedAndVisualized).
func TestPinnedCopyJudgedPerCell(t *testing.T) {
	const text = `forkfuzz v1
region r0 anon-private pages=2
store r0 off=0x0 count=2 stride=0x1000
uringreg r0 off=0x0 len=0x1000
t1: storeloop r0 off=0x0 count=2 stride=0x1000 until=f0
fork f0
wait f0
join t1
`
	p, err := prog.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	init0, init1 := prog.SlotValue(0, 0), prog.SlotValue(0, 1)
	a, b := prog.SlotValue(2, 0), prog.SlotValue(2, 1)
	late := prog.SlotValue(2, 2) // slot 0 again, after fork returned
	// t1 stores page 0 (pinned) then page 1 (not pinned), both during the
	// fork call [5, 30], then page 0 again at 40-41.
	stores := []obs.TimedStore{
		{Op: 2, Slot: 0, Value: a, Inv: 10, Resp: 11},
		{Op: 2, Slot: 1, Value: b, Inv: 12, Resp: 13},
		{Op: 2, Slot: 2, Value: late, Inv: 40, Resp: 41},
	}
	run := func(page0, page1 uint64) []Finding {
		o := Expected(p)
		o.Threads = []obs.ThreadLog{{Thread: 1, Stores: stores}}
		o.Ops[3].TSCStart, o.Ops[3].TSCEnd = 5, 30
		for i := range o.Views {
			v := &o.Views[i]
			if v.Proc == 1 && v.At == obs.AtStart {
				v.Words = []obs.Word{{Region: 0, Off: 0, Value: page0}, {Region: 0, Off: 0x1000, Value: page1}}
				v.Pages = []obs.PageDigest{
					{Region: 0, Page: 0, Digest: obs.WordDigest(0, page0), NonZero: 1},
					{Region: 0, Page: 1, Digest: obs.WordDigest(0x1000, page1), NonZero: 1},
				}
			}
		}
		var out []Finding
		for _, f := range Check(p, o).Findings {
			if f.Oracle == OracleLinearizability {
				out = append(out, f)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		page0, page1 uint64
		want         string // signature substring, "" for none
	}{
		{"one instant", a, b, ""},
		{"before both", init0, init1, ""},
		// Page 0 copied before t1's first store, page 1 after its second:
		// no single instant, but the pinned page was copied on its own.
		{"pinned page copied early", init0, b, ""},
		{"pinned page holds a value written after fork returned", late, b, "pinned-copy"},
		{"pinned page holds a value never written", 0, b, "pinned-copy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := run(tc.page0, tc.page1)
			if tc.want == "" {
				if len(fs) > 0 {
					t.Fatalf("unexpected finding: %s: %s", fs[0].Signature, fs[0].Explanation)
				}
				return
			}
			if len(fs) == 0 || !strings.Contains(fs[0].Signature, tc.want) {
				t.Fatalf("want a %s finding, got %v", tc.want, fs)
			}
			if !strings.Contains(fs[0].Explanation, "io_uring registration pinned") {
				t.Errorf("explanation: %s", fs[0].Explanation)
			}
		})
	}
}

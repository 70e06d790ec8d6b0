package judge

import (
	"reflect"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// TestAtFork checks that the per-fork evidence of an observation is summed
// into the verdict and the tally and said in the summary line.
func TestAtFork(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    obs.Observation
		want *AtFork
		says []string
	}{
		{"none", obs.Observation{Ops: []obs.OpResult{{Ran: true}}}, nil, nil},
		{"overlap", obs.Observation{Ops: []obs.OpResult{
			{Overlap: &obs.Overlap{Stores: 10, Inside: 7, Blocked: 2}},
			{Overlap: &obs.Overlap{}},
			{Ran: true},
		}}, &AtFork{WriterForks: 2, OverlapForks: 1, Overlap: obs.Overlap{Stores: 10, Inside: 7, Blocked: 2}},
			[]string{"1 of 2 forks with writer threads", "10 stores: 7 completed inside it, 2 blocked"}},
		{"movers", obs.Observation{Ops: []obs.OpResult{
			{Overlap: &obs.Overlap{Movers: true, MovePasses: 3, Moved: 100}},
			{Overlap: &obs.Overlap{Movers: true}},
			{Overlap: &obs.Overlap{Movers: true, Writers: true, Stores: 5, Inside: 5, MovePasses: 1, Moved: 4}},
		}}, &AtFork{WriterForks: 1, OverlapForks: 1, MoverForks: 3, MovedForks: 2,
			Overlap: obs.Overlap{Stores: 5, Inside: 5, MovePasses: 4, Moved: 104}},
			[]string{"1 of 1 forks with writer threads", "2 of 3 forks with migrating threads had page moves overlapping the fork call (104 pages moved in 4 passes)"}},
		{"census", obs.Observation{ForkPages: []obs.ForkPages{
			{Fork: 0, Present: 8, Swapped: 2, Flags: true, THP: 512, PMDMapped: 512, KSM: 3, Shared: 6, Exclusive: 2, Zero: 5},
			{Fork: 1, Present: 4, Shared: 4, Flags: true, HugeZero: 512, Hugetlb: 1024, Zero: 1, File: 7},
		}}, &AtFork{Censused: 2, Pages: obs.ForkPages{Present: 12, Swapped: 2, Flags: true, THP: 512, PMDMapped: 512, KSM: 3, Shared: 10, Exclusive: 2,
			Zero: 6, HugeZero: 512, Hugetlb: 1024, File: 7}},
			[]string{"pages at 2 forks: 12 resident before (2 swapped out", "512 THP of which 512 PMD-mapped, 3 KSM",
				"6 zeropage, 512 huge zeropage, 1024 hugetlb, 7 file page cache", "10 shared with the child, 2 exclusive",
				"forks with such pages: swapped 1, ksm 1, thp 1, pmd-thp 1, pte-thp 0, mlocked 0, uffd-wp 0, exclusive 1, zero 2, huge-zero 1, hugetlb 1, file 1 (of 2)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := atFork(&tc.o)
			if got != nil && tc.want != nil {
				tc.want.Held = got.Held // checked below
			}
			if (got == nil) != (tc.want == nil) || got != nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("atFork = %+v, want %+v", got, tc.want)
			}
			var tally Tally
			tally.Add(&Verdict{Judged: Judged{AtFork: got}})
			tally.Add(&Verdict{Judged: Judged{AtFork: got}})
			if got != nil && tally.AtFork.Overlap.Stores != 2*got.Overlap.Stores {
				t.Errorf("tally of two runs: %+v", tally.AtFork)
			}
			s := tally.AtFork.String()
			if got == nil && s != "" {
				t.Errorf("nothing seen but the summary says %q", s)
			}
			if got != nil {
				s = got.String()
			}
			for _, w := range tc.says {
				if !strings.Contains(s, w) {
					t.Errorf("summary %q does not say %q", s, w)
				}
			}
		})
	}
}

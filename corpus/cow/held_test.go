package cow

import (
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// Held names what a kind's pages lacked at the body's fork: a hugetlb
// kind needs hugetlb pages (not THP), a THP kind THP.
func TestHeld(t *testing.T) {
	find := func(file string) *Case {
		for _, c := range Cases() {
			if c.File == file {
				c := c
				return &c
			}
		}
		t.Fatalf("no case %s", file)
		return nil
	}
	for _, tc := range []struct {
		file string
		fp   obs.ForkPages
		want string
	}{
		{"cow--hugetlb-2m.ffz", obs.ForkPages{Present: 512, Flags: true, Hugetlb: 512}, ""},
		{"cow--hugetlb-2m.ffz", obs.ForkPages{Present: 512, Flags: true}, "no hugetlb"},
		{"cow--thp.ffz", obs.ForkPages{Present: 512, Flags: true, THP: 512, PMDMapped: 512}, ""},
		{"cow--thp.ffz", obs.ForkPages{Present: 512, Flags: true}, "no THP"},
		{"cow--base-swap.ffz", obs.ForkPages{Present: 1, Flags: true}, "not swapped"},
	} {
		_, note := Held(find(tc.file), &obs.Observation{ForkPages: []obs.ForkPages{tc.fp}})
		if note != tc.want {
			t.Errorf("%s with %+v: note %q, want %q", tc.file, tc.fp, note, tc.want)
		}
	}
}

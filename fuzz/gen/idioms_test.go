package gen

import (
	"math/rand/v2"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestTHPSplitIdiom: default programs with an anonymous private THP region
// of a whole PMD get cow.c's PTE-mapped THP shapes before their first
// fork now and then: a store into the PMD, then one page made read-only
// and writable again, or every page of the PMD but one zapped.
func TestTHPSplitIdiom(t *testing.T) {
	const n = 2000
	eligible, split, single := 0, 0, 0
	for i := 0; i < n; i++ {
		p := Generate(rand.New(rand.NewPCG(uint64(i), 7)), DefaultWeights())
		if err := p.Validate(); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		thp := map[int]bool{}
		for ri, r := range p.Regions {
			if r.Kind == prog.AnonPrivate && r.THP == prog.THPOn && r.Pages >= prog.PMDSize/prog.PageSize {
				thp[ri] = true
			}
		}
		if len(thp) == 0 {
			continue
		}
		eligible++
		ops := p.Ops
		if f := p.ForkOp(0); f >= 0 {
			ops = ops[:f]
		}
		for k := 1; k+1 < len(ops); k++ {
			a, b, prev := ops[k], ops[k+1], ops[k-1]
			if !thp[a.Region] || prev.Kind != prog.OpStore || prev.Region != a.Region || prev.Off/prog.PMDSize != a.Off/prog.PMDSize {
				continue
			}
			switch {
			case a.Kind == prog.OpMprotect && a.Prot == prog.ProtRead && a.Len == prog.PageSize &&
				b.Kind == prog.OpMprotect && b.Prot == prog.ProtRW && b.Off == a.Off && b.Len == a.Len:
				split++
			case a.Kind == prog.OpMadvise && a.Advice == prog.AdvDontneed && b.Kind == prog.OpMadvise && b.Advice == prog.AdvDontneed &&
				a.Off%prog.PMDSize == 0 && b.Off+b.Len == a.Off+prog.PMDSize && b.Off == a.Off+a.Len+prog.PageSize:
				single++
			}
		}
	}
	t.Logf("%d of %d programs have a whole-PMD THP region; %d split idioms, %d single-PTE idioms", eligible, n, split, single)
	if eligible == 0 || split == 0 || single == 0 || (split+single)*20 < eligible {
		t.Errorf("THP split idioms: %d split and %d single-PTE in %d eligible programs, want both and at least 5%%", split, single, eligible)
	}
}

package randprog

import (
	"math/rand/v2"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestEveryValueDrawn: the builder's programs are valid, and over a few
// hundred of them it draws every value of every enum it draws from (the
// counts come from fuzz/prog's descriptor tables, so a new advice,
// protection, region kind, THP advice or mremap flag is drawn without an
// edit here or there).
func TestEveryValueDrawn(t *testing.T) {
	advices := make([]int, prog.NumAdvices)
	prots := make([]int, prog.NumProts)
	// The hugetlb kinds are not drawn: the model and the simulated
	// kernel do not follow hugetlb semantics yet (the checker leaves such
	// programs unjudged).
	kinds := make([]int, prog.HugetlbPrivate)
	thps := make([]int, prog.NumTHPs)
	flags := make([]int, 1<<prog.NumMremapFlags)
	for seed := uint64(0); seed < 300; seed++ {
		p := Build(rand.New(rand.NewPCG(seed, 0)), 40)
		if err := p.Validate(); err != nil {
			t.Fatalf("seed %d: invalid program: %v\n%s", seed, err, p.Format())
		}
		for _, r := range p.Regions {
			kinds[r.Kind]++
			thps[r.THP]++
		}
		for _, op := range p.Ops {
			switch op.Kind {
			case prog.OpMadvise:
				advices[op.Advice]++
			case prog.OpMprotect:
				prots[op.Prot]++
			case prog.OpMremap:
				flags[op.Flags]++
			}
		}
	}
	never := func(what string, counts []int, name func(int) string) {
		t.Helper()
		for v, n := range counts {
			if n == 0 {
				t.Errorf("%s %s is never drawn", what, name(v))
			}
		}
	}
	never("advice", advices, func(v int) string { return prog.Advice(v).String() })
	never("prot", prots, func(v int) string { return prog.Prot(v).String() })
	never("region kind", kinds, func(v int) string { return prog.RegionKind(v).String() })
	never("thp", thps, func(v int) string { return prog.THP(v).String() })
	never("mremap flags", flags, func(v int) string { return prog.MremapFlags(v).String() })
}

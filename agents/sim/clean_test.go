package sim

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func nPrograms(t testing.TB, def int) int {
	if s := os.Getenv("SIM_N"); s != "" {
		n, _ := strconv.Atoi(s)
		return n
	}
	if testing.Short() {
		return def / 5
	}
	return def
}

// TestCleanModelsPass runs generated programs on every unmodified model:
// the checker and the page-table invariant must find nothing.
func TestCleanModelsPass(t *testing.T) {
	n := nPrograms(t, 500)
	for _, mode := range []Mode{Eager, OnDemand, Async} {
		tg, _ := NewTarget(Config{Mode: mode, SchedSeed: 7})
		bad := 0
		for i := 0; i < n; i++ {
			p := gen.Generate(rand.New(rand.NewPCG(11, uint64(i))), gen.DefaultWeights())
			o, err := tg.Run(p, execOpts)
			if err != nil {
				t.Fatal(err)
			}
			v := checker.Check(p, o)
			sigs, texts := KernelFindings(o)
			if len(v.Findings) == 0 && len(sigs) == 0 {
				continue
			}
			bad++
			if bad <= 2 {
				t.Errorf("%v: program %d:\n%s", mode, i, p.Format())
				for _, f := range v.Findings {
					t.Errorf("  %s", f.String())
				}
				for _, s := range texts {
					t.Errorf("  %s", s)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%v: %d of %d programs have findings", mode, bad, n)
		}
	}
}

var _ = prog.Version

// TestCleanModelsWithFailures injects allocation failures into forks: the
// unmodified models must still satisfy every oracle (a failed fork is
// allowed, a fork whose background copy failed kills the child).
func TestCleanModelsWithFailures(t *testing.T) {
	n := nPrograms(t, 300)
	for _, mode := range []Mode{Eager, OnDemand, Async} {
		tg, _ := NewTarget(Config{Mode: mode, SchedSeed: 3, FailRate: 0.5})
		bad := 0
		for i := 0; i < n; i++ {
			p := gen.Generate(rand.New(rand.NewPCG(12, uint64(i))), gen.DefaultWeights())
			o, err := tg.Run(p, execOpts)
			if err != nil {
				t.Fatal(err)
			}
			is := Judge(p, o)
			if len(is) == 0 {
				continue
			}
			bad++
			if bad <= 2 {
				t.Errorf("%v: program %d:\n%s", mode, i, p.Format())
				for _, x := range is {
					t.Errorf("  %s", x.Explanation)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%v: %d of %d programs have findings", mode, bad, n)
		}
	}
}

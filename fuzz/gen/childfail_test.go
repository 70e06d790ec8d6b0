package gen

import (
	"math/rand/v2"
	"testing"
)

// TestChildFailGenerated: with ChildFailProb set, the generator gives some
// forks of the main process childfail=K within bounds, never together with
// fail_nth, and the programs are valid.
func TestChildFailGenerated(t *testing.T) {
	w := DefaultWeights()
	w.ChildFailProb, w.FailNthProb = 0.5, 0.2
	seen := 0
	for seed := uint64(1); seed <= 200; seed++ {
		p := Generate(rand.New(rand.NewPCG(seed, 0)), w)
		if err := p.Validate(); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, p.Format())
		}
		for _, op := range p.Ops {
			if op.ChildFail > 0 {
				seen++
				if op.Proc != 0 || op.FailNth > 0 || op.ChildFail > w.MaxChildFail {
					t.Fatalf("seed %d: %v", seed, op)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no childfail generated in 200 programs")
	}
}

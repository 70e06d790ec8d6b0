package corpus

import (
	"math/rand/v2"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/minimize"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestSeedsMutateAndMinimize checks that the seeds work as fuzzing and
// minimization inputs: mutations of them are valid, and minimizing a seed
// for "has a fork and a store in process 0" ends at three operations.
func TestSeedsMutateAndMinimize(t *testing.T) {
	seeds := Seeds()
	var progs []*prog.Program
	for _, s := range seeds {
		progs = append(progs, s.Prog)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range seeds {
		for i := 0; i < 50; i++ {
			q := gen.Mutate(r, s.Prog, progs, gen.DefaultWeights())
			if err := q.Validate(); err != nil {
				t.Fatalf("%s: mutation invalid: %v", s.Name, err)
			}
		}
		pred := func(p *prog.Program) bool {
			fork, store := false, false
			for _, op := range p.Ops {
				fork = fork || op.Kind == prog.OpFork
				store = store || (op.Kind == prog.OpStore && op.Proc == 0)
			}
			return fork && store
		}
		if !pred(s.Prog) {
			continue
		}
		q, _ := minimize.Minimize(s.Prog, pred)
		if len(q.Ops) != 3 {
			t.Errorf("%s minimizes to\n%s", s.Name, q.Format())
		}
	}
}

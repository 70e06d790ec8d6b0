package gen

import (
	"math/rand/v2"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The generator produces every operation kind and every advice (across its
// profiles), and Repair keeps each kind's example program as it is.
func TestEveryValueGenerated(t *testing.T) {
	kinds := make([]int, prog.NumOpKinds)
	advices := make([]int, prog.NumAdvices)
	for _, name := range []string{"default", "threads", "pinned"} {
		w, err := Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 400; i++ {
			p := Generate(rand.New(rand.NewPCG(5, uint64(i))), w)
			for _, op := range p.Ops {
				kinds[op.Kind]++
				if op.Kind == prog.OpMadvise {
					advices[op.Advice]++
				}
			}
		}
	}
	for k, n := range kinds {
		if n == 0 {
			t.Errorf("no generated program has a %v operation", prog.OpKind(k))
		}
	}
	for a, n := range advices {
		if n == 0 {
			t.Errorf("no generated madvise has advice %v", prog.Advice(a))
		}
	}
	for k := prog.OpKind(0); int(k) < prog.NumOpKinds; k++ {
		p := prog.Example(k)
		if q := Repair(p); string(q.Format()) != string(p.Format()) {
			t.Errorf("Repair changed the valid example of %v:\n%s\ninto\n%s", k, p.Format(), q.Format())
		}
	}
}

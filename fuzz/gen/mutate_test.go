package gen

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func TestMutateValid(t *testing.T) {
	r, _ := testRand(t)
	w := DefaultWeights()
	var corpus []*prog.Program
	for i := 0; i < 20; i++ {
		corpus = append(corpus, Generate(r, w))
	}
	same := 0
	n := iters(10000)
	p := corpus[0]
	for i := 0; i < n; i++ {
		if i%50 == 0 {
			p = corpus[r.IntN(len(corpus))]
		}
		before := p.Format()
		q := Mutate(r, p, corpus, w)
		if !bytes.Equal(p.Format(), before) {
			t.Fatalf("Mutate modified its input")
		}
		checkProgram(t, q, "mutate")
		checkBounds(t, q, w)
		if bytes.Equal(q.Format(), before) {
			same++
		}
		if i%10 == 0 && len(corpus) < 200 {
			corpus = append(corpus, q)
		}
		p = q
	}
	if same > n/100 {
		t.Errorf("%d of %d mutations changed nothing", same, n)
	}
}

// TestMutateEachKind runs every kind of mutation alone.
func TestMutateEachKind(t *testing.T) {
	r, _ := testRand(t)
	corpus := []*prog.Program{Generate(r, DefaultWeights()), Generate(r, DefaultWeights())}
	kinds := []struct {
		name string
		set  func(*MutationWeights)
	}{
		{"insert", func(m *MutationWeights) { m.Insert = 1 }},
		{"remove", func(m *MutationWeights) { m.Remove = 1 }},
		{"change", func(m *MutationWeights) { m.Change = 1 }},
		{"region", func(m *MutationWeights) { m.Region = 1 }},
		{"splice", func(m *MutationWeights) { m.Splice = 1 }},
		{"dupfork", func(m *MutationWeights) { m.DupFork = 1 }},
		{"swap", func(m *MutationWeights) { m.Swap = 1 }},
		{"race", func(m *MutationWeights) { m.Race = 1 }},
		{"crossover", func(m *MutationWeights) { m.Crossover = 1 }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			w := DefaultWeights()
			w.Mutations = MutationWeights{}
			k.set(&w.Mutations)
			for i := 0; i < iters(1000); i++ {
				p := Generate(r, w)
				q := Mutate(r, p, corpus, w)
				checkProgram(t, q, k.name)
				if k.name == "remove" && len(q.Ops) >= len(p.Ops) && len(p.Ops) > 0 {
					t.Fatalf("remove did not shrink:\n%s\n---\n%s", p.Format(), q.Format())
				}
				if k.name == "dupfork" && p.NumForks() > 0 && p.NumForks() < prog.MaxForks/2 && len(p.Ops) <= w.MaxOps && q.NumForks() <= p.NumForks() {
					t.Fatalf("dupfork added no fork:\n%s\n---\n%s", p.Format(), q.Format())
				}
			}
		})
	}
}

func TestMutateRepairsInvalidInput(t *testing.T) {
	r, _ := testRand(t)
	bad := &prog.Program{Ops: []prog.Op{{Kind: prog.OpFork}, {Proc: 1, Kind: prog.OpStore, Count: 1, Stride: 8}}}
	for i := 0; i < 100; i++ {
		checkProgram(t, Mutate(r, bad, []*prog.Program{nil, bad}, DefaultWeights()), "mutate invalid")
	}
}

func TestMutateEmptyProgram(t *testing.T) {
	r, _ := testRand(t)
	p := &prog.Program{Regions: []prog.Region{{Kind: prog.MemfdShared, Pages: 3}}}
	for i := 0; i < 200; i++ {
		q := Mutate(r, p, nil, DefaultWeights())
		checkProgram(t, q, "mutate empty")
	}
}

func FuzzMutate(f *testing.F) {
	f.Add([]byte("seed"), uint64(1))
	f.Add([]byte{}, uint64(7))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		p := FromBytes(data)
		r := rand.New(rand.NewPCG(seed, seed))
		q := Mutate(r, p, []*prog.Program{p, FromBytes(append([]byte{1}, data...))}, DefaultWeights())
		checkProgram(t, q, "mutate")
	})
}

// checkBounds fails unless q stays within w's memory bounds.
func checkBounds(t *testing.T, q *prog.Program, w Weights) {
	t.Helper()
	total := 0
	for _, r := range q.Regions {
		total += r.Pages
	}
	if len(q.Regions) > w.MaxRegions {
		t.Fatalf("%d regions > %d", len(q.Regions), w.MaxRegions)
	}
	if total > w.MaxTotalPages {
		t.Fatalf("%d pages > %d\n%s", total, w.MaxTotalPages, q.Format())
	}
	for _, op := range q.Ops {
		if (op.Kind == prog.OpStore || op.Kind == prog.OpPwrite) && touchedPages(op) > w.MaxStorePages+1 {
			t.Fatalf("%v touches %d pages", op, touchedPages(op))
		}
	}
}

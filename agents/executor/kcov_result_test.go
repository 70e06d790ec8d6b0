package executor

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// fakeKcov is a kcovState whose sets hold what a program of forks
// children recorded: the main process pcs PCs and 3/2 as many edges,
// each child a share of them plus some of its own (seeded).
func fakeKcov(seed uint64, forks, pcs int) *kcovState {
	r := rand.New(rand.NewPCG(seed, 0))
	k := &kcovState{ok: true, on: true}
	for i := range k.area {
		k.area[i] = make([]uint64, 2)
	}
	k.pcs[0], k.edges[0] = make([]uint64, kcovMainPCs+1), make([]uint64, kcovMainEdges+1)
	base := make([]uint64, pcs)
	for i := range base {
		base[i] = 0xffffffff81000000 + uint64(r.IntN(16<<20))&^3
	}
	fill := func(i, n int, share float64) {
		for j := 0; j < n; j++ {
			pc := base[r.IntN(len(base))]
			if r.Float64() > share {
				pc = 0xffffffff81000000 + uint64(r.IntN(16<<20))&^3
			}
			setAdd(k.pcs[i], pc)
			setAdd(k.edges[i], edgeHash(base[r.IntN(len(base))], pc))
			setAdd(k.edges[i], edgeHash(pc, base[r.IntN(len(base))]))
		}
	}
	fill(0, pcs, 1)
	for f := 1; f <= forks; f++ {
		k.pcs[f], k.edges[f] = make([]uint64, kcovChildPCs+1), make([]uint64, kcovChildEdges+1)
		fill(f, pcs/3, 0.9)
	}
	return k
}

// result's merge of every process's sets gives each PC and folded edge
// once, sorted, whatever the order of the processes.
func TestKcovResultMerge(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		k := fakeKcov(seed, 3, 4000)
		c := k.result(3)
		want := map[uint64]bool{}
		wantE := map[uint32]bool{}
		for i := 0; i <= 3; i++ {
			for _, pc := range k.pcs[i][1:] {
				if pc != 0 {
					want[pc] = true
				}
			}
			for _, e := range k.edges[i][1:] {
				if e != 0 {
					wantE[uint32(e>>32)^uint32(e)] = true
				}
			}
		}
		if len(c.PCs) != len(want) || len(c.Edges) != len(wantE) || c.Procs != 4 {
			t.Fatalf("seed %d: %d PCs (want %d), %d edges (want %d), %d procs", seed, len(c.PCs), len(want), len(c.Edges), len(wantE), c.Procs)
		}
		if !slices.IsSorted(c.PCs) || !slices.IsSorted(c.Edges) {
			t.Fatalf("seed %d: not sorted", seed)
		}
		for _, pc := range c.PCs {
			if !want[pc] {
				t.Fatalf("seed %d: PC %#x was not recorded", seed, pc)
			}
		}
		for _, e := range c.Edges {
			if !wantE[e] {
				t.Fatalf("seed %d: edge %#x was not recorded", seed, e)
			}
		}
	}
}

// BenchmarkKcovResult: merging a program's sets (main process and 3
// children, 12,000 PCs in the main one) into the observation's coverage.
func BenchmarkKcovResult(b *testing.B) {
	k := fakeKcov(1, 3, 12000)
	b.ResetTimer()
	for range b.N {
		k.result(3)
	}
}

func TestRadixSort32(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 0)) // seed 7
	for _, n := range []int{0, 1, 255, 256, 1000, 70000} {
		a := make([]uint32, n)
		for i := range a {
			a[i] = r.Uint32()
			if i%5 == 0 && i > 0 {
				a[i] = a[i-1] // duplicates
			}
		}
		want := slices.Clone(a)
		slices.Sort(want)
		if got := radixSort32(a); !slices.Equal(got, want) {
			t.Fatalf("n=%d: not sorted as slices.Sort sorts", n)
		}
	}
}

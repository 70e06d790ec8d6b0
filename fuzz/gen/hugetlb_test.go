package gen

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Where the target has hugetlb pages, generated programs get a hugetlb
// region whose operations the checker models, within half the target's
// pages; where it has none, the programs are exactly those drawn before
// hugetlb regions existed (no extra random draw).
func TestGenerateHugetlb(t *testing.T) {
	w := DefaultWeights()
	w.HugetlbProb, w.HugetlbFree = 1, 16
	huge := 0
	for i := 0; i < 200; i++ {
		p := Generate(rand.New(rand.NewPCG(7, uint64(i))), w)
		if err := p.Validate(); err != nil {
			t.Fatalf("program %d: %v\n%s", i, err, p.Format())
		}
		hr := -1
		for j, r := range p.Regions {
			if r.Kind.Hugetlb() {
				if hr >= 0 {
					t.Fatalf("program %d: two hugetlb regions\n%s", i, p.Format())
				}
				hr = j
			}
		}
		if hr < 0 {
			continue
		}
		huge++
		r := p.Regions[hr]
		need := r.Pages / prog.HugetlbPages
		if !r.Kind.Shared() {
			need *= 1 + p.NumForks()
		}
		if need > w.HugetlbFree/2 {
			t.Errorf("program %d: %s region of %d pages with %d forks may need %d huge pages, more than half of %d", i, r.Kind, r.Pages, p.NumForks(), need, w.HugetlbFree)
		}
		for k, op := range p.Ops {
			if usesRegion(op.Kind) && op.Region == hr && !hugetlbOK(op.Kind) {
				t.Errorf("program %d op %d: %s on the hugetlb region", i, k, op.Kind)
			}
		}
	}
	if huge < 190 {
		t.Errorf("%d of 200 programs have a hugetlb region with HugetlbProb 1", huge)
	}
	none := DefaultWeights()
	none.HugetlbProb = 0
	for i := 0; i < 50; i++ {
		a := Generate(rand.New(rand.NewPCG(7, uint64(i))), DefaultWeights())
		b := Generate(rand.New(rand.NewPCG(7, uint64(i))), none)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("program %d differs with HugetlbFree 0:\n%s\n---\n%s", i, a.Format(), b.Format())
		}
	}
}

// A mutation of a program with a hugetlb region keeps it within the
// target's pages and drops the operations the checker does not model on
// it (a mutated mremap of a hugetlb memfd mapping was a false finding).
func TestMutateHugetlb(t *testing.T) {
	w := DefaultWeights()
	w.HugetlbProb, w.HugetlbFree = 1, 16
	for i := 0; i < 200; i++ {
		r := rand.New(rand.NewPCG(9, uint64(i)))
		p := Mutate(r, Generate(r, w), nil, w)
		if err := p.Validate(); err != nil {
			t.Fatalf("mutation %d: %v\n%s", i, err, p.Format())
		}
		for _, reg := range p.Regions {
			need := reg.Pages / prog.HugetlbPages
			if reg.Kind.Hugetlb() && !reg.Kind.Shared() {
				need *= 1 + p.NumForks()
			}
			if reg.Kind.Hugetlb() && need > w.HugetlbFree/2 {
				t.Errorf("mutation %d: %s region of %d pages with %d forks", i, reg.Kind, reg.Pages, p.NumForks())
			}
		}
		for k, op := range p.Ops {
			huge := op.Region < len(p.Regions) && p.Regions[op.Region].Kind.Hugetlb()
			if usesRegion(op.Kind) && huge && !hugetlbOK(op.Kind) {
				t.Errorf("mutation %d op %d: %s on a hugetlb region", i, k, op.Kind)
			}
		}
	}
}

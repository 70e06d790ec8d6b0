package gen

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestFileRegions: without file systems the generator draws nothing more
// (the same programs as with FileProb 0); with them, file regions appear
// only on the target's file systems, at most MaxFilePages big, in valid
// programs; mutations for a target without ext4 carry no ext4 region.
func TestFileRegions(t *testing.T) {
	w := DefaultWeights()
	off := w
	off.FileProb = 0
	for i := 0; i < 100; i++ {
		a := Generate(rand.New(rand.NewPCG(3, uint64(i))), w)
		b := Generate(rand.New(rand.NewPCG(3, uint64(i))), off)
		if string(a.Format()) != string(b.Format()) {
			t.Fatalf("program %d differs without file systems:\n%s\nvs\n%s", i, a.Format(), b.Format())
		}
	}
	w.FileProb, w.FileSystems = 1, []prog.FS{prog.Ext4}
	files := 0
	for i := 0; i < 200; i++ {
		p := Generate(rand.New(rand.NewPCG(4, uint64(i))), w)
		if err := p.Validate(); err != nil {
			t.Fatalf("program %d: %v\n%s", i, err, p.Format())
		}
		for _, r := range p.Regions {
			if f := r.Kind.FS(); f != prog.NoFS {
				files++
				if f != prog.Ext4 || r.Pages > MaxFilePages {
					t.Errorf("program %d: region %+v", i, r)
				}
			}
		}
	}
	if files < 150 {
		t.Errorf("%d file regions in 200 programs with FileProb 1", files)
	}
	tmpfsOnly := DefaultWeights()
	tmpfsOnly.FileSystems = []prog.FS{prog.Tmpfs}
	for i := 0; i < 100; i++ {
		r := rand.New(rand.NewPCG(5, uint64(i)))
		p := Mutate(r, Generate(r, w), nil, tmpfsOnly)
		if err := p.Validate(); err != nil {
			t.Fatalf("mutation %d: %v", i, err)
		}
		for _, reg := range p.Regions {
			if f := reg.Kind.FS(); f != prog.NoFS && !slices.Contains(tmpfsOnly.FileSystems, f) {
				t.Errorf("mutation %d: %s region for a target with tmpfs only", i, reg.Kind)
			}
		}
	}
}

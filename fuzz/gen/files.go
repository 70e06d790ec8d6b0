package gen

import (
	"slices"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// File regions (issue 31): where the target has a directory on a file
// kind's file system (Weights.FileSystems, set by the campaign from the
// target), a generated program gets a file region with probability
// Weights.FileProb: one of its regions, drawn at random (not a hugetlb
// one), becomes the file kind with its sharing on one of those file
// systems, at most MaxFilePages big. Every operation valid on the region
// stays valid (the file kinds take what memfd kinds take, and the model
// keeps the memfd rules, checker/filekinds.go).

// MaxFilePages bounds a generated file region's pages: an ext4 file's
// written pages take guest memory twice (page cache and the in-memory
// image behind the file system, agents/vm/ext4img.go).
const MaxFilePages = 4096

// fileRegion turns one region of the finished program into a file region
// and says whether it did. It draws nothing when the target has no file
// system, so such campaigns generate the programs they always did.
func (g *generator) fileRegion() bool {
	if len(g.w.FileSystems) == 0 || g.w.FileProb <= 0 || !chance(g.r, g.w.FileProb) || len(g.p.Regions) == 0 {
		return false
	}
	r := &g.p.Regions[g.r.IntN(len(g.p.Regions))]
	fs := g.w.FileSystems[g.r.IntN(len(g.w.FileSystems))]
	if r.Kind.Hugetlb() {
		return false
	}
	r.Kind = prog.FileKind(fs, r.Kind.Shared())
	r.Pages = min(r.Pages, MaxFilePages)
	return true
}

// fitFiles turns p's file regions on file systems not in have into the
// memfd kind with the same sharing (same rules) and says whether it
// changed p. Mutate applies it: a mutated region kind or a corpus program
// from another target may name a file system this one lacks.
func fitFiles(p *prog.Program, have []prog.FS) bool {
	changed := false
	for i := range p.Regions {
		r := &p.Regions[i]
		if f := r.Kind.FS(); f != prog.NoFS && !slices.Contains(have, f) {
			r.Kind = r.Kind.Base()
			changed = true
		}
	}
	return changed
}

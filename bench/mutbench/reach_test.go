package mutbench

import (
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// Every mutant has a trigger condition, and the default generator meets
// the common ones often (a change that loses them shows here first).
// The short profile's programs (gen.Weights.Short) must reach every
// mutant too.
func TestReach(t *testing.T) {
	const n = 1000
	w := QEMUWeights(gen.DefaultWeights())
	got := Reach(w, 1, n)
	short := Reach(w.Short(), 1, n)
	for _, m := range kernel.Mutants {
		t.Logf("%-20s %5.1f%% of %d programs, %5.1f%% of short ones", m.Name, 100*float64(got[m.Name])/n, n, 100*float64(short[m.Name])/n)
		if short[m.Name] < n/100 {
			t.Errorf("%s: trigger met by %d of %d short programs, want at least 1%%", m.Name, short[m.Name], n)
		}
	}
	for name := range got {
		if _, err := kernel.MutantByName(name); err != nil {
			t.Errorf("a trigger for %s, which is not a mutant", name)
		}
	}
	// No mutant out of reach: the idioms (fuzz/gen/idioms.go) bring the
	// rare shapes (keeponfork after wipeonfork, a grandchild of a wiped
	// region, a pinned page at the first fork, vmsplice across COW) to a
	// few percent.
	for _, m := range kernel.Mutants {
		if got[m.Name] < n*3/100 {
			t.Errorf("%s: trigger met by %d of %d programs, want at least 3%%", m.Name, got[m.Name], n)
		}
	}
	for _, name := range []string{"wp-src-memfd", "wp-src-hugepage-pte", "wp-src-pmd", "nocopy-hugepage", "wipeonfork-copied", "mlock-reuse", "gup-write-shared"} {
		if got[name] < n/20 {
			t.Errorf("%s: trigger met by %d of %d programs, want at least 5%%", name, got[name], n)
		}
	}
}

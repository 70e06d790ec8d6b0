package cow

import (
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestSimMutants runs the cow.c programs on the simulated kernel: every
// one passes on each fork model without a bug, and the copy-on-write bugs
// cow.c is about are caught: eager-cow-reuse (a COW fault reuses a page
// still mapped twice) and eager-no-wrprotect (fork leaves private PTEs
// writable). The log says how many programs catch each catalogued bug.
// -short runs those two only.
func TestSimMutants(t *testing.T) {
	var progs []*prog.Program
	var names []string
	for _, c := range Cases() {
		if c.Missing != "" {
			continue
		}
		p, err := c.Parse()
		if err != nil {
			t.Fatal(err)
		}
		if simLacks(p) {
			continue // the simulated kernel has no hugetlb pages and no ext4
		}
		progs, names = append(progs, p), append(names, c.File)
	}
	caught := func(cfg sim.Config) (n int, first string) {
		tg, err := sim.NewTarget(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range progs {
			o, runErr := tg.Run(p, agents.Options{})
			v, err := judge.Judge(p, o, runErr)
			if err != nil {
				t.Fatalf("%s on %s: judge: %v", names[i], tg.Name(), err)
			}
			if !v.OK() {
				if n == 0 {
					first = names[i] + ": " + v.Signatures()[0]
				}
				n++
			}
		}
		return n, first
	}
	for _, mode := range []sim.Mode{sim.Eager, sim.OnDemand, sim.Async} {
		if n, first := caught(sim.Config{Mode: mode}); n > 0 {
			t.Errorf("sim-%v without a bug: %d programs fail, first %s", mode, n, first)
		}
	}
	must := map[string]bool{"eager-cow-reuse": true, "eager-no-wrprotect": true}
	for _, m := range sim.Mutants() {
		if testing.Short() && !must[m.Name] {
			continue
		}
		n, first := caught(sim.Config{Mode: m.Mode, Mutant: m.Name})
		t.Logf("%-26s caught by %2d of %d programs %s", m.Name, n, len(progs), first)
		if must[m.Name] && n == 0 {
			t.Errorf("%s (%s): no cow.c program catches it", m.Name, m.Desc)
		}
	}
}

// simLacks says whether p has a region the simulated kernel lacks
// (hugetlb pages, ext4).
func simLacks(p *prog.Program) bool {
	for _, r := range p.Regions {
		if r.Kind.Hugetlb() || r.Kind.FS() == prog.Ext4 {
			return true
		}
	}
	return false
}

package hostcmp

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/sim"
)

// TestModelCmpModels: the simulated Async-fork agrees with the simulated
// eager fork on every comparable program; a simulated eager fork with a
// catalogued bug (standing in for a kernel) differs, in classes the
// eager model shares, and none of them is explained.
func TestModelCmpModels(t *testing.T) {
	w, err := Weights("default")
	if err != nil {
		t.Fatal(err)
	}
	eager, _ := sim.NewTarget(sim.Config{Mode: sim.Eager})
	c := &ModelCmp{Target: eager, Mode: sim.Async, SchedSeed: 3}
	for i := 0; c.Programs < 50; i++ {
		c.One(Generate(7, i, w))
	}
	if c.Agree != 50 || c.ModelsDiffer != 0 || len(c.Classes) != 0 {
		var b strings.Builder
		c.Report(&b)
		t.Errorf("simulated async vs eager fork:\n%s", b.String())
	}

	bad, _ := sim.NewTarget(sim.Config{Mode: sim.Eager, Mutant: "eager-no-wrprotect"})
	c = &ModelCmp{Target: bad, Mode: sim.Async}
	for i := 0; c.Programs < 50; i++ {
		c.One(Generate(7, i, w))
	}
	var b strings.Builder
	c.Report(&b)
	t.Log(b.String())
	if c.Differ == 0 || len(c.Unexplained()) == 0 {
		t.Fatalf("a mutant kernel gave no unexplained difference:\n%s", b.String())
	}
	for _, cl := range c.Classes {
		if cl.AlsoEager != cl.Programs {
			t.Errorf("class %s: the eager model shares it on %d of %d programs, want all (the mutant is eager)", cl.Name, cl.AlsoEager, cl.Programs)
		}
		if !strings.HasPrefix(cl.Name, "view:") && !strings.HasPrefix(cl.Name, "op:") && !strings.HasPrefix(cl.Name, "views:") {
			t.Errorf("class %q: not a known shape", cl.Name)
		}
	}
	if !strings.Contains(b.String(), "| UNEXPLAINED: ") {
		t.Errorf("the report does not mark unexplained classes:\n%s", b.String())
	}
}

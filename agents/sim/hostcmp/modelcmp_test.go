package hostcmp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
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

// TestLinux61Recorded: observations recorded on Linux 6.1.192 in QEMU
// (checker/testdata/linux61) agree with the simulated kernel told that
// release, and at least one differs from the model of 6.18: the version
// rules (mremap before 6.17) bite.
func TestLinux61Recorded(t *testing.T) {
	files, _ := filepath.Glob("../../../checker/testdata/linux61/*.ffz")
	if len(files) == 0 {
		t.Fatal("no recorded 6.1 observations")
	}
	compared, differ618 := 0, 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := prog.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		if Comparable(p) != "" {
			continue
		}
		b, err := os.ReadFile(strings.TrimSuffix(f, ".ffz") + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var o obs.Observation
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatal(err)
		}
		compared++
		for _, kernel := range []string{o.Kernel, "6.18.0"} {
			so, k, err := sim.Run(p, sim.Config{Mode: sim.Eager, Kernel: kernel}, 0)
			if err != nil {
				t.Fatal(err)
			}
			k.Release()
			d := Compare(p, &o, so)
			switch {
			case kernel == o.Kernel && len(d) > 0:
				t.Errorf("%s: the model of %s differs from the recording: %v", filepath.Base(f), kernel, d)
			case kernel != o.Kernel && len(d) > 0:
				differ618++
			}
		}
	}
	if compared == 0 || differ618 == 0 {
		t.Errorf("%d recorded programs compared, %d differ from the 6.18 model: want some of each", compared, differ618)
	}
}

func TestExplain(t *testing.T) {
	defer func(k map[string]string) { KnownClasses = k }(KnownClasses)
	KnownClasses = map[string]string{"op:*": "any op", "op:mremap:*": "mremap", "view:runs:main-end": "exact"}
	for class, want := range map[string]string{
		"op:mremap:errno EFAULT/0": "mremap", "op:madvise:errno 0/ENOMEM": "any op",
		"view:runs:main-end": "exact", "view:runs:child-start": "",
	} {
		if got := Explain(class); got != want {
			t.Errorf("Explain(%q) = %q, want %q", class, got, want)
		}
	}
}

package gate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// coverRecorder is a simulated kernel recording, for each program it
// ran, how often it ran with and without kernel coverage.
type coverRecorder struct {
	*sim.Target
	mu  sync.Mutex
	ran map[string][2]int // progHash -> runs with coverage, without
}

func (c *coverRecorder) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	c.mu.Lock()
	if c.ran == nil {
		c.ran = map[string][2]int{}
	}
	n := c.ran[progHash(p)]
	if opt.NoCover {
		n[1]++
	} else {
		n[0]++
	}
	c.ran[progHash(p)] = n
	c.mu.Unlock()
	return c.Target.Run(p, opt)
}

func (c *coverRecorder) runs(p *prog.Program) [2]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ran[progHash(p)]
}

// A blind gate samples coverage in its fuzz phase as forkfuzz run does,
// and replays every finding (minimization, confirm, baseline, fresh) the
// way the run that showed it ran: KCOV slows the kernel 1.3-1.5x, and a
// race replayed under other timing could be confirmed or dismissed for
// the wrong reason. Corpus replays collect no coverage (nothing in a gate
// reads it). A finding's replay commands say --no-cover when it ran so.
func TestGateReplaysAsRun(t *testing.T) {
	mut, err := sim.NewTarget(sim.Config{Mode: sim.Eager, Mutant: "eager-no-wrprotect"})
	if err != nil {
		t.Fatal(err)
	}
	tut, base := &coverRecorder{Target: mut}, &coverRecorder{Target: simTarget(t)}
	cfg := Config{
		Open:         func() (agents.Target, error) { return tut, nil },
		OpenBaseline: func() (agents.Target, error) { return base, nil },
		Kernel:       KernelIdentity{Target: "sim-eager"}, Baseline: &KernelIdentity{Target: "sim-eager"},
		Budget: 12 * time.Second, Seed: 7, Workdir: filepath.Join(t.TempDir(), "w"), MinPrograms: 1, MinimizeRuns: 20,
	}
	r := Run(context.Background(), cfg)
	if r.ExitCode != 1 || len(r.Findings) == 0 {
		t.Fatalf("exit %d with %d findings, want the mutant's findings: %s", r.ExitCode, len(r.Findings), r.Reason)
	}
	uncovered, baselined := 0, 0
	for _, f := range r.Findings {
		if f.NoCover {
			uncovered++
		}
		if strings.Contains(f.Replay, "--no-cover") != f.NoCover {
			t.Errorf("%s: no_cover %v, replay %q", f.Signature, f.NoCover, f.Replay)
		}
		if b := f.Baseline; b != nil && strings.Contains(b.Command, "--no-cover") != f.NoCover {
			t.Errorf("%s: no_cover %v, baseline replay %q", f.Signature, f.NoCover, b.Command)
		}
		for name, p := range map[string]*prog.Program{"program": f.origProg, "reproducer": f.reproProg} {
			n := tut.runs(p)
			if f.NoCover && n[0] > 0 || !f.NoCover && n[1] > 0 {
				t.Errorf("%s (no_cover %v): its %s ran %d times with coverage, %d without", f.Signature, f.NoCover, name, n[0], n[1])
			}
		}
		n := base.runs(f.reproProg)
		if f.NoCover && n[0] > 0 || !f.NoCover && n[1] > 0 {
			t.Errorf("%s (no_cover %v): the baseline ran its reproducer %d times with coverage, %d without", f.Signature, f.NoCover, n[0], n[1])
		}
		if n[0]+n[1] > 0 {
			baselined++
		}
	}
	if uncovered == 0 || baselined == 0 {
		t.Errorf("%d of %d findings ran without coverage, %d replayed on the baseline: the test shows nothing", uncovered, len(r.Findings), baselined)
	}
	ran := 0
	for _, c := range r.Corpus {
		if c.Status == "skipped" {
			continue
		}
		ran++
		if n := tut.runs(c.prog); c.Cover || n[0] > 0 {
			t.Errorf("corpus %s: kcov %v, ran %d times with coverage", c.Name, c.Cover, n[0])
		}
	}
	if ran == 0 {
		t.Error("no corpus program ran")
	}
}

// A claimed fix whose reproducer is a finding's program that ran without
// coverage runs that way on both kernels, and its commands say so; a
// plain program file collects as before.
func TestFixesRunAsFound(t *testing.T) {
	const text = "forkfuzz v1\nregion r0 anon-private pages=4 thp=off\nstore r0 off=0x0 count=4 stride=0x1000\nfork f0\nwait f0\n"
	dir := t.TempDir()
	found := filepath.Join(dir, "finding")
	if err := os.MkdirAll(found, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.ffz")
	for path, b := range map[string]string{filepath.Join(found, "minimized.ffz"): text, filepath.Join(found, "seed"): "campaign-seed 1\nprogram-index 2\nprogram-seed 3\nkcov off\n", plain: text} {
		if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixes, err := LoadFixes([]string{filepath.Join(found, "minimized.ffz"), plain})
	if err != nil {
		t.Fatal(err)
	}
	if len(fixes) != 2 || !fixes[0].NoCover || fixes[1].NoCover {
		t.Fatalf("fixes %+v: want the finding's without coverage, the plain file's with", fixes)
	}
	tut, base := &coverRecorder{Target: simTarget(t)}, &coverRecorder{Target: simTarget(t)}
	r := Run(context.Background(), Config{
		Open:         func() (agents.Target, error) { return tut, nil },
		OpenBaseline: func() (agents.Target, error) { return base, nil },
		Kernel:       KernelIdentity{Target: "sim-eager"}, Baseline: &KernelIdentity{Target: "sim-eager"},
		Budget: 8 * time.Second, Seed: 1, Workdir: filepath.Join(dir, "w"), MinPrograms: 1, Fixes: fixes[:1], FixRuns: 2,
	})
	if len(r.Fixes) != 1 {
		t.Fatalf("%d fix cases in the result", len(r.Fixes))
	}
	f := r.Fixes[0]
	if f.BaselineRuns == 0 || f.PatchedRuns == 0 {
		t.Fatalf("fix case ran %d/%d times: %+v", f.BaselineRuns, f.PatchedRuns, f)
	}
	for name, rec := range map[string]*coverRecorder{"baseline": base, "patched": tut} {
		if n := rec.runs(fixes[0].prog); n[0] > 0 || n[1] == 0 {
			t.Errorf("%s kernel: the reproducer ran %d times with coverage, %d without", name, n[0], n[1])
		}
	}
	if !strings.Contains(f.BaselineCommand, "--no-cover") || !strings.Contains(f.PatchedCommand, "--no-cover") {
		t.Errorf("commands %q, %q lack --no-cover", f.BaselineCommand, f.PatchedCommand)
	}
}

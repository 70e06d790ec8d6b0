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
// ran, how often it ran in each mode (with or without kernel coverage and
// the page census).
type coverRecorder struct {
	*sim.Target
	mu  sync.Mutex
	ran map[string]map[RunMode]int // progHash -> runs per mode
}

func (c *coverRecorder) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	c.mu.Lock()
	if c.ran == nil {
		c.ran = map[string]map[RunMode]int{}
	}
	h := progHash(p)
	if c.ran[h] == nil {
		c.ran[h] = map[RunMode]int{}
	}
	c.ran[h][RunMode{NoCover: opt.NoCover, NoCensus: opt.NoForkPages}]++
	c.mu.Unlock()
	return c.Target.Run(p, opt)
}

// otherModes is how often p ran in a mode other than m, and in all.
func (c *coverRecorder) otherModes(p *prog.Program, m RunMode) (other, all int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for mode, n := range c.ran[progHash(p)] {
		all += n
		if mode != m {
			other += n
		}
	}
	return other, all
}

// A blind gate samples coverage and the page census in its fuzz phase as
// forkfuzz run does, and replays every finding (minimization, confirm,
// baseline, fresh) the way the run that showed it ran: KCOV slows the
// kernel 1.3-1.5x and the census reads /proc around every fork, and a
// race replayed under other timing could be confirmed or dismissed for
// the wrong reason. Corpus replays collect no coverage (nothing in a gate
// reads it) and take the census. A finding's replay commands say
// --no-cover and --no-census when it ran so.
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
	uncovered, uncensused, baselined := 0, 0, 0
	for _, f := range r.Findings {
		if f.NoCover {
			uncovered++
		}
		if f.NoCensus {
			uncensused++
		}
		for flag, on := range map[string]bool{"--no-cover": f.NoCover, "--no-census": f.NoCensus} {
			if strings.Contains(f.Replay, flag) != on {
				t.Errorf("%s: %+v, replay %q", f.Signature, f.RunMode, f.Replay)
			}
			if b := f.Baseline; b != nil && strings.Contains(b.Command, flag) != on {
				t.Errorf("%s: %+v, baseline replay %q", f.Signature, f.RunMode, b.Command)
			}
		}
		for name, p := range map[string]*prog.Program{"program": f.origProg, "reproducer": f.reproProg} {
			if other, all := tut.otherModes(p, f.RunMode); other > 0 {
				t.Errorf("%s (%+v): its %s ran %d of %d times another way", f.Signature, f.RunMode, name, other, all)
			}
		}
		other, all := base.otherModes(f.reproProg, f.RunMode)
		if other > 0 {
			t.Errorf("%s (%+v): the baseline ran its reproducer %d of %d times another way", f.Signature, f.RunMode, other, all)
		}
		if all > 0 {
			baselined++
		}
	}
	if uncovered == 0 || uncensused == 0 || baselined == 0 {
		t.Errorf("of %d findings %d ran without coverage, %d without the census, %d were replayed on the baseline: the test shows nothing",
			len(r.Findings), uncovered, uncensused, baselined)
	}
	ran := 0
	for _, c := range r.Corpus {
		if c.Status == "skipped" {
			continue
		}
		ran++
		if other, all := tut.otherModes(c.prog, RunMode{NoCover: true}); c.Cover || other > 0 {
			t.Errorf("corpus %s: kcov %v, ran %d of %d times other than without coverage and with the census", c.Name, c.Cover, other, all)
		}
	}
	if ran == 0 {
		t.Error("no corpus program ran")
	}
}

// A claimed fix whose reproducer is a finding's program that ran without
// coverage and census runs that way on both kernels, and its commands say
// so; a plain program file collects and takes the census as before.
func TestFixesRunAsFound(t *testing.T) {
	const text = "forkfuzz v1\nregion r0 anon-private pages=4 thp=off\nstore r0 off=0x0 count=4 stride=0x1000\nfork f0\nwait f0\n"
	dir := t.TempDir()
	found := filepath.Join(dir, "finding")
	if err := os.MkdirAll(found, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain.ffz")
	for path, b := range map[string]string{filepath.Join(found, "minimized.ffz"): text, filepath.Join(found, "seed"): "campaign-seed 1\nprogram-index 2\nprogram-seed 3\nkcov off\ncensus off\n", plain: text} {
		if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixes, err := LoadFixes([]string{filepath.Join(found, "minimized.ffz"), plain})
	if err != nil {
		t.Fatal(err)
	}
	if len(fixes) != 2 || fixes[0].RunMode != (RunMode{NoCover: true, NoCensus: true}) || fixes[1].RunMode != (RunMode{}) {
		t.Fatalf("fixes %+v: want the finding's without coverage and census, the plain file's with", fixes)
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
		if other, all := rec.otherModes(fixes[0].prog, fixes[0].RunMode); other > 0 || all == 0 {
			t.Errorf("%s kernel: the reproducer ran %d of %d times with coverage or the census", name, other, all)
		}
	}
	for _, c := range []string{f.BaselineCommand, f.PatchedCommand} {
		if !strings.Contains(c, "--no-cover --no-census") {
			t.Errorf("command %q lacks --no-cover --no-census", c)
		}
	}
}

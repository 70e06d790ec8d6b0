package vm

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/agents/sim/hostcmp"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// stockUnderAsync is a kernel whose Async-fork knob silently does nothing:
// it runs stock fork and reports the async-fork profile.
type stockUnderAsync struct{ agents.Target }

func (s stockUnderAsync) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	opt.ForkImpl = "stock"
	o, err := s.Target.Run(p, opt)
	if o != nil && o.ForkImpl != nil {
		o.ForkImpl.Profile = "async-fork"
	}
	return o, err
}

// TestModelVsAsyncForkKernel boots the Async-fork kernel once
// (async_fork.seq_fix=1) and checks, on that boot: the profiles of other
// vendors' knobs are refused clearly; the calibration at start proves
// deferred forks with the knob on and fails when the knob does nothing;
// and FORKFUZZ_MODELCMP_N generated programs (default 8, seed
// FORKFUZZ_MODELCMP_SEED, default 1) give the same observations on the
// kernel with --fork-impl async-fork and on the simulated Async-fork,
// except for the documented classes (hostcmp.KnownClasses).
func TestModelVsAsyncForkKernel(t *testing.T) {
	needQEMU(t)
	image := asyncForkKernel(t)
	n, seed := 8, uint64(1)
	if s := os.Getenv("FORKFUZZ_MODELCMP_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("FORKFUZZ_MODELCMP_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	tg := bootTarget(t, image, nil, 0, &TargetFile{Cmdline: "async_fork.seq_fix=1"})

	// Other vendors' knobs: refused before anything runs, naming the knob.
	for impl, knob := range map[string]string{"bytedance-async-fork": "/proc/sys/kernel/async_fork_enabled", "odf": "/proc/self/use_odf"} {
		if slices.Contains(tg.ForkImpls(), impl) {
			t.Errorf("the guest reports %s among its fork implementations %v", impl, tg.ForkImpls())
		}
		_, err := agents.NewForkImplTarget(tg, impl, false)
		if err == nil || !strings.Contains(err.Error(), "does not have it (no "+knob) {
			t.Errorf("--fork-impl %s on the Async-fork kernel: %v, want a refusal naming %s", impl, err, knob)
		}
	}

	w, err := agents.NewForkImplTarget(tg, "async-fork", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Calibrate(); err != nil || !strings.Contains(w.Calibration, "deferred") {
		t.Fatalf("calibration with memory.async_fork=1: %v (%s)", err, w.Calibration)
	}
	t.Log(w.Calibration)
	lie := &agents.ForkImplTarget{Target: stockUnderAsync{tg}, Profile: "async-fork"}
	var fe *obs.ForkImplError
	if err := lie.Calibrate(); !errors.As(err, &fe) {
		t.Errorf("calibration on a knob that does nothing: %v, want a ForkImplError", err)
	} else {
		t.Logf("knob without effect: %v", err)
	}

	wt, err := hostcmp.Weights("default")
	if err != nil {
		t.Fatal(err)
	}
	c := &hostcmp.ModelCmp{Target: w, Mode: sim.Async}
	for i := 0; c.Programs < n; i++ {
		p := hostcmp.Generate(seed, i, wt)
		r := c.One(p)
		if r.Err != nil {
			t.Errorf("program %d (seed %d): %v\n%s", i, seed, r.Err, p.Format())
		}
		for _, d := range r.Diffs {
			t.Logf("program %d (seed %d): [%s] %s", i, seed, d.Class, d.Text)
		}
	}
	var b strings.Builder
	c.Report(&b)
	t.Log(b.String())
	t.Log(w.Summary())
	for _, cl := range c.Unexplained() {
		t.Errorf("unexplained difference class %s on %d programs, e.g. %s\n%s", cl.Name, cl.Programs, cl.Text, cl.Example)
	}
	if w.Eager != 0 || w.Deferred == 0 {
		t.Errorf("evidence: %s", w.Summary())
	}
}

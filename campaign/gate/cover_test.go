package gate

import (
	"sync/atomic"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// coverCounter is the simulated kernel counting the runs asked to
// collect no kernel coverage.
type coverCounter struct {
	*sim.Target
	runs, off atomic.Int64
}

func (c *coverCounter) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	c.runs.Add(1)
	if opt.NoCover {
		c.off.Add(1)
	}
	return c.Target.Run(p, opt)
}

// A gate's fuzz phase is blind but collects coverage on every program by
// default, as its replays of findings (corpus, confirm, baseline) do: a
// finding is never replayed under other timing than the run that showed
// it.
func TestGateCollectsOnEveryRun(t *testing.T) {
	tg := &coverCounter{Target: simTarget(t)}
	r := runGate(t, 0, tg)
	if r.ExitCode != 0 {
		t.Fatalf("exit %d: %s", r.ExitCode, r.Reason)
	}
	if tg.runs.Load() < 10 || tg.off.Load() != 0 {
		t.Fatalf("%d of %d runs without coverage, want none of at least 10", tg.off.Load(), tg.runs.Load())
	}
}

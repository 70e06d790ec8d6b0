package sim

import (
	"fmt"
	"hash/fnv"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Target runs programs on the simulated kernel; it implements
// agents.Target. It is not safe for concurrent use (make one per
// goroutine: runs are independent). Every run gets a fresh kernel whose scheduler seed is
// Config.SchedSeed mixed with a hash of the program text, so the same
// program on the same target replays exactly (same interleaving, same
// injected failures) while different programs see different interleavings.
type Target struct {
	Config Config
	// Last is the kernel of the last run (page tables, events). It stays
	// valid until the next Run, which recycles its pages.
	Last *Kernel
}

// NewTarget checks cfg and returns a target.
func NewTarget(cfg Config) (*Target, error) {
	if _, err := NewKernel(cfg); err != nil {
		return nil, err
	}
	return &Target{Config: cfg}, nil
}

// Name is "sim-MODE" or "sim-MODE+MUTANT".
func (t *Target) Name() string {
	n := "sim-" + t.Config.Mode.String()
	if t.Config.Mutant != "" {
		n += "+" + t.Config.Mutant
	}
	return n
}

// RunSeed is the scheduler seed a run of p uses.
func (t *Target) RunSeed(p *prog.Program) uint64 {
	h := fnv.New64a()
	h.Write(p.Format())
	return t.Config.SchedSeed ^ h.Sum64()
}

// Run executes p. Test-only corruptions of the executor are not supported
// (the simulated kernel has mutants instead).
func (t *Target) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if opt.Corrupt != "" {
		return nil, fmt.Errorf("sim: --corrupt is an executor switch; use --mutant on the simulated kernel")
	}
	if t.Last != nil {
		t.Last.Release()
		t.Last = nil
	}
	cfg := t.Config
	cfg.SchedSeed = t.RunSeed(p)
	regions := ^uint64(0)
	if opt.DigestsFirst {
		regions = p.RacedRegions()
	}
	o, k, err := run(p, cfg, opt.WordCap, regions)
	t.Last = k
	return o, err
}

// Close does nothing.
func (t *Target) Close() error { return nil }

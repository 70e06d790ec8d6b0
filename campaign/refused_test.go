package campaign

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// refusingTarget refuses every other program the way a target without
// free hugetlb pages does.
type refusingTarget struct {
	agents.Target
	n atomic.Int64
}

func (r *refusingTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if r.n.Add(1)%2 == 0 {
		return nil, fmt.Errorf("vm 0: executor: map hugetlb-private region r0 (2 MiB): cannot allocate memory: %w", executor.ErrNoHugetlb)
	}
	return r.Target.Run(p, opt)
}

// A program the target refuses (no free hugetlb pages) is counted apart:
// not a harness error, so refusals in a row never end the campaign.
func TestRefusedProgramsNotHarnessErrors(t *testing.T) {
	tg, err := sim.NewTarget(sim.Config{Mode: sim.Eager})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(context.Background(), Config{Target: &refusingTarget{Target: tg}, Seed: 3, Programs: 20, Duration: time.Minute,
		Weights: gen.DefaultWeights(), Workdir: t.TempDir(), MaxHarnessErrors: 2})
	if err != nil {
		t.Fatal(err)
	}
	if st.Refused == 0 || st.HarnessErrors != 0 || st.Programs == 0 {
		t.Fatalf("refused %d, harness errors %d, programs %d: want refusals counted apart", st.Refused, st.HarnessErrors, st.Programs)
	}
}

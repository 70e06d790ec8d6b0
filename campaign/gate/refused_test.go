package gate

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// refusingTarget refuses every third program the way a target without
// free hugetlb pages does.
type refusingTarget struct {
	agents.Target
	n atomic.Int64
}

func (r *refusingTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if r.n.Add(1)%3 == 0 {
		return nil, fmt.Errorf("vm 0: executor: map hugetlb-private region r0 (2 MiB): cannot allocate memory: %w", executor.ErrNoHugetlb)
	}
	return r.Target.Run(p, opt)
}

// Programs the target refuses are neither harness errors nor passes: the
// gate passes on what ran and its fuzz phase says how many were refused.
func TestGateRefusedPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an 8 s gate")
	}
	tg := &refusingTarget{Target: simTarget(t)}
	r := Run(context.Background(), Config{
		Open:    func() (agents.Target, error) { return tg, nil },
		Kernel:  KernelIdentity{Target: "sim-eager"},
		Budget:  8 * time.Second,
		Seed:    7,
		Workdir: filepath.Join(t.TempDir(), "w"),
	})
	if r.ExitCode != ExitPass || r.HarnessErrors != 0 {
		t.Fatalf("exit %d (%s), %d harness errors: want a pass without harness errors\n%s", r.ExitCode, r.Reason, r.HarnessErrors, phaseNotes(r))
	}
	for _, p := range r.Phases {
		if p.Name == "fuzz" && !strings.Contains(p.Note, "refused by the target") {
			t.Errorf("the fuzz phase's note does not count the refused programs: %q", p.Note)
		}
	}
}
